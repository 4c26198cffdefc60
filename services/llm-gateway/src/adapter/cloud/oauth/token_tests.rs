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
        "Google access token",
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
            "Google access token",
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

    let down = parse(
        503,
        "<html>busy</html>",
        "Google access token",
        "the metadata server",
    )
    .unwrap_err();
    assert_eq!(down.kind, ErrorKind::Overloaded);
    assert!(down.retryable);
    assert!(!down.message.contains("html"));

    for body in [
        "{}",
        r#"{"access_token": "","expires_in": 1}"#,
        r#"{"access_token": "x","expires_in": 1,"token_type": "mac"}"#,
    ] {
        assert_eq!(
            parse(200, body, "Google access token", "s")
                .unwrap_err()
                .kind,
            ErrorKind::Auth,
            "{body}"
        );
    }
}

#[test]
fn entra_answers_are_read_in_both_forms_and_refusals_name_the_aadsts_code() {
    for body in [
        r#"{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"eyJ0.a.b"}"#,
        r#"{"token_type":"Bearer","expires_in":"3599","ext_expires_in":"3599","access_token":"eyJ0.a.b"}"#,
    ] {
        let ok = parse(200, body, "Entra ID access token", "the token endpoint").unwrap();
        assert_eq!(
            (ok.access_token.as_str(), ok.expires_in),
            ("eyJ0.a.b", 3599)
        );
    }
    let refused = parse(
        401,
        r#"{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided.","error_codes":[7000215]}"#,
        "Entra ID access token",
        "the token endpoint",
    )
    .unwrap_err();
    assert_eq!((refused.kind, refused.retryable), (ErrorKind::Auth, false));
    assert_eq!(
        refused.message,
        "Entra ID access token: the token endpoint answered 401: invalid_client AADSTS7000215: Invalid client secret provided."
    );
}
