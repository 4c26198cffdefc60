//! Decoder tests: every recorded-shape fixture in `shared/fake-provider/fixtures/openai_chat/` decoded to its exact
//! event sequence, plus synthetic frames for the edge cases the fixtures do not cover.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::ChatDecoder;
use crate::adapter::Decoder;
use crate::adapter::testing::event_kit::{
    assert_one_terminal_last, decode_in_reads, finish, frames, one_call, rd, rs, tc, td, te, texts,
    tid, tie, tis, ts, usage,
};
use crate::adapter::transport::classify::classify;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, FinishReason, Usage};

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            "../../../../../shared/fake-provider/fixtures/openai_chat/",
            $name
        ))
    };
}

/// Every SSE fixture, for the tests that run all of them.
const FIXTURES: [&str; 11] = [
    fixture!("text.sse"),
    fixture!("parallel_tools.sse"),
    fixture!("reasoning.sse"),
    fixture!("error_after_200.sse"),
    fixture!("error_first.sse"),
    fixture!("stop_with_tool_calls.sse"),
    fixture!("mistral_tool_call.sse"),
    fixture!("openrouter_keepalive.sse"),
    fixture!("azure_prompt_filter.sse"),
    fixture!("malformed.sse"),
    fixture!("truncated.sse"),
];

/// Feeds every frame, then `end()`, and checks the decoder's contract: done at the end, nothing after the last
/// `Finish`/`Error`.
fn decode(sse: &str) -> Vec<Event> {
    let mut d = ChatDecoder::new();
    let mut out = Vec::new();
    for (event, data) in frames(sse) {
        d.frame(&event, &data, &mut out);
    }
    d.end(&mut out);
    assert!(d.is_done());
    assert_one_terminal_last(&out);
    // Anything fed afterwards is ignored.
    let n = out.len();
    d.frame(
        "",
        r#"{"choices":[{"index":0,"delta":{"content":"late"}}]}"#,
        &mut out,
    );
    d.frame("", "[DONE]", &mut out);
    d.end(&mut out);
    assert_eq!(out.len(), n);
    out
}

fn decode_frames(data: &[&str]) -> Vec<Event> {
    let sse: String = data.iter().map(|d| format!("data: {d}\n\n")).collect();
    decode(&sse)
}

/// Every reasoning block closes with the empty replay metadata, so the core records which model produced it.
fn re(id: &str) -> Event {
    Event::ReasoningEnd {
        id: id.into(),
        metadata: Some("{}".into()),
    }
}

const ERROR_FRAME: &str = r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#;

#[test]
fn text_fixture() {
    let mut want = vec![ts("text-0")];
    want.extend(texts(
        "text-0",
        &[
            "Hello", "!", " How", " can", " I", " help", " you", " today", "?",
        ],
    ));
    want.push(te("text-0"));
    // prompt 1234 of which 1024 cached; 9 completion tokens, no reasoning.
    want.push(finish(
        FinishReason::Stop,
        "stop",
        usage(210, 1024, 0, 9, 0),
        "chatcmpl-CkR7qT2mVx9bLwP4nZ0aYs1eHd6uJ",
        "gpt-4.1-mini-2025-04-14",
    ));
    assert_eq!(decode(fixture!("text.sse")), want);
}

#[test]
fn parallel_tools_fixture() {
    let a = "call_q5Jd0mXb3RkV8tYpL2wNcHsA";
    let b = "call_Wm2Yv7Lx0QaB9cTd4NfKhS1e";
    let mut want = vec![tis(a, "get_weather")];
    for f in [
        "{\"", "city", "\":\"", "Paris", "\",\"", "unit", "\":\"c", "\"}",
    ] {
        want.push(tid(a, f));
    }
    want.push(tis(b, "get_time"));
    for f in ["{\"", "timezone", "\":\"", "Europe/Paris", "\"}"] {
        want.push(tid(b, f));
    }
    want.extend([
        tie(a),
        tc(a, "get_weather", r#"{"city":"Paris","unit":"c"}"#),
        tie(b),
        tc(b, "get_time", r#"{"timezone":"Europe/Paris"}"#),
        finish(
            FinishReason::ToolCalls,
            "tool_calls",
            usage(152, 0, 0, 58, 0),
            "chatcmpl-CkR9fW1sGe7hTq3YbN5uXo2aLc8vD",
            "gpt-4.1-2025-04-14",
        ),
    ]);
    assert_eq!(decode(fixture!("parallel_tools.sse")), want);
}

#[test]
fn reasoning_fixture_deepseek() {
    let mut want = vec![rs("reasoning-0")];
    for d in [
        "Okay",
        ", the user",
        " asks for 17",
        " × 3. 17",
        " × 3 = 51.",
    ] {
        want.push(rd("reasoning-0", d));
    }
    want.push(re("reasoning-0"));
    want.push(ts("text-0"));
    want.extend(texts("text-0", &["17", " × 3", " = **51**."]));
    want.push(te("text-0"));
    // prompt 96 with 64 cache hits (DeepSeek's field); completion 180 of which 171 reasoning.
    want.push(finish(
        FinishReason::Stop,
        "stop",
        usage(32, 64, 0, 9, 171),
        "5b2e4c1a-9d7f-4e3b-8a6c-0f1d2e3c4b5a",
        "deepseek-reasoner",
    ));
    assert_eq!(decode(fixture!("reasoning.sse")), want);
}

#[test]
fn error_after_200_fixture() {
    let mut want = vec![ts("text-0")];
    want.extend(texts("text-0", &["The", " answer", " is"]));
    want.push(Event::Error(classify(None, None, ERROR_FRAME)));
    assert_eq!(decode(fixture!("error_after_200.sse")), want);
}

#[test]
fn error_first_fixture() {
    assert_eq!(
        decode(fixture!("error_first.sse")),
        vec![Event::Error(classify(None, None, ERROR_FRAME))]
    );
}

#[test]
fn stop_with_tool_calls_fixture_is_tool_calls() {
    let id = "call_7x2kq9mf";
    assert_eq!(
        decode(fixture!("stop_with_tool_calls.sse")),
        one_call(
            id,
            "get_weather",
            r#"{"city":"Oslo"}"#,
            finish(
                FinishReason::ToolCalls,
                "stop",
                usage(211, 0, 0, 23, 0),
                "chatcmpl-417",
                "qwen2.5:7b",
            ),
        )
    );
}

#[test]
fn mistral_tool_call_fixture() {
    let id = "D4r8Kq2Zp";
    assert_eq!(
        decode(fixture!("mistral_tool_call.sse")),
        one_call(
            id,
            "get_weather",
            r#"{"city": "Lyon"}"#,
            finish(
                FinishReason::ToolCalls,
                "tool_calls",
                usage(124, 0, 0, 22, 0),
                "7c1e2f9a3b4d4e5f8a6b7c8d9e0f1a2b",
                "mistral-small-latest",
            ),
        )
    );
}

#[test]
fn openrouter_keepalive_fixture() {
    // `reasoning` and `reasoning_details` carry the same text: it must come out once.
    let mut want = vec![rs("reasoning-0")];
    for d in ["Simple", " greeting;", " reply briefly."] {
        want.push(rd("reasoning-0", d));
    }
    want.extend([
        Event::ReasoningEnd {
            id: "reasoning-0".into(),
            // The details, merged, are the block's replay metadata.
            metadata: Some(
                r#"{"reasoning_details":[{"type":"reasoning.text","text":"Simple greeting; reply briefly.","format":"unknown","index":0}]}"#
                    .into(),
            ),
        },
        ts("text-0"),
    ]);
    want.extend(texts("text-0", &["Hi", " there!"]));
    want.push(te("text-0"));
    // The usage chunk comes after the finish chunk with `finish_reason:null`, which must not erase `stop`.
    want.push(finish(
        FinishReason::Stop,
        "stop",
        usage(12, 0, 0, 3, 38),
        "gen-1767226000-Qm4xT8bVn2LcR7yPa0Ws",
        "deepseek/deepseek-r1",
    ));
    assert_eq!(decode(fixture!("openrouter_keepalive.sse")), want);
}

#[test]
fn azure_prompt_filter_fixture() {
    let mut want = vec![ts("text-0")];
    want.extend(texts("text-0", &["Bonjour", " !"]));
    want.push(te("text-0"));
    // The leading prompt-filter chunk's empty id and model are skipped.
    want.push(finish(
        FinishReason::Stop,
        "stop",
        usage(18, 0, 0, 3, 0),
        "chatcmpl-CkRB7pL3sWq9YhN1cXv5TzAe0Mu2K",
        "gpt-4o-2024-11-20",
    ));
    assert_eq!(decode(fixture!("azure_prompt_filter.sse")), want);
}

#[test]
fn malformed_fixture_is_provider_error() {
    let broken = r#"{"id":"chatcmpl-CkRC4nV7bXs2KqP9mLz1YwEr6Tu0H","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"delta":{"content":" wor"#;
    let mut err = ProviderError::malformed(
        "malformed stream chunk: EOF while parsing a string at line 1 column 181",
    );
    err.provider_body = broken.to_string();
    assert_eq!(err.kind, ErrorKind::ProviderError);
    assert!(!err.retryable);
    assert_eq!(
        decode(fixture!("malformed.sse")),
        vec![ts("text-0"), td("text-0", "Hello"), Event::Error(err)]
    );
}

#[test]
fn truncated_fixture_is_retryable_network_error() {
    let err = ProviderError::new(
        ErrorKind::Network,
        "stream ended before the provider finished",
    );
    assert!(err.retryable);
    let mut want = vec![ts("text-0")];
    want.extend(texts("text-0", &["Once", " upon", " a"]));
    want.push(Event::Error(err));
    assert_eq!(decode(fixture!("truncated.sse")), want);
}

#[test]
fn error_bodies_are_openai_shaped() {
    for (body, code) in [
        (
            fixture!("errors/context_length_exceeded.json"),
            Some("context_length_exceeded"),
        ),
        (
            fixture!("errors/rate_limit.json"),
            Some("rate_limit_exceeded"),
        ),
        (
            fixture!("errors/insufficient_quota.json"),
            Some("insufficient_quota"),
        ),
        (fixture!("errors/server_error.json"), None),
    ] {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let e = &v["error"];
        assert!(e["message"].is_string());
        assert!(e["type"].is_string());
        assert_eq!(e["code"].as_str(), code);
        assert!(body.starts_with("{\n  \"error\": {\n"), "pretty-printed");
    }
    assert!(fixture!("errors/rate_limit.json").contains("Please try again in 1.574s."));
}

#[test]
fn every_fixture_uses_lf_only() {
    for sse in FIXTURES {
        assert!(!sse.contains('\r'));
        assert!(sse.ends_with("\n\n"));
    }
}

// ---- Synthetic frames ---------------------------------------------------------------------------------------------

#[test]
fn arguments_are_never_finalized_early() {
    // `{"n":1` already parses as a prefix of valid JSON… and `{"n":1}` would parse; the call must wait for the end.
    let events = decode_frames(&[
        r#"{"id":"c","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"n\":1"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"  "}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            tis("call_a", "f"),
            tid("call_a", "{\"n\":1"),
            tid("call_a", "}"),
            tid("call_a", "  "),
            tie("call_a"),
            tc("call_a", "f", "{\"n\":1}  "),
            finish(
                FinishReason::ToolCalls,
                "tool_calls",
                Usage::default(),
                "c",
                "m"
            ),
        ]
    );
}

#[test]
fn missing_ids_are_synthesized_and_empty_arguments_become_empty_object() {
    let events = decode_frames(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"function","function":{"name":"now","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"later"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            tis("call_0", "now"),
            tis("call_1", "later"),
            tie("call_0"),
            tc("call_0", "now", "{}"),
            tie("call_1"),
            tc("call_1", "later", "{}"),
            finish(
                FinishReason::ToolCalls,
                "tool_calls",
                Usage::default(),
                "",
                ""
            ),
        ]
    );
}

#[test]
fn calls_without_index_and_reused_indices_are_separate_calls() {
    // Two whole Mistral calls in one chunk, then an Ollama-style call that reuses index 0 with a new id, and
    // arguments sent as an object.
    let events = decode_frames(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"AAAAAAAAA","function":{"name":"a","arguments":"{}"}},{"id":"BBBBBBBBB","function":{"name":"b","arguments":"{\"x\":1}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_c","function":{"name":"c","arguments":{"y":2}}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            tis("AAAAAAAAA", "a"),
            tid("AAAAAAAAA", "{}"),
            tis("BBBBBBBBB", "b"),
            tid("BBBBBBBBB", "{\"x\":1}"),
            tis("call_c", "c"),
            tid("call_c", "{\"y\":2}"),
            tie("AAAAAAAAA"),
            tc("AAAAAAAAA", "a", "{}"),
            tie("BBBBBBBBB"),
            tc("BBBBBBBBB", "b", "{\"x\":1}"),
            tie("call_c"),
            tc("call_c", "c", "{\"y\":2}"),
            finish(FinishReason::ToolCalls, "stop", Usage::default(), "", ""),
        ]
    );
}

#[test]
fn unindexed_fragments_continue_by_id_or_latest_call_and_close_reasoning() {
    let events = decode_frames(&[
        r#"{"choices":[{"index":0,"delta":{"reasoning":"plan"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"k1","function":{"name":"f","arguments":"{\"a\""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":":1"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"k1","function":{"arguments":"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            rs("reasoning-0"),
            rd("reasoning-0", "plan"),
            re("reasoning-0"),
            tis("k1", "f"),
            tid("k1", "{\"a\""),
            tid("k1", ":1"),
            tid("k1", "}"),
            tie("k1"),
            tc("k1", "f", "{\"a\":1}"),
            finish(
                FinishReason::ToolCalls,
                "tool_calls",
                Usage::default(),
                "",
                ""
            ),
        ]
    );
}

#[test]
fn arguments_before_the_name_are_replayed_at_start() {
    let events = decode_frames(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_z","function":{"arguments":"{\"q\":"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"search","arguments":"\"x\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            tis("call_z", "search"),
            tid("call_z", "{\"q\":\"x\"}"),
            tie("call_z"),
            tc("call_z", "search", "{\"q\":\"x\"}"),
            finish(
                FinishReason::ToolCalls,
                "tool_calls",
                Usage::default(),
                "",
                ""
            ),
        ]
    );
}

#[test]
fn mistral_thinking_content_parts() {
    let events = decode_frames(&[
        r#"{"id":"m1","model":"magistral-medium-2507","choices":[{"index":0,"delta":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"2+2"}]}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":" is 4."}]}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"4"}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"total_tokens":56,"completion_tokens":46}}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            rs("reasoning-0"),
            rd("reasoning-0", "2+2"),
            rd("reasoning-0", " is 4."),
            re("reasoning-0"),
            ts("text-0"),
            td("text-0", "4"),
            te("text-0"),
            finish(
                FinishReason::Stop,
                "stop",
                usage(10, 0, 0, 46, 0),
                "m1",
                "magistral-medium-2507"
            ),
        ]
    );
}

#[test]
fn reasoning_details_alone_and_reopened_reasoning() {
    let events = decode_frames(&[
        r#"{"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text","text":"a"},{"type":"reasoning.encrypted","data":"xyz"}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"b"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning":"c"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"d"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"e"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            rs("reasoning-0"),
            rd("reasoning-0", "a"),
            Event::ReasoningEnd {
                id: "reasoning-0".into(),
                // Both details are kept for replay, the encrypted one too.
                metadata: Some(
                    r#"{"reasoning_details":[{"type":"reasoning.text","text":"a"},{"type":"reasoning.encrypted","data":"xyz"}]}"#
                        .into()
                ),
            },
            ts("text-0"),
            td("text-0", "b"),
            rs("reasoning-1"),
            rd("reasoning-1", "c"),
            re("reasoning-1"),
            td("text-0", "d"),
            rs("reasoning-2"),
            rd("reasoning-2", "e"),
            re("reasoning-2"),
            te("text-0"),
            finish(FinishReason::Length, "length", Usage::default(), "", ""),
        ]
    );
}

#[test]
fn finish_without_done_is_flushed_at_end() {
    let mut d = ChatDecoder::new();
    let mut out = Vec::new();
    d.frame(
        "",
        r#"{"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"content_filter"}]}"#,
        &mut out,
    );
    assert!(!d.is_done());
    d.end(&mut out);
    assert_eq!(
        out,
        vec![
            ts("text-0"),
            td("text-0", "hi"),
            te("text-0"),
            finish(
                FinishReason::ContentFilter,
                "content_filter",
                Usage::default(),
                "x",
                "m"
            ),
        ]
    );
}

#[test]
fn finish_reason_mapping() {
    for (raw, want) in [
        ("stop", FinishReason::Stop),
        ("length", FinishReason::Length),
        ("tool_calls", FinishReason::ToolCalls),
        ("function_call", FinishReason::ToolCalls),
        ("content_filter", FinishReason::ContentFilter),
        ("eos", FinishReason::Other),
    ] {
        let frame =
            format!(r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{raw}"}}]}}"#);
        let events = decode_frames(&[&frame, "[DONE]"]);
        assert_eq!(
            events,
            vec![finish(want, raw, Usage::default(), "", "")],
            "{raw}"
        );
    }
    // `[DONE]` without any finish reason still finishes; the reason is unknown.
    assert_eq!(
        decode_frames(&["[DONE]"]),
        vec![finish(FinishReason::Other, "", Usage::default(), "", "")]
    );
}

#[test]
fn usage_normalisation() {
    let cases = [
        // OpenAI: cached and reasoning subtracted.
        (
            r#"{"prompt_tokens":1000,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":800},"completion_tokens_details":{"reasoning_tokens":200}}"#,
            usage(200, 800, 0, 100, 200),
        ),
        // DeepSeek: cache hits under their own name, and also in details (same count, not added twice).
        (
            r#"{"prompt_tokens":500,"completion_tokens":10,"prompt_cache_hit_tokens":128,"prompt_cache_miss_tokens":372,"prompt_tokens_details":{"cached_tokens":128}}"#,
            usage(372, 128, 0, 10, 0),
        ),
        // OpenRouter fronting Anthropic: cache writes in details.
        (
            r#"{"prompt_tokens":3000,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":1000,"cache_write_tokens":1500}}"#,
            usage(500, 1000, 1500, 5, 0),
        ),
        // Anthropic-style field on a compatible server.
        (
            r#"{"prompt_tokens":100,"completion_tokens":5,"cache_creation_input_tokens":60}"#,
            usage(40, 0, 60, 5, 0),
        ),
        // Inconsistent counts saturate instead of wrapping; nulls are zero.
        (
            r#"{"prompt_tokens":10,"completion_tokens":null,"prompt_tokens_details":{"cached_tokens":20},"completion_tokens_details":{"reasoning_tokens":7}}"#,
            usage(0, 20, 0, 0, 7),
        ),
    ];
    for (wire, want) in cases {
        let frame = format!(
            r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],"usage":{wire}}}"#
        );
        let events = decode_frames(&[&frame, "[DONE]"]);
        assert_eq!(
            events,
            vec![finish(FinishReason::Stop, "stop", want, "", "")],
            "{wire}"
        );
        let Some(Event::Finish(f)) = events.last() else {
            unreachable!()
        };
        assert_eq!(f.usage.total(), want.total());
    }
}

#[test]
fn last_usage_wins_and_null_usage_keeps_it() {
    let events = decode_frames(&[
        r#"{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":5,"completion_tokens":1}}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"b"}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events.last(),
        Some(&finish(
            FinishReason::Stop,
            "stop",
            usage(5, 0, 0, 2, 0),
            "",
            ""
        ))
    );
}

#[test]
fn event_error_and_other_choices() {
    // A compatible server's `event: error` frame.
    let mut d = ChatDecoder::new();
    let mut out = Vec::new();
    d.frame("error", r#"{"message":"overloaded"}"#, &mut out);
    assert_eq!(
        out,
        vec![Event::Error(classify(
            None,
            None,
            r#"{"message":"overloaded"}"#
        ))]
    );
    assert!(d.is_done());

    // Choices other than the first are ignored; empty data and a refusal.
    let events = decode_frames(&[
        r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"refusal":"I can't help with that."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            ts("text-0"),
            td("text-0", "I can't help with that."),
            te("text-0"),
            finish(FinishReason::Stop, "stop", Usage::default(), "", ""),
        ]
    );
}

#[test]
fn non_object_and_wrongly_typed_chunks_are_malformed_not_panics() {
    for data in [
        "42",
        "\"text\"",
        "[1,2]",
        r#"{"choices":"nope"}"#,
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":7}}]}",
    ] {
        let mut d = ChatDecoder::new();
        let mut out = Vec::new();
        d.frame("", data, &mut out);
        assert!(
            matches!(&out[..], [Event::Error(e)] if e.kind == ErrorKind::ProviderError && e.provider_body == data),
            "{data}: {out:?}"
        );
    }
    // Empty data is ignored.
    let mut d = ChatDecoder::new();
    let mut out = Vec::new();
    d.frame("", "", &mut out);
    d.frame("", "  ", &mut out);
    assert!(out.is_empty());
    assert!(!d.is_done());
}

/// The same fixtures through the real SSE parser, fed in awkward read sizes, give the same events as the local
/// splitter above.
#[test]
fn fixtures_decode_the_same_through_the_sse_parser() {
    for sse in FIXTURES {
        for read in [1, 7, 64, 4096] {
            let out = decode_in_reads(&mut ChatDecoder::new(), sse, read);
            assert_eq!(out, decode(sse), "read size {read}");
        }
    }
}

/// Feeds `data` frames to `d` and returns the `ToolCall` inputs.
fn tool_inputs(d: &mut dyn Decoder, data: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for frame in data {
        d.frame("", frame, &mut out);
    }
    d.end(&mut out);
    out.into_iter()
        .filter_map(|e| match e {
            Event::ToolCall { input_json, .. } => Some(input_json),
            _ => None,
        })
        .collect()
}

#[test]
fn strict_tools_lose_the_nulls_strict_mode_added_also_after_a_restart() {
    use crate::adapter::{Adapter, Target, pb};
    use crate::catalog::{Capabilities, ModelInfo};

    let model = |strict_schemas| ModelInfo {
        id: "openai/gpt-4o".into(),
        provider: "openai".into(),
        name: "gpt-4o".into(),
        display_name: "GPT-4o".into(),
        protocol: crate::protocol::Protocol::OpenaiChat,
        context_window: 128_000,
        max_input_tokens: 0,
        max_output_tokens: 16_384,
        capabilities: Capabilities {
            strict_schemas,
            ..Capabilities::default()
        },
        pricing: None,
    };
    let g = pb::Generation {
        tools: vec![pb::Tool {
            name: "get_weather".into(),
            description: String::new(),
            input_schema_json:
                r#"{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string"}},"required":["city"]}"#
                    .into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let frames = [
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\",\"unit\":null}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ];
    let strict = model(true);
    let mut d = super::OpenAiChat.decoder_for(&Target::new(&strict), &g);
    assert_eq!(tool_inputs(d.as_mut(), &frames), [r#"{"city":"Paris"}"#]);
    // A retry decodes with the same cleaning.
    let mut again = d.restart();
    assert!(!again.is_done());
    assert_eq!(
        tool_inputs(again.as_mut(), &frames),
        [r#"{"city":"Paris"}"#]
    );
    // Without strict schemas the provider's arguments are passed through untouched.
    let plain = model(false);
    let mut d = super::OpenAiChat.decoder_for(&Target::new(&plain), &g);
    assert_eq!(
        tool_inputs(d.as_mut(), &frames),
        [r#"{"city":"Paris","unit":null}"#]
    );
}
