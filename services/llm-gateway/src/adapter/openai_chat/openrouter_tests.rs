//! OpenRouter `reasoning_details` (Claude behind OpenRouter with thinking and a tool call): the byte-exact fixture
//! decoded through the real SSE parser, and the reasoning block replayed with its signature on the next request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::ChatDecoder;
use crate::adapter::framing::sse::{SseItem, SseParser};
use crate::adapter::{Decoder, Protocol, Target};
use crate::catalog::{Capabilities, ModelInfo};
use crate::event::Event;
use llm_proto::gateway as pb;

const FIXTURE: &str = include_str!(
    "../../../../../shared/fake-provider/fixtures/openai_chat/openrouter_reasoning_details.sse"
);
const SIGNATURE: &str =
    "ErUBCkYIBxgCIkDv4mQ2Zl0s9W3h8Yc1kTqPzRb7nA5uLxE6oJ2dFgV0wS4yMiHcN8aBtKpU3rGe";

fn decode(body: &str) -> Vec<Event> {
    let mut parser = SseParser::new();
    let mut decoder = ChatDecoder::new();
    let mut out = Vec::new();
    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
        if let SseItem::Event { event, data } = item {
            decoder.frame(event, data, &mut out);
        }
        Ok(())
    };
    parser.feed(body.as_bytes(), &mut on).unwrap();
    parser.finish(&mut on).unwrap();
    decoder.end(&mut out);
    out
}

fn claude_via_openrouter() -> ModelInfo {
    ModelInfo {
        id: "openrouter/anthropic/claude-sonnet-4.5".into(),
        provider: "openrouter".into(),
        name: "anthropic/claude-sonnet-4.5".into(),
        display_name: "Claude Sonnet 4.5 (OpenRouter)".into(),
        protocol: Protocol::OpenaiChat,
        context_window: 200_000,
        max_input_tokens: 0,
        max_output_tokens: 64_000,
        capabilities: Capabilities {
            reasoning: true,
            ..Capabilities::default()
        },
        pricing: None,
    }
}

#[test]
fn the_signature_only_detail_is_kept_on_the_reasoning_block() {
    let events = decode(FIXTURE);
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            Event::ReasoningDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        text,
        "The user wants the weather in Paris; I will call the tool."
    );
    let metadata = events
        .iter()
        .find_map(|e| match e {
            Event::ReasoningEnd { metadata, .. } => metadata.clone(),
            _ => None,
        })
        .expect("reasoning end");
    let meta: Value = serde_json::from_str(&metadata).unwrap();
    assert_eq!(
        meta,
        json!({"reasoning_details": [{
            "type": "reasoning.text",
            "text": "The user wants the weather in Paris; I will call the tool.",
            "format": "anthropic-claude-v1",
            "index": 0,
            "signature": SIGNATURE,
        }]})
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ToolCall { tool, input_json, .. }
        if tool == "get_weather" && input_json == r#"{"city": "Paris"}"#))
    );
}

#[test]
fn the_details_are_replayed_to_the_same_model_and_dropped_for_another() {
    let events = decode(FIXTURE);
    let (mut reasoning, mut call) = (None, None);
    for e in events {
        match e {
            Event::ReasoningEnd { metadata, .. } => reasoning = metadata,
            Event::ToolCall {
                call_id,
                tool,
                input_json,
                ..
            } => call = Some((call_id, tool, input_json)),
            _ => {}
        }
    }
    let model = claude_via_openrouter();
    let (call_id, tool, input_json) = call.unwrap();
    let part = |kind| pb::Part { kind: Some(kind) };
    let history = |model_id: &str| pb::Generation {
        model: model.id.clone(),
        messages: vec![
            pb::Message {
                role: pb::Role::User as i32,
                parts: vec![part(pb::part::Kind::Text(pb::TextPart {
                    text: "Weather in Paris?".into(),
                }))],
            },
            pb::Message {
                role: pb::Role::Assistant as i32,
                parts: vec![
                    part(pb::part::Kind::Reasoning(pb::ReasoningPart {
                        text: "The user wants the weather in Paris; I will call the tool.".into(),
                        provider_metadata: Some(pb::ProviderMetadata {
                            protocol: "openai_chat".into(),
                            model: model_id.into(),
                            json: reasoning.clone().unwrap(),
                        }),
                    })),
                    part(pb::part::Kind::ToolCall(pb::ToolCallPart {
                        call_id: call_id.clone(),
                        tool_name: tool.clone(),
                        input_json: input_json.clone(),
                        provider_metadata: None,
                    })),
                ],
            },
            pb::Message {
                role: pb::Role::Tool as i32,
                parts: vec![part(pb::part::Kind::ToolResult(pb::ToolResultPart {
                    call_id: call_id.clone(),
                    tool_name: tool.clone(),
                    output: "18°C".into(),
                    is_error: false,
                }))],
            },
        ],
        ..Default::default()
    };
    let body = super::request::build(&history(&model.id), &Target::new(&model))
        .unwrap()
        .body;
    let assistant = &body["messages"][1];
    assert_eq!(assistant["reasoning_details"][0]["signature"], SIGNATURE);
    assert_eq!(assistant["reasoning_details"][0]["type"], "reasoning.text");
    assert_eq!(assistant["tool_calls"][0]["id"], call_id.as_str());
    let other = super::request::build(
        &history("openrouter/some/other-model"),
        &Target::new(&model),
    )
    .unwrap()
    .body;
    assert!(other["messages"][1].get("reasoning_details").is_none());
}
