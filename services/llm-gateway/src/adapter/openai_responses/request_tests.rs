//! Request builder tests: whole JSON bodies for each feature, and the errors naming their fields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::adapter::testing::testkit::kinds::{call, result, text};
use crate::adapter::testing::testkit::{
    self, every_sampling, files_to_compare, high_effort, misplaced_parts, msg, person_schema,
    sparse_conversation,
};
use crate::catalog::{Capabilities, ModelInfo};
use serde_json::json;

fn model(id: &str, caps: Capabilities) -> ModelInfo {
    let (provider, name) = id.split_once('/').unwrap();
    ModelInfo {
        id: id.into(),
        provider: provider.into(),
        name: name.into(),
        display_name: name.into(),
        protocol: Protocol::OpenaiResponses,
        context_window: 400_000,
        max_input_tokens: 272_000,
        max_output_tokens: 128_000,
        capabilities: caps,
        pricing: None,
    }
}

fn reasoning_caps() -> Capabilities {
    Capabilities {
        reasoning: true,
        temperature: false,
        ..Capabilities::default()
    }
}

/// A reasoning model served over Responses, as the bundled catalog describes `openai/gpt-5-codex`.
fn codex() -> ModelInfo {
    model("openai/gpt-5-codex", reasoning_caps())
}

/// An ordinary (non-reasoning) model over Responses.
fn gpt41() -> ModelInfo {
    model("openai/gpt-4.1", Capabilities::default())
}

fn body(g: &pb::Generation, m: &ModelInfo) -> Value {
    let req = build(g, &Target::new(m)).unwrap();
    assert_eq!(req.path, "/responses");
    assert!(req.headers.is_empty());
    req.body
}

fn err(g: &pb::Generation, m: &ModelInfo) -> BuildError {
    build(g, &Target::new(m)).unwrap_err()
}

fn reasoning(t: &str, protocol: &str, model: &str, json: &str) -> Kind {
    Kind::Reasoning(pb::ReasoningPart {
        text: t.into(),
        provider_metadata: Some(pb::ProviderMetadata {
            protocol: protocol.into(),
            model: model.into(),
            json: json.into(),
        }),
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
        ..Default::default()
    }
}

const RS_META: &str = r#"{"item_id":"rs_0a1b","encrypted_content":"gAAAAABenc=="}"#;

/// A tool loop on `openai/gpt-5-codex`: the model reasoned, said something, called two tools, got both results.
fn tool_loop(reasoning_part: Kind) -> pb::Generation {
    pb::Generation {
        model: "openai/gpt-5-codex".into(),
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
                    reasoning_part,
                    text("Checking"),
                    text(" both."),
                    call("call_W1", "get_weather", r#"{"city":"Paris"}"#),
                    call("call_T2", "get_time", ""),
                ],
            ),
            msg(
                pb::Role::Tool,
                vec![
                    result("call_W1", "get_weather", "18°C", false),
                    result("call_T2", "get_time", "clock unavailable", true),
                ],
            ),
        ],
        tools: vec![
            tool(
                "get_weather",
                r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
            ),
            tool("get_time", ""),
        ],
        context: Some(pb::RequestContext {
            session_id: "ses_42".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The body of [`tool_loop`] with `reasoning_items` (zero or one) in front of the assistant's output.
fn tool_loop_body(reasoning_items: Vec<Value>) -> Value {
    let mut input = vec![json!({ "role": "user", "content": [
        { "type": "input_text", "text": "Weather in Paris and the time?" },
    ] })];
    input.extend(reasoning_items);
    input.extend([
        json!({ "role": "assistant", "content": [{ "type": "output_text", "text": "Checking both." }] }),
        json!({ "type": "function_call", "call_id": "call_W1", "name": "get_weather",
                "arguments": "{\"city\":\"Paris\"}" }),
        json!({ "type": "function_call", "call_id": "call_T2", "name": "get_time", "arguments": "{}" }),
        json!({ "type": "function_call_output", "call_id": "call_W1", "output": "18°C" }),
        json!({ "type": "function_call_output", "call_id": "call_T2", "output": "clock unavailable" }),
    ]);
    json!({
        "model": "gpt-5-codex",
        "instructions": "You are terse.\n\nToday is Monday.",
        "input": input,
        "tools": [
            { "type": "function", "name": "get_weather", "description": "get_weather tool",
              "parameters": { "type": "object", "properties": { "city": { "type": "string" } },
                              "required": ["city"] },
              "strict": false },
            { "type": "function", "name": "get_time", "description": "get_time tool",
              "parameters": { "type": "object", "properties": {} }, "strict": false },
        ],
        "reasoning": { "summary": "auto" },
        "include": ["reasoning.encrypted_content"],
        "store": false,
        "stream": true,
        "prompt_cache_key": "ses_42",
    })
}

#[test]
fn tool_loop_pairs_calls_and_results_by_call_id_and_replays_reasoning_to_the_same_model() {
    let g = tool_loop(reasoning(
        "**Plan**\n\nLook both up.",
        "openai_responses",
        "openai/gpt-5-codex",
        RS_META,
    ));
    assert_eq!(
        body(&g, &codex()),
        tool_loop_body(vec![json!({
            "type": "reasoning",
            "id": "rs_0a1b",
            "encrypted_content": "gAAAAABenc==",
            "summary": [{ "type": "summary_text", "text": "**Plan**\n\nLook both up." }],
        })])
    );
}

#[test]
fn reasoning_from_another_model_or_protocol_or_without_encrypted_content_is_dropped() {
    for (protocol, model_id, json) in [
        ("openai_responses", "openai/o3-pro", RS_META),
        ("anthropic", "openai/gpt-5-codex", RS_META),
        (
            "openai_responses",
            "openai/gpt-5-codex",
            r#"{"item_id":"rs_0a1b"}"#,
        ),
        (
            "openai_responses",
            "openai/gpt-5-codex",
            r#"{"item_id":"","encrypted_content":"x"}"#,
        ),
        ("openai_responses", "openai/gpt-5-codex", "not json"),
    ] {
        let g = tool_loop(reasoning("Plan.", protocol, model_id, json));
        assert_eq!(
            body(&g, &codex()),
            tool_loop_body(Vec::new()),
            "{protocol} {model_id} {json}"
        );
    }
    // Reasoning without any metadata (from a Chat Completions model) is dropped too.
    let g = tool_loop(Kind::Reasoning(pb::ReasoningPart {
        text: "thinking".into(),
        provider_metadata: None,
    }));
    assert_eq!(body(&g, &codex()), tool_loop_body(Vec::new()));
}

#[test]
fn reasoning_with_empty_text_replays_an_empty_summary() {
    let g = tool_loop(reasoning(
        "",
        "openai_responses",
        "openai/gpt-5-codex",
        RS_META,
    ));
    assert_eq!(
        body(&g, &codex()),
        tool_loop_body(vec![json!({
            "type": "reasoning", "id": "rs_0a1b", "encrypted_content": "gAAAAABenc==", "summary": [],
        })])
    );
}

#[test]
fn reasoning_model_drops_sampling_and_sends_effort_with_summary() {
    let g = pb::Generation {
        messages: vec![user("2+2?")],
        sampling: Some(every_sampling()),
        reasoning: Some(high_effort()),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &codex()),
        json!({
            "model": "gpt-5-codex",
            "input": [{ "role": "user", "content": [{ "type": "input_text", "text": "2+2?" }] }],
            "max_output_tokens": 4096,
            "reasoning": { "effort": "high", "summary": "auto" },
            "include": ["reasoning.encrypted_content"],
            "store": false,
            "stream": true,
        })
    );
    for (effort, want) in [
        (pb::reasoning::Effort::None, Some("none")),
        (pb::reasoning::Effort::Minimal, Some("minimal")),
        (pb::reasoning::Effort::Low, Some("low")),
        (pb::reasoning::Effort::Medium, Some("medium")),
        (pb::reasoning::Effort::Unspecified, None),
    ] {
        let g = pb::Generation {
            messages: vec![user("hi")],
            reasoning: Some(pb::Reasoning {
                effort: effort as i32,
                budget_tokens: 0,
            }),
            ..Default::default()
        };
        assert_eq!(
            body(&g, &codex())["reasoning"].get("effort").cloned(),
            want.map(Value::from),
            "{effort:?}"
        );
    }
}

#[test]
fn ordinary_model_keeps_sampling_and_gets_no_reasoning_fields() {
    let g = pb::Generation {
        messages: vec![user("hi")],
        sampling: Some(pb::Sampling {
            temperature: Some(0.5),
            top_p: Some(0.9),
            top_k: Some(40),
            max_output_tokens: Some(256),
            stop_sequences: vec!["END".into()],
            seed: Some(1),
        }),
        // Not a reasoning model: the effort is dropped rather than rejected by the server.
        reasoning: Some(pb::Reasoning {
            effort: pb::reasoning::Effort::Low as i32,
            budget_tokens: 0,
        }),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt41()),
        json!({
            "model": "gpt-4.1",
            "input": [{ "role": "user", "content": [{ "type": "input_text", "text": "hi" }] }],
            "temperature": 0.5,
            "top_p": 0.9,
            "max_output_tokens": 256,
            "store": false,
            "stream": true,
        })
    );
    // A model that rejects temperature keeps top_p.
    let m = model(
        "openai/gpt-x",
        Capabilities {
            temperature: false,
            ..Capabilities::default()
        },
    );
    let b = body(&g, &m);
    assert_eq!(b.get("temperature"), None);
    assert_eq!(b["top_p"], json!(0.9));
}

#[test]
fn tool_choice_modes() {
    let mut g = pb::Generation {
        messages: vec![user("go")],
        tools: vec![tool("get_weather", r#"{"type":"object"}"#)],
        tool_choice: Some(pb::ToolChoice {
            mode: pb::tool_choice::Mode::Tool as i32,
            tool_name: "get_weather".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt41())["tool_choice"],
        json!({ "type": "function", "name": "get_weather" })
    );
    // Without tools, no tool_choice either: OpenAI rejects it alone.
    g.tools.clear();
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Required as i32,
        tool_name: String::new(),
        ..Default::default()
    });
    let b = body(&g, &gpt41());
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
        err(&g, &gpt41()).field,
        "generation.tools[1].input_schema_json"
    );
    for bad in ["[]", r#"{"type":"string"}"#] {
        g.tools[1].input_schema_json = bad.into();
        assert_eq!(
            err(&g, &gpt41()).field,
            "generation.tools[1].input_schema_json"
        );
    }
    g.tools[1].input_schema_json = r#"{"type":"object"}"#.into();
    for name in ["", "nope"] {
        g.tool_choice = Some(pb::ToolChoice {
            mode: pb::tool_choice::Mode::Tool as i32,
            tool_name: name.into(),
            ..Default::default()
        });
        assert_eq!(err(&g, &gpt41()).field, "generation.tool_choice.tool_name");
    }
}

#[test]
fn invalid_tool_call_input_names_the_part() {
    let g = pb::Generation {
        messages: vec![
            user("go"),
            msg(
                pb::Role::Assistant,
                vec![text("ok"), call("call_1", "t", "{\"a\":")],
            ),
        ],
        ..Default::default()
    };
    assert_eq!(
        err(&g, &gpt41()).field,
        "generation.messages[1].parts[1].tool_call.input_json"
    );
}

#[test]
fn json_schema_output() {
    let mut g = pb::Generation {
        messages: vec![user("give me a person")],
        output_format: Some(person_schema()),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt41()),
        json!({
            "model": "gpt-4.1",
            "input": [{ "role": "user", "content": [{ "type": "input_text", "text": "give me a person" }] }],
            "text": { "format": {
                "type": "json_schema",
                "name": "output",
                "schema": { "type": "object", "properties": { "name": { "type": "string" } } },
                "strict": false,
            } },
            "store": false,
            "stream": true,
        })
    );
    if let Some(of) = g.output_format.as_mut() {
        of.name = "person".into();
    }
    assert_eq!(
        body(&g, &gpt41())["text"]["format"]["name"],
        json!("person")
    );
    if let Some(of) = g.output_format.as_mut() {
        of.schema_json = "nope".into();
    }
    assert_eq!(
        err(&g, &gpt41()).field,
        "generation.output_format.schema_json"
    );
    if let Some(of) = g.output_format.as_mut() {
        of.r#type = pb::output_format::Type::Text as i32;
    }
    assert_eq!(body(&g, &gpt41()).get("text"), None);
}

#[test]
fn provider_options_merge_refusal_and_include_union() {
    let mut g = pb::Generation {
        messages: vec![user("hi")],
        provider_options_json: r#"{"openai_chat":{"user":"ignored"},"openai_responses":{"parallel_tool_calls":false,"service_tier":"flex","include":["message.output_text.logprobs"],"max_output_tokens":64}}"#.into(),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &codex()),
        json!({
            "model": "gpt-5-codex",
            "input": [{ "role": "user", "content": [{ "type": "input_text", "text": "hi" }] }],
            "reasoning": { "summary": "auto" },
            "include": ["message.output_text.logprobs", "reasoning.encrypted_content"],
            "store": false,
            "stream": true,
            "parallel_tool_calls": false,
            "service_tier": "flex",
            "max_output_tokens": 64,
        })
    );

    for owned in OWNED_KEYS {
        g.provider_options_json = format!(r#"{{"openai_responses":{{"{owned}":true}}}}"#);
        let e = err(&g, &codex());
        assert_eq!(e.field, "generation.provider_options_json");
        assert!(e.message.contains(owned), "{e}");
    }
    for bad in ["{", "[1]", r#"{"openai_responses":1}"#] {
        g.provider_options_json = bad.into();
        assert_eq!(
            err(&g, &codex()).field,
            "generation.provider_options_json",
            "{bad}"
        );
    }
    // Options for another protocol only: nothing merged.
    g.provider_options_json = r#"{"openai_chat":{"model":"x"}}"#.into();
    assert_eq!(body(&g, &codex())["model"], json!("gpt-5-codex"));
    // A key of `reasoning` or `text` joins what the gateway wrote there.
    g.reasoning = Some(pb::Reasoning {
        effort: pb::reasoning::Effort::High as i32,
        budget_tokens: 0,
    });
    g.provider_options_json =
        r#"{"openai_responses":{"reasoning":{"summary":"detailed"},"text":{"verbosity":"low"}}}"#
            .into();
    let sent = body(&g, &codex());
    assert_eq!(
        sent["reasoning"],
        json!({"effort": "high", "summary": "detailed"})
    );
    assert_eq!(sent["text"], json!({"verbosity": "low"}));
}

#[test]
fn empty_parts_and_turns_are_dropped() {
    let g = pb::Generation {
        system: vec![String::new()],
        messages: sparse_conversation(),
        ..Default::default()
    };
    let b = body(&g, &gpt41());
    assert_eq!(b.get("instructions"), None);
    assert_eq!(
        b["input"],
        json!([
            { "role": "user", "content": [
                { "type": "input_text", "text": "a" },
                { "type": "input_text", "text": "b" },
            ] },
            { "type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}" },
            { "type": "function_call_output", "call_id": "c1", "output": "" },
            { "role": "assistant", "content": [{ "type": "output_text", "text": "Done." }] },
        ])
    );
}

#[test]
fn image_and_file_parts() {
    use pb::file_part::Source;
    let mut parts = files_to_compare();
    parts.push(testkit::file(
        "application/pdf",
        "",
        Source::Url("https://example.com/a.pdf".into()),
    ));
    let g = pb::Generation {
        messages: vec![testkit::user(parts)],
        ..Default::default()
    };
    assert_eq!(
        body(&g, &gpt41())["input"],
        json!([{ "role": "user", "content": [
            { "type": "input_text", "text": "Compare these." },
            { "type": "input_image", "image_url": "data:image/png;base64,iVBORw==" },
            { "type": "input_image", "image_url": "https://example.com/cat.jpg" },
            { "type": "input_file", "filename": "report.pdf",
              "file_data": "data:application/pdf;base64,JVBERi0xLjc=" },
            { "type": "input_file", "filename": "part-5.txt", "file_data": "data:text/plain;base64,aGk=" },
            { "type": "input_file", "file_url": "https://example.com/a.pdf" },
        ] }])
    );

    let no_source = pb::Generation {
        messages: vec![msg(
            pb::Role::User,
            vec![Kind::File(pb::FilePart {
                media_type: "image/png".into(),
                filename: String::new(),
                source: None,
            })],
        )],
        ..Default::default()
    };
    assert_eq!(
        err(&no_source, &gpt41()).field,
        "generation.messages[0].parts[0].file"
    );
}

#[test]
fn misplaced_parts_and_missing_role_are_errors() {
    let mut cases = misplaced_parts();
    cases.extend([(
        msg(
            pb::Role::User,
            vec![reasoning("r", "openai_responses", "m", "{}")],
        ),
        "generation.messages[0].parts[0]",
    )]);
    for (m, field) in cases {
        let g = pb::Generation {
            messages: vec![m],
            ..Default::default()
        };
        assert_eq!(err(&g, &gpt41()).field, field);
    }
}

#[test]
fn strict_schemas_send_lowered_tools_and_output_with_strict_true() {
    let strict = model(
        "openai/gpt-4.1",
        Capabilities {
            strict_schemas: true,
            ..Capabilities::default()
        },
    );
    let g = pb::Generation {
        messages: vec![user("go")],
        tools: vec![
            tool(
                "lookup",
                r#"{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer"}},"required":["q"]}"#,
            ),
            // A map has no strict form: the tool keeps its schema and goes out with strict off.
            tool(
                "tag",
                r#"{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}}}"#,
            ),
        ],
        output_format: Some(pb::OutputFormat {
            r#type: pb::output_format::Type::JsonSchema as i32,
            name: "answer".into(),
            schema_json: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let b = body(&g, &strict);
    assert_eq!(
        b["tools"],
        json!([
            {
                "type": "function",
                "name": "lookup",
                "description": "lookup tool",
                "parameters": {
                    "type": "object",
                    "properties": { "q": { "type": "string" }, "limit": { "type": ["integer", "null"] } },
                    "required": ["q", "limit"],
                    "additionalProperties": false,
                },
                "strict": true,
            },
            {
                "type": "function",
                "name": "tag",
                "description": "tag tool",
                "parameters": {
                    "type": "object",
                    "properties": { "labels": { "type": "object", "additionalProperties": { "type": "string" } } },
                },
                "strict": false,
            },
        ])
    );
    assert_eq!(
        b["text"]["format"],
        json!({
            "type": "json_schema",
            "name": "answer",
            "schema": {
                "type": "object",
                "properties": { "text": { "type": ["string", "null"] } },
                "required": ["text"],
                "additionalProperties": false,
            },
            "strict": true,
        })
    );
    // Without the capability: strict off everywhere and the schemas as written.
    let b = body(&g, &gpt41());
    assert_eq!(b["tools"][0]["strict"], false);
    assert_eq!(b["tools"][0]["parameters"]["required"], json!(["q"]));
    assert_eq!(b["text"]["format"]["strict"], false);
}
