//! Request builder tests: whole JSON bodies for each feature, and the errors naming their fields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::adapter::Protocol;
use crate::catalog::{Capabilities, ModelInfo};

fn model(provider: &str, name: &str, caps: Capabilities) -> ModelInfo {
    ModelInfo {
        id: format!("{provider}/{name}"),
        provider: provider.into(),
        name: name.into(),
        display_name: name.into(),
        protocol: Protocol::OpenaiChat,
        context_window: 128_000,
        max_input_tokens: 0,
        max_output_tokens: 16_384,
        capabilities: caps,
        pricing: None,
    }
}

fn gpt4o() -> ModelInfo {
    model("openai", "gpt-4o", Capabilities::default())
}

fn o3() -> ModelInfo {
    model(
        "openai",
        "o3",
        Capabilities {
            reasoning: true,
            temperature: false,
            ..Capabilities::default()
        },
    )
}

fn body(g: &pb::Generation, m: &ModelInfo) -> Value {
    let req = build(g, &Target { model: m }).unwrap();
    assert_eq!(req.path, "/chat/completions");
    assert!(req.headers.is_empty());
    req.body
}

fn err(g: &pb::Generation, m: &ModelInfo) -> BuildError {
    build(g, &Target { model: m }).unwrap_err()
}

fn msg(role: pb::Role, parts: Vec<Kind>) -> pb::Message {
    pb::Message {
        role: role as i32,
        parts: parts
            .into_iter()
            .map(|k| pb::Part { kind: Some(k) })
            .collect(),
    }
}

fn text(t: &str) -> Kind {
    Kind::Text(pb::TextPart { text: t.into() })
}

fn call(id: &str, name: &str, input: &str) -> Kind {
    Kind::ToolCall(pb::ToolCallPart {
        call_id: id.into(),
        tool_name: name.into(),
        input_json: input.into(),
        provider_metadata: None,
    })
}

fn result(id: &str, name: &str, output: &str, is_error: bool) -> Kind {
    Kind::ToolResult(pb::ToolResultPart {
        call_id: id.into(),
        tool_name: name.into(),
        output: output.into(),
        is_error,
    })
}

fn user(t: &str) -> pb::Message {
    msg(pb::Role::User, vec![text(t)])
}

fn tool(name: &str, schema: &str) -> pb::Tool {
    pb::Tool {
        name: name.into(),
        description: format!("{name} tool"),
        input_schema_json: schema.into(),
    }
}

#[test]
fn conversation_with_paired_tool_calls() {
    let long_id = format!("fc_{}", "0123456789abcdef".repeat(3));
    let short_long = ids::openai(&long_id).into_owned();
    assert_ne!(short_long, long_id);
    assert!(short_long.len() <= 40);
    let g = pb::Generation {
        model: "openai/gpt-4o".into(),
        system: vec![
            "You are terse.".into(),
            String::new(),
            "Today is Monday.".into(),
        ],
        messages: vec![
            user("Weather in Paris and the time?"),
            msg(
                pb::Role::Assistant,
                vec![
                    Kind::Reasoning(pb::ReasoningPart {
                        text: "thinking".into(),
                        provider_metadata: None,
                    }),
                    text("Checking."),
                    call("call_1", "get_weather", r#"{"city":"Paris"}"#),
                    call(&long_id, "get_time", ""),
                ],
            ),
            msg(
                pb::Role::Tool,
                vec![
                    result("call_1", "get_weather", "18°C", false),
                    result(&long_id, "get_time", "clock unavailable", true),
                ],
            ),
        ],
        context: Some(pb::RequestContext {
            session_id: "ses_42".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt4o()),
        json!({
            "model": "gpt-4o",
            "messages": [
                { "role": "system", "content": "You are terse.\n\nToday is Monday." },
                { "role": "user", "content": "Weather in Paris and the time?" },
                {
                    "role": "assistant",
                    "content": "Checking.",
                    "tool_calls": [
                        { "id": "call_1", "type": "function",
                          "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } },
                        { "id": short_long, "type": "function",
                          "function": { "name": "get_time", "arguments": "{}" } },
                    ],
                },
                { "role": "tool", "tool_call_id": "call_1", "content": "18°C" },
                { "role": "tool", "tool_call_id": short_long, "content": "clock unavailable" },
            ],
            "stream": true,
            "stream_options": { "include_usage": true },
            "prompt_cache_key": "ses_42",
        })
    );
}

#[test]
fn reasoning_model_uses_developer_role_and_drops_sampling() {
    let g = pb::Generation {
        system: vec!["Be careful.".into()],
        messages: vec![user("2+2?")],
        sampling: Some(pb::Sampling {
            temperature: Some(0.2),
            top_p: Some(0.9),
            top_k: Some(40),
            max_output_tokens: Some(4096),
            stop_sequences: vec!["END".into()],
            seed: Some(7),
        }),
        reasoning: Some(pb::Reasoning {
            effort: pb::reasoning::Effort::High as i32,
            budget_tokens: 0,
        }),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &o3()),
        json!({
            "model": "o3",
            "messages": [
                { "role": "developer", "content": "Be careful." },
                { "role": "user", "content": "2+2?" },
            ],
            "max_completion_tokens": 4096,
            "stop": ["END"],
            "seed": 7,
            "reasoning_effort": "high",
            "stream": true,
            "stream_options": { "include_usage": true },
        })
    );
}

#[test]
fn ordinary_model_sampling_and_no_cache_key_off_openai() {
    let g = pb::Generation {
        messages: vec![user("hi")],
        sampling: Some(pb::Sampling {
            temperature: Some(0.5),
            top_p: Some(0.9),
            top_k: Some(40),
            max_output_tokens: Some(256),
            ..Default::default()
        }),
        // Not a reasoning model: the effort is dropped rather than rejected by the server.
        reasoning: Some(pb::Reasoning {
            effort: pb::reasoning::Effort::Low as i32,
            budget_tokens: 0,
        }),
        context: Some(pb::RequestContext {
            session_id: "ses_1".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let m = model("deepseek", "deepseek-chat", Capabilities::default());
    assert_eq!(
        body(&g, &m),
        json!({
            "model": "deepseek-chat",
            "messages": [{ "role": "user", "content": "hi" }],
            "temperature": 0.5,
            "top_p": 0.9,
            "max_tokens": 256,
            "stream": true,
            "stream_options": { "include_usage": true },
        })
    );

    // A model that rejects temperature keeps top_p.
    let m = model(
        "openai",
        "gpt-x",
        Capabilities {
            temperature: false,
            ..Capabilities::default()
        },
    );
    let b = body(&g, &m);
    assert_eq!(b.get("temperature"), None);
    assert_eq!(b["top_p"], json!(0.9));
    assert_eq!(b["prompt_cache_key"], json!("ses_1"));
}

#[test]
fn effort_none_is_sent_as_none() {
    let g = pb::Generation {
        messages: vec![user("hi")],
        reasoning: Some(pb::Reasoning {
            effort: pb::reasoning::Effort::None as i32,
            budget_tokens: 0,
        }),
        ..Default::default()
    };
    assert_eq!(body(&g, &o3())["reasoning_effort"], json!("none"));
}

#[test]
fn tools_and_tool_choice() {
    let mut g = pb::Generation {
        messages: vec![user("go")],
        tools: vec![
            tool(
                "get_weather",
                r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
            ),
            pb::Tool {
                name: "ping".into(),
                description: String::new(),
                input_schema_json: String::new(),
            },
        ],
        tool_choice: Some(pb::ToolChoice {
            mode: pb::tool_choice::Mode::Tool as i32,
            tool_name: "get_weather".into(),
        }),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt4o()),
        json!({
            "model": "gpt-4o",
            "messages": [{ "role": "user", "content": "go" }],
            "tools": [
                { "type": "function", "function": {
                    "name": "get_weather",
                    "description": "get_weather tool",
                    "parameters": {
                        "type": "object",
                        "properties": { "city": { "type": "string" } },
                        "required": ["city"],
                    },
                } },
                { "type": "function", "function": {
                    "name": "ping",
                    "parameters": { "type": "object", "properties": {} },
                } },
            ],
            "tool_choice": { "type": "function", "function": { "name": "get_weather" } },
            "stream": true,
            "stream_options": { "include_usage": true },
        })
    );

    for (mode, want) in [
        (pb::tool_choice::Mode::Auto, Some(json!("auto"))),
        (pb::tool_choice::Mode::None, Some(json!("none"))),
        (pb::tool_choice::Mode::Required, Some(json!("required"))),
        (pb::tool_choice::Mode::Unspecified, None),
    ] {
        g.tool_choice = Some(pb::ToolChoice {
            mode: mode as i32,
            tool_name: String::new(),
        });
        assert_eq!(
            body(&g, &gpt4o()).get("tool_choice").cloned(),
            want,
            "{mode:?}"
        );
    }

    // Without tools, no tool_choice either: OpenAI rejects it alone.
    g.tools.clear();
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Required as i32,
        tool_name: String::new(),
    });
    let b = body(&g, &gpt4o());
    assert_eq!(b.get("tools"), None);
    assert_eq!(b.get("tool_choice"), None);
}

#[test]
fn tool_errors_name_the_field() {
    let mut g = pb::Generation {
        messages: vec![user("go")],
        tools: vec![tool("a", r#"{"type":"object"}"#), tool("b", "{not json")],
        ..Default::default()
    };
    assert_eq!(
        err(&g, &gpt4o()).field,
        "generation.tools[1].input_schema_json"
    );
    g.tools[1].input_schema_json = "[]".into();
    assert_eq!(
        err(&g, &gpt4o()).field,
        "generation.tools[1].input_schema_json"
    );
    g.tools[1].input_schema_json = r#"{"type":"string"}"#.into();
    assert_eq!(
        err(&g, &gpt4o()).field,
        "generation.tools[1].input_schema_json"
    );
    g.tools[1].input_schema_json = r#"{"type":"object"}"#.into();
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Tool as i32,
        tool_name: String::new(),
    });
    assert_eq!(err(&g, &gpt4o()).field, "generation.tool_choice.tool_name");
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Tool as i32,
        tool_name: "nope".into(),
    });
    assert_eq!(err(&g, &gpt4o()).field, "generation.tool_choice.tool_name");
}

#[test]
fn invalid_tool_call_input_names_the_part() {
    let g = pb::Generation {
        messages: vec![
            user("go"),
            msg(
                pb::Role::Assistant,
                vec![text("ok"), call("c1", "t", "{\"a\":")],
            ),
        ],
        ..Default::default()
    };
    assert_eq!(
        err(&g, &gpt4o()).field,
        "generation.messages[1].parts[1].tool_call.input_json"
    );
}

#[test]
fn json_schema_output() {
    let mut g = pb::Generation {
        messages: vec![user("give me a person")],
        output_format: Some(pb::OutputFormat {
            r#type: pb::output_format::Type::JsonSchema as i32,
            name: String::new(),
            schema_json: r#"{"type":"object","properties":{"name":{"type":"string"}}}"#.into(),
        }),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt4o()),
        json!({
            "model": "gpt-4o",
            "messages": [{ "role": "user", "content": "give me a person" }],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "output",
                    "schema": { "type": "object", "properties": { "name": { "type": "string" } } },
                    "strict": false,
                },
            },
            "stream": true,
            "stream_options": { "include_usage": true },
        })
    );
    if let Some(of) = g.output_format.as_mut() {
        of.name = "person".into();
    }
    assert_eq!(
        body(&g, &gpt4o())["response_format"]["json_schema"]["name"],
        json!("person")
    );
    if let Some(of) = g.output_format.as_mut() {
        of.schema_json = "nope".into();
    }
    assert_eq!(
        err(&g, &gpt4o()).field,
        "generation.output_format.schema_json"
    );
    if let Some(of) = g.output_format.as_mut() {
        of.r#type = pb::output_format::Type::Text as i32;
    }
    assert_eq!(body(&g, &gpt4o()).get("response_format"), None);
}

#[test]
fn provider_options_merge_and_refusal() {
    let mut g = pb::Generation {
        messages: vec![user("hi")],
        sampling: Some(pb::Sampling {
            temperature: Some(0.3),
            ..Default::default()
        }),
        provider_options_json: r#"{"anthropic":{"metadata":{"user_id":"u"}},"openai_chat":{"temperature":1.0,"parallel_tool_calls":false,"user":"u1"}}"#.into(),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt4o()),
        json!({
            "model": "gpt-4o",
            "messages": [{ "role": "user", "content": "hi" }],
            "temperature": 1.0,
            "stream": true,
            "stream_options": { "include_usage": true },
            "parallel_tool_calls": false,
            "user": "u1",
        })
    );

    for owned in OWNED_KEYS {
        g.provider_options_json = format!(r#"{{"openai_chat":{{"{owned}":true}}}}"#);
        let e = err(&g, &gpt4o());
        assert_eq!(e.field, "generation.provider_options_json");
        assert!(e.message.contains(owned), "{e}");
    }
    for bad in ["{", "[1]", r#"{"openai_chat":1}"#] {
        g.provider_options_json = bad.into();
        assert_eq!(
            err(&g, &gpt4o()).field,
            "generation.provider_options_json",
            "{bad}"
        );
    }
    // Options for another protocol only: nothing merged.
    g.provider_options_json = r#"{"anthropic":{"model":"x"}}"#.into();
    assert_eq!(body(&g, &gpt4o())["model"], json!("gpt-4o"));
}

#[test]
fn empty_parts_and_turns_are_dropped() {
    let g = pb::Generation {
        system: vec![String::new()],
        messages: vec![
            msg(
                pb::Role::User,
                vec![text(""), text("a"), text(""), text("b")],
            ),
            msg(pb::Role::User, vec![text("")]),
            pb::Message {
                role: pb::Role::User as i32,
                parts: vec![pb::Part { kind: None }],
            },
            // Reasoning only: nothing left to replay, so no empty assistant turn.
            msg(
                pb::Role::Assistant,
                vec![
                    Kind::Reasoning(pb::ReasoningPart {
                        text: "hmm".into(),
                        provider_metadata: None,
                    }),
                    text(""),
                ],
            ),
            // Tool calls without text: content is null.
            msg(pb::Role::Assistant, vec![text(""), call("c1", "t", "{}")]),
            msg(pb::Role::Tool, vec![text(""), result("c1", "t", "", false)]),
            // A file the model produced elsewhere cannot be replayed on this protocol: dropped.
            msg(
                pb::Role::Assistant,
                vec![
                    text("Do"),
                    Kind::File(pb::FilePart {
                        media_type: "image/png".into(),
                        filename: String::new(),
                        source: Some(pb::file_part::Source::Data(vec![1, 2, 3])),
                    }),
                    text("ne."),
                ],
            ),
        ],
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt4o())["messages"],
        json!([
            { "role": "user", "content": "a\n\nb" },
            { "role": "assistant", "content": null, "tool_calls": [
                { "id": "c1", "type": "function", "function": { "name": "t", "arguments": "{}" } },
            ] },
            { "role": "tool", "tool_call_id": "c1", "content": "" },
            { "role": "assistant", "content": "Done." },
        ])
    );
}

#[test]
fn image_and_file_parts() {
    use pb::file_part::Source;
    let file = |media_type: &str, filename: &str, source: Source| {
        Kind::File(pb::FilePart {
            media_type: media_type.into(),
            filename: filename.into(),
            source: Some(source),
        })
    };
    let g = pb::Generation {
        messages: vec![msg(
            pb::Role::User,
            vec![
                text("Compare these."),
                text(""),
                file("image/png", "", Source::Data(vec![0x89, b'P', b'N', b'G'])),
                file(
                    "image/jpeg",
                    "",
                    Source::Url("https://example.com/cat.jpg".into()),
                ),
                file(
                    "application/pdf",
                    "report.pdf",
                    Source::Data(b"%PDF-1.7".to_vec()),
                ),
                file("text/plain", "", Source::Data(b"hi".to_vec())),
            ],
        )],
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt4o())["messages"],
        json!([{ "role": "user", "content": [
            { "type": "text", "text": "Compare these." },
            { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw==" } },
            { "type": "image_url", "image_url": { "url": "https://example.com/cat.jpg" } },
            { "type": "file", "file": {
                "filename": "report.pdf",
                "file_data": "data:application/pdf;base64,JVBERi0xLjc=",
            } },
            { "type": "file", "file": {
                "filename": "part-5.txt",
                "file_data": "data:text/plain;base64,aGk=",
            } },
        ] }])
    );

    let by_url = pb::Generation {
        messages: vec![msg(
            pb::Role::User,
            vec![file(
                "application/pdf",
                "",
                Source::Url("https://example.com/a.pdf".into()),
            )],
        )],
        ..Default::default()
    };
    assert_eq!(
        err(&by_url, &gpt4o()).field,
        "generation.messages[0].parts[0].file.url"
    );
}

#[test]
fn misplaced_parts_and_missing_role_are_errors() {
    let cases = [
        (
            msg(pb::Role::User, vec![call("c", "t", "{}")]),
            "generation.messages[0].parts[0]",
        ),
        (
            msg(pb::Role::Tool, vec![text("x")]),
            "generation.messages[0].parts[0]",
        ),
        (
            msg(
                pb::Role::Assistant,
                vec![text("x"), result("c", "t", "o", false)],
            ),
            "generation.messages[0].parts[1]",
        ),
        (
            msg(pb::Role::Unspecified, vec![text("x")]),
            "generation.messages[0].role",
        ),
    ];
    for (m, field) in cases {
        let g = pb::Generation {
            messages: vec![m],
            ..Default::default()
        };
        assert_eq!(err(&g, &gpt4o()).field, field);
    }
}

#[test]
fn base64_matches_rfc4648_vectors() {
    for (input, want) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        let mut out = String::new();
        base64_into(&mut out, input.as_bytes());
        assert_eq!(out, want);
    }
    let mut out = String::new();
    base64_into(&mut out, &[0xfb, 0xff, 0xbf]);
    assert_eq!(out, "+/+/");
}
