use super::*;
use crate::error::ErrorKind;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            "../../../../../shared/fake-provider/fixtures/anthropic/",
            $name
        ))
    };
}

const MODEL: &str = "claude-sonnet-4-5-20250929";

/// Minimal SSE splitter for the tests (the real parser lives in `adapter::framing::sse`): frames are separated by a blank
/// line; `event:` names the frame and `data:` lines are joined with `\n`.
fn frames(sse: &str) -> Vec<(&str, String)> {
    sse.split("\n\n")
        .filter_map(|frame| {
            let mut event = "";
            let mut data = Vec::new();
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim_start();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            (!data.is_empty()).then(|| (event, data.join("\n")))
        })
        .collect()
}

/// Feeds every frame of `sse`, then the end of the body; each `ping` is one keep-alive (left out of what this
/// returns, which is the stream's content).
fn decode(sse: &str) -> Vec<Event> {
    let mut decoder = AnthropicDecoder::new();
    let mut out = Vec::new();
    let frames = frames(sse);
    let pings = frames.iter().filter(|(e, _)| *e == "ping").count();
    for (event, data) in frames {
        decoder.frame(event, &data, &mut out);
    }
    decoder.end(&mut out);
    assert!(decoder.is_done());
    let kept = out.iter().filter(|e| matches!(e, Event::KeepAlive)).count();
    if !matches!(out.last(), Some(Event::Error(_))) {
        assert_eq!(kept, pings, "one keep-alive per ping: {out:#?}");
    }
    out.retain(|e| !matches!(e, Event::KeepAlive));
    out
}

/// The `data` of the first frame named `event`.
fn data_of(sse: &str, event: &str) -> String {
    frames(sse)
        .into_iter()
        .find(|(e, _)| *e == event)
        .map(|(_, d)| d)
        .unwrap()
}

fn text_start(id: &str) -> Event {
    Event::TextStart { id: id.into() }
}
fn text_delta(id: &str, d: &str) -> Event {
    Event::TextDelta {
        id: id.into(),
        delta: d.into(),
    }
}
fn text_end(id: &str) -> Event {
    Event::TextEnd { id: id.into() }
}
fn tool_start(call_id: &str, tool: &str) -> Event {
    Event::ToolInputStart {
        call_id: call_id.into(),
        tool: tool.into(),
    }
}
fn tool_delta(call_id: &str, d: &str) -> Event {
    Event::ToolInputDelta {
        call_id: call_id.into(),
        delta: d.into(),
    }
}
fn tool_end(call_id: &str) -> Event {
    Event::ToolInputEnd {
        call_id: call_id.into(),
    }
}
fn tool_call(call_id: &str, tool: &str, input: &str) -> Event {
    Event::ToolCall {
        call_id: call_id.into(),
        tool: tool.into(),
        input_json: input.into(),
        metadata: None,
    }
}
fn finish(reason: FinishReason, raw: &str, usage: Usage, id: &str) -> Event {
    Event::Finish(Finish {
        reason,
        raw_reason: raw.into(),
        usage,
        response_id: id.into(),
        response_model: MODEL.into(),
    })
}
fn usage(input: u64, cache_read: u64, cache_write: u64, output: u64) -> Usage {
    Usage {
        input,
        cache_read,
        cache_write,
        output,
        reasoning: 0,
    }
}

#[test]
fn text_stream() {
    assert_eq!(
        decode(fixture!("text.sse")),
        vec![
            text_start("0"),
            text_delta("0", "Hello"),
            text_delta("0", "! The file says \"done\".\nAnything else?"),
            text_end("0"),
            finish(
                FinishReason::Stop,
                "end_turn",
                usage(25, 3840, 1210, 15),
                "msg_01XFDUDYJgAACzvnptvVoYEL"
            ),
        ]
    );
}

#[test]
fn parallel_tool_calls() {
    let (a, b) = (
        "toolu_01A09q90qw90lq917835lq9",
        "toolu_01B7dXq3fJt8mYh2KcLzWp4V",
    );
    let events = decode(fixture!("parallel_tools.sse"));
    assert_eq!(
        events,
        vec![
            text_start("0"),
            text_delta("0", "I'll check the weather in both cities."),
            text_end("0"),
            tool_start(a, "get_weather"),
            tool_delta(a, "{\"city\""),
            tool_delta(a, ": \"Par"),
            tool_delta(a, "is\"}"),
            tool_end(a),
            tool_call(a, "get_weather", r#"{"city": "Paris"}"#),
            tool_start(b, "get_weather"),
            tool_delta(b, "{\"ci"),
            tool_delta(b, "ty\": \"Tokyo\", "),
            tool_delta(b, "\"unit\": \"celsius\"}"),
            tool_end(b),
            tool_call(b, "get_weather", r#"{"city": "Tokyo", "unit": "celsius"}"#),
            finish(
                FinishReason::ToolCalls,
                "tool_use",
                usage(612, 2048, 0, 131),
                "msg_01Rk8tSbDcQ5vGnEJmWpHa2N"
            ),
        ]
    );
}

#[test]
fn reasoning_with_signature() {
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/1Nq8+8UtbwCk1TkAvNg8ZYnOkIoV0NvZc/0RoLjGTYQ4X3bnKxVXUlkQu3Cj4OLmjTy2DmAtFm2ZGxz+OWVrvG3nLkYqKsrB4o2CJqxCfrnhj1tY=";
    assert_eq!(
        decode(fixture!("reasoning.sse")),
        vec![
            Event::ReasoningStart { id: "0".into() },
            Event::ReasoningDelta {
                id: "0".into(),
                delta: "The user asks for 27 * 453.".into()
            },
            Event::ReasoningDelta {
                id: "0".into(),
                delta: "\n27 * 453 = 27 * 400 + 27 * 53 = 10800 + 1431".into()
            },
            Event::ReasoningDelta {
                id: "0".into(),
                delta: " = 12231.".into()
            },
            Event::ReasoningEnd {
                id: "0".into(),
                metadata: Some(format!(r#"{{"signature":"{signature}"}}"#)),
            },
            text_start("1"),
            text_delta("1", "27 × 453 = **12,231**."),
            text_end("1"),
            // Thinking tokens are inside output_tokens and the API does not split them out here.
            finish(
                FinishReason::Stop,
                "end_turn",
                usage(48, 0, 0, 187),
                "msg_01Jm5Lq2sPzW8vYbT3nKcR7e"
            ),
        ]
    );
}

/// The fixture the cross-model end-to-end test starts from: signed thinking, text, then a tool call.
#[test]
fn thinking_then_text_then_a_tool_call() {
    let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6";
    let events = decode(fixture!("thinking_tool_use.sse"));
    let Some(Event::ReasoningEnd {
        metadata: Some(meta),
        ..
    }) = events.get(3)
    else {
        panic!("{events:#?}");
    };
    assert!(meta.starts_with(r#"{"signature":"EpYCCkYIBxgC"#), "{meta}");
    assert_eq!(
        events[4..],
        [
            text_start("1"),
            text_delta("1", "Let me check the weather in Paris."),
            text_end("1"),
            tool_start(id, "get_weather"),
            tool_delta(id, "{\"city\": "),
            tool_delta(id, "\"Paris\"}"),
            tool_end(id),
            tool_call(id, "get_weather", r#"{"city": "Paris"}"#),
            finish(
                FinishReason::ToolCalls,
                "tool_use",
                usage(412, 0, 0, 96),
                "msg_01HJ7vRzq2W4dKp9sN3xTbQe"
            ),
        ]
    );
}

#[test]
fn redacted_thinking_opens_and_closes_at_once() {
    let data = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8URj2pLmN3kT7TwUqP4Ab9Ci5VxY1JhM0oLcE7wK8dGfR2sNt6Zp";
    assert_eq!(
        decode(fixture!("redacted_thinking.sse")),
        vec![
            Event::ReasoningStart { id: "0".into() },
            Event::ReasoningEnd {
                id: "0".into(),
                metadata: Some(format!(r#"{{"redacted_data":"{data}"}}"#)),
            },
            text_start("1"),
            text_delta(
                "1",
                "I can't share my full reasoning, but the answer is 42."
            ),
            text_end("1"),
            finish(
                FinishReason::Stop,
                "end_turn",
                usage(92, 0, 0, 254),
                "msg_01Qw3Ze6Hn9Tb2XcVfKj5Ls8"
            ),
        ]
    );
}

#[test]
fn error_after_output_ends_the_stream() {
    let sse = fixture!("error_after_200.sse");
    let events = decode(sse);
    assert_eq!(
        events,
        vec![
            text_start("0"),
            text_delta("0", "Here is the first part"),
            text_delta("0", " of the answer"),
            Event::Error(classify(None, None, &data_of(sse, "error"))),
        ]
    );
    let Some(Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(e.http_status, None);
}

#[test]
fn error_before_any_block() {
    let sse = fixture!("error_first.sse");
    assert_eq!(
        decode(sse),
        vec![Event::Error(classify(None, None, &data_of(sse, "error")))]
    );
}

#[test]
fn truncated_stream_is_a_retryable_network_error() {
    let call = "toolu_01Dk2Pw7Ys4Nh9Bq3Vt6Fm8J";
    let events = decode(fixture!("truncated.sse"));
    assert_eq!(
        events,
        vec![
            text_start("0"),
            text_delta("0", "Let me look that up"),
            text_end("0"),
            tool_start(call, "search"),
            tool_delta(call, "{\"query\": \"rust"),
            Event::Error(ProviderError::new(
                ErrorKind::Network,
                "stream ended before message_stop"
            )),
        ]
    );
    let Some(Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert!(e.retryable);
}

#[test]
fn malformed_json_is_a_provider_error_and_nothing_follows() {
    let sse = fixture!("malformed.sse");
    let bad = frames(sse)
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| serde_json::from_str::<serde_json::Value>(d).is_err())
        .unwrap();
    let parse_error = serde_json::from_str::<WireEvent<'_>>(&bad).err().unwrap();
    let mut expected = ProviderError::malformed(format!(
        "malformed Anthropic stream: `content_block_delta` event: {parse_error}"
    ));
    expected.provider_body = bad.clone();
    let events = decode(sse);
    assert_eq!(
        events,
        vec![
            text_start("0"),
            text_delta("0", "Hi"),
            Event::Error(expected)
        ]
    );
    let Some(Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(e.kind, ErrorKind::ProviderError);
    assert!(!e.retryable);
}

/// Feeds inline `(event, data)` frames without ending the body.
fn feed(decoder: &mut AnthropicDecoder, frames: &[(&str, &str)]) -> Vec<Event> {
    let mut out = Vec::new();
    for (event, data) in frames {
        decoder.frame(event, data, &mut out);
    }
    out
}

const START: &str = r#"{"type":"message_start","message":{"id":"msg_01X","model":"claude-sonnet-4-5-20250929","usage":{"input_tokens":100,"cache_creation_input_tokens":10,"cache_read_input_tokens":20,"output_tokens":1}}}"#;

#[test]
fn usage_from_message_delta_overrides_message_start_and_splits_thinking() {
    let mut d = AnthropicDecoder::new();
    let out = feed(
        &mut d,
        &[
            ("message_start", START),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":120,"cache_read_input_tokens":null,"output_tokens":500,"output_tokens_details":{"thinking_tokens":300}}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ],
    );
    assert_eq!(
        out,
        vec![Event::Finish(Finish {
            reason: FinishReason::Length,
            raw_reason: "max_tokens".into(),
            usage: Usage {
                input: 120,
                cache_read: 20,
                cache_write: 10,
                output: 200,
                reasoning: 300,
            },
            response_id: "msg_01X".into(),
            response_model: MODEL.into(),
        })]
    );
    // Nothing after the finish, not even at the end of the body.
    let mut rest = Vec::new();
    d.frame("message_stop", r#"{"type":"message_stop"}"#, &mut rest);
    d.end(&mut rest);
    assert!(rest.is_empty());
}

#[test]
fn stop_reasons_map_to_unified_reasons() {
    for (raw, reason) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("pause_turn", FinishReason::Stop),
        ("tool_use", FinishReason::ToolCalls),
        ("max_tokens", FinishReason::Length),
        ("model_context_window_exceeded", FinishReason::Length),
        ("refusal", FinishReason::ContentFilter),
        ("something_new", FinishReason::Other),
        ("", FinishReason::Other),
    ] {
        assert_eq!(finish_reason(raw), reason, "{raw}");
    }
}

#[test]
fn unknown_events_blocks_and_deltas_are_ignored_and_the_event_name_is_optional() {
    let mut d = AnthropicDecoder::new();
    let mut out = feed(
        &mut d,
        &[
            ("", START),
            ("ping", r#"{"type": "ping"}"#),
            (
                "future_event",
                r#"{"type":"future_event","delta":"a string","index":"x"}"#,
            ),
            (
                "",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"q\":1}"}}"#,
            ),
            ("", r#"{"type":"content_block_stop","index":0}"#),
            (
                "",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"char_location"}}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}"#,
            ),
            (
                "",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}}"#,
            ),
            ("", r#"{"type":"content_block_stop","index":1}"#),
            (
                "",
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#,
            ),
            ("", r#"{"type":"message_stop"}"#),
        ],
    );
    assert_eq!(out.first(), Some(&Event::KeepAlive), "the ping: {out:#?}");
    out.remove(0);
    assert_eq!(
        out,
        vec![
            text_start("1"),
            text_delta("1", "ok"),
            text_end("1"),
            Event::Finish(Finish {
                reason: FinishReason::Stop,
                raw_reason: "end_turn".into(),
                usage: usage(100, 20, 10, 9),
                response_id: "msg_01X".into(),
                response_model: MODEL.into(),
            }),
        ]
    );
}

#[test]
fn tool_without_arguments_and_open_blocks_are_closed_at_message_stop() {
    let mut d = AnthropicDecoder::new();
    let out = feed(
        &mut d,
        &[
            ("message_start", START),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01N","name":"now","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ],
    );
    assert_eq!(
        out,
        vec![
            Event::ReasoningStart { id: "0".into() },
            tool_start("toolu_01N", "now"),
            Event::ReasoningEnd {
                id: "0".into(),
                metadata: None
            },
            tool_end("toolu_01N"),
            tool_call("toolu_01N", "now", "{}"),
            // `end_turn` with a tool call is reported as tool calls.
            Event::Finish(Finish {
                reason: FinishReason::ToolCalls,
                raw_reason: "end_turn".into(),
                usage: usage(100, 20, 10, 7),
                response_id: "msg_01X".into(),
                response_model: MODEL.into(),
            }),
        ]
    );
}

#[test]
fn delta_for_a_block_that_never_started_is_malformed() {
    let mut d = AnthropicDecoder::new();
    let data =
        r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"lost"}}"#;
    let out = feed(
        &mut d,
        &[("message_start", START), ("content_block_delta", data)],
    );
    let mut expected = ProviderError::malformed(
        "malformed Anthropic stream: delta for content block 3, which is not open",
    );
    expected.provider_body = data.into();
    assert_eq!(out, vec![Event::Error(expected)]);
    assert!(d.is_done());
}

#[test]
fn error_event_of_any_shape_is_classified() {
    for data in ["Overloaded", r#"{"type":"error","message":"flat"}"#] {
        let mut d = AnthropicDecoder::new();
        let out = feed(&mut d, &[("error", data)]);
        assert_eq!(out, vec![Event::Error(classify(None, None, data))]);
    }
}

#[test]
fn error_body_fixtures_classify_as_their_status_says() {
    for (status, body, kind) in [
        (
            400,
            fixture!("errors/prompt_too_long.json"),
            ErrorKind::ContextOverflow,
        ),
        (401, fixture!("errors/authentication.json"), ErrorKind::Auth),
        (
            429,
            fixture!("errors/rate_limit.json"),
            ErrorKind::RateLimited,
        ),
        (
            529,
            fixture!("errors/overloaded.json"),
            ErrorKind::Overloaded,
        ),
    ] {
        let e = classify(Some(status), None, body);
        assert_eq!(e.kind, kind, "{status}: {e}");
        assert_eq!(e.http_status, Some(status));
    }
}

#[test]
fn adapter_hands_out_fresh_decoders() {
    use crate::adapter::anthropic::Anthropic;
    use crate::adapter::{Adapter, Target};
    use crate::catalog::{Capabilities, ModelInfo};
    let model = ModelInfo {
        id: "anthropic/claude-sonnet-4-5".into(),
        provider: "anthropic".into(),
        name: "claude-sonnet-4-5".into(),
        display_name: String::new(),
        protocol: crate::protocol::Protocol::Anthropic,
        context_window: 200_000,
        max_input_tokens: 0,
        max_output_tokens: 64_000,
        capabilities: Capabilities::default(),
        pricing: None,
    };
    let mut decoder = Anthropic.decoder(&Target::new(&model));
    let mut out = Vec::new();
    for (event, data) in frames(fixture!("text.sse")) {
        decoder.frame(event, &data, &mut out);
    }
    assert!(decoder.is_done());
    // The text's start, delta and end, the finish, and the fixture's one `ping` as a keep-alive.
    assert_eq!(out.len(), 6);
    assert_eq!(
        out.iter().filter(|e| matches!(e, Event::KeepAlive)).count(),
        1
    );
}
