#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

use super::*;
use crate::adapter::framing::eventstream::{EventStreamDecoder, encode};
use crate::adapter::testing::invariants::check;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fake-provider/fixtures/bedrock"
);

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}.es")).unwrap()
}

/// Feeds `bytes` through the real eventstream decoder in reads of `split` bytes, then ends the body.
fn decode_split(bytes: &[u8], split: usize) -> Vec<Event> {
    let mut framing = EventStreamDecoder::new();
    let mut decoder = BedrockDecoder::new();
    let mut out = Vec::new();
    for chunk in bytes.chunks(split.max(1)) {
        framing
            .feed(chunk, &mut |m| {
                if !decoder.is_done() {
                    decoder.message(&m, &mut out);
                }
            })
            .unwrap();
    }
    framing.finish().unwrap();
    if !decoder.is_done() {
        decoder.end(&mut out);
    }
    assert!(decoder.is_done());
    out
}

fn decode(bytes: &[u8]) -> Vec<Event> {
    decode_split(bytes, bytes.len())
}

fn finish(events: &[Event]) -> &Finish {
    match events.last() {
        Some(Event::Finish(f)) => f,
        other => panic!("last event {other:?}"),
    }
}

fn error(events: &[Event]) -> &ProviderError {
    match events.last() {
        Some(Event::Error(e)) => e,
        other => panic!("last event {other:?}"),
    }
}

fn event(kind: &str, payload: &str) -> Vec<u8> {
    encode(
        &[(":event-type", kind), (":message-type", "event")],
        payload.as_bytes(),
    )
}

fn exception_frame(kind: &str, payload: &str) -> Vec<u8> {
    encode(
        &[(":exception-type", kind), (":message-type", "exception")],
        payload.as_bytes(),
    )
}

#[test]
fn every_fixture_matches_its_source_and_decodes_well_formed() {
    let mut seen = 0;
    for entry in std::fs::read_dir(FIXTURES).unwrap().flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let bytes = std::fs::read(path.with_extension("es")).unwrap();
        // The .es bytes are the .jsonl messages, in order: regenerate with scripts/bedrock_fixtures.py.
        let mut framing = EventStreamDecoder::new();
        let mut got: Vec<(String, Value)> = Vec::new();
        framing
            .feed(&bytes, &mut |m| {
                let name = m
                    .header_str(":event-type")
                    .or(m.header_str(":exception-type"))
                    .unwrap()
                    .to_string();
                got.push((name, serde_json::from_slice(m.payload).unwrap()));
            })
            .unwrap();
        let want: Vec<(String, Value)> = source
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let name = v.get("event").or(v.get("exception")).unwrap();
                (name.as_str().unwrap().to_string(), v["payload"].clone())
            })
            .collect();
        assert_eq!(got, want, "{} is stale", path.display());
        let events = decode(&bytes);
        assert_eq!(check(&events), Ok(()), "{}", path.display());
        // Any read size gives the same events.
        for split in [1, 7, 64] {
            assert_eq!(decode_split(&bytes, split), events, "{}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 5);
}

#[test]
fn text_with_usage_including_cache() {
    let events = decode(&fixture("text"));
    assert_eq!(
        events[..5],
        [
            Event::TextStart { id: "0".into() },
            Event::TextDelta {
                id: "0".into(),
                delta: "Hello".into()
            },
            Event::TextDelta {
                id: "0".into(),
                delta: " from".into()
            },
            Event::TextDelta {
                id: "0".into(),
                delta: " Bedrock.".into()
            },
            Event::TextEnd { id: "0".into() },
        ]
    );
    let f = finish(&events);
    assert_eq!(
        (f.reason, f.raw_reason.as_str()),
        (FinishReason::Stop, "end_turn")
    );
    assert_eq!(
        f.usage,
        Usage {
            input: 18,
            cache_read: 1024,
            cache_write: 256,
            output: 7,
            reasoning: 0
        }
    );
}

#[test]
fn parallel_tool_calls_with_fragmented_arguments() {
    let events = decode(&fixture("parallel_tools"));
    let calls: Vec<(&str, &str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall {
                call_id,
                tool,
                input_json,
                ..
            } => Some((call_id.as_str(), tool.as_str(), input_json.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            (
                "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                "get_weather",
                "{\"city\": \"Paris\"}"
            ),
            (
                "tooluse_9xQ2rT0bS1uV3wY5zA7cD",
                "get_weather",
                "{\"city\": \"Tokyo\"}"
            ),
        ]
    );
    let deltas = events
        .iter()
        .filter(|e| matches!(e, Event::ToolInputDelta { .. }))
        .count();
    assert_eq!(deltas, 5);
    assert_eq!(finish(&events).reason, FinishReason::ToolCalls);
}

#[test]
fn reasoning_carries_its_signature() {
    let events = decode(&fixture("reasoning"));
    assert_eq!(events[0], Event::ReasoningStart { id: "0".into() });
    let end = events
        .iter()
        .find_map(|e| match e {
            Event::ReasoningEnd { metadata, .. } => metadata.clone(),
            _ => None,
        })
        .unwrap();
    let meta: Value = serde_json::from_str(&end).unwrap();
    assert_eq!(
        meta["signature"],
        "EqQBCkYIBhgCIkB3wI6b0oFakeSignatureForTestsOnlyAAAA=="
    );
    assert!(events.contains(&Event::TextDelta {
        id: "1".into(),
        delta: "17 × 23 = 391.".into()
    }));
}

#[test]
fn redacted_reasoning_is_kept_for_replay() {
    let mut bytes = event("messageStart", r#"{"role":"assistant"}"#);
    bytes.extend(event(
        "contentBlockDelta",
        r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"redactedContent":"AAEC"}}}"#,
    ));
    bytes.extend(event("contentBlockStop", r#"{"contentBlockIndex":0}"#));
    bytes.extend(event("messageStop", r#"{"stopReason":"end_turn"}"#));
    let events = decode(&bytes);
    assert_eq!(
        events[1],
        Event::ReasoningEnd {
            id: "0".into(),
            metadata: Some(r#"{"redacted":"AAEC"}"#.into())
        }
    );
    // No metadata event: the stop still finishes the stream, without usage.
    assert_eq!(finish(&events).usage, Usage::default());
    assert_eq!(check(&events), Ok(()));
}

#[test]
fn exceptions_are_classified() {
    let e = decode(&fixture("throttle_first"));
    let e = error(&e);
    assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, true));
    assert_eq!(
        e.message,
        "Too many requests, please wait before trying again."
    );

    let e = decode(&fixture("validation_overflow"));
    assert_eq!(error(&e).kind, ErrorKind::ContextOverflow);

    let events = decode(&fixture("error_after_output"));
    assert!(matches!(events[1], Event::TextDelta { .. }));
    let e = error(&events);
    assert_eq!((e.kind, e.retryable), (ErrorKind::ProviderError, true));

    for (kind, want, retry) in [
        ("serviceUnavailableException", ErrorKind::Overloaded, true),
        ("internalServerException", ErrorKind::ProviderError, true),
        ("modelTimeoutException", ErrorKind::Timeout, true),
        ("validationException", ErrorKind::InvalidRequest, false),
        ("accessDeniedException", ErrorKind::Auth, false),
        (
            "serviceQuotaExceededException",
            ErrorKind::RateLimited,
            false,
        ),
    ] {
        let events = decode(&exception_frame(kind, r#"{"message":"x"}"#));
        let e = error(&events);
        assert_eq!((e.kind, e.retryable), (want, retry), "{kind}");
    }
    assert_eq!(
        exception(
            "validationException",
            r#"{"message":"Input is too long for requested model."}"#
        )
        .kind,
        ErrorKind::ContextOverflow
    );
    // An `error` message carries its code and text in headers.
    let bytes = encode(
        &[
            (":message-type", "error"),
            (":error-code", "InternalFailure"),
            (":error-message", "boom"),
        ],
        b"",
    );
    let events = decode(&bytes);
    assert_eq!(error(&events).message, "boom");
}

#[test]
fn broken_streams_are_errors_never_panics() {
    // A delta for a tool block that never started.
    let bytes = event(
        "contentBlockDelta",
        r#"{"contentBlockIndex":3,"delta":{"toolUse":{"input":"{"}}}"#,
    );
    assert_eq!(error(&decode(&bytes)).kind, ErrorKind::ProviderError);
    // A known event whose payload is not JSON.
    assert_eq!(
        error(&decode(&event("contentBlockDelta", "{"))).kind,
        ErrorKind::ProviderError
    );
    // A tool start without a name.
    let bytes = event(
        "contentBlockStart",
        r#"{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t"}}}"#,
    );
    assert_eq!(error(&decode(&bytes)).kind, ErrorKind::ProviderError);
    // The body ends before messageStop.
    let e = decode(&event("messageStart", r#"{"role":"assistant"}"#));
    assert_eq!(error(&e).kind, ErrorKind::Network);
    // Unknown events are ignored.
    let mut bytes = event("futureEvent", r#"{"x":1}"#);
    bytes.extend(event("messageStop", r#"{"stopReason":"max_tokens"}"#));
    assert_eq!(finish(&decode(&bytes)).reason, FinishReason::Length);
}
