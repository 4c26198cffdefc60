#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::adapter::Decoder;
use crate::adapter::framing::{Framing, Parser};
use crate::adapter::testing::invariants::check;
use crate::error::ErrorKind;
use crate::event::{Finish, FinishReason, Usage};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fake-provider/fixtures/bedrock"
);

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}.json")).unwrap()
}

/// `body` through the JSON framing in reads of `split` bytes, as the transport feeds a Converse answer.
fn decode_split(body: &[u8], split: usize, limit: usize) -> Vec<Event> {
    let mut parser = Parser::new(Framing::Json, limit);
    let mut decoder = BedrockDecoder::new();
    let mut out = Vec::new();
    for chunk in body.chunks(split.max(1)) {
        if let Err(e) = parser.feed(chunk, &mut decoder, &mut out) {
            out.push(Event::Error(e));
            return out;
        }
    }
    parser.finish(&mut decoder, &mut out).unwrap();
    if !decoder.is_done() {
        decoder.end(&mut out);
    }
    out
}

fn decode(body: &str) -> Vec<Event> {
    decode_split(body.as_bytes(), body.len(), 1 << 20)
}

fn tool_events(id: &str, city: &str) -> Vec<Event> {
    let input = format!("{{\"city\":\"{city}\"}}");
    vec![
        Event::ToolInputStart {
            call_id: id.into(),
            tool: "get_weather".into(),
        },
        Event::ToolInputDelta {
            call_id: id.into(),
            delta: input.clone(),
        },
        Event::ToolInputEnd { call_id: id.into() },
        Event::ToolCall {
            call_id: id.into(),
            tool: "get_weather".into(),
            input_json: input,
            metadata: None,
        },
    ]
}

#[test]
fn text_and_two_tool_uses_become_the_events_a_stream_would_give() {
    let events = decode(&fixture("converse_tools"));
    let mut want = vec![
        Event::TextStart { id: "0".into() },
        Event::TextDelta {
            id: "0".into(),
            delta: "I will look up the weather in both cities.".into(),
        },
        Event::TextEnd { id: "0".into() },
    ];
    want.extend(tool_events("tooluse_Q3f8sKxUTNe0pYw1bH2aJg", "Paris"));
    want.extend(tool_events("tooluse_m7LrV2dXQcWk9Zt4yFhN5A", "Tokyo"));
    want.push(Event::Finish(Finish {
        reason: FinishReason::ToolCalls,
        raw_reason: "tool_use".into(),
        usage: Usage {
            input: 412,
            output: 58,
            ..Usage::default()
        },
        response_id: String::new(),
        response_model: String::new(),
    }));
    assert_eq!(events, want);
    check(&events).unwrap();
}

#[test]
fn reasoning_keeps_its_signature_and_cache_counts_are_read() {
    let events = decode(&fixture("converse_reasoning_tool"));
    assert_eq!(
        events[..3],
        [
            Event::ReasoningStart { id: "0".into() },
            Event::ReasoningDelta {
                id: "0".into(),
                delta: "Two calls are needed, one per city.".into(),
            },
            Event::ReasoningEnd {
                id: "0".into(),
                metadata: Some(
                    r#"{"signature":"ErcBCkgIBxABGAIiQConverseSignatureForTestsOnly=="}"#.into()
                ),
            },
        ]
    );
    let Some(Event::Finish(f)) = events.last() else {
        panic!("{events:#?}")
    };
    assert_eq!(
        f.usage,
        Usage {
            input: 97,
            cache_read: 256,
            cache_write: 0,
            output: 41,
            reasoning: 0,
        }
    );
    check(&events).unwrap();
}

#[test]
fn any_split_of_the_body_decodes_like_the_whole() {
    let body = fixture("converse_tools");
    let whole = decode(&body);
    for split in [1, 2, 7, 64, 333] {
        assert_eq!(
            decode_split(body.as_bytes(), split, 1 << 20),
            whole,
            "{split}"
        );
    }
}

#[test]
fn redacted_reasoning_and_a_tool_without_input() {
    let body = r#"{"output":{"message":{"role":"assistant","content":[{"reasoningContent":{"redactedContent":"ZW5jcnlwdGVk"}},{"toolUse":{"toolUseId":"tooluse_1","name":"now"}}]}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7}}"#;
    let events = decode(body);
    assert_eq!(
        events[1],
        Event::ReasoningEnd {
            id: "0".into(),
            metadata: Some(r#"{"redacted":"ZW5jcnlwdGVk"}"#.into()),
        }
    );
    assert!(events.contains(&Event::ToolCall {
        call_id: "tooluse_1".into(),
        tool: "now".into(),
        input_json: "{}".into(),
        metadata: None,
    }));
    check(&events).unwrap();
}

#[test]
fn bodies_that_are_not_converse_answers_are_malformed_errors() {
    for body in [
        "",
        "{",
        r#"{"stopReason":"end_turn"}"#,
        r#"{"output":{"message":{"role":"assistant","content":[]}}}"#,
        r#"{"output":{"message":{"content":[{"toolUse":{"toolUseId":"","name":"x","input":{}}}]}},"stopReason":"tool_use"}"#,
    ] {
        let events = decode(body);
        let Some(Event::Error(e)) = events.last() else {
            panic!("{body}: {events:#?}")
        };
        assert_eq!(e.kind, ErrorKind::ProviderError, "{body}");
        assert_eq!(events.len(), 1, "{body}: one terminal error, nothing else");
        check(&events).unwrap();
    }
}

#[test]
fn a_body_over_the_limit_is_refused_and_invalid_utf8_is_malformed() {
    let body = fixture("converse_tools");
    let events = decode_split(body.as_bytes(), 100, 200);
    let Some(Event::Error(e)) = events.last() else {
        panic!("{events:#?}")
    };
    assert!(e.message.contains("over 200 bytes"), "{}", e.message);

    let mut parser = Parser::new(Framing::Json, 1024);
    let mut decoder = BedrockDecoder::new();
    let mut out = Vec::new();
    parser
        .feed(b"{\"a\":\"\xff\"}", &mut decoder, &mut out)
        .unwrap();
    let err = parser.finish(&mut decoder, &mut out).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ProviderError);
}
