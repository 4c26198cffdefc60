//! A whole (non-streaming) response decodes to the same events as the stream it is equivalent to: for every fixture
//! pair `<name>.json` / `<name>.sse` in `shared/fake-provider/fixtures/<protocol>/`, the JSON body through the
//! `Json` framing and the SSE body through the SSE parser give the same content, calls, finish and usage (deltas
//! merged, since a stream splits text where a whole body does not).

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use crate::adapter::framing::{Framing, Parser};
use crate::adapter::testing::event_kit::decode_in_reads;
use crate::adapter::{Decoder, Protocol, Target};
use crate::catalog::ModelInfo;
use crate::event::Event;

/// The protocols whose fixtures have whole-body twins, and the catalog protocol whose decoder reads them.
const PROTOCOLS: [(&str, Protocol); 4] = [
    ("openai_chat", Protocol::OpenaiChat),
    ("openai_responses", Protocol::OpenaiResponses),
    ("anthropic", Protocol::Anthropic),
    ("gemini", Protocol::Gemini),
];

fn fixture_dir(protocol: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fake-provider/fixtures")
        .join(protocol)
}

fn decoder(protocol: Protocol) -> Box<dyn Decoder> {
    let model = ModelInfo::for_tests("p/m", protocol);
    protocol.adapter().decoder(&Target::new(&model))
}

/// `body` as one JSON document, in reads of `read` bytes, as the transport hands it over.
fn decode_whole(decoder: &mut dyn Decoder, body: &str, read: usize) -> Vec<Event> {
    let mut parser = Parser::new(Framing::Json, 1 << 20);
    let mut out = Vec::new();
    for bytes in body.as_bytes().chunks(read) {
        parser.feed(bytes, decoder, &mut out).unwrap();
    }
    parser.finish(decoder, &mut out).unwrap();
    if !decoder.is_done() {
        decoder.end(&mut out);
    }
    out
}

/// Adjacent deltas of one block merged, and tool-call arguments compared as JSON values.
fn canonical(events: Vec<Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for ev in events {
        match (out.last_mut(), ev) {
            (
                Some(Event::TextDelta { id, delta }),
                Event::TextDelta {
                    id: next,
                    delta: more,
                },
            )
            | (
                Some(Event::ReasoningDelta { id, delta }),
                Event::ReasoningDelta {
                    id: next,
                    delta: more,
                },
            )
            | (
                Some(Event::ToolInputDelta { call_id: id, delta }),
                Event::ToolInputDelta {
                    call_id: next,
                    delta: more,
                },
            ) if *id == next => delta.push_str(&more),
            (
                _,
                Event::ToolCall {
                    call_id,
                    tool,
                    input_json,
                    metadata,
                },
            ) => {
                let input_json = json_text(&input_json);
                out.push(Event::ToolCall {
                    call_id,
                    tool,
                    input_json,
                    metadata,
                });
            }
            (_, ev) => out.push(ev),
        }
    }
    for ev in &mut out {
        if let Event::ToolInputDelta { delta, .. } = ev {
            *delta = json_text(delta);
        }
    }
    out
}

fn json_text(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| text.to_string())
}

#[test]
fn every_whole_fixture_decodes_as_its_stream_twin() {
    let mut pairs = 0;
    for (dir, protocol) in PROTOCOLS {
        for entry in std::fs::read_dir(fixture_dir(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let twin = path.with_extension("sse");
            let whole = std::fs::read_to_string(&path).unwrap();
            let sse = std::fs::read_to_string(&twin).unwrap();
            let streamed = canonical(decode_in_reads(decoder(protocol).as_mut(), &sse, 4096));
            assert!(
                matches!(streamed.last(), Some(Event::Finish(_))),
                "{twin:?}: {streamed:#?}"
            );
            for read in [1, 7, 4096] {
                let decoded = canonical(decode_whole(decoder(protocol).as_mut(), &whole, read));
                assert_eq!(decoded, streamed, "{path:?} in reads of {read}");
            }
            pairs += 1;
        }
    }
    assert!(pairs >= 10, "{pairs} whole fixtures");
}

#[test]
fn an_error_object_under_200_is_the_providers_error() {
    let bodies = [
        (
            Protocol::OpenaiChat,
            r#"{"error":{"message":"Overloaded","type":"server_error","param":null,"code":null}}"#,
        ),
        (
            Protocol::OpenaiResponses,
            r#"{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"server_is_overloaded"}}"#,
        ),
        (
            Protocol::Anthropic,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        (
            Protocol::Gemini,
            r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
        ),
    ];
    for (protocol, body) in bodies {
        let out = decode_whole(decoder(protocol).as_mut(), body, 4096);
        match out.as_slice() {
            [Event::Error(e)] => assert!(e.retryable, "{protocol:?}: {e:?}"),
            other => panic!("{protocol:?}: {other:#?}"),
        }
    }
}

#[test]
fn json_that_is_no_answer_is_an_error_never_an_empty_success() {
    for (_, protocol) in PROTOCOLS {
        for body in [
            "{}",
            "[]",
            "{\"object\":\"list\",\"data\":[]}",
            "{\"id\":\"x\"",
        ] {
            let out = decode_whole(decoder(protocol).as_mut(), body, 4096);
            assert!(
                matches!(out.last(), Some(Event::Error(_))),
                "{protocol:?} {body}: {out:#?}"
            );
        }
    }
}
