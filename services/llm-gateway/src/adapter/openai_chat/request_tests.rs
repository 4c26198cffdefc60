//! Request builder tests: whole JSON bodies for each feature, and the errors naming their fields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::adapter::testing::testkit::kinds::{call, result, text};
use crate::adapter::testing::testkit::{
    self, every_sampling, files_to_compare, high_effort, kind, misplaced_parts, msg, person_schema,
    sparse_conversation,
};
use crate::catalog::{Capabilities, ModelInfo, ReasoningReplay, ToolCallIds};
use crate::protocol::Protocol;
use serde_json::json;

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
    let req = build(g, &Target::new(m)).unwrap();
    assert_eq!(req.path, "/chat/completions");
    assert!(req.headers.is_empty());
    req.body
}

fn err(g: &pb::Generation, m: &ModelInfo) -> BuildError {
    build(g, &Target::new(m)).unwrap_err()
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
        sampling: Some(every_sampling()),
        reasoning: Some(high_effort()),
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
                ..Default::default()
            },
        ],
        tool_choice: Some(pb::ToolChoice {
            mode: pb::tool_choice::Mode::Tool as i32,
            tool_name: "get_weather".into(),
            ..Default::default()
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

    // Without tools, no tool_choice either: OpenAI rejects it alone.
    g.tools.clear();
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Required as i32,
        tool_name: String::new(),
        ..Default::default()
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
        ..Default::default()
    });
    assert_eq!(err(&g, &gpt4o()).field, "generation.tool_choice.tool_name");
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Tool as i32,
        tool_name: "nope".into(),
        ..Default::default()
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
        output_format: Some(person_schema()),
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
        messages: sparse_conversation(),
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
        kind(testkit::file(media_type, filename, source))
    };
    let g = pb::Generation {
        messages: vec![testkit::user(files_to_compare())],
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
    let cases = misplaced_parts();
    for (m, field) in cases {
        let g = pb::Generation {
            messages: vec![m],
            ..Default::default()
        };
        assert_eq!(err(&g, &gpt4o()).field, field);
    }
}

fn reasoning_part(text: &str, protocol: &str, model: &str) -> Kind {
    Kind::Reasoning(pb::ReasoningPart {
        text: text.into(),
        provider_metadata: Some(pb::ProviderMetadata {
            protocol: protocol.into(),
            model: model.into(),
            json: "{}".into(),
        }),
    })
}

fn mistral() -> ModelInfo {
    model(
        "mistral",
        "mistral-large-latest",
        Capabilities {
            tool_call_ids: ToolCallIds::Mistral,
            ..Capabilities::default()
        },
    )
}

#[test]
fn mistral_ids_are_nine_alphanumerics_on_calls_and_results_alike() {
    let ids_in = [
        "toolu_01A09q90qw90lq917835lq9",
        "call:weird/id",
        "Ab3dE6gH9",
    ];
    let g = pb::Generation {
        messages: vec![
            user("go"),
            msg(
                pb::Role::Assistant,
                ids_in
                    .iter()
                    .map(|id| call(id, "get_weather", r#"{"city":"Paris"}"#))
                    .collect(),
            ),
            msg(
                pb::Role::Tool,
                // Answered out of order: pairing is by id, not position.
                ids_in
                    .iter()
                    .rev()
                    .map(|id| result(id, "get_weather", "18°C", false))
                    .collect(),
            ),
        ],
        ..Default::default()
    };
    let b = body(&g, &mistral());
    let calls = b["messages"][1]["tool_calls"].as_array().unwrap();
    let sent: Vec<&str> = calls.iter().map(|c| c["id"].as_str().unwrap()).collect();
    for id in &sent {
        assert_eq!(id.len(), 9, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
    }
    // A valid Mistral id is kept; the others are rewritten deterministically and stay distinct.
    assert_eq!(sent[2], "Ab3dE6gH9");
    assert_eq!(sent[0], ids::mistral(ids_in[0]));
    assert_ne!(sent[0], sent[1]);
    let answered: Vec<&str> = b["messages"].as_array().unwrap()[2..]
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(answered, [sent[2], sent[1], sent[0]]);

    // The same conversation to OpenAI keeps the ids (all within 40 characters).
    let b = body(&g, &gpt4o());
    assert_eq!(b["messages"][1]["tool_calls"][1]["id"], "call:weird/id");
    assert_eq!(b["messages"][3]["tool_call_id"], "call:weird/id");
}

#[test]
fn mistral_never_gets_an_assistant_turn_without_content_or_tool_calls() {
    let g = pb::Generation {
        messages: vec![
            user("hi"),
            // Reasoning only, empty text, an empty part: nothing Mistral would accept.
            msg(
                pb::Role::Assistant,
                vec![
                    reasoning_part("hmm", "openai_chat", "mistral/mistral-large-latest"),
                    text(""),
                ],
            ),
            pb::Message {
                role: pb::Role::Assistant as i32,
                parts: vec![pb::Part { kind: None }],
            },
            user("still there?"),
        ],
        ..Default::default()
    };
    assert_eq!(
        body(&g, &mistral())["messages"],
        json!([
            { "role": "user", "content": "hi" },
            { "role": "user", "content": "still there?" },
        ])
    );
}

fn with_replay(name: &str, replay: ReasoningReplay) -> ModelInfo {
    model(
        "deepseek",
        name,
        Capabilities {
            reasoning_replay: replay,
            ..Capabilities::default()
        },
    )
}

/// A conversation whose first assistant turn reasoned on `own`, the second on Claude, the third not at all.
fn replay_conversation(own: &str) -> pb::Generation {
    pb::Generation {
        messages: vec![
            user("plan a trip"),
            msg(
                pb::Role::Assistant,
                vec![
                    reasoning_part("First, the weather.", "openai_chat", own),
                    reasoning_part(" Then the time.", "openai_chat", own),
                    call("c1", "get_weather", r#"{"city":"Paris"}"#),
                ],
            ),
            msg(
                pb::Role::Tool,
                vec![result("c1", "get_weather", "18°C", false)],
            ),
            msg(
                pb::Role::Assistant,
                vec![
                    reasoning_part(
                        "Claude's thought",
                        "anthropic",
                        "anthropic/claude-sonnet-4-5",
                    ),
                    // The same protocol, another model.
                    reasoning_part("Other model", "openai_chat", "deepseek/deepseek-reasoner"),
                    text("Warm."),
                ],
            ),
            user("and tomorrow?"),
            msg(pb::Role::Assistant, vec![text("Also warm.")]),
        ],
        ..Default::default()
    }
}

fn assistant_turns(b: &Value) -> Vec<Value> {
    b["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .cloned()
        .collect()
}

#[test]
fn reasoning_content_goes_on_every_assistant_turn_and_only_the_same_models_text() {
    let m = with_replay("deepseek-v4", ReasoningReplay::ReasoningContent);
    let turns = assistant_turns(&body(&replay_conversation("deepseek/deepseek-v4"), &m));
    assert_eq!(
        turns,
        [
            json!({ "role": "assistant", "content": null,
                    "reasoning_content": "First, the weather. Then the time.",
                    "tool_calls": [{ "id": "c1", "type": "function",
                        "function": { "name": "get_weather", "arguments": "{\"city\":\"Paris\"}" } }] }),
            // Another model's reasoning is dropped, but the field is still there: DeepSeek requires it.
            json!({ "role": "assistant", "content": "Warm.", "reasoning_content": "" }),
            json!({ "role": "assistant", "content": "Also warm.", "reasoning_content": "" }),
        ]
    );
}

#[test]
fn reasoning_field_carries_only_the_same_models_reasoning_and_is_omitted_otherwise() {
    let m = with_replay("qwen3", ReasoningReplay::Reasoning);
    let turns = assistant_turns(&body(&replay_conversation("deepseek/qwen3"), &m));
    assert_eq!(turns[0]["reasoning"], "First, the weather. Then the time.");
    assert_eq!(turns[0].get("reasoning_content"), None);
    assert_eq!(turns[1], json!({ "role": "assistant", "content": "Warm." }));
    assert_eq!(
        turns[2],
        json!({ "role": "assistant", "content": "Also warm." })
    );
}

#[test]
fn reasoning_is_never_replayed_without_the_capability_nor_after_a_model_change() {
    // DeepSeek R1 rejects an earlier `reasoning_content`; OpenAI takes no reasoning at all.
    let r1 = with_replay("deepseek-reasoner", ReasoningReplay::None);
    for m in [r1, gpt4o()] {
        let own = m.id.clone();
        for turn in assistant_turns(&body(&replay_conversation(&own), &m)) {
            assert_eq!(turn.get("reasoning_content"), None, "{}: {turn}", m.id);
            assert_eq!(turn.get("reasoning"), None, "{}: {turn}", m.id);
        }
    }
    // The conversation came from V4 and now goes to V4.1: the model changed, so nothing is replayed.
    let next = with_replay("deepseek-v4.1", ReasoningReplay::ReasoningContent);
    for turn in assistant_turns(&body(&replay_conversation("deepseek/deepseek-v4"), &next)) {
        assert_eq!(turn["reasoning_content"], "", "{turn}");
    }
}

fn strict_model() -> ModelInfo {
    model(
        "openai",
        "gpt-4o",
        Capabilities {
            strict_schemas: true,
            ..Capabilities::default()
        },
    )
}

#[test]
fn strict_schemas_lower_the_tools_strict_mode_can_express_and_leave_the_rest() {
    let g = pb::Generation {
        messages: vec![user("go")],
        tools: vec![
            tool(
                "get_weather",
                r#"{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}"#,
            ),
            // A free-form object has no strict form: sent as written, strict off.
            tool(
                "store",
                r#"{"type":"object","properties":{"data":{"type":"object"}},"required":["data"]}"#,
            ),
            pb::Tool {
                name: "ping".into(),
                description: String::new(),
                input_schema_json: String::new(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let b = body(&g, &strict_model());
    assert_eq!(
        b["tools"],
        json!([
            { "type": "function", "function": {
                "name": "get_weather",
                "description": "get_weather tool",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": { "type": "string" },
                        "unit": { "type": ["string", "null"], "enum": ["c", "f", null] },
                    },
                    "required": ["city", "unit"],
                    "additionalProperties": false,
                },
                "strict": true,
            } },
            { "type": "function", "function": {
                "name": "store",
                "description": "store tool",
                "parameters": {
                    "type": "object",
                    "properties": { "data": { "type": "object" } },
                    "required": ["data"],
                },
            } },
            { "type": "function", "function": {
                "name": "ping",
                "parameters": { "type": "object", "properties": {}, "required": [], "additionalProperties": false },
                "strict": true,
            } },
        ])
    );
    // Without the capability nothing changes.
    let b = body(&g, &gpt4o());
    assert_eq!(b["tools"][0]["function"].get("strict"), None);
    assert_eq!(
        b["tools"][0]["function"]["parameters"]["required"],
        json!(["city"])
    );
}

#[test]
fn strict_schemas_lower_json_schema_output_when_they_can() {
    let mut g = pb::Generation {
        messages: vec![user("a person")],
        output_format: Some(pb::OutputFormat {
            r#type: pb::output_format::Type::JsonSchema as i32,
            name: "person".into(),
            schema_json: r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}"#.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &strict_model())["response_format"],
        json!({ "type": "json_schema", "json_schema": {
            "name": "person",
            "schema": {
                "type": "object",
                "properties": { "name": { "type": "string" }, "age": { "type": ["integer", "null"] } },
                "required": ["name", "age"],
                "additionalProperties": false,
            },
            "strict": true,
        } })
    );
    if let Some(of) = g.output_format.as_mut() {
        of.schema_json = r#"{"type":"object","additionalProperties":{"type":"string"}}"#.into();
    }
    let format = body(&g, &strict_model())["response_format"].clone();
    assert_eq!(format["json_schema"]["strict"], false);
    assert_eq!(
        format["json_schema"]["schema"],
        json!({"type":"object","additionalProperties":{"type":"string"}})
    );
}

#[test]
fn reasoning_models_drop_rejected_parameters_from_provider_options_too() {
    let g = pb::Generation {
        messages: vec![user("hi")],
        provider_options_json: r#"{"openai_chat":{"temperature":0.2,"top_p":0.5,"presence_penalty":1,"frequency_penalty":1,"logit_bias":{"50256":-100},"logprobs":true,"top_logprobs":2,"max_tokens":512,"user":"u1","service_tier":"flex"}}"#.into(),
        ..Default::default()
    };
    assert_eq!(
        body(&g, &o3()),
        json!({
            "model": "o3",
            "messages": [{ "role": "user", "content": "hi" }],
            "stream": true,
            "stream_options": { "include_usage": true },
            "max_completion_tokens": 512,
            "user": "u1",
            "service_tier": "flex",
        })
    );
    // An ordinary model gets every option as sent.
    let b = body(&g, &gpt4o());
    for key in [
        "temperature",
        "presence_penalty",
        "logit_bias",
        "max_tokens",
    ] {
        assert!(b.get(key).is_some(), "{key}");
    }
}
