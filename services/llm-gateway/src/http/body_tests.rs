use serde_json::json;

use super::*;
use crate::http::errors::Class;

fn refused(body: &[u8]) -> ApiError {
    let e = json(body).unwrap_err();
    assert_eq!(e.class, Class::InvalidRequest, "{e:?}");
    e
}

#[test]
fn a_key_named_twice_is_refused_at_its_path_whatever_the_depth() {
    for (body, field) in [
        (r#"{"model":"a","model":"b"}"#, "model"),
        (
            r#"{"model":"a","messages":[{"role":"user","role":"system","content":"x"}]}"#,
            "messages[0].role",
        ),
        (r#"{"a":{"b":[0,{"c":1,"c":1}]}}"#, "a.b[1].c"),
        (r#"{"x":1,"y":2,"x":1}"#, "x"),
    ] {
        let e = refused(body.as_bytes());
        assert_eq!(e.param.as_deref(), Some(field), "{body}: {e:?}");
        assert!(e.message.contains("appears twice"), "{e:?}");
    }
    // The same key in sibling objects is not a duplicate.
    let v = json(br#"{"a":{"k":1},"b":{"k":2},"c":[{"k":3},{"k":4}]}"#).unwrap();
    assert_eq!(v, json!({"a":{"k":1},"b":{"k":2},"c":[{"k":3},{"k":4}]}));
}

#[test]
fn deep_nesting_is_refused_without_recursing_further() {
    for open in ["[", "{\"a\":"] {
        let body = open.repeat(100_000);
        let e = refused(body.as_bytes());
        assert!(e.message.contains("recursion limit"), "{e:?}");
    }
    // 100 levels, well inside the limit, parse.
    let body = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    json(body.as_bytes()).unwrap();
}

#[test]
fn bytes_that_are_not_one_json_value_are_refused() {
    for body in [
        &b"{\"model\":\"\xff\xfe\"}"[..],
        br#"{"temperature":1e309}"#,
        br#"{"temperature":NaN}"#,
        br#"{"model":"a"} {"model":"b"}"#,
        br#"{"model":"a""#,
        b"",
    ] {
        let e = refused(body);
        assert!(e.param.is_some(), "{e:?}");
    }
    // Trailing whitespace is fine.
    json(b"{\"a\":1}\n\r\n ").unwrap();
}

#[test]
fn a_value_of_the_wrong_type_or_range_is_named_by_its_path() {
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Body {
        max_tokens: Option<u32>,
        messages: Vec<Message>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Message {
        content: String,
    }
    for (body, field) in [
        (
            json!({"max_tokens": 18446744073709551616_f64, "messages": []}),
            "max_tokens",
        ),
        (json!({"max_tokens": -1, "messages": []}), "max_tokens"),
        (
            json!({"max_tokens": 4294967296_u64, "messages": []}),
            "max_tokens",
        ),
        (
            json!({"messages": [{"content": "a"}, {"content": 7}]}),
            "messages[1].content",
        ),
        (json!({"messages": "x"}), "messages"),
    ] {
        let e = parse::<Body>("body", body.clone()).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(field), "{body}: {e:?}");
    }
    let e = parse::<Message>("messages[3]", json!({"content": 1})).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("messages[3].content"));
    let e = parse::<Vec<Message>>("tools", json!([{"content": "a"}, {}])).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("tools[1]"));
}

#[test]
fn a_syntax_error_is_named_by_the_deepest_place_the_parser_reached() {
    for (body, field) in [
        ("{not json", "body"),
        ("", "body"),
        (
            r#"{"messages":[{"role":"user","content":}]}"#,
            "messages[0].content",
        ),
        (r#"{"messages":[{"role" "user"}]}"#, "messages[0]"),
    ] {
        let e = refused(body.as_bytes());
        assert_eq!(e.param.as_deref(), Some(field), "{body}: {e:?}");
        assert!(!e.message.contains('?'), "{e:?}");
    }
}
