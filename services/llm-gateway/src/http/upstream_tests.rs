use super::*;
use crate::error::ErrorKind;

fn upstream(protocol: Protocol, body: &str) -> Upstream {
    let mut e = ProviderError::new(ErrorKind::InvalidRequest, "x");
    e.provider_body = body.to_string();
    Upstream::of(&e, Some(protocol))
}

#[test]
fn only_a_body_in_the_doors_own_error_shape_is_relayed() {
    let openai = r#"{"error":{"message":"m","type":"t","param":null,"code":"c"}}"#;
    assert!(
        upstream(Protocol::OpenaiChat, openai)
            .verbatim(Dialect::OpenAi)
            .is_some()
    );
    assert!(
        upstream(Protocol::OpenaiChat, openai)
            .verbatim(Dialect::Anthropic)
            .is_none()
    );
    // Gemini's error is `{"error": {...}}` too, but the door does not speak Gemini.
    let gemini = r#"{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED"}}"#;
    assert!(
        upstream(Protocol::Gemini, gemini)
            .verbatim(Dialect::OpenAi)
            .is_none()
    );
    // An OpenAI-protocol body that is not an error object: the door's own shape.
    for body in [
        "{}",
        "not json",
        r#"{"error":"flat string"}"#,
        r#"{"error":{"code":1}}"#,
    ] {
        assert!(
            upstream(Protocol::OpenaiChat, body)
                .verbatim(Dialect::OpenAi)
                .is_none(),
            "{body}"
        );
    }
    let anthropic = r#"{"type":"error","error":{"type":"rate_limit_error","message":"m"}}"#;
    assert!(
        upstream(Protocol::Anthropic, anthropic)
            .verbatim(Dialect::Anthropic)
            .is_some()
    );
    assert!(
        upstream(Protocol::Bedrock, anthropic)
            .verbatim(Dialect::Anthropic)
            .is_none()
    );
    let untyped = r#"{"type":"error","error":{"message":"m"}}"#;
    assert!(
        upstream(Protocol::Anthropic, untyped)
            .verbatim(Dialect::Anthropic)
            .is_none()
    );
}

#[test]
fn a_responses_error_event_or_failed_response_relays_its_error_object() {
    let event = r#"{"type":"error","sequence_number":3,"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"m","param":null}}"#;
    let relayed = upstream(Protocol::OpenaiResponses, event)
        .verbatim(Dialect::OpenAi)
        .unwrap();
    assert_eq!(relayed["error"]["code"], "insufficient_quota");
    let failed =
        r#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"m"}}}"#;
    let relayed = upstream(Protocol::OpenaiResponses, failed)
        .verbatim(Dialect::OpenAi)
        .unwrap();
    assert_eq!(
        relayed,
        serde_json::json!({"error": {"code": "server_error", "message": "m"}})
    );
}

#[test]
fn an_error_status_is_kept_except_a_refused_credential() {
    let mut e = ProviderError::new(ErrorKind::Overloaded, "x");
    for (sent, kept) in [
        (Some(529), Some(529)),
        (Some(500), Some(500)),
        (Some(413), Some(413)),
        (Some(401), None),
        (Some(403), None),
        (Some(200), None),
        (None, None),
    ] {
        e.http_status = sent;
        assert_eq!(Upstream::of(&e, None).status(), kept, "{sent:?}");
    }
}
