//! Decoder tests: every fixture in `shared/fake-provider/fixtures/gemini/` decoded to its exact event sequence
//! through the real SSE parser (whole, byte by byte and in pseudo-random reads, with CRLF as recorded and converted
//! to LF), plus synthetic chunks for the edge cases the fixtures do not cover.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::GeminiDecoder;
use crate::adapter::Decoder;
use crate::adapter::framing::sse::{SseItem, SseParser};
pub(super) use crate::adapter::testing::event_kit::{call, finish, td, te, ts};
use crate::adapter::testing::event_kit::{rd, rs};
use crate::adapter::transport::classify::classify;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, FinishReason, Usage};

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            "../../../../../shared/fake-provider/fixtures/gemini/",
            $name
        ))
    };
}

const FIXTURES: [(&str, &str); 7] = [
    ("text.sse", fixture!("text.sse")),
    ("parallel_tools.sse", fixture!("parallel_tools.sse")),
    ("reasoning.sse", fixture!("reasoning.sse")),
    ("error_after_200.sse", fixture!("error_after_200.sse")),
    ("error_first.sse", fixture!("error_first.sse")),
    ("truncated.sse", fixture!("truncated.sse")),
    ("malformed.sse", fixture!("malformed.sse")),
];

/// Feeds `body` to the real SSE parser in reads of the given sizes (cycled), routing items like the transport
/// does, then ends the body.
fn decode_reads(body: &[u8], reads: &[usize]) -> Vec<Event> {
    let mut parser = SseParser::new();
    let mut d = GeminiDecoder::new();
    let mut out = Vec::new();
    let mut on = |item: SseItem<'_>| -> Result<(), ()> {
        if !d.is_done() {
            match item {
                SseItem::Event { event, data } => d.frame(event, data, &mut out),
                SseItem::BareJson(json) => d.bare_json(json, &mut out),
                SseItem::Comment => out.push(Event::KeepAlive),
            }
        }
        Ok(())
    };
    let mut rest = body;
    let mut sizes = reads.iter().cycle();
    while !rest.is_empty() {
        let n = (*sizes.next().unwrap()).clamp(1, rest.len());
        parser.feed(&rest[..n], &mut on).unwrap();
        rest = &rest[n..];
    }
    parser.finish(&mut on).unwrap();
    if !d.is_done() {
        d.end(&mut out);
    }
    assert!(d.is_done());
    out
}

/// Read sizes from a small linear congruential generator: "random" splits that are the same on every run.
fn pseudo_random_reads(seed: u64) -> Vec<usize> {
    let mut x = seed;
    (0..64)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(x >> 58).unwrap() + 1
        })
        .collect()
}

/// The fixture with CRLF line endings rewritten to LF: the framing other providers use, which must decode the same.
fn lf(sse: &str) -> String {
    sse.replace("\r\n", "\n")
}

/// Decodes `sse` whole, byte by byte and in pseudo-random reads, as recorded and converted to LF; checks that all
/// agree and that the decoder's contract holds (exactly one terminal event, last).
pub(super) fn decode(sse: &str) -> Vec<Event> {
    let want = decode_reads(sse.as_bytes(), &[usize::MAX]);
    let lf = lf(sse);
    for body in [sse, lf.as_str()] {
        assert_eq!(decode_reads(body.as_bytes(), &[1]), want, "byte by byte");
        for seed in 1..=6 {
            assert_eq!(
                decode_reads(body.as_bytes(), &pseudo_random_reads(seed)),
                want,
                "reads from seed {seed}"
            );
        }
    }
    let terminal = want
        .iter()
        .filter(|e| matches!(e, Event::Finish(_) | Event::Error(_)))
        .count();
    assert_eq!(terminal, 1, "{want:#?}");
    assert!(matches!(
        want.last(),
        Some(Event::Finish(_) | Event::Error(_))
    ));
    want
}

/// Feeds synthetic `data:` payloads as frames, then ends the body.
pub(super) fn decode_chunks(chunks: &[&str]) -> Vec<Event> {
    let mut d = GeminiDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.frame("", c, &mut out);
    }
    d.end(&mut out);
    assert!(d.is_done());
    // Nothing after the terminal event, whatever comes.
    let n = out.len();
    d.frame(
        "",
        &candidate(r#"[{"text": "late"}]"#, Some("STOP")),
        &mut out,
    );
    d.bare_json(r#"{"error": {"code": 500,"status": "INTERNAL"}}"#, &mut out);
    d.end(&mut out);
    assert_eq!(out.len(), n);
    out
}

/// A chunk with one candidate holding `parts` (a JSON array) and an optional finish reason.
pub(super) fn candidate(parts: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or(String::new(), |f| format!(r#","finishReason": "{f}""#));
    format!(
        r#"{{"candidates": [{{"content": {{"parts": {parts},"role": "model"}}{finish},"index": 0}}],"modelVersion": "gemini-2.5-flash","responseId": "resp1"}}"#
    )
}

/// The bare JSON after the last event of `sse`, as the SSE parser hands it over (lines joined with `\n`).
fn bare_tail(sse: &str) -> String {
    sse.rsplit("\r\n\r\n")
        .next()
        .unwrap()
        .trim_end()
        .replace("\r\n", "\n")
}

fn re(id: &str, signature: Option<&str>) -> Event {
    Event::ReasoningEnd {
        id: id.into(),
        metadata: signature.map(|s| format!(r#"{{"thought_signature":"{s}"}}"#)),
    }
}
pub(super) fn usage(input: u64, cache_read: u64, output: u64, reasoning: u64) -> Usage {
    Usage {
        input,
        cache_read,
        cache_write: 0,
        output,
        reasoning,
    }
}

#[test]
fn text_fixture() {
    assert_eq!(
        decode(fixture!("text.sse")),
        vec![
            ts("t0"),
            td("t0", "Hello"),
            td("t0", "! The file says \"done\"."),
            td("t0", "\nAnything else?"),
            te("t0"),
            finish(
                FinishReason::Stop,
                "STOP",
                usage(9, 0, 12, 0),
                "kWTPaJL8GovS7M8PmeTTgAk",
                "gemini-2.5-flash"
            ),
        ]
    );
}

#[test]
fn parallel_tools_fixture_synthesizes_ids_and_keeps_the_first_calls_signature() {
    const SIG: &str = "CtIDAVSoXO5fJ0pl7Qy3kDq1mZxW8tR2nB6vC4hL9sE1aU7oP3iK5gT0yF2jN8wX4rM6bH1cV9dS3qA7zL5eG0uY2tO8pI4kJ6fR1nW3xD5mB7vQ9sC2hZ4aE6gT8yU0oK1lP3jF5rN7wX9iM2bH4cV6dS8qA0zL1eG3uY5tO7pI9kJ2fR4nW6xD8mB0vQ==";
    let mut want = call(
        "call_3GXPaOKvDcmV7M8P6YbA2QQ_0",
        "get_weather",
        r#"{"city":"Paris"}"#,
        Some(format!(r#"{{"thought_signature":"{SIG}"}}"#)),
    );
    want.extend(call(
        "call_3GXPaOKvDcmV7M8P6YbA2QQ_1",
        "get_weather",
        r#"{"city":"Tokyo","unit":"celsius"}"#,
        None,
    ));
    // `STOP` with function calls is a tool-calls finish; thoughts are counted apart from the visible output.
    want.push(finish(
        FinishReason::ToolCalls,
        "STOP",
        usage(74, 0, 38, 91),
        "3GXPaOKvDcmV7M8P6YbA2QQ",
        "gemini-2.5-flash",
    ));
    assert_eq!(decode(fixture!("parallel_tools.sse")), want);
}

#[test]
fn reasoning_fixture_then_text_then_the_trailing_signature() {
    const SIG: &str = "CsYCAdHtim9kR3vX1qB8nZ4cL7wE2yT5uJ0pM6sD9fG3hK1aV8oN2iQ4bW7xC5zF0eY3tR6lU9jP1mS4dH8gA2kO5vB7nX0cZ3qE6wT9yL1uI4fJ7pM0sD2hG5aK8oV1bN3iQ6xC9zF2eY4tR7lU0jP3mS6dH9gA1kO4vB==";
    assert_eq!(
        decode(fixture!("reasoning.sse")),
        vec![
            rs("r0"),
            rd(
                "r0",
                "**Calculating the product**\n\nThe user asks for 27 × 453. I'll split 453 into 400 + 53.\n\n"
            ),
            rd(
                "r0",
                "27 × 400 = 10800 and 27 × 53 = 1431, so the total is 12231."
            ),
            re("r0", None),
            ts("t0"),
            td("t0", "27 × 453 = **12,231**."),
            te("t0"),
            // The signature came on an empty text part after the answer: a block of its own, in stream order.
            rs("r1"),
            re("r1", Some(SIG)),
            // 1290 prompt tokens of which 1024 cached; 12 visible and 196 thought tokens.
            finish(
                FinishReason::Stop,
                "STOP",
                usage(266, 1024, 12, 196),
                "Q2fPaNfmIbGe7M8Pq5mL8Q0",
                "gemini-2.5-pro"
            ),
        ]
    );
}

#[test]
fn error_after_200_fixture_keeps_the_text_and_classifies_the_bare_object() {
    let sse = fixture!("error_after_200.sse");
    let events = decode(sse);
    assert_eq!(
        events,
        vec![
            ts("t0"),
            td("t0", "Here is the first part"),
            td("t0", " of the answer"),
            Event::Error(classify(None, None, &bare_tail(sse))),
        ]
    );
    let Some(Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    // The body's `UNAVAILABLE` / 503 drive the kind even though no HTTP status goes with a mid-stream error.
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    assert_eq!(
        e.message,
        "The model is overloaded. Please try again later."
    );
    assert_eq!(e.http_status, None);
}

#[test]
fn error_first_fixture_is_a_retryable_error_and_nothing_else() {
    let sse = fixture!("error_first.sse");
    let events = decode(sse);
    assert_eq!(
        events,
        vec![Event::Error(classify(None, None, &bare_tail(sse)))]
    );
    let Some(Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!((e.kind, e.retryable), (ErrorKind::ProviderError, true));
}

#[test]
fn truncated_fixture_is_a_retryable_network_error() {
    let events = decode(fixture!("truncated.sse"));
    assert_eq!(
        events,
        vec![
            ts("t0"),
            td("t0", "Let me look that up"),
            td("t0", " for you"),
            Event::Error(ProviderError::new(
                ErrorKind::Network,
                "stream ended before the provider finished"
            )),
        ]
    );
    let Some(Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert!(e.retryable);
}

#[test]
fn malformed_fixture_is_a_provider_error_and_nothing_follows() {
    let sse = fixture!("malformed.sse");
    let bad = sse
        .split("\r\n\r\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .find(|d| serde_json::from_str::<serde_json::Value>(d).is_err())
        .unwrap();
    let events = decode(sse);
    assert_eq!(events.len(), 3, "{events:#?}");
    assert_eq!(events[..2], [ts("t0"), td("t0", "Hi")]);
    let Event::Error(e) = &events[2] else {
        panic!("{events:?}")
    };
    assert_eq!(e.kind, ErrorKind::ProviderError);
    assert!(!e.retryable);
    assert!(
        e.message
            .starts_with("malformed Gemini stream chunk: EOF while parsing"),
        "{}",
        e.message
    );
    assert_eq!(e.provider_body, bad);
}

#[test]
fn every_fixture_is_wire_exact_crlf_with_geminis_json_spacing() {
    for (name, sse) in FIXTURES {
        for frame in sse.split("\r\n\r\n").filter(|f| f.starts_with("data: ")) {
            assert!(!frame.contains('\n'), "{name}: LF inside a CRLF frame");
            let json = &frame["data: ".len()..];
            if serde_json::from_str::<serde_json::Value>(json).is_ok() {
                // `{"a": 1,"b": 2}`: a space after each colon, none after commas (outside strings, which these
                // checks ignore by looking at key boundaries only).
                assert!(json.contains("\"candidates\": ["), "{name}: {json}");
                assert!(!json.contains("\", \""), "{name}: {json}");
                assert!(json.contains("],\"usageMetadata\": {"), "{name}: {json}");
            }
        }
        let events = sse.matches("data: ").count();
        assert_eq!(
            sse.matches("\r\n\r\n").count(),
            events,
            "{name}: every event ends with CRLF CRLF"
        );
    }
}

#[test]
fn signature_on_an_empty_text_part_joins_the_open_reasoning_block() {
    let out = decode_chunks(&[
        &candidate(r#"[{"text": "Thinking...","thought": true}]"#, None),
        &candidate(r#"[{"text": "","thoughtSignature": "U0lH"}]"#, None),
        &candidate(r#"[{"text": "Answer."}]"#, Some("STOP")),
    ]);
    assert_eq!(
        out,
        vec![
            rs("r0"),
            rd("r0", "Thinking..."),
            re("r0", Some("U0lH")),
            ts("t0"),
            td("t0", "Answer."),
            te("t0"),
            finish(
                FinishReason::Stop,
                "STOP",
                Usage::default(),
                "resp1",
                "gemini-2.5-flash"
            ),
        ]
    );
}

#[test]
fn each_signed_thought_part_gets_its_own_block_and_text_reopens_after_calls() {
    let out = decode_chunks(&[
        &candidate(
            r#"[{"text": "a","thought": true,"thoughtSignature": "QQ=="},{"text": "b","thought": true,"thoughtSignature": "Qg=="}]"#,
            None,
        ),
        &candidate(r#"[{"text": "Let me check."}]"#, None),
        &candidate(
            r#"[{"functionCall": {"id": "fc-7","name": "now"}},{"text": "Done"}]"#,
            None,
        ),
        &candidate(r#"[{"text": "again","thought": true}]"#, Some("STOP")),
    ]);
    let mut want = vec![
        rs("r0"),
        rd("r0", "a"),
        re("r0", Some("QQ==")),
        rs("r1"),
        rd("r1", "b"),
        re("r1", Some("Qg==")),
        ts("t0"),
        td("t0", "Let me check."),
        te("t0"),
    ];
    // Gemini's own id is the call id and goes into the metadata to be echoed back; no `args` means `{}`.
    want.extend(call(
        "fc-7",
        "now",
        "{}",
        Some(r#"{"function_call_id":"fc-7"}"#.into()),
    ));
    want.extend([
        ts("t1"),
        td("t1", "Done"),
        te("t1"),
        rs("r2"),
        rd("r2", "again"),
        re("r2", None),
        finish(
            FinishReason::ToolCalls,
            "STOP",
            Usage::default(),
            "resp1",
            "gemini-2.5-flash",
        ),
    ]);
    assert_eq!(out, want);
}

#[test]
fn synthesized_ids_count_calls_and_fall_back_without_a_response_id() {
    let mut d = GeminiDecoder::new();
    let mut out = Vec::new();
    d.frame(
        "",
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "a","args": {}}}]},"index": 0}]}"#,
        &mut out,
    );
    d.frame(
        "",
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "b","args": null}}]},"finishReason": "STOP"}],"responseId": "R"}"#,
        &mut out,
    );
    d.end(&mut out);
    let mut want = call("call_0", "a", "{}", None);
    want.extend(call("call_R_1", "b", "{}", None));
    want.push(finish(
        FinishReason::ToolCalls,
        "STOP",
        Usage::default(),
        "R",
        "",
    ));
    assert_eq!(out, want);
}

#[test]
fn signature_with_nothing_open_becomes_its_own_block() {
    let out = decode_chunks(&[&candidate(
        r#"[{"text": "Hi","thoughtSignature": "U0lH"},{"text": " there"}]"#,
        Some("STOP"),
    )]);
    assert_eq!(
        out,
        vec![
            ts("t0"),
            td("t0", "Hi"),
            te("t0"),
            rs("r0"),
            re("r0", Some("U0lH")),
            ts("t1"),
            td("t1", " there"),
            te("t1"),
            finish(
                FinishReason::Stop,
                "STOP",
                Usage::default(),
                "resp1",
                "gemini-2.5-flash"
            ),
        ]
    );
}

#[test]
fn finish_reasons_map_to_unified_reasons_and_keep_the_raw_string() {
    for (raw, reason) in [
        ("STOP", FinishReason::Stop),
        ("MAX_TOKENS", FinishReason::Length),
        ("SAFETY", FinishReason::ContentFilter),
        ("RECITATION", FinishReason::ContentFilter),
        ("BLOCKLIST", FinishReason::ContentFilter),
        ("PROHIBITED_CONTENT", FinishReason::ContentFilter),
        ("SPII", FinishReason::ContentFilter),
        ("IMAGE_SAFETY", FinishReason::ContentFilter),
        ("MALFORMED_FUNCTION_CALL", FinishReason::Error),
        ("OTHER", FinishReason::Other),
        ("LANGUAGE", FinishReason::Other),
        ("UNEXPECTED_TOOL_CALL", FinishReason::Other),
        ("TOO_MANY_TOOL_CALLS", FinishReason::Other),
        ("FINISH_REASON_UNSPECIFIED", FinishReason::Other),
        ("SOMETHING_NEW", FinishReason::Other),
    ] {
        let out = decode_chunks(&[&candidate("[]", Some(raw))]);
        assert_eq!(
            out,
            vec![finish(
                reason,
                raw,
                Usage::default(),
                "resp1",
                "gemini-2.5-flash"
            )],
            "{raw}"
        );
    }
}

#[test]
fn usage_is_a_running_total_the_last_wins_and_tool_use_prompt_is_input() {
    let out = decode_chunks(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "x"}]},"index": 0}],"usageMetadata": {"promptTokenCount": 500,"totalTokenCount": 500}}"#,
        // No usage on this chunk: the previous totals stay.
        r#"{"candidates": [{"content": {"parts": [{"text": "y"}]},"index": 0}]}"#,
        r#"{"candidates": [{"content": {"parts": []},"finishReason": "MAX_TOKENS","index": 0}],"usageMetadata": {"promptTokenCount": 500,"cachedContentTokenCount": 200,"toolUsePromptTokenCount": 30,"candidatesTokenCount": 70,"thoughtsTokenCount": 40,"totalTokenCount": 640}}"#,
    ]);
    assert_eq!(
        out.last(),
        Some(&finish(
            FinishReason::Length,
            "MAX_TOKENS",
            usage(330, 200, 70, 40),
            "",
            ""
        ))
    );
}

#[test]
fn a_blocked_prompt_finishes_as_content_filter_with_its_usage() {
    let out = decode_chunks(&[
        r#"{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},"usageMetadata": {"promptTokenCount": 12,"totalTokenCount": 12},"modelVersion": "gemini-2.5-flash","responseId": "blk"}"#,
    ]);
    assert_eq!(
        out,
        vec![finish(
            FinishReason::ContentFilter,
            "PROHIBITED_CONTENT",
            usage(12, 0, 0, 0),
            "blk",
            "gemini-2.5-flash"
        )]
    );
}

#[test]
fn only_the_first_candidate_counts() {
    let out = decode_chunks(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "other"}]},"finishReason": "STOP","index": 1},{"content": {"parts": [{"text": "mine"}]},"finishReason": "STOP","index": 0}]}"#,
    ]);
    assert_eq!(
        out,
        vec![
            ts("t0"),
            td("t0", "mine"),
            te("t0"),
            finish(FinishReason::Stop, "STOP", Usage::default(), "", ""),
        ]
    );
}

#[test]
fn bare_errors_plain_or_array_wrapped_and_error_frames_are_classified() {
    let body = include_str!(
        "../../../../../shared/fake-provider/fixtures/gemini/errors/rate_limit_429.json"
    );
    for json in [
        body.trim_end().to_string(),
        format!("[{}]", body.trim_end()),
    ] {
        let mut d = GeminiDecoder::new();
        let mut out = Vec::new();
        d.frame("", &candidate(r#"[{"text": "a"}]"#, None), &mut out);
        d.bare_json(&json, &mut out);
        assert!(d.is_done());
        let Some(Event::Error(e)) = out.last() else {
            panic!("{out:?}")
        };
        assert_eq!(e, &classify(None, None, &json));
        assert_eq!(e.kind, ErrorKind::RateLimited);
        assert_eq!(e.retry_after, Some(std::time::Duration::from_secs(1)));
    }
    // A proxy that re-frames the object as a `data:` line.
    let frame =
        r#"{"error": {"code": 503,"message": "The model is overloaded.","status": "UNAVAILABLE"}}"#;
    let out = decode_chunks(&[frame]);
    assert_eq!(out, vec![Event::Error(classify(None, None, frame))]);
    assert!(matches!(&out[0], Event::Error(e) if e.kind == ErrorKind::Overloaded));
}

#[test]
fn a_body_that_is_a_json_array_of_chunks_decodes_too() {
    let body = format!(
        "[{},\n{}]",
        candidate(r#"[{"text": "Hel"}]"#, None),
        candidate(r#"[{"text": "lo"}]"#, Some("STOP"))
    );
    let out = decode_reads(body.as_bytes(), &[5]);
    assert_eq!(
        out,
        vec![
            ts("t0"),
            td("t0", "Hel"),
            td("t0", "lo"),
            te("t0"),
            finish(
                FinishReason::Stop,
                "STOP",
                Usage::default(),
                "resp1",
                "gemini-2.5-flash"
            ),
        ]
    );
}

#[test]
fn malformed_bare_json_and_wrongly_typed_chunks_are_provider_errors() {
    for (bare, data) in [
        (true, "{\"error\": {\"code\": 5"),
        (false, "[1, 2]"),
        (false, r#"{"candidates": "nope"}"#),
        (
            false,
            r#"{"candidates": [{"content": {"parts": [{"text": 7}]}}]}"#,
        ),
    ] {
        let mut d = GeminiDecoder::new();
        let mut out = Vec::new();
        if bare {
            d.bare_json(data, &mut out);
        } else {
            d.frame("", data, &mut out);
        }
        assert!(d.is_done(), "{data}");
        assert!(
            matches!(&out[..], [Event::Error(e)] if e.kind == ErrorKind::ProviderError && e.provider_body == data),
            "{data}: {out:?}"
        );
    }
}

#[test]
fn blank_frames_are_ignored() {
    let mut d = GeminiDecoder::new();
    let mut out = Vec::new();
    d.frame("", "  ", &mut out);
    assert!(out.is_empty());
    assert!(!d.is_done());
}

#[test]
fn error_body_fixtures_classify_as_their_status_says() {
    use std::time::Duration;
    for (status, body, kind, retry_after) in [
        (
            429,
            fixture!("errors/rate_limit_429.json"),
            ErrorKind::RateLimited,
            Some(Duration::from_secs(1)),
        ),
        (
            400,
            fixture!("errors/context_overflow.json"),
            ErrorKind::ContextOverflow,
            None,
        ),
        (
            503,
            fixture!("errors/unavailable_503.json"),
            ErrorKind::Overloaded,
            None,
        ),
    ] {
        let e = classify(Some(status), None, body);
        assert_eq!(e.kind, kind, "{status}: {e}");
        assert_eq!(e.retry_after, retry_after, "{status}");
        assert_eq!(e.http_status, Some(status));
    }
}

#[test]
fn adapter_hands_out_fresh_decoders() {
    use crate::adapter::gemini::Gemini;
    use crate::adapter::{Adapter, Protocol, Target};
    use crate::catalog::{Capabilities, ModelInfo};
    let model = ModelInfo {
        id: "gemini/gemini-2.5-flash".into(),
        provider: "gemini".into(),
        name: "gemini-2.5-flash".into(),
        display_name: String::new(),
        protocol: Protocol::Gemini,
        context_window: 1_048_576,
        max_input_tokens: 0,
        max_output_tokens: 65_536,
        capabilities: Capabilities::default(),
        pricing: None,
    };
    for _ in 0..2 {
        let mut decoder = Gemini.decoder(&Target::new(&model));
        let mut out = Vec::new();
        decoder.frame(
            "",
            &candidate(r#"[{"text": "ok"}]"#, Some("STOP")),
            &mut out,
        );
        decoder.end(&mut out);
        assert!(decoder.is_done());
        assert_eq!(out.len(), 4);
    }
}
