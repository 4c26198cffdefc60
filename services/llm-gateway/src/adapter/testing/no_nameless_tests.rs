//! The no-nameless-call rule for every decoder: a provider stream whose tool call has no name, or whose call id was
//! already used, ends with one typed `provider_error` and passes the unified invariants; it never produces a
//! malformed unified event.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::adapter::testing::invariants::check;
use crate::adapter::{Protocol, Target};
use crate::catalog::ModelInfo;
use crate::error::ErrorKind;
use crate::event::Event;

fn decode(protocol: Protocol, frames: &[(&str, &str)]) -> Vec<Event> {
    let model = ModelInfo::for_tests("m", protocol);
    let mut d = protocol.adapter().decoder(&Target::new(&model));
    let mut out = Vec::new();
    for (event, data) in frames {
        if !d.is_done() {
            d.frame(event, data, &mut out);
        }
    }
    if !d.is_done() {
        d.end(&mut out);
    }
    out
}

fn assert_refused(protocol: Protocol, frames: &[(&str, &str)], what: &str) {
    let out = decode(protocol, frames);
    assert_eq!(check(&out), Ok(()), "{protocol:?}: {out:#?}");
    match out.last() {
        Some(Event::Error(e)) => {
            assert_eq!(e.kind, ErrorKind::ProviderError, "{e:?}");
            assert!(
                e.message.contains(what),
                "{protocol:?}: {} / {what}",
                e.message
            );
        }
        other => panic!("{protocol:?}: want an error, got {other:?}"),
    }
}

fn chat(tool_calls: &str) -> String {
    format!(
        r#"{{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{{"index":0,"delta":{{"tool_calls":{tool_calls}}},"finish_reason":null}}]}}"#
    )
}
const CHAT_STOP: &str = r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#;

#[test]
fn openai_chat_refuses_a_call_without_a_name_and_an_id_used_twice() {
    let nameless =
        chat(r#"[{"index":0,"id":"call_a","type":"function","function":{"arguments":"{}"}}]"#);
    assert_refused(
        Protocol::OpenaiChat,
        &[("", &nameless), ("", CHAT_STOP), ("", "[DONE]")],
        "has no name",
    );
    let first = chat(
        r#"[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]"#,
    );
    let again = chat(
        r#"[{"index":1,"id":"call_a","type":"function","function":{"name":"g","arguments":"{}"}}]"#,
    );
    assert_refused(
        Protocol::OpenaiChat,
        &[("", &first), ("", &again), ("", CHAT_STOP), ("", "[DONE]")],
        "used twice",
    );
}

fn tool_use(index: u64, id: &str, name: &str) -> String {
    format!(
        r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"{id}","name":"{name}","input":{{}}}}}}"#
    )
}
const MESSAGE_START: &str = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}"#;

#[test]
fn anthropic_refuses_a_tool_use_without_a_name_and_an_id_used_twice() {
    let nameless = tool_use(0, "toolu_1", "");
    assert_refused(
        Protocol::Anthropic,
        &[
            ("message_start", MESSAGE_START),
            ("content_block_start", &nameless),
        ],
        "without an id or a name",
    );
    let stop = r#"{"type":"content_block_stop","index":0}"#;
    let (a, b) = (tool_use(0, "toolu_1", "f"), tool_use(1, "toolu_1", "g"));
    assert_refused(
        Protocol::Anthropic,
        &[
            ("message_start", MESSAGE_START),
            ("content_block_start", &a),
            ("content_block_stop", stop),
            ("content_block_start", &b),
        ],
        "used twice",
    );
}

fn added(n: u64, call_id: &str, name: &str) -> String {
    format!(
        r#"{{"type":"response.output_item.added","sequence_number":{n},"output_index":{n},"item":{{"id":"fc_{n}","type":"function_call","status":"in_progress","arguments":"","call_id":"{call_id}","name":"{name}"}}}}"#
    )
}

#[test]
fn responses_refuses_a_function_call_without_a_name_and_a_call_id_used_twice() {
    assert_refused(
        Protocol::OpenaiResponses,
        &[("response.output_item.added", &added(0, "call_1", ""))],
        "without a name",
    );
    assert_refused(
        Protocol::OpenaiResponses,
        &[
            ("response.output_item.added", &added(0, "call_1", "f")),
            ("response.output_item.added", &added(1, "call_1", "g")),
        ],
        "used twice",
    );
}
