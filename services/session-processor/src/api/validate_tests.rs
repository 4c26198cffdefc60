use super::*;
use tonic::Code;

fn field(s: &Status) -> String {
    tonic_types::StatusExt::get_error_details(s)
        .bad_request()
        .map(|b| b.field_violations[0].field.clone())
        .unwrap_or_default()
}

#[test]
fn ids_are_bounded_plain_and_brace_free() {
    assert!(id("x", "ses_0123456789abcdef01234567").is_ok());
    for bad in ["", "a{b}", "a}", "a b", "a:b", "é", &"a".repeat(MAX_ID + 1)] {
        let e = id("session_id", bad).unwrap_err();
        assert_eq!(
            (e.code(), field(&e)),
            (Code::InvalidArgument, "session_id".into()),
            "{bad}"
        );
    }
    assert!(foreign_id("call_id", "call_abc.123:x").is_ok());
    for bad in ["", "{x}", "a b", "a\nb", &"a".repeat(MAX_FOREIGN_ID + 1)] {
        assert!(foreign_id("call_id", bad).is_err(), "{bad:?}");
    }
}

#[test]
fn page_tokens_are_what_pages_return() {
    assert_eq!(session_cursor("").unwrap(), None);
    assert!(session_cursor("1700000000000:ses_01").unwrap().is_some());
    for bad in ["garbage", "x:ses_1", "12:", "12:{a}", ":"] {
        assert_eq!(
            field(&session_cursor(bad).unwrap_err()),
            "page_token",
            "{bad}"
        );
    }
    assert_eq!(message_cursor("msg_1").unwrap(), Some(("msg_1", None)));
    assert_eq!(
        message_cursor("msg_1:prt_2").unwrap(),
        Some(("msg_1", Some("prt_2")))
    );
    for bad in ["(msg", "msg_1:", "a:b:c", "[x"] {
        assert_eq!(
            field(&message_cursor(bad).unwrap_err()),
            "page_token",
            "{bad}"
        );
    }
}

#[test]
fn metadata_limits() {
    let mut m = HashMap::new();
    m.insert("k".to_string(), "v".repeat(MAX_METADATA_VALUE));
    assert!(metadata(&m).is_ok());
    m.insert("k2".to_string(), "v".repeat(MAX_METADATA_VALUE + 1));
    assert_eq!(metadata(&m).unwrap_err().code(), Code::ResourceExhausted);
    let many: HashMap<String, String> = (0..=MAX_METADATA_ENTRIES)
        .map(|i| (i.to_string(), String::new()))
        .collect();
    assert_eq!(metadata(&many).unwrap_err().code(), Code::ResourceExhausted);
    let big: HashMap<String, String> = (0..8)
        .map(|i| (i.to_string(), "v".repeat(MAX_METADATA_VALUE)))
        .collect();
    assert_eq!(metadata(&big).unwrap_err().code(), Code::ResourceExhausted);
}

#[test]
fn client_tools_may_not_take_a_built_in_name() {
    let tool = |name: &str| pb::ClientTool {
        name: name.into(),
        description: String::new(),
        input_schema_json: "{}".into(),
    };
    assert!(client_tools(&[tool("lookup")], false).is_ok());
    for name in ["read", "bash", "write"] {
        let e = client_tools(&[tool(name)], false).unwrap_err();
        assert_eq!(field(&e), "client_tools[0].name");
    }
    let e = client_tools(&[tool("a"), tool("a")], false).unwrap_err();
    assert_eq!(field(&e), "client_tools[1].name");
}
