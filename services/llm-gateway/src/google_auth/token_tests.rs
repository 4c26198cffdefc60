#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

#[test]
fn a_token_is_refreshed_once_less_than_the_margin_is_left() {
    let now = Instant::now();
    let margin = Duration::from_secs(300);
    assert!(!needs_refresh(now + Duration::from_secs(301), now, margin));
    assert!(needs_refresh(now + Duration::from_secs(300), now, margin));
    assert!(needs_refresh(now, now + Duration::from_secs(5), margin));
}

#[test]
fn answers_become_a_token_or_a_typed_error_without_the_body() {
    let ok = parse(
        200,
        r#"{"access_token": "ya29.abc","expires_in": 3599,"token_type": "Bearer"}"#,
        "the token endpoint",
    )
    .unwrap();
    assert_eq!(
        (ok.access_token.as_str(), ok.expires_in),
        ("ya29.abc", 3599)
    );

    let refused = parse(
            400,
            r#"{"error": "invalid_grant","error_description": "Invalid JWT Signature.","assertion": "eyJ.secret"}"#,
            "the token endpoint",
        )
        .unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Auth);
    assert!(!refused.retryable);
    assert_eq!(
        refused.message,
        "Google access token: the token endpoint answered 400: invalid_grant Invalid JWT Signature."
    );
    assert!(refused.provider_body.is_empty());

    let down = parse(503, "<html>busy</html>", "the metadata server").unwrap_err();
    assert_eq!(down.kind, ErrorKind::Overloaded);
    assert!(down.retryable);
    assert!(!down.message.contains("html"));

    for body in [
        "{}",
        r#"{"access_token": "","expires_in": 1}"#,
        r#"{"access_token": "x","expires_in": 1,"token_type": "mac"}"#,
    ] {
        assert_eq!(
            parse(200, body, "s").unwrap_err().kind,
            ErrorKind::Auth,
            "{body}"
        );
    }
}
