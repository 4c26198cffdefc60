use super::*;
use proptest::prelude::*;

const KEY: &str = "sk-E2e-Secret-Key-000";

#[test]
fn plain_and_nested_secrets() {
    let text = "key sk-abc123 and Bearer sk-abc123, also goog-xyz twice goog-xyz";
    assert_eq!(
        redact(text, &["", "sk-abc123", "goog-xyz"]),
        "key [REDACTED] and Bearer [REDACTED], also [REDACTED] twice [REDACTED]"
    );
    assert_eq!(redact("x-sk-abc-y", &["sk", "x-sk-abc-y"]), "[REDACTED]");
    assert_eq!(redact("nothing here", &[]), "nothing here");
}

#[test]
fn lowercased_and_uppercased_keys() {
    let text = format!("bad key {} or {}", KEY.to_lowercase(), KEY.to_uppercase());
    assert_eq!(redact(&text, &[KEY]), "bad key [REDACTED] or [REDACTED]");
}

#[test]
fn percent_encoded_keys_in_any_mix() {
    let all = KEY.replace('-', "%2D");
    let lower = KEY.replace('-', "%2d").to_lowercase();
    let every: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    let text = format!("url ?key={all}&b={lower}&c={every} end");
    assert_eq!(
        redact(&text, &[KEY]),
        "url ?key=[REDACTED]&b=[REDACTED]&c=[REDACTED] end"
    );
}

#[test]
fn basic_auth_credentials_whatever_the_user() {
    for user in ["", "u", "ab", "apikey", "someone@example.com"] {
        let credential = base64(format!("{user}:{KEY}").as_bytes());
        let text = format!("authorization: Basic {credential}== was refused");
        assert_eq!(
            redact(&text, &[KEY]),
            "authorization: Basic [REDACTED] was refused",
            "user {user:?}"
        );
    }
    assert_eq!(base64(b"Man"), "TWFu");
    assert_eq!(base64(b"Ma"), "TWE");
}

#[test]
fn multibyte_text_around_an_escape_stays_valid() {
    let text = "é%C3%A9 sk-abc ü";
    assert_eq!(redact(text, &["sk-abc"]), "é%C3%A9 [REDACTED] ü");
}

proptest! {
    #[test]
    fn the_key_never_survives_in_any_form(prefix in "\\PC{0,20}", suffix in "\\PC{0,20}", form in 0usize..4) {
        let key = "sk-live-AbC123-xyz";
        let shown = match form {
            0 => key.to_string(),
            1 => key.to_lowercase(),
            2 => key.replace('-', "%2D"),
            _ => base64(format!("user:{key}").as_bytes()),
        };
        let out = redact(&format!("{prefix}{shown}{suffix}"), &[key]);
        prop_assert!(!out.to_lowercase().contains(&key.to_lowercase()));
        prop_assert!(out.contains(REDACTED));
    }
}
