#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

const KEY_FILE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fake-provider/fixtures/vertex/service_account.json"
));

/// `openssl dgst -sha256 -sign` of `eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ0ZXN0In0` with the test key, base64url:
/// an independent implementation's signature for the same key and message.
const OPENSSL_SIGNATURE: &str = "BgBsP0jCXaRtGiTfvB4sqDddLsQBV4x12MsZK8l0QqVrdL2-0cpR1mKqcliWIUKYm62j04uEvnoFuPYTHYtrfdVsh3nu7qzpAd1gTtDPp3-KaN-MfscVamgHujmLcMPvYxtegMsCv7EobRdPmQsqMOwg07Jf6gG0QkVUF5Y3Sn3Hn11QYmp4qRoRW9wNXxrYYca6N1INGRLdqUE4nBIbSiaL0igeJSY4JlJxFJsCeq2cvU2mByiKzv2J1SKZ3HNUaolnTYjm7Nbdl6v7Al38q1eleeZ4GuDmR7QXTIcY03KXMz-_ZbIjB8cJGs5-o7T6z_9tlLLDTTqSQxrb09xc7g";

#[test]
fn signing_matches_openssl_for_the_same_key_and_message() {
    let sa = ServiceAccount::parse(KEY_FILE).unwrap();
    let sig = sign_rs256(&sa.key, b"eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ0ZXN0In0").unwrap();
    assert_eq!(URL_SAFE_NO_PAD.encode(sig), OPENSSL_SIGNATURE);
}

#[test]
fn the_assertion_carries_the_claims_google_checks() {
    let sa = ServiceAccount::parse(KEY_FILE).unwrap();
    let jwt = sa
        .assertion(1_700_000_000, "http://127.0.0.1:9/token")
        .unwrap();
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3);
    let json = |s: &str| -> serde_json::Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap()
    };
    assert_eq!(
        json(parts[0]),
        serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": "3f9c2a7d61b04e58a1c9d7e2f4b6a8c0d1e3f5a7"})
    );
    assert_eq!(
        json(parts[1]),
        serde_json::json!({
            "iss": "gateway@acme-llm-test.iam.gserviceaccount.com",
            "scope": CLOUD_PLATFORM_SCOPE,
            "aud": "http://127.0.0.1:9/token",
            "iat": 1_700_000_000u64,
            "exp": 1_700_003_600u64,
        })
    );
    assert_eq!(sa.token_uri, "https://oauth2.googleapis.com/token");
    assert!(grant_body(&jwt).ends_with(&jwt));
}

#[test]
fn bad_key_files_name_the_field_and_never_quote_the_key() {
    let cases = [
        ("{", "not a service-account key file"),
        (r#"{"type": "authorized_user"}"#, "`type`"),
        (r#"{"type": "service_account"}"#, "`client_email`"),
        (
            r#"{"type": "service_account", "client_email": "a@b"}"#,
            "`private_key` is missing",
        ),
        (
            r#"{"type": "service_account", "client_email": "a@b", "private_key": "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"}"#,
            "not an RSA key",
        ),
    ];
    for (json, want) in cases {
        let err = ServiceAccount::parse(json).unwrap_err();
        assert!(err.contains(want), "{err} / {want}");
        assert!(!err.contains("c2VjcmV0"), "{err}");
    }
    let sa = ServiceAccount::parse(KEY_FILE).unwrap();
    let shown = format!("{sa:?}");
    assert!(!shown.contains("PRIVATE"), "{shown}");
}
