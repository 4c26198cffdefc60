#![allow(clippy::unwrap_used)]

use super::*;

const RESERVED: [&str; 2] = ["messages", "tools"];

#[test]
fn the_protocols_entry_is_returned_and_others_ignored() {
    let json = r#"{"anthropic": {"metadata": {"user_id": "u"}}, "gemini": {"x": 1}}"#;
    let options = for_protocol(json, Protocol::Anthropic, &RESERVED)
        .unwrap()
        .unwrap();
    assert_eq!(
        Value::Object(options),
        serde_json::json!({"metadata": {"user_id": "u"}})
    );
    assert_eq!(
        for_protocol(json, Protocol::Bedrock, &RESERVED).unwrap(),
        None
    );
    assert_eq!(
        for_protocol("  ", Protocol::Bedrock, &RESERVED).unwrap(),
        None
    );
}

#[test]
fn malformed_options_and_reserved_fields_are_refused() {
    let refused = |json: &str| for_protocol(json, Protocol::Gemini, &RESERVED).unwrap_err();
    assert!(refused("{").message.starts_with("not valid JSON"));
    assert_eq!(
        refused("[1]").message,
        "must be a JSON object keyed by protocol"
    );
    assert_eq!(
        refused(r#"{"gemini": 1}"#).message,
        "`gemini` must be a JSON object"
    );
    let reserved = refused(r#"{"gemini": {"tools": []}}"#);
    assert_eq!(reserved.field, FIELD);
    assert_eq!(
        reserved.message,
        "`gemini.tools` is set by the gateway and cannot be overridden"
    );
}
