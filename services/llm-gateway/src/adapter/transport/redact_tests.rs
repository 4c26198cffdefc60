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

#[test]
fn json_escaped_keys_in_an_error_body() {
    let aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY+EXAMPLEKEY";
    let escaped = aws.replace('/', "\\/").replace('+', "\\u002B");
    let body = format!(
        r#"{{"message":"The secret {escaped} is wrong","key":"{}"}}"#,
        {
            let all: String = KEY.bytes().map(|b| format!("\\u{:04x}", b)).collect();
            all
        }
    );
    let out = redact(&body, &[aws, KEY]);
    assert_eq!(
        out,
        r#"{"message":"The secret [REDACTED] is wrong","key":"[REDACTED]"}"#
    );
    // Non-ASCII escapes and a lone backslash are text, not part of a match.
    assert_eq!(redact(r"\u00e9\ sk", &["sk"]), r"\u00e9\ [REDACTED]");
}

/// `secret` written the way `forms` says, one form per byte (cycled): as is, case-flipped, `%XX`, `%xx`,
/// `\uXXXX`, `\uxxxx`, or `\/` for a `/`.
fn disguised(secret: &str, forms: &[u8]) -> String {
    secret
        .bytes()
        .zip(forms.iter().cycle())
        .map(|(b, form)| match form % 7 {
            0 => char::from(b).to_string(),
            1 if b.is_ascii_lowercase() => char::from(b.to_ascii_uppercase()).to_string(),
            1 => char::from(b.to_ascii_lowercase()).to_string(),
            2 => format!("%{b:02X}"),
            3 => format!("%{b:02x}"),
            4 => format!("\\u{b:04X}"),
            5 => format!("\\u{b:04x}"),
            _ if b == b'/' => "\\/".to_string(),
            _ => char::from(b).to_string(),
        })
        .collect()
}

proptest! {
    /// The rule for every credential shape the clouds use (AWS secret keys with `/` and `+`, Azure hex keys, Entra
    /// secrets with `~` and `.`, JWT-like tokens): in any mix of the escapes a provider may apply, it is cut out.
    #[test]
    fn a_credential_never_survives_any_mix_of_escapes(
        secret in "[A-Za-z0-9+/=._~-]{16,48}",
        forms in proptest::collection::vec(any::<u8>(), 1..64),
        prefix in "\\PC{0,16}",
        suffix in "\\PC{0,16}",
    ) {
        let out = redact(&format!("{prefix}{}{suffix}", disguised(&secret, &forms)), &[&secret]);
        prop_assert!(out.contains(REDACTED), "{out}");
        let view = Normalised::of(out.as_bytes()).bytes;
        let needle = secret.to_ascii_lowercase();
        prop_assert!(!view.windows(needle.len()).any(|w| w == needle.as_bytes()), "{out}");
    }

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

/// A one-character (or any short) key never alters ordinary text: it is redacted only where it stands alone.
#[test]
fn a_short_key_is_redacted_only_as_a_whole_token() {
    assert_eq!(
        redact("a banana and a key: a", &["a"]),
        "[REDACTED] banana and [REDACTED] key: [REDACTED]"
    );
    assert_eq!(redact("banana", &["a"]), "banana");
    assert_eq!(
        redact("bad key test-key-1 in test-key-12", &["test-key-1"]),
        "bad key [REDACTED] in test-key-12"
    );
    // Long keys are still cut out wherever they are, even inside a word.
    let long = "sk-0123456789abcdef";
    assert_eq!(
        redact(&format!("x{long}y"), &[long]),
        "x[REDACTED]y".to_string()
    );
}
