//! The per-server fixes the catalog switches on, end to end through the real gateway, each against a fake provider
//! that validates requests like the real server: Mistral's tool-call ids (`tool_call_ids = "mistral"`), DeepSeek's
//! reasoning replay (`reasoning_replay = "reasoning_content"`), OpenAI strict mode (`strict_schemas`), and per-model
//! sampling defaults (`defaults`) in their order with the hooks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use e2e_tests::*;
use fake_provider::openai_sse::ChatStream;
use fake_provider::{Protocol, Reply};
use llm_proto::gateway as pb;
use pb::part::Kind;
use pb::stream_response::Event as E;
use serde_json::{Value, json};

/// Catalog entries for OpenAI-compatible servers behind the test's `openai` provider.
const MODELS: &str = r#"
[models."openai/mistral-large-latest"]
context_window = 131072
max_output_tokens = 8192
capabilities = { tool_call_ids = "mistral" }

[models."openai/mistral-unflagged"]
context_window = 131072
max_output_tokens = 8192

[models."openai/deepseek-v4"]
context_window = 131072
max_output_tokens = 8192
capabilities = { reasoning = false, reasoning_replay = "reasoning_content" }

[models."openai/gpt-4o"]
capabilities = { strict_schemas = true }
"#;

fn part(kind: Kind) -> pb::Part {
    pb::Part { kind: Some(kind) }
}

fn call(id: &str, city: &str) -> pb::Part {
    part(Kind::ToolCall(pb::ToolCallPart {
        call_id: id.into(),
        tool_name: "get_weather".into(),
        input_json: format!(r#"{{"city":"{city}"}}"#),
        provider_metadata: None,
    }))
}

fn result(id: &str) -> pb::Part {
    part(Kind::ToolResult(pb::ToolResultPart {
        call_id: id.into(),
        tool_name: "get_weather".into(),
        output: "sunny".into(),
        is_error: false,
    }))
}

fn message(role: pb::Role, parts: Vec<pb::Part>) -> pb::Message {
    pb::Message {
        role: role as i32,
        parts,
    }
}

/// A history whose calls were made by Claude and by a server with odd ids.
fn foreign_history(model: &str) -> pb::Generation {
    pb::Generation {
        model: model.into(),
        messages: vec![
            user("Weather in Paris and Lyon?"),
            message(
                pb::Role::Assistant,
                vec![
                    call("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "Paris"),
                    call("call:weird/id", "Lyon"),
                ],
            ),
            message(
                pb::Role::Tool,
                vec![
                    result("call:weird/id"),
                    result("toolu_01T1x1fJ34qAmk2tNTrN7Up6"),
                ],
            ),
        ],
        tools: vec![weather_tool()],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistral_gets_nine_character_ids_that_pair_and_an_unflagged_model_shows_why() {
    let mut h = Harness::start_with(MODELS).await;
    // The unflagged model's request is refused: what the test shows.
    h.expect_rejections();
    h.openai.validate_requests(Protocol::MistralChat);
    h.openai.push(Reply::fixture("openai_chat/text.sse"));

    let events = h
        .stream(foreign_history("openai/mistral-large-latest"))
        .await
        .unwrap();
    assert!(
        matches!(terminal(&events), E::StepFinish(_)),
        "{:#?} {:#?}",
        render(&events),
        h.openai.rejections()
    );
    let body = h.openai.requests()[0].json();
    let calls: Vec<&str> = body["messages"][1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for id in &calls {
        assert!(
            id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric()),
            "{id}"
        );
    }
    // Results answer in the caller's order, with the same rewritten ids.
    assert_eq!(body["messages"][2]["tool_call_id"], calls[1]);
    assert_eq!(body["messages"][3]["tool_call_id"], calls[0]);

    // The same conversation to a Mistral model the catalog does not flag: Mistral's own 400, not retried.
    let events = h
        .stream(foreign_history("openai/mistral-unflagged"))
        .await
        .unwrap();
    let E::Error(e) = terminal(&events) else {
        panic!("{:#?}", render(&events))
    };
    assert_eq!(e.kind, pb::ErrorKind::InvalidRequest as i32);
    assert!(
        e.message
            .contains("Tool call id was toolu_01T1x1fJ34qAmk2tNTrN7Up6 but must be a-z, A-Z, 0-9, with a length of 9."),
        "{}",
        e.message
    );
    assert_eq!(h.openai.requests().len(), 2, "not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deepseek_gets_its_own_reasoning_back_on_every_assistant_turn() {
    let h = Harness::start_with(MODELS).await;
    h.openai.validate_requests(Protocol::DeepseekChat);
    h.openai.push(Reply::fixture("openai_chat/reasoning.sse"));
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let model = "openai/deepseek-v4";

    // An earlier turn came from Claude, with its signed thinking.
    let mut messages = vec![
        user("Hi"),
        message(
            pb::Role::Assistant,
            vec![
                part(Kind::Reasoning(pb::ReasoningPart {
                    text: "Greet back.".into(),
                    provider_metadata: Some(pb::ProviderMetadata {
                        protocol: "anthropic".into(),
                        model: "anthropic/claude-sonnet-4-5".into(),
                        json: r#"{"signature":"EqQB"}"#.into(),
                    }),
                })),
                part(Kind::Text(pb::TextPart {
                    text: "Hello!".into(),
                })),
            ],
        ),
        user("What is 17 × 3?"),
    ];
    let first = h
        .stream(pb::Generation {
            model: model.into(),
            messages: messages.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        matches!(terminal(&first), E::StepFinish(_)),
        "{:#?}",
        render(&first)
    );

    // The step's reasoning and text become the next assistant turn, as the processor stores them.
    let mut reasoning = pb::ReasoningPart::default();
    let mut text = String::new();
    for ev in &first {
        match ev.event.as_ref().unwrap() {
            E::ReasoningDelta(d) => reasoning.text.push_str(&d.delta),
            E::ReasoningEnd(r) => reasoning.provider_metadata = r.provider_metadata.clone(),
            E::TextDelta(d) => text.push_str(&d.delta),
            _ => {}
        }
    }
    let meta = reasoning
        .provider_metadata
        .clone()
        .expect("replay metadata");
    assert_eq!(
        (
            meta.protocol.as_str(),
            meta.model.as_str(),
            meta.json.as_str()
        ),
        ("openai_chat", model, "{}")
    );
    let thought = reasoning.text.clone();
    messages.push(message(
        pb::Role::Assistant,
        vec![
            part(Kind::Reasoning(reasoning)),
            part(Kind::Text(pb::TextPart { text })),
        ],
    ));
    messages.push(user("And 18 × 3?"));
    let second = h
        .stream(pb::Generation {
            model: model.into(),
            messages,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        matches!(terminal(&second), E::StepFinish(_)),
        "{:#?} {:#?}",
        render(&second),
        h.openai.rejections()
    );
    let body = h.openai.requests()[1].json();
    let assistants: Vec<&Value> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    // Claude's thinking is not DeepSeek's: the field is there (DeepSeek requires it) but empty.
    assert_eq!(assistants[0]["reasoning_content"], "");
    assert_eq!(assistants[1]["reasoning_content"], thought.as_str());
    assert!(!body.to_string().contains("Greet back."), "{body:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_tools_pass_openais_schema_check_and_their_nulls_are_removed_again() {
    let h = Harness::start_with(MODELS).await;
    h.openai.validate_requests(Protocol::OpenaiChat);
    h.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-strict")
            .created(1_767_225_600)
            .tool_call(
                "call_strict_1",
                "get_weather",
                &["{\"city\":\"Paris\",", "\"unit\":null}"],
            )
            .finish("tool_calls", Some((80, 12))),
    ));
    let tool = pb::Tool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema_json: r#"{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}"#.into(),
        ..Default::default()
    };
    let events = h
        .stream(pb::Generation {
            tools: vec![tool],
            ..generation("openai/gpt-4o", "Weather in Paris?")
        })
        .await
        .unwrap();
    let lines = render(&events);
    assert!(
        h.openai.rejections().is_empty(),
        "{:#?}",
        h.openai.rejections()
    );
    assert!(matches!(terminal(&events), E::StepFinish(_)), "{lines:#?}");
    let body = h.openai.requests()[0].json();
    assert_eq!(
        body["tools"][0]["function"],
        json!({
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": ["string", "null"], "enum": ["c", "f", null]},
                },
                "required": ["city", "unit"],
                "additionalProperties": false,
            },
            "strict": true,
        })
    );
    // The deltas are the provider's text; the final call validates against the caller's schema.
    assert!(
        lines.contains(&"tool_call call_strict_1 get_weather {\"city\":\"Paris\"}".to_string()),
        "{lines:#?}"
    );
}

/// Catalog defaults fill what the caller left unset before any hook runs; a hook's `params.default` then finds
/// them set, its `params.set` still wins, and the adapter finally drops what the model rejects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_defaults_come_before_the_hooks_and_the_models_own_rules() {
    let h = Harness::start_with(
        r#"
[models."openai/gpt-4o"]
defaults = { temperature = 0.7, top_p = 0.95, max_output_tokens = 8192 }

[models."openai/o3"]
defaults = { temperature = 0.7, max_output_tokens = 4096 }

[[hooks]]
match = "openai/*"
params = { default = { temperature = 0.2, max_output_tokens = 1000 }, set = { top_p = 0.5 } }
"#,
    )
    .await;
    h.openai.validate_requests(Protocol::OpenaiChat);
    for _ in 0..3 {
        h.openai.push(Reply::fixture("openai_chat/text.sse"));
    }
    let sampling_of = |body: &Value| {
        [
            "temperature",
            "top_p",
            "max_tokens",
            "max_completion_tokens",
        ]
        .map(|k| body.get(k).cloned().unwrap_or(Value::Null))
    };

    // Nothing set by the caller: the catalog's values, except top_p, which the hook sets.
    let events = h.stream(generation("openai/gpt-4o", "hi")).await.unwrap();
    assert!(
        matches!(terminal(&events), E::StepFinish(_)),
        "{:#?}",
        render(&events)
    );
    assert_eq!(
        sampling_of(&h.openai.requests()[0].json()),
        [json!(0.7), json!(0.5), json!(8192), Value::Null]
    );

    // The caller's own values win over both defaults.
    let events = h
        .stream(pb::Generation {
            sampling: Some(pb::Sampling {
                temperature: Some(0.1),
                max_output_tokens: Some(100),
                ..Default::default()
            }),
            ..generation("openai/gpt-4o", "hi")
        })
        .await
        .unwrap();
    assert!(
        matches!(terminal(&events), E::StepFinish(_)),
        "{:#?}",
        render(&events)
    );
    assert_eq!(
        sampling_of(&h.openai.requests()[1].json()),
        [json!(0.1), json!(0.5), json!(100), Value::Null]
    );

    // A reasoning model: the default temperature (and the hook's top_p) are dropped by the adapter, the output
    // limit goes out as `max_completion_tokens`; OpenAI's reasoning-model checks pass.
    let events = h.stream(generation("openai/o3", "hi")).await.unwrap();
    assert!(
        matches!(terminal(&events), E::StepFinish(_)),
        "{:#?} {:#?}",
        render(&events),
        h.openai.rejections()
    );
    assert_eq!(
        sampling_of(&h.openai.requests()[2].json()),
        [Value::Null, Value::Null, Value::Null, json!(4096)]
    );
}
