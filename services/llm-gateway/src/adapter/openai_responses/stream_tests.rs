//! Decoder tests: every fixture in `shared/fake-provider/fixtures/openai_responses/` decoded to its exact event
//! sequence, the same fixtures through the real SSE parser with LF and CRLF line endings, plus synthetic frames for
//! the edge cases the fixtures do not cover.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::ResponsesDecoder;
use crate::adapter::Decoder;
use crate::adapter::testing::event_kit::{
    assert_one_terminal_last, decode_in_reads, finish, frames, rd, rs, tc, td, te, texts, tid, tie,
    tis, ts, usage,
};
use crate::adapter::transport::classify::classify;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, FinishReason, Usage};

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            "../../../../../shared/fake-provider/fixtures/openai_responses/",
            $name
        ))
    };
}

/// Every SSE fixture, for the tests that run all of them.
const FIXTURES: [(&str, &str); 8] = [
    ("text.sse", fixture!("text.sse")),
    ("parallel_tools.sse", fixture!("parallel_tools.sse")),
    ("reasoning.sse", fixture!("reasoning.sse")),
    ("error_after_200.sse", fixture!("error_after_200.sse")),
    ("error_first.sse", fixture!("error_first.sse")),
    ("incomplete.sse", fixture!("incomplete.sse")),
    ("truncated.sse", fixture!("truncated.sse")),
    ("malformed.sse", fixture!("malformed.sse")),
];

/// The `data` of the first frame named `event`.
fn data_of(sse: &str, event: &str) -> String {
    frames(sse)
        .into_iter()
        .find(|(e, _)| e == event)
        .map(|(_, d)| d)
        .unwrap()
}

/// Checks the decoder contract on `out`: exactly one terminal event, last; then that nothing more comes out.
fn check_contract(d: &mut ResponsesDecoder, out: &mut Vec<Event>) {
    assert!(d.is_done());
    assert_one_terminal_last(out);
    let n = out.len();
    d.frame(
        "response.output_text.delta",
        r#"{"type":"response.output_text.delta","item_id":"msg_late","delta":"late"}"#,
        out,
    );
    d.frame(
        "response.completed",
        r#"{"type":"response.completed","response":{"id":"r"}}"#,
        out,
    );
    d.end(out);
    assert_eq!(out.len(), n, "nothing after the terminal event");
}

/// Feeds every frame of `sse`, then the end of the body.
fn decode(sse: &str) -> Vec<Event> {
    let mut d = ResponsesDecoder::new();
    let mut out = Vec::new();
    for (event, data) in frames(sse) {
        d.frame(&event, &data, &mut out);
    }
    d.end(&mut out);
    check_contract(&mut d, &mut out);
    out
}

/// Feeds inline `(event, data)` frames, then the end of the body.
fn decode_frames(frames: &[(&str, &str)]) -> Vec<Event> {
    let mut d = ResponsesDecoder::new();
    let mut out = Vec::new();
    for (event, data) in frames {
        d.frame(event, data, &mut out);
    }
    d.end(&mut out);
    check_contract(&mut d, &mut out);
    out
}

fn re(id: &str, metadata: &str) -> Event {
    Event::ReasoningEnd {
        id: id.into(),
        metadata: Some(metadata.into()),
    }
}
fn network_error() -> Event {
    Event::Error(ProviderError::new(
        ErrorKind::Network,
        "stream ended before the response completed",
    ))
}

const ENCRYPTED: &str = "gAAAAABpVxqhkCMk9EFqwhzcpVZZqmoqM4V6i827Ve7COHXOSGt9Fy3qptmDj0yp8xAFXrn6KZ7FUqC7_izyNUKe9QPG-6udLSv-rBZBx2UMZLl0WbKQZoY7EaA7qd2FpYkBW5zOFUTrO5yP_ng386xTPoXAZ8sQONT4LLkL43eVhSKWKJ4Q_CYqscl-72SBddCe9v_cqwl2XjoxjKBIQaTvxfrMOXUW8YEathZxtLK7UyMRUARnmW1rovzx7AKnChp1AnxdWihEiqkcSaZhzBhvDWnp-5-Z1rU7K1ngLCktFECjKxB7iyDd3Gmpvk65MP4bPgEidJSyypYIeV8mWxkMxdKBZaCLxJH4Q1ZaMZUv6754jwoQSeZrZNKh5bZnVIDt7g1sW0ep4Ffj20pWQBnE5bA==";

#[test]
fn text_fixture() {
    let msg = "msg_109031c05318848ba768c52c2c3a93f15dfea6f3f93916b4ad";
    let mut want = vec![ts(msg)];
    want.extend(texts(
        msg,
        &[
            "Hi", " there", "!", " What", " shall", " we", " build", " today", "?",
        ],
    ));
    want.push(te(msg));
    // 1843 input tokens of which 1536 cached; 12 output, no reasoning.
    want.push(finish(
        FinishReason::Stop,
        "completed",
        usage(307, 1536, 0, 12, 0),
        "resp_109031c05318848ba78ba04165baaad1e1cd00daf51a4164a2",
        "gpt-4.1-mini-2025-04-14",
    ));
    assert_eq!(decode(fixture!("text.sse")), want);
}

#[test]
fn parallel_tools_fixture_reports_call_ids_not_item_ids() {
    let a = "call_AjH1jLLHHEt6T5WHU3iG1tcd";
    let b = "call_IsRaEIH1a6gUiZPn8pvAIrN5";
    let mut want = vec![tis(a, "get_weather")];
    for f in ["{\"", "city", "\":\"", "Par", "is", "\"}"] {
        want.push(tid(a, f));
    }
    want.extend([
        tie(a),
        tc(a, "get_weather", r#"{"city":"Paris"}"#),
        tis(b, "get_weather"),
    ]);
    for f in ["{\"ci", "ty\":\"", "Tok", "yo\",\"", "unit", "\":\"c\"}"] {
        want.push(tid(b, f));
    }
    want.extend([
        tie(b),
        tc(b, "get_weather", r#"{"city":"Tokyo","unit":"c"}"#),
        finish(
            FinishReason::ToolCalls,
            "completed",
            usage(312, 0, 0, 58, 0),
            "resp_aa9623d96f03ffb638c3f7ea0d62a2bf0f4b4239e63aee0bb1",
            "gpt-4.1-2025-04-14",
        ),
    ]);
    let events = decode(fixture!("parallel_tools.sse"));
    assert_eq!(events, want);
    let sse = fixture!("parallel_tools.sse");
    assert!(sse.contains("\"id\":\"fc_"), "the fixture has item ids");
    assert!(
        !events.iter().any(|e| format!("{e:?}").contains("fc_")),
        "item ids never reach the caller"
    );
}

#[test]
fn reasoning_fixture_joins_summary_parts_and_keeps_encrypted_content() {
    let rs_id = "rs_3aaa6370d734b4ecf40e68ed72dfe0cef33613483a0d3b4fd0";
    let msg = "msg_3aaa6370d734b4ecf43c33116686e1c021038ab2728f81c772";
    let mut want = vec![rs(rs_id)];
    for d in [
        "**Computing",
        " the product",
        "**\n\nThe user wants",
        " 27 × 453.",
        " Split 453 into 400 + 53.",
        // The second summary part starts after a blank line, inside the same block.
        "\n\n**Checking",
        " the sum**\n\n",
        "10800 + 1431",
        " = 12231.",
    ] {
        want.push(rd(rs_id, d));
    }
    want.push(re(
        rs_id,
        &format!(r#"{{"item_id":"{rs_id}","encrypted_content":"{ENCRYPTED}"}}"#),
    ));
    want.push(ts(msg));
    want.extend(texts(msg, &["27 × 453", " = **12,231**."]));
    want.push(te(msg));
    // 412 output tokens of which 384 reasoning.
    want.push(finish(
        FinishReason::Stop,
        "completed",
        usage(96, 0, 0, 28, 384),
        "resp_3aaa6370d734b4ecf4f1836f384771b7efe706ce78eb1b09cb",
        "gpt-5-codex",
    ));
    assert_eq!(decode(fixture!("reasoning.sse")), want);
}

#[test]
fn error_after_200_fixture_nested_error_then_failed() {
    let sse = fixture!("error_after_200.sse");
    let msg = "msg_16cb21168e737e05abe363728c7bf0c6b890fa09a3b26f2d9c";
    let mut want = vec![ts(msg)];
    want.extend(texts(msg, &["The", " answer", " is"]));
    let error = classify(None, None, &data_of(sse, "error"));
    assert_eq!(
        (error.kind, error.retryable),
        (ErrorKind::ProviderError, true)
    );
    assert!(error.message.starts_with("An error occurred"), "{error:?}");
    want.push(Event::Error(error));
    // The `response.failed` after the `error` event adds nothing.
    assert_eq!(decode(sse), want);
}

#[test]
fn error_first_fixture_flat_error_is_overloaded() {
    let sse = fixture!("error_first.sse");
    let events = decode(sse);
    assert_eq!(
        events,
        vec![Event::Error(classify(None, None, &data_of(sse, "error")))]
    );
    let Some(Event::Error(e)) = events.last() else {
        unreachable!()
    };
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    assert_eq!(
        e.message,
        "Our servers are currently overloaded. Please try again later."
    );
}

#[test]
fn incomplete_fixture_is_length() {
    let msg = "msg_bb79690f073d89637bb08bea95c7d446994e52dfc6177b9622";
    let mut want = vec![ts(msg)];
    want.extend(texts(
        msg,
        &[
            "Once", " upon", " a", " time", ",", " in", " a", " quiet", " village", " by", " the",
            " sea", ",", " there", " lived", " a",
        ],
    ));
    want.push(te(msg));
    want.push(finish(
        FinishReason::Length,
        "max_output_tokens",
        usage(25, 0, 0, 16, 0),
        "resp_bb79690f073d89637b0185a0c0eac4329cd9062ff1c1ba5d42",
        "gpt-4.1-mini-2025-04-14",
    ));
    assert_eq!(decode(fixture!("incomplete.sse")), want);
}

#[test]
fn truncated_fixture_is_retryable_network_error() {
    let msg = "msg_b6f0a673346077f2eecbc35dea35985d2d7d8c0e905951db77";
    let mut want = vec![ts(msg)];
    want.extend(texts(msg, &["Once", " upon", " a"]));
    want.push(network_error());
    let events = decode(fixture!("truncated.sse"));
    assert_eq!(events, want);
    let Some(Event::Error(e)) = events.last() else {
        unreachable!()
    };
    assert!(e.retryable);
}

#[test]
fn malformed_fixture_is_provider_error_and_nothing_follows() {
    let sse = fixture!("malformed.sse");
    let msg = "msg_608f6ae47be81d254c08cb5a8963fcaf7191a52e86a8d601d4";
    let bad = frames(sse)
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| serde_json::from_str::<serde_json::Value>(d).is_err())
        .unwrap();
    let mut err = ProviderError::malformed(format!(
        "malformed OpenAI Responses stream: `response.output_text.delta` event: EOF while parsing a string at line 1 column {}",
        bad.len()
    ));
    err.provider_body = bad;
    assert!(!err.retryable);
    assert_eq!(
        decode(sse),
        vec![ts(msg), td(msg, "Hello"), Event::Error(err)]
    );
}

#[test]
fn error_bodies_are_openai_shaped_and_classify() {
    for (body, status, kind) in [
        (
            fixture!("errors/context_length_exceeded.json"),
            400,
            ErrorKind::ContextOverflow,
        ),
        (
            fixture!("errors/rate_limit.json"),
            429,
            ErrorKind::RateLimited,
        ),
        (
            fixture!("errors/overloaded.json"),
            503,
            ErrorKind::Overloaded,
        ),
    ] {
        assert!(body.starts_with("{\n  \"error\": {\n"), "pretty-printed");
        let e = classify(Some(status), None, body);
        assert_eq!(e.kind, kind, "{body}");
    }
    let e = classify(Some(429), None, fixture!("errors/rate_limit.json"));
    assert_eq!(e.retry_after, Some(std::time::Duration::from_millis(225)));
}

#[test]
fn fixtures_are_wire_exact() {
    for (name, sse) in FIXTURES {
        assert!(!sse.contains('\r'), "{name}: LF only");
        assert!(sse.ends_with("\n\n"), "{name}");
        let mut next = 0;
        for (event, data) in frames(sse) {
            // The malformed frame is the one exception, cut short on purpose.
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&data) else {
                assert_eq!(name, "malformed.sse");
                next += 1;
                continue;
            };
            assert_eq!(
                v["type"].as_str(),
                Some(event.as_str()),
                "{name}: event: = type"
            );
            assert_eq!(v["sequence_number"].as_u64(), Some(next), "{name}: {data}");
            next += 1;
            if matches!(
                event.as_str(),
                "response.created"
                    | "response.in_progress"
                    | "response.completed"
                    | "response.incomplete"
                    | "response.failed"
            ) {
                let r = &v["response"];
                assert_eq!(r["object"], "response", "{name}: full response object");
                assert!(r["id"].as_str().unwrap().starts_with("resp_"));
                assert!(r.get("output").is_some() && r.get("usage").is_some());
            }
        }
        assert!(next > 2, "{name}");
    }
}

/// The fixtures through the real SSE parser, in awkward read sizes and with CRLF line endings, give the same events
/// as the local splitter above.
#[test]
fn fixtures_decode_the_same_through_the_sse_parser_lf_and_crlf() {
    for (name, sse) in FIXTURES {
        let want = decode(sse);
        let crlf = sse.replace('\n', "\r\n");
        for body in [sse, crlf.as_str()] {
            for read in [1, 7, 64, 4096] {
                let out = decode_in_reads(&mut ResponsesDecoder::new(), body, read);
                assert_eq!(
                    out,
                    want,
                    "{name}, read size {read}, crlf {}",
                    body.contains('\r')
                );
            }
        }
    }
}

// ---- Synthetic frames ---------------------------------------------------------------------------------------------

const CREATED: &str = r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"o3-pro-2025-06-10","output":[],"usage":null,"incomplete_details":null,"error":null}}"#;

fn completed(usage_json: &str) -> String {
    format!(
        r#"{{"type":"response.completed","response":{{"id":"resp_1","object":"response","status":"completed","model":"o3-pro-2025-06-10","output":[],"usage":{usage_json}}}}}"#
    )
}

const NO_USAGE: &str = "null";

#[test]
fn raw_reasoning_text_and_parts_in_one_block_and_empty_deltas_skipped() {
    let completed = completed(NO_USAGE);
    let events = decode_frames(&[
        ("response.created", CREATED),
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_a","type":"reasoning","summary":[]}}"#,
        ),
        (
            "response.reasoning_text.delta",
            r#"{"type":"response.reasoning_text.delta","item_id":"rs_a","content_index":0,"delta":"step one"}"#,
        ),
        (
            "response.reasoning_text.delta",
            r#"{"type":"response.reasoning_text.delta","item_id":"rs_a","content_index":1,"delta":""}"#,
        ),
        (
            "response.reasoning_text.delta",
            r#"{"type":"response.reasoning_text.delta","item_id":"rs_a","content_index":1,"delta":"step two"}"#,
        ),
        (
            "response.reasoning_summary_text.delta",
            r#"{"type":"response.reasoning_summary_text.delta","item_id":"rs_a","summary_index":0,"delta":"Summary."}"#,
        ),
        // No encrypted content (include not requested): the metadata names the item only.
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_a","type":"reasoning","summary":[{"type":"summary_text","text":"Summary."}]}}"#,
        ),
        ("response.completed", &completed),
    ]);
    assert_eq!(
        events,
        vec![
            rs("rs_a"),
            rd("rs_a", "step one"),
            rd("rs_a", "\n\nstep two"),
            rd("rs_a", "\n\nSummary."),
            re("rs_a", r#"{"item_id":"rs_a"}"#),
            finish(
                FinishReason::Stop,
                "completed",
                Usage::default(),
                "resp_1",
                "o3-pro-2025-06-10"
            ),
        ]
    );
}

#[test]
fn completed_items_without_deltas_are_replayed_from_the_done_item() {
    let completed = completed(NO_USAGE);
    let events = decode_frames(&[
        ("response.created", CREATED),
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_b","type":"reasoning","encrypted_content":"enc","summary":[{"type":"summary_text","text":"One."},{"type":"summary_text","text":"Two."}]}}"#,
        ),
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","output_index":1,"item":{"id":"msg_b","type":"message","status":"in_progress","content":[],"role":"assistant"}}"#,
        ),
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","output_index":1,"item":{"id":"msg_b","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Hello "},{"type":"refusal","refusal":"but no."}],"role":"assistant"}}"#,
        ),
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","output_index":2,"item":{"id":"fc_b","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"lookup"}}"#,
        ),
        // No deltas: the `arguments.done` event carries them.
        (
            "response.function_call_arguments.done",
            r#"{"type":"response.function_call_arguments.done","item_id":"fc_b","output_index":2,"arguments":"{\"q\":1}"}"#,
        ),
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","output_index":2,"item":{"id":"fc_b","type":"function_call","status":"completed","arguments":"{\"q\":1}","call_id":"call_b","name":"lookup"}}"#,
        ),
        // A call seen only as a done item, with empty arguments.
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","output_index":3,"item":{"id":"fc_c","type":"function_call","status":"completed","arguments":"","call_id":"call_c","name":"now"}}"#,
        ),
        ("response.completed", &completed),
    ]);
    assert_eq!(
        events,
        vec![
            rs("rs_b"),
            rd("rs_b", "One.\n\nTwo."),
            re("rs_b", r#"{"item_id":"rs_b","encrypted_content":"enc"}"#),
            ts("msg_b"),
            td("msg_b", "Hello but no."),
            te("msg_b"),
            tis("call_b", "lookup"),
            tid("call_b", "{\"q\":1}"),
            tie("call_b"),
            tc("call_b", "lookup", "{\"q\":1}"),
            tis("call_c", "now"),
            tie("call_c"),
            tc("call_c", "now", "{}"),
            finish(
                FinishReason::ToolCalls,
                "completed",
                Usage::default(),
                "resp_1",
                "o3-pro-2025-06-10"
            ),
        ]
    );
}

#[test]
fn arguments_are_never_finalized_early_and_done_arguments_win() {
    let completed = completed(NO_USAGE);
    let events = decode_frames(&[
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"call_1","name":"f"}}"#,
        ),
        (
            "response.function_call_arguments.delta",
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{\"n\":1"}"#,
        ),
        (
            "response.function_call_arguments.delta",
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"2}"}"#,
        ),
        // Ignored: deltas already carried the arguments.
        (
            "response.function_call_arguments.done",
            r#"{"type":"response.function_call_arguments.done","item_id":"fc_1","arguments":"{\"n\":12}"}"#,
        ),
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"{\"n\": 12}","call_id":"call_1","name":"f"}}"#,
        ),
        ("response.completed", &completed),
    ]);
    assert_eq!(
        events,
        vec![
            tis("call_1", "f"),
            tid("call_1", "{\"n\":1"),
            tid("call_1", "2}"),
            tie("call_1"),
            tc("call_1", "f", "{\"n\": 12}"),
            finish(
                FinishReason::ToolCalls,
                "completed",
                Usage::default(),
                "resp_1",
                "o3-pro-2025-06-10"
            ),
        ]
    );
}

#[test]
fn open_items_are_closed_at_the_terminal_event() {
    let events = decode_frames(&[
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","item":{"id":"rs_o","type":"reasoning","summary":[]}}"#,
        ),
        (
            "response.output_text.delta",
            r#"{"type":"response.output_text.delta","item_id":"msg_o","delta":"cut"}"#,
        ),
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","item":{"id":"fc_o","type":"function_call","arguments":"","call_id":"call_o","name":"g"}}"#,
        ),
        (
            "response.function_call_arguments.delta",
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_o","delta":"{\"a\""}"#,
        ),
        (
            "response.incomplete",
            r#"{"type":"response.incomplete","response":{"id":"resp_2","model":"m","status":"incomplete","incomplete_details":{"reason":"content_filter"},"usage":{"input_tokens":10,"output_tokens":4}}}"#,
        ),
    ]);
    assert_eq!(
        events,
        vec![
            rs("rs_o"),
            ts("msg_o"),
            td("msg_o", "cut"),
            tis("call_o", "g"),
            tid("call_o", "{\"a\""),
            re("rs_o", r#"{"item_id":"rs_o"}"#),
            te("msg_o"),
            tie("call_o"),
            tc("call_o", "g", "{\"a\""),
            finish(
                FinishReason::ContentFilter,
                "content_filter",
                usage(10, 0, 0, 4, 0),
                "resp_2",
                "m"
            ),
        ]
    );
}

#[test]
fn incomplete_reasons_map_to_unified_reasons() {
    for (details, reason, raw) in [
        (
            r#"{"reason":"max_output_tokens"}"#,
            FinishReason::Length,
            "max_output_tokens",
        ),
        (
            r#"{"reason":"content_filter"}"#,
            FinishReason::ContentFilter,
            "content_filter",
        ),
        (
            r#"{"reason":"something_new"}"#,
            FinishReason::Other,
            "something_new",
        ),
        ("null", FinishReason::Other, "incomplete"),
    ] {
        let frame = format!(
            r#"{{"type":"response.incomplete","response":{{"id":"r","model":"m","incomplete_details":{details}}}}}"#
        );
        assert_eq!(
            decode_frames(&[("response.incomplete", &frame)]),
            vec![finish(reason, raw, Usage::default(), "r", "m")],
            "{details}"
        );
    }
}

#[test]
fn usage_normalisation() {
    for (wire, want) in [
        (
            r#"{"input_tokens":1000,"input_tokens_details":{"cached_tokens":800},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":200},"total_tokens":1300}"#,
            usage(200, 800, 0, 100, 200),
        ),
        // Newer responses also report cache writes.
        (
            r#"{"input_tokens":45,"input_tokens_details":{"cache_write_tokens":5,"cached_tokens":10},"output_tokens":25,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":70}"#,
            usage(30, 10, 5, 25, 0),
        ),
        // Inconsistent counts saturate instead of wrapping; missing details are zero.
        (
            r#"{"input_tokens":5,"input_tokens_details":{"cached_tokens":20},"output_tokens":null,"output_tokens_details":{"reasoning_tokens":7}}"#,
            usage(0, 20, 0, 0, 7),
        ),
        (
            r#"{"input_tokens":3,"output_tokens":2}"#,
            usage(3, 0, 0, 2, 0),
        ),
    ] {
        let frame = completed(wire);
        let events = decode_frames(&[("response.completed", &frame)]);
        assert_eq!(
            events,
            vec![finish(
                FinishReason::Stop,
                "completed",
                want,
                "resp_1",
                "o3-pro-2025-06-10"
            )],
            "{wire}"
        );
    }
}

#[test]
fn error_event_shapes_and_failed_alone() {
    let flat = r#"{"type":"error","sequence_number":3,"code":"rate_limit_exceeded","message":"Rate limit reached. Please try again in 20ms.","param":null}"#;
    let nested = r#"{"type":"error","sequence_number":2,"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota.","param":null}}"#;
    let failed = r#"{"type":"response.failed","sequence_number":4,"response":{"id":"resp_f","status":"failed","error":{"code":"server_error","message":"boom"},"usage":null}}"#;
    for (event, data, kind, retryable) in [
        ("error", flat, ErrorKind::RateLimited, true),
        ("error", nested, ErrorKind::Auth, false),
        ("response.failed", failed, ErrorKind::ProviderError, true),
        // An error frame that is not even JSON is still the provider's error.
        (
            "error",
            "upstream overloaded",
            ErrorKind::ProviderError,
            true,
        ),
    ] {
        let events = decode_frames(&[("response.created", CREATED), (event, data)]);
        assert_eq!(events, vec![Event::Error(classify(None, None, data))]);
        let Some(Event::Error(e)) = events.last() else {
            unreachable!()
        };
        assert_eq!((e.kind, e.retryable), (kind, retryable), "{data}");
    }
}

#[test]
fn unknown_events_and_hosted_tool_items_are_ignored_and_the_event_name_is_optional() {
    let completed = completed(NO_USAGE);
    let events = decode_frames(&[
        ("", CREATED),
        (
            "response.queued",
            r#"{"type":"response.queued","response":"not an object"}"#,
        ),
        (
            "response.web_search_call.searching",
            r#"{"type":"response.web_search_call.searching","item_id":"ws_1","delta":{"odd":true}}"#,
        ),
        (
            "",
            r#"{"type":"response.output_item.added","item":{"id":"ws_1","type":"web_search_call","status":"in_progress","content":"a string"}}"#,
        ),
        (
            "",
            r#"{"type":"response.output_item.done","item":{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"q"}}}"#,
        ),
        (
            "",
            r#"{"type":"response.output_item.added","item":{"id":"msg_u","type":"message","content":[],"role":"assistant"}}"#,
        ),
        (
            "",
            r#"{"type":"response.content_part.added","item_id":"msg_u","part":{"type":"output_text","text":""}}"#,
        ),
        (
            "",
            r#"{"type":"response.output_text.delta","item_id":"msg_u","delta":""}"#,
        ),
        (
            "",
            r#"{"type":"response.refusal.delta","item_id":"msg_u","delta":"I can't help with that."}"#,
        ),
        (
            "",
            r#"{"type":"response.output_text.annotation.added","item_id":"msg_u","annotation":{"type":"url_citation"}}"#,
        ),
        // Its event name stands in for a missing `type`.
        (
            "response.output_item.done",
            r#"{"item":{"id":"msg_u","type":"message","content":[{"type":"refusal","refusal":"I can't help with that."}]}}"#,
        ),
        ("", &completed),
    ]);
    assert_eq!(
        events,
        vec![
            ts("msg_u"),
            td("msg_u", "I can't help with that."),
            te("msg_u"),
            finish(
                FinishReason::Stop,
                "completed",
                Usage::default(),
                "resp_1",
                "o3-pro-2025-06-10"
            ),
        ]
    );
}

#[test]
fn broken_known_frames_are_malformed_not_panics() {
    for (event, data, what) in [
        ("", "42", "`untyped` event"),
        (
            "response.output_text.delta",
            "[1,2]",
            "`response.output_text.delta` event",
        ),
        (
            "",
            r#"{"type":"response.output_text.delta","item_id":"m","delta":7}"#,
            "`response.output_text.delta` event",
        ),
        (
            "",
            r#"{"type":"response.output_item.added","item":{"id":"m","type":"message","content":"x"}}"#,
            "`response.output_item.added` event",
        ),
        (
            "",
            r#"{"type":"response.output_text.delta","delta":"orphan"}"#,
            "`response.output_text.delta` without item_id",
        ),
        (
            "",
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_x","delta":"{}"}"#,
            "arguments for item fc_x, which is not an open function call",
        ),
        (
            "",
            r#"{"type":"response.output_item.added","item":{"id":"fc_y","type":"function_call","arguments":"","name":"f"}}"#,
            "function_call item without call_id",
        ),
        (
            "",
            r#"{"type":"response.output_item.done"}"#,
            "`response.output_item.done` without item",
        ),
        ("", r#"{"sequence_number":1}"#, "event without a type"),
    ] {
        let mut d = ResponsesDecoder::new();
        let mut out = Vec::new();
        d.frame(event, data, &mut out);
        assert!(d.is_done(), "{data}");
        assert!(
            matches!(&out[..], [Event::Error(e)] if e.kind == ErrorKind::ProviderError
                && e.message.contains(what)
                && e.provider_body == data),
            "{data}: {out:?}"
        );
    }
    // Empty data is no frame at all.
    let mut d = ResponsesDecoder::new();
    let mut out = Vec::new();
    d.frame("", "", &mut out);
    d.frame("response.output_text.delta", "  ", &mut out);
    assert!(out.is_empty());
    assert!(!d.is_done());
}

#[test]
fn text_for_a_reasoning_item_is_malformed() {
    let mut d = ResponsesDecoder::new();
    let mut out = Vec::new();
    d.frame(
        "",
        r#"{"type":"response.output_item.added","item":{"id":"rs_z","type":"reasoning","summary":[]}}"#,
        &mut out,
    );
    d.frame(
        "",
        r#"{"type":"response.output_text.delta","item_id":"rs_z","delta":"x"}"#,
        &mut out,
    );
    assert!(d.is_done());
    assert!(
        matches!(&out[..], [Event::ReasoningStart { .. }, Event::Error(e)] if e.kind == ErrorKind::ProviderError),
        "{out:?}"
    );
}

#[test]
fn end_without_terminal_event_is_a_network_error_even_after_output() {
    let events = decode_frames(&[
        ("response.created", CREATED),
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","item":{"id":"fc_t","type":"function_call","arguments":"","call_id":"call_t","name":"f"}}"#,
        ),
    ]);
    // The call is never reported complete: the stream broke, the caller retries or gives up.
    assert_eq!(events, vec![tis("call_t", "f"), network_error()]);
}

#[test]
fn arguments_already_in_the_added_item_are_streamed_and_a_repeated_added_is_ignored() {
    let completed = completed(NO_USAGE);
    let added = r#"{"type":"response.output_item.added","item":{"id":"fc_i","type":"function_call","arguments":"{\"a\":","call_id":"call_i","name":"f"}}"#;
    let events = decode_frames(&[
        ("", added),
        ("", added),
        (
            "",
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_i","delta":"1}"}"#,
        ),
        (
            "",
            r#"{"type":"response.output_item.done","item":{"id":"fc_i","type":"function_call","arguments":"{\"a\":1}","call_id":"call_i","name":"f"}}"#,
        ),
        ("", &completed),
    ]);
    assert_eq!(
        events,
        vec![
            tis("call_i", "f"),
            tid("call_i", "{\"a\":"),
            tid("call_i", "1}"),
            tie("call_i"),
            tc("call_i", "f", "{\"a\":1}"),
            finish(
                FinishReason::ToolCalls,
                "completed",
                Usage::default(),
                "resp_1",
                "o3-pro-2025-06-10"
            ),
        ]
    );
}

#[test]
fn strict_tools_lose_the_nulls_strict_mode_added_at_the_done_item_and_at_the_stream_end() {
    use crate::adapter::common::strict::StrictTools;
    use crate::adapter::pb;

    let strict = StrictTools::of(&pb::Generation {
        tools: vec![pb::Tool {
            name: "f".into(),
            description: String::new(),
            input_schema_json:
                r#"{"type":"object","properties":{"n":{"type":"integer"},"note":{"type":"string"}},"required":["n"]}"#
                    .into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let completed = completed(NO_USAGE);
    let frames = [
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"call_1","name":"f"}}"#.to_string(),
        ),
        (
            "response.output_item.done",
            r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"{\"n\":1,\"note\":null}","call_id":"call_1","name":"f"}}"#.to_string(),
        ),
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","output_index":1,"item":{"id":"fc_2","type":"function_call","arguments":"","call_id":"call_2","name":"f"}}"#.to_string(),
        ),
        (
            "response.function_call_arguments.delta",
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_2","delta":"{\"note\":null,\"n\":2}"}"#.to_string(),
        ),
        // No `output_item.done` for the second call: it is closed by the terminal event.
        ("response.completed", completed),
    ];
    let run = |d: &mut dyn Decoder| {
        let mut out = Vec::new();
        for (event, data) in &frames {
            d.frame(event, data, &mut out);
        }
        out.into_iter()
            .filter_map(|e| match e {
                Event::ToolCall { input_json, .. } => Some(input_json),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let mut d = ResponsesDecoder::with_strict(strict);
    assert_eq!(run(&mut d), [r#"{"n":1}"#, r#"{"n":2}"#]);
    assert_eq!(run(d.restart().as_mut()), [r#"{"n":1}"#, r#"{"n":2}"#]);
    assert_eq!(
        run(&mut ResponsesDecoder::new()),
        [r#"{"n":1,"note":null}"#, r#"{"note":null,"n":2}"#]
    );
}
