//! The fast path for text chunks ([`super::decode`]'s `TextChunk`) against the full parse: over generated chunks, a
//! decoder that tries the fast path must push exactly what a decoder that never does pushes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::GeminiDecoder;
use crate::adapter::framing::json_scan::testgen::{
    self, corrupt, data_lines, field, object, rare, space, string, value,
};
use crate::event::Event;

/// Every event both decoders push for `frames` (then `end`); panics if they differ.
fn same_events(frames: &[String]) -> Vec<Event> {
    testgen::same_events(
        GeminiDecoder::new(),
        GeminiDecoder::without_fast_path(),
        frames,
    )
}

fn fixtures() -> Vec<(String, String)> {
    testgen::fixtures("gemini")
}

#[test]
fn every_fixture_decodes_the_same_on_both_paths() {
    let all = fixtures();
    assert!(all.len() >= 5, "fixtures found: {}", all.len());
    for (_, body) in all {
        same_events(&data_lines(&body));
    }
}

#[test]
fn fixture_text_chunks_take_the_fast_path() {
    let (_, body) = fixtures()
        .into_iter()
        .find(|(n, _)| n == "text.sse")
        .unwrap();
    let frames = data_lines(&body);
    let (last, deltas) = frames.split_last().unwrap();
    for f in deltas {
        assert!(super::decode::fast_path_takes(f), "{f}");
    }
    // The finishing chunk carries `finishReason`: the full parse's job.
    assert!(!super::decode::fast_path_takes(last));
}

#[test]
fn escaped_text_thoughts_and_usage_match() {
    let events = same_events(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "plan \u00e9", "thought": true}], "role": "model"}, "index": 0}], "usageMetadata": {"promptTokenCount": 4, "thoughtsTokenCount": 2}, "responseId": "r\u0031"}"#.to_string(),
        r#"{"candidates": [{"content": {"parts": [{"text": "a\nb \ud83d\ude00"}, {"text": "c"}]}}], "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 3, "thoughtsTokenCount": 2, "cachedContentTokenCount": null}, "modelVersion": "gemini\/x"}"#.to_string(),
        r#"{"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]}"#.to_string(),
    ]);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::TextDelta { delta, .. } if delta == "a\nb 😀"))
    );
    match events.last().unwrap() {
        Event::Finish(f) => {
            assert_eq!(f.response_id, "r1");
            assert_eq!(f.response_model, "gemini/x");
            assert_eq!(f.usage.output, 3);
            assert_eq!(f.usage.reasoning, 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_and_unusual_chunks_match() {
    for frame in [
        r#"{"candidates": [{"content": {"parts": [{"text": "x", "text": "y"}]}}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "x"}]}, "index": 1}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "x"}]}}], "usageMetadata": {"promptTokenCount": 1.0}}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "x"}]}}], "usageMetadata": {"promptTokenCount": -1}}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "x"}]}}], "usageMetadata": {"promptTokenCount": 99999999999999999999}}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "lone \ud800"}]}}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "x", "thoughtSignature": "c2ln"}]}}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]}}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"a":1},{"b":2},{"c":3},{"d":4},{"text":"fifth"}]}}]}"#,
        r#"{"candidates": [], "promptFeedback": {"blockReason": "SAFETY"}}"#,
        r#"{"error": {"code": 503, "status": "UNAVAILABLE", "message": "x"}}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "x"}]}}]} trailing"#,
        r#"{"candidates": [{"content": {"parts": [{"text": "x"}],}}]}"#,
    ] {
        same_events(&[frame.to_string()]);
    }
}

fn part() -> BoxedStrategy<String> {
    (
        field(
            "text",
            prop_oneof![6 => string(), 1 => Just("null".to_string()), 1 => value()].boxed(),
        ),
        field(
            "thought",
            prop_oneof![
                Just("true".to_string()),
                Just("false".to_string()),
                Just("null".to_string()),
                value()
            ]
            .boxed(),
        ),
        rare(
            "thoughtSignature",
            prop_oneof![string(), Just("null".to_string())].boxed(),
        ),
        rare(
            "functionCall",
            Just(r#"{"name":"f","args":{"a":1}}"#.to_string()).boxed(),
        ),
        field("extra", value()),
        prop::collection::vec(any::<usize>(), 0..4),
        space(),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(t, th, sig, fc, x, order, sp, dup)| {
            object(vec![t, th, sig, fc, x], &order, sp, dup)
        })
        .boxed()
}

fn candidate() -> BoxedStrategy<String> {
    (
        field(
            "content",
            prop_oneof![
                8 => (prop::collection::vec(part(), 0..6), field("role", Just("\"model\"".to_string()).boxed()), space())
                    .prop_map(|(parts, role, sp)| {
                        let parts = Some(("parts".to_string(), format!("[{}]", parts.join(","))));
                        object(vec![parts, role], &[], sp, false)
                    }),
                1 => Just("null".to_string()),
                1 => Just(r#"{"parts":null}"#.to_string()),
            ]
            .boxed(),
        ),
        field(
            "finishReason",
            prop_oneof![6 => Just("null".to_string()), 1 => Just("\"STOP\"".to_string()), 1 => Just("\"MAX_TOKENS\"".to_string())].boxed(),
        ),
        field("index", prop_oneof![8 => Just("0".to_string()), 1 => Just("1".to_string()), 1 => value()].boxed()),
        field("safetyRatings", value()),
        prop::collection::vec(any::<usize>(), 0..4),
        space(),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(c, f, i, s, order, sp, dup)| object(vec![c, f, i, s], &order, sp, dup))
        .boxed()
}

fn usage() -> BoxedStrategy<String> {
    let count = || {
        prop_oneof![8 => (0u64..100_000).prop_map(|n| n.to_string()), 1 => Just("null".to_string()), 1 => value()].boxed()
    };
    (
        field("promptTokenCount", count()),
        field("cachedContentTokenCount", count()),
        field("candidatesTokenCount", count()),
        field("thoughtsTokenCount", count()),
        field("toolUsePromptTokenCount", count()),
        field(
            "promptTokensDetails",
            Just(r#"[{"modality": "TEXT","tokenCount": 9}]"#.to_string()).boxed(),
        ),
        prop::collection::vec(any::<usize>(), 0..4),
        space(),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(a, b, c, d, e, f, order, sp, dup)| {
            object(vec![a, b, c, d, e, f], &order, sp, dup)
        })
        .boxed()
}

/// A whole chunk, sometimes broken.
fn chunk() -> BoxedStrategy<String> {
    (
        field(
            "candidates",
            prop_oneof![
                8 => candidate().prop_map(|c| format!("[{c}]")),
                1 => Just("[]".to_string()),
                1 => (candidate(), candidate()).prop_map(|(a, b)| format!("[{a}, {b}]")),
                1 => Just("null".to_string()),
            ]
            .boxed(),
        ),
        field(
            "usageMetadata",
            prop_oneof![8 => usage(), 1 => Just("null".to_string())].boxed(),
        ),
        field(
            "modelVersion",
            prop_oneof![6 => string(), 1 => Just("null".to_string())].boxed(),
        ),
        field(
            "responseId",
            prop_oneof![6 => string(), 1 => Just("null".to_string())].boxed(),
        ),
        rare(
            "promptFeedback",
            Just(r#"{"blockReason": "SAFETY"}"#.to_string()).boxed(),
        ),
        field("createTime", value()),
        prop::collection::vec(any::<usize>(), 0..6),
        space(),
        prop::bool::weighted(0.05),
        any::<u8>(),
        any::<usize>(),
    )
        .prop_map(|(c, u, m, r, p, x, order, sp, dup, how, at)| {
            corrupt(object(vec![c, u, m, r, p, x], &order, sp, dup), how, at)
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fast_path_pushes_what_the_full_parse_pushes(frames in prop::collection::vec(chunk(), 1..6)) {
        same_events(&frames);
    }
}

/// The generated chunks really exercise the fast path (not only the fallback), and the fallback too.
#[test]
fn generated_chunks_reach_both_paths() {
    testgen::reaches_both_paths(chunk(), super::decode::fast_path_takes);
}
