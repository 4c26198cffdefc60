//! Converse body tests: whole bodies for each feature, and errors naming their fields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::body;
use crate::adapter::testing::testkit::{message, part, text};
use crate::adapter::{Protocol, Target, pb};
use crate::catalog::{Capabilities, ModelInfo};

use pb::file_part::Source;
use pb::part::Kind;

const CLAUDE: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

fn model(name: &str, reasoning: bool, cache: bool) -> ModelInfo {
    ModelInfo {
        id: format!("bedrock/{name}"),
        provider: "bedrock".into(),
        name: name.into(),
        display_name: name.into(),
        protocol: Protocol::Bedrock,
        context_window: 200_000,
        max_input_tokens: 0,
        max_output_tokens: 64_000,
        capabilities: Capabilities {
            reasoning,
            vision: true,
            prompt_cache: cache,
            ..Capabilities::default()
        },
        pricing: None,
    }
}

fn claude() -> ModelInfo {
    model(CLAUDE, true, true)
}

fn build(g: &pb::Generation, m: &ModelInfo) -> Value {
    body(g, &Target::new(m)).unwrap()
}

fn generation(messages: Vec<pb::Message>) -> pb::Generation {
    pb::Generation {
        model: format!("bedrock/{CLAUDE}"),
        messages,
        ..Default::default()
    }
}
fn weather() -> pb::Tool {
    pb::Tool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema_json:
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                .into(),
        ..Default::default()
    }
}

#[test]
fn text_system_and_sampling() {
    let mut g = generation(vec![
        message(pb::Role::User, vec![text("Hi"), text("  ")]),
        message(pb::Role::User, vec![text("there")]),
    ]);
    g.system = vec!["Be brief.".into(), " ".into()];
    g.sampling = Some(pb::Sampling {
        temperature: Some(1.5),
        top_k: Some(40),
        max_output_tokens: Some(100),
        stop_sequences: vec!["END".into(), " ".into()],
        ..Default::default()
    });
    let m = model("amazon.nova-pro-v1:0", false, false);
    assert_eq!(
        build(&g, &m),
        json!({
            "messages": [{"role": "user", "content": [{"text": "Hi"}, {"text": "there"}]}],
            "system": [{"text": "Be brief."}],
            "inferenceConfig": {"maxTokens": 100, "temperature": 1.0, "stopSequences": ["END"]},
        })
    );
    // Claude takes top_k through additionalModelRequestFields.
    let b = build(&g, &model(CLAUDE, false, false));
    assert_eq!(b["additionalModelRequestFields"], json!({"top_k": 40}));
}

#[test]
fn tools_calls_results_and_cache_points() {
    let mut g = generation(vec![
        message(pb::Role::User, vec![text("Weather in Paris?")]),
        message(
            pb::Role::Assistant,
            vec![part(Kind::ToolCall(pb::ToolCallPart {
                call_id: "call:1".into(),
                tool_name: "get_weather".into(),
                input_json: r#"{"city":"Paris"}"#.into(),
                provider_metadata: None,
            }))],
        ),
        message(
            pb::Role::Tool,
            vec![part(Kind::ToolResult(pb::ToolResultPart {
                call_id: "call:1".into(),
                tool_name: "get_weather".into(),
                output: "".into(),
                is_error: true,
            }))],
        ),
    ]);
    g.tools = vec![weather()];
    g.system = vec!["sys".into()];
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::Required.into(),
        tool_name: String::new(),
        ..Default::default()
    });
    let b = build(&g, &claude());
    let id = crate::adapter::common::ids::bedrock("call:1").into_owned();
    assert_ne!(id, "call:1");
    assert_eq!(
        b["toolConfig"],
        json!({
            "tools": [
                {"toolSpec": {"name": "get_weather", "description": "Weather for a city",
                  "inputSchema": {"json": {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}},
                {"cachePoint": {"type": "default"}},
            ],
            "toolChoice": {"any": {}},
        })
    );
    assert_eq!(
        b["system"],
        json!([{"text": "sys"}, {"cachePoint": {"type": "default"}}])
    );
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"text": "Weather in Paris?"}, {"cachePoint": {"type": "default"}}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": id, "name": "get_weather", "input": {"city": "Paris"}}}]},
            {"role": "user", "content": [
                {"toolResult": {"toolUseId": id, "content": [{"text": "(empty)"}], "status": "error"}},
                {"cachePoint": {"type": "default"}},
            ]},
        ])
    );
    // NONE still sends the tools (the history has tool blocks) but no choice.
    g.tool_choice = Some(pb::ToolChoice {
        mode: pb::tool_choice::Mode::None.into(),
        tool_name: String::new(),
        ..Default::default()
    });
    let b = build(&g, &claude());
    assert!(b["toolConfig"].get("toolChoice").is_none());
    assert!(b["toolConfig"]["tools"].is_array());
}

#[test]
fn reasoning_config_and_signed_replay() {
    let meta = |model: &str| {
        Some(pb::ProviderMetadata {
            protocol: "bedrock".into(),
            model: model.into(),
            json: r#"{"signature":"sig-1"}"#.into(),
        })
    };
    let mut g = generation(vec![
        message(pb::Role::User, vec![text("17*23?")]),
        message(
            pb::Role::Assistant,
            vec![
                part(Kind::Reasoning(pb::ReasoningPart {
                    text: "think".into(),
                    provider_metadata: meta(&format!("bedrock/{CLAUDE}")),
                })),
                text("391"),
            ],
        ),
        message(pb::Role::User, vec![text("and 18*23?")]),
    ]);
    g.reasoning = Some(pb::Reasoning {
        effort: pb::reasoning::Effort::Low.into(),
        budget_tokens: 0,
    });
    g.sampling = Some(pb::Sampling {
        max_output_tokens: Some(1000),
        temperature: Some(0.3),
        ..Default::default()
    });
    let b = build(&g, &model(CLAUDE, true, false));
    assert_eq!(
        b["additionalModelRequestFields"],
        json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})
    );
    // maxTokens raised above the budget; temperature dropped with thinking on.
    assert_eq!(b["inferenceConfig"], json!({"maxTokens": 3072}));
    assert_eq!(
        b["messages"][1]["content"][0],
        json!({"reasoningContent": {"reasoningText": {"text": "think", "signature": "sig-1"}}})
    );
    // Another model's reasoning is not replayed.
    if let Some(Kind::Reasoning(r)) = &mut g.messages[1].parts[0].kind {
        r.provider_metadata = meta("bedrock/other");
    }
    let b = build(&g, &model(CLAUDE, true, false));
    assert_eq!(b["messages"][1]["content"], json!([{"text": "391"}]));
    // Non-Claude models get no thinking field.
    let b = build(&g, &model("amazon.nova-pro-v1:0", true, false));
    assert!(b.get("additionalModelRequestFields").is_none());
}

#[test]
fn files_and_errors_name_their_fields() {
    let file = |media: &str, source: Source| {
        part(Kind::File(pb::FilePart {
            media_type: media.into(),
            filename: "My report.v2.pdf".into(),
            source: Some(source),
        }))
    };
    let g = generation(vec![message(
        pb::Role::User,
        vec![
            file("image/png", Source::Data(vec![1, 2, 3])),
            file("application/pdf", Source::Data(b"%PDF".to_vec())),
        ],
    )]);
    let b = build(&g, &claude());
    assert_eq!(
        b["messages"][0]["content"],
        json!([
            {"image": {"format": "png", "source": {"bytes": "AQID"}}},
            {"document": {"format": "pdf", "name": "My report v2", "source": {"bytes": "JVBERg=="}}},
            {"cachePoint": {"type": "default"}},
        ])
    );
    let g = generation(vec![message(
        pb::Role::User,
        vec![file("image/png", Source::Url("https://x/y.png".into()))],
    )]);
    let e = body(&g, &Target::new(&claude())).unwrap_err();
    assert_eq!(e.field, "generation.messages[0].parts[0].file");
    let mut g = generation(vec![message(pb::Role::User, vec![text("x")])]);
    g.provider_options_json = r#"{"bedrock":{"messages":[]}}"#.into();
    let e = body(&g, &Target::new(&claude())).unwrap_err();
    assert_eq!(e.field, "generation.provider_options_json");
    g.provider_options_json = r#"{"bedrock":{"additionalModelRequestFields":{"anthropic_beta":["x"]},"performanceConfig":{"latency":"optimized"}}}"#.into();
    let b = build(&g, &claude());
    assert_eq!(
        b["additionalModelRequestFields"],
        json!({"anthropic_beta": ["x"]})
    );
    assert_eq!(b["performanceConfig"], json!({"latency": "optimized"}));
    let e = body(
        &generation(vec![message(pb::Role::User, vec![text(" ")])]),
        &Target::new(&claude()),
    )
    .unwrap_err();
    assert_eq!(e.field, "generation.messages");
}

#[test]
fn an_assistant_first_history_gets_a_user_turn() {
    let g = generation(vec![message(pb::Role::Assistant, vec![text("Hello! ")])]);
    let b = build(&g, &model("meta.llama3-3-70b-instruct-v1:0", false, false));
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"text": "."}]},
            {"role": "assistant", "content": [{"text": "Hello!"}]},
        ])
    );
}

/// The request features beyond the conversation (docs/gateway.md "Request features by provider"): strict tools go
/// as `toolSpec.strict`; JSON-object output and one call per step, which Converse has no field for, are refused.
#[test]
fn strict_tools_and_what_converse_cannot_say() {
    use crate::adapter::testing::testkit::{city_tool, json_object, tool_choice};
    use pb::tool_choice::Mode;
    let uncached = model(CLAUDE, false, false);
    let mut g = generation(vec![message(pb::Role::User, vec![text("Hi")])]);
    g.tools = vec![city_tool("get_weather", true), city_tool("get_time", false)];
    let schema =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    assert_eq!(
        build(&g, &uncached)["toolConfig"],
        json!({"tools": [
            {"toolSpec": {"name": "get_weather", "inputSchema": {"json": schema}, "strict": true}},
            {"toolSpec": {"name": "get_time", "inputSchema": {"json": schema}}}
        ]})
    );

    g.tool_choice = tool_choice(Mode::Auto, "", true);
    let e = body(&g, &Target::new(&uncached)).unwrap_err();
    assert_eq!(e.field, "generation.tool_choice.disable_parallel");
    g.tool_choice = tool_choice(Mode::None, "", true);
    assert!(body(&g, &Target::new(&uncached)).is_ok());

    g.output_format = json_object();
    let e = body(&g, &Target::new(&uncached)).unwrap_err();
    assert_eq!(e.field, "generation.output_format.type");
    assert!(e.message.contains("no JSON mode"), "{e}");
}
