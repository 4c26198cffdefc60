//! The fast path for text chunks ([`super::decode`]'s `TextChunk`) against the full parse: over generated chunks, a
//! decoder that tries the fast path must push exactly what a decoder that never does pushes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::ChatDecoder;
use crate::adapter::framing::json_scan::testgen::{
    self, corrupt, data_lines, field, object, rare, space, string, value,
};
use crate::event::Event;

/// Every event both decoders push for `frames` (then `end`); panics if they differ.
fn same_events(frames: &[String]) -> Vec<Event> {
    testgen::same_events(ChatDecoder::new(), ChatDecoder::without_fast_path(), frames)
}

fn fixture(name: &str) -> String {
    let all = testgen::fixtures("openai_chat");
    assert!(all.len() >= 5, "fixtures found: {}", all.len());
    all.into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, body)| body)
        .unwrap()
}

#[test]
fn every_fixture_decodes_the_same_on_both_paths() {
    for (_, body) in testgen::fixtures("openai_chat") {
        same_events(&data_lines(&body));
    }
}

#[test]
fn fixture_text_chunks_take_the_fast_path() {
    let frames = data_lines(&fixture("text.sse"));
    let taken = frames
        .iter()
        .filter(|f| super::fast::fast_path_takes(f))
        .count();
    // Every content chunk; not the role chunk (its `refusal: null` is fine, but its content is "" with a role, still
    // fast) nor the finish and usage chunks.
    assert!(taken >= frames.len() - 3, "{taken} of {}", frames.len());
    assert!(!super::fast::fast_path_takes(frames.last().unwrap()));
}

#[test]
fn escaped_text_and_ids_match() {
    let events = same_events(&[
        r#"{"id":"c\u0031","model":"m\/1","choices":[{"index":0,"delta":{"content":"a\nb \ud83d\ude00 \"q\""},"finish_reason":null}],"usage":null}"#.to_string(),
        r#"{"choices":[{"delta":{"content":"é"}}]}"#.to_string(),
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.to_string(),
        "[DONE]".to_string(),
    ]);
    assert!(matches!(&events[1], Event::TextDelta { delta, .. } if delta == "a\nb 😀 \"q\""));
    match events.last().unwrap() {
        Event::Finish(f) => {
            assert_eq!(f.response_id, "c1");
            assert_eq!(f.response_model, "m/1");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_and_unusual_chunks_match() {
    for frame in [
        r#"{"id":"a","id":"b","choices":[]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"x"}},]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"x","content":"y"}}]}"#,
        r#"{"choices":[{"index":1,"delta":{"content":"x"}}]}"#,
        r#"{"choices":[{"index":-0,"delta":{"content":"x"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"lone \ud800"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":3}}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"x"}}],"error":null}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"x","refusal":"no"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"x"}}],"obfuscation":"a\u0001"}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"x"}}]} trailing"#,
        r#"{"\u0069d":"escaped key","choices":[{"index":0,"delta":{"content":"x"}}]}"#,
        r#"[{"choices":[]}]"#,
    ] {
        same_events(&[frame.to_string(), "[DONE]".to_string()]);
    }
}

/// A delta: the fields the decoder reads, with the values that keep it a text chunk and values that do not.
fn delta() -> BoxedStrategy<String> {
    let nullable = |values: BoxedStrategy<String>| {
        prop_oneof![3 => Just("null".to_string()), 1 => values].boxed()
    };
    (
        field(
            "content",
            prop_oneof![6 => string(), 1 => Just("null".to_string()), 1 => value()].boxed(),
        ),
        field(
            "role",
            prop_oneof![Just("\"assistant\"".to_string()), value()].boxed(),
        ),
        rare("refusal", nullable(string())),
        rare("reasoning", nullable(string())),
        rare("reasoning_content", nullable(string())),
        rare(
            "tool_calls",
            nullable(
                Just(
                    r#"[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]"#
                        .to_string(),
                )
                .boxed(),
            ),
        ),
        field("extra", value()),
        prop::collection::vec(any::<usize>(), 0..4),
        space(),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(c, r, f, re, rc, t, x, order, sp, dup)| {
            object(vec![c, r, f, re, rc, t, x], &order, sp, dup)
        })
        .boxed()
}

fn choice() -> BoxedStrategy<String> {
    (
        field(
            "index",
            prop_oneof![8 => Just("0".to_string()), 1 => Just("1".to_string()), 1 => Just("null".to_string()), 1 => value()].boxed(),
        ),
        field("delta", prop_oneof![8 => delta(), 1 => Just("null".to_string())].boxed()),
        field(
            "finish_reason",
            prop_oneof![8 => Just("null".to_string()), 1 => Just("\"stop\"".to_string()), 1 => Just("\"length\"".to_string())].boxed(),
        ),
        field("logprobs", value()),
        prop::collection::vec(any::<usize>(), 0..4),
        space(),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(i, d, f, l, order, sp, dup)| object(vec![i, d, f, l], &order, sp, dup))
        .boxed()
}

/// A whole chunk, sometimes broken.
fn chunk() -> BoxedStrategy<String> {
    (
        (
            field("id", prop_oneof![6 => string(), 1 => Just("null".to_string())].boxed()),
            field("model", prop_oneof![6 => string(), 1 => Just("null".to_string())].boxed()),
            field(
                "choices",
                prop_oneof![
                    8 => choice().prop_map(|c| format!("[{c}]")),
                    1 => Just("[]".to_string()),
                    1 => (choice(), choice()).prop_map(|(a, b)| format!("[{a},{b}]")),
                    1 => Just("null".to_string()),
                ]
                .boxed(),
            ),
            field(
                "usage",
                prop_oneof![
                    6 => Just("null".to_string()),
                    1 => Just(r#"{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}"#.to_string()),
                ]
                .boxed(),
            ),
            rare("error", prop_oneof![Just("null".to_string()), Just(r#"{"message":"boom"}"#.to_string())].boxed()),
        ),
        (
            field("object", Just("\"chat.completion.chunk\"".to_string()).boxed()),
            field("created", any::<u32>().prop_map(|n| n.to_string()).boxed()),
            field("obfuscation", value()),
            prop::collection::vec(any::<usize>(), 0..6),
            space(),
            prop::bool::weighted(0.05),
            any::<u8>(),
            any::<usize>(),
        ),
    )
        .prop_map(|((id, model, choices, usage, error), (obj, created, obf, order, sp, dup, how, at))| {
            let text = object(vec![id, model, choices, usage, error, obj, created, obf], &order, sp, dup);
            corrupt(text, how, at)
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fast_path_pushes_what_the_full_parse_pushes(frames in prop::collection::vec(chunk(), 1..6), done in any::<bool>()) {
        let mut frames = frames;
        if done {
            frames.push("[DONE]".to_string());
        }
        same_events(&frames);
    }
}

/// The generated chunks really exercise the fast path (not only the fallback), and the fallback too.
#[test]
fn generated_chunks_reach_both_paths() {
    testgen::reaches_both_paths(chunk(), super::fast::fast_path_takes);
}
