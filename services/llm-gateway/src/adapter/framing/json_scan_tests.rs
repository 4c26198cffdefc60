use super::*;
use proptest::prelude::*;

/// True if the cursor accepts `text` as one JSON value followed by whitespace only.
fn skips(text: &str) -> bool {
    let mut c = Cursor::new(text);
    c.skip().is_some() && c.at_end()
}

#[test]
fn skips_valid_json() {
    for text in [
        r#"{"a":1,"b":[true,false,null],"c":{"d":"e\n\"\\\/\b\f\r\t\u00e9"}}"#,
        " [ ] ",
        "{}",
        "-0.5e+10",
        "0",
        "12E3",
        r#""😀 \ud83d\ude00""#,
        "[[[[1]]]]",
    ] {
        assert!(skips(text), "{text}");
    }
}

#[test]
fn rejects_what_serde_json_rejects() {
    for text in [
        r#"{"a":1,}"#,
        "[1,]",
        "01",
        "-",
        "1.",
        "1e",
        ".5",
        "tru",
        "nul",
        r#""\x""#,
        r#""\u12G4""#,
        "\"a\u{1}b\"",
        "\"unterminated",
        r#"{"a" 1}"#,
        r#"{a:1}"#,
        "[1 2]",
        "1 2",
        "",
    ] {
        assert!(!skips(text), "{text:?}");
        assert!(
            serde_json::from_str::<serde_json::Value>(text).is_err(),
            "{text:?}"
        );
    }
}

#[test]
fn nesting_is_bounded() {
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert!(!skips(&deep));
}

#[test]
fn strings_decode_like_serde() {
    let mut c = Cursor::new(r#""plain" "a\"b\u00e9\ud83d\ude00" "\ud800""#);
    let plain = c.string().unwrap();
    assert_eq!(plain.plain(), Some("plain"));
    assert!(matches!(plain.decode(), Some(Cow::Borrowed("plain"))));
    let escaped = c.string().unwrap();
    assert_eq!(escaped.plain(), None);
    assert_eq!(escaped.decode().unwrap(), "a\"bé😀");
    // A lone surrogate: the escape is well-formed, but serde refuses the string, so the fast path must too.
    let lone = c.string().unwrap();
    assert_eq!(lone.decode(), None);
}

#[test]
fn integers_are_plain_digits_only() {
    for (text, want) in [
        ("0", Some(Some(0))),
        ("null", Some(None)),
        ("42", Some(Some(42))),
        ("18446744073709551615", Some(Some(u64::MAX))),
        ("18446744073709551616", None),
        ("01", None),
        ("-1", None),
        ("1.0", None),
        ("1e2", None),
        ("\"1\"", None),
    ] {
        assert_eq!(Cursor::new(text).opt_u64(), want, "{text}");
    }
}

/// Arbitrary JSON values, serialised with arbitrary spacing.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| serde_json::json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::json!(f)),
        any::<String>().prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn skips_everything_serde_serialises(value in json_value(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            serde_json::to_string(&value).unwrap()
        };
        prop_assert!(skips(&text), "{}", text);
    }

    /// Whatever the cursor accepts, serde_json accepts too (the fast paths rely on it).
    #[test]
    fn accepts_nothing_serde_rejects(text in r#"[\[\]{}",:0-9a-z\\ .eE+-]{0,24}"#) {
        if skips(&text) {
            prop_assert!(serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok(), "{}", text);
        }
    }

    #[test]
    fn finds_the_same_string_end_as_a_byte_loop(body in "[a-z\"\\\\\u{1}é ]{0,40}") {
        let bytes = body.as_bytes();
        let want = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).unwrap_or(bytes.len());
        prop_assert_eq!(skip_plain(bytes, 0), want);
    }
}
