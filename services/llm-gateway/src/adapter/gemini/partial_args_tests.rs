//! Vertex streamed function-call arguments: the fixture `shared/fake-provider/fixtures/vertex_gemini/partial_args.sse`
//! (two parallel calls, each a named opening part, `partialArgs` fragments with a string split across parts, and
//! an empty closing `functionCall`) decodes to two whole calls, and every shape that cannot make a well-formed call
//! ends the stream with a typed `provider_error` that passes the unified invariants.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::GeminiDecoder;
use super::partial_args::{Arguments, PartialArg};
use super::stream_tests::{call, candidate, decode, decode_chunks, finish, td, te, ts, usage};
use crate::adapter::Decoder;
use crate::adapter::testing::invariants::check;
use crate::error::ErrorKind;
use crate::event::{Event, FinishReason};

const FIXTURE: &str = include_str!(concat!(
    "../../../../../shared/fake-provider/fixtures/vertex_gemini/partial_args.sse"
));

const SIGNATURE: &str = "CiQBjz1rX3N0cmVhbWVkLWNhbGwtc2lnbmF0dXJlLWZpeHR1cmUtMDEK0wEBjz1rX8vQm3YhT2pLc4eR9sZk1wNfA6uBiC0xJ7qD5hVtWm2yPo8rGd4nUe6lKs3aXj0bHz9cQf1vYtR8pMi2wNkL7oE5sBhD3gAyVc6rJu4ZtPq0mXn==";

#[test]
fn partial_args_fixture_rebuilds_two_named_calls_in_any_read_split() {
    let got = decode(FIXTURE);
    let rid = "vGXPaPm2KJiF-O4P8ZvS4Ak";
    let first = format!("call_{rid}_0");
    let second = format!("call_{rid}_1");
    let mut want = call(
        &first,
        "get_weather",
        r#"{"location":"Boston, MA","unit":"celsius","days":3}"#,
        Some(format!(r#"{{"thought_signature":"{SIGNATURE}"}}"#)),
    );
    // The start goes out when the named part arrives; the rest when the empty `functionCall` closes the call.
    assert_eq!(got[0], want[0]);
    want.extend(call(
        &second,
        "get_weather",
        r#"{"location":"San Francisco, CA","days":3,"alerts":true}"#,
        None,
    ));
    want.push(finish(
        FinishReason::ToolCalls,
        "STOP",
        usage(61, 0, 44, 82),
        rid,
        "gemini-3-pro-preview",
    ));
    assert_eq!(got, want);
    assert_eq!(check(&got), Ok(()));
}

fn fc(body: &str) -> String {
    candidate(&format!(r#"[{{"functionCall": {body}}}]"#), None)
}

/// The stream ends with one `provider_error` naming `what`, and is well formed.
fn assert_malformed(events: &[Event], what: &str) {
    assert_eq!(check(events), Ok(()), "{events:#?}");
    match events.last() {
        Some(Event::Error(e)) => {
            assert_eq!(e.kind, ErrorKind::ProviderError, "{e:?}");
            assert!(e.message.contains(what), "{} / {what}", e.message);
        }
        other => panic!("want an error, got {other:?}"),
    }
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::ToolCall { tool, .. } if tool.is_empty())),
        "{events:#?}"
    );
}

#[test]
fn a_call_without_a_name_is_a_typed_error_never_a_nameless_call() {
    let out = decode_chunks(&[&fc(r#"{"args": {"city": "Paris"}}"#)]);
    assert_malformed(&out, "without a name");
    // The fragments of a streamed call with no opening part.
    let out = decode_chunks(&[
        &fc(
            r#"{"partialArgs": [{"jsonPath": "$.city","stringValue": "Paris"}],"willContinue": true}"#,
        ),
        &fc("{}"),
    ]);
    assert_malformed(&out, "without a name");
}

#[test]
fn inconsistent_streamed_calls_are_typed_errors() {
    let open = fc(r#"{"name": "f","willContinue": true}"#);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![open.clone(), fc(r#"{"name": "g","willContinue": true}"#)],
            "before the streamed one closed",
        ),
        (
            vec![
                open.clone(),
                candidate(r#"[{"functionCall": {}}]"#, None)
                    .replace(r#""functionCall": {}"#, r#""text": "hi""#),
            ],
            "content inside a streamed call",
        ),
        (
            vec![open.clone(), candidate("[]", Some("STOP"))],
            "finished inside a streamed call",
        ),
        (
            vec![
                open.clone(),
                fc(
                    r#"{"partialArgs": [{"jsonPath": "$.a","stringValue": "x"}],"willContinue": true}"#,
                ),
                fc(r#"{"partialArgs": [{"jsonPath": "$.a","stringValue": "y"}]}"#),
            ],
            "set twice",
        ),
        (
            vec![
                open.clone(),
                fc(r#"{"partialArgs": [{"jsonPath": "$..a","stringValue": "x"}]}"#),
            ],
            "unsupported jsonPath",
        ),
        (
            vec![open.clone(), fc(r#"{"id": "other"}"#)],
            "changed its id",
        ),
        (vec![open, fc(r#"{"args": {"a": 1}}"#)], "whole arguments"),
        (
            vec![
                fc(r#"{"id": "c1","name": "f","args": {}}"#),
                fc(r#"{"id": "c1","name": "f","args": {}}"#),
            ],
            "used twice",
        ),
    ];
    for (chunks, what) in cases {
        let chunks: Vec<&str> = chunks.iter().map(String::as_str).collect();
        assert_malformed(&decode_chunks(&chunks), what);
    }
}

#[test]
fn text_before_a_streamed_call_is_closed_and_the_call_counts_for_tool_calls() {
    let out = decode_chunks(&[
        &candidate(r#"[{"text": "Let me look."}]"#, None),
        &fc(r#"{"id": "v1","name": "lookup","willContinue": true}"#),
        &fc(r#"{"partialArgs": [{"jsonPath": "$.q","stringValue": "rust"}],"willContinue": true}"#),
        &candidate(r#"[{"functionCall": {}}]"#, Some("STOP")),
    ]);
    let mut want = vec![ts("t0"), td("t0", "Let me look."), te("t0")];
    want.extend(call(
        "v1",
        "lookup",
        r#"{"q":"rust"}"#,
        Some(r#"{"function_call_id":"v1"}"#.into()),
    ));
    want.push(finish(
        FinishReason::ToolCalls,
        "STOP",
        usage(0, 0, 0, 0),
        "resp1",
        "gemini-2.5-flash",
    ));
    assert_eq!(out, want);
}

fn arg(json: &str) -> PartialArg {
    serde_json::from_str(json).unwrap()
}

fn rebuild(args: &[&str]) -> Result<String, String> {
    let mut a = Arguments::with_args(None)?;
    for json in args {
        a.apply(arg(json))?;
    }
    Ok(a.finish())
}

#[test]
fn arguments_rebuild_nested_paths_arrays_quoted_keys_and_typed_values() {
    let got = rebuild(&[
        r#"{"jsonPath": "$.trip.stops[0].city","stringValue": "Pa","willContinue": true}"#,
        r#"{"jsonPath": "$.trip.stops[0].city","stringValue": "ris"}"#,
        r#"{"jsonPath": "$.trip.stops[1].city","stringValue": "Lyon"}"#,
        r#"{"jsonPath": "$['odd key'][0]","numberValue": 2.5}"#,
        r#"{"jsonPath": "$[\"q\"]","nullValue": "NULL_VALUE"}"#,
        r#"{"jsonPath": "$.n","numberValue": 12}"#,
        r#"{"jsonPath": "$.ok","boolValue": false}"#,
        r#"{"jsonPath": "$.empty"}"#,
    ]);
    assert_eq!(
        got.as_deref(),
        Ok(
            r#"{"trip":{"stops":[{"city":"Paris"},{"city":"Lyon"}]},"odd key":[2.5],"q":null,"n":12,"ok":false}"#
        )
    );
    let start = Arguments::with_args(Some(serde_json::json!({"a": 1}))).unwrap();
    assert_eq!(start.finish(), r#"{"a":1}"#);
    assert!(Arguments::with_args(Some(serde_json::json!([1]))).is_err());
}

#[test]
fn arguments_refuse_what_cannot_be_rebuilt() {
    let cases: &[(&[&str], &str)] = &[
        (&[r#"{"stringValue": "x"}"#], "without a jsonPath"),
        (&[r#"{"jsonPath": "a","stringValue": "x"}"#], "unsupported"),
        (
            &[r#"{"jsonPath": "$.a[*]","stringValue": "x"}"#],
            "unsupported",
        ),
        (
            &[r#"{"jsonPath": "$.a[2]","stringValue": "x"}"#],
            "does not fit",
        ),
        (
            &[
                r#"{"jsonPath": "$.a","numberValue": 1}"#,
                r#"{"jsonPath": "$.a.b","numberValue": 1}"#,
            ],
            "does not fit",
        ),
        (
            &[
                r#"{"jsonPath": "$.a","numberValue": 1}"#,
                r#"{"jsonPath": "$.a","numberValue": 1}"#,
            ],
            "set twice",
        ),
        (
            &[
                r#"{"jsonPath": "$.a","stringValue": "x","willContinue": true}"#,
                r#"{"jsonPath": "$.a","numberValue": 1}"#,
            ],
            "non-string",
        ),
    ];
    for (args, what) in cases {
        let err = rebuild(args).unwrap_err();
        assert!(err.contains(what), "{err} / {what}");
    }
}

#[test]
fn a_decoder_restart_forgets_the_open_call() {
    let mut d = GeminiDecoder::new();
    let mut out = Vec::new();
    d.frame("", &fc(r#"{"name": "f","willContinue": true}"#), &mut out);
    let mut fresh = d.restart();
    let mut out = Vec::new();
    fresh.frame(
        "",
        &candidate(r#"[{"text": "ok"}]"#, Some("STOP")),
        &mut out,
    );
    fresh.end(&mut out);
    assert_eq!(check(&out), Ok(()));
    assert!(matches!(out.last(), Some(Event::Finish(_))));
}

mod rebuild_property {
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    use super::super::partial_args::{Arguments, PartialArg};

    /// Leaves without empty containers (a fragment can only carry a leaf), integers exact in an f64.
    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            ".{0,12}".prop_map(Value::from),
            (-1_000_000i64..1_000_000).prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z ]{1,6}", inner, 1..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The fragments Vertex would send for `v` at `path`, strings cut at `cuts` (character counts, cycled).
    fn fragments(path: &str, v: &Value, cuts: &[usize], out: &mut Vec<PartialArg>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let key = k.replace('\\', "\\\\").replace('\'', "\\'");
                    fragments(&format!("{path}['{key}']"), child, cuts, out);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    fragments(&format!("{path}[{i}]"), child, cuts, out);
                }
            }
            Value::String(s) => {
                let chars: Vec<char> = s.chars().collect();
                let mut at = 0;
                let mut sizes = cuts.iter().cycle();
                loop {
                    let n = (*sizes.next().unwrap_or(&1)).max(1);
                    let end = (at + n).min(chars.len());
                    out.push(PartialArg {
                        json_path: Some(path.to_string()),
                        string_value: Some(chars[at..end].iter().collect()),
                        will_continue: Some(end < chars.len()),
                        ..PartialArg::default()
                    });
                    at = end;
                    if at >= chars.len() {
                        break;
                    }
                }
            }
            Value::Number(n) => out.push(PartialArg {
                json_path: Some(path.to_string()),
                number_value: n.as_f64(),
                ..PartialArg::default()
            }),
            Value::Bool(b) => out.push(PartialArg {
                json_path: Some(path.to_string()),
                bool_value: Some(*b),
                ..PartialArg::default()
            }),
            Value::Null => out.push(PartialArg {
                json_path: Some(path.to_string()),
                null_value: Some(Value::from("NULL_VALUE")),
                ..PartialArg::default()
            }),
        }
    }

    proptest! {
        /// Any arguments object, sent as fragments in document order with its strings cut anywhere, is rebuilt
        /// exactly.
        #[test]
        fn fragments_rebuild_the_arguments(
            args in prop::collection::btree_map("[a-z]{1,6}", value(), 1..5),
            cuts in prop::collection::vec(1usize..6, 1..8),
        ) {
            let want = Value::Object(args.into_iter().collect::<Map<String, Value>>());
            let mut frags = Vec::new();
            fragments("$", &want, &cuts, &mut frags);
            let mut a = Arguments::with_args(None).unwrap();
            for f in frags {
                a.apply(f).unwrap();
            }
            let got: Value = serde_json::from_str(&a.finish()).unwrap();
            prop_assert_eq!(got, want);
        }
    }
}
