use super::*;
use crate::protocol::Protocol;

fn provider(kind: ErrorKind) -> ProviderError {
    ProviderError::new(kind, "upstream said no")
}

#[test]
fn a_rate_limit_is_429_with_retry_after_in_both_dialects() {
    let mut e = provider(ErrorKind::RateLimited);
    e.retry_after = Some(Duration::from_millis(1500));
    let api = ApiError::from_provider(&e, None);
    assert_eq!(api.status(Dialect::OpenAi), 429);
    assert_eq!(api.status(Dialect::Anthropic), 429);
    assert_eq!(api.retry_after_header().as_deref(), Some("2"));
    assert_eq!(
        api.body(Dialect::OpenAi),
        json!({"error": {"message": "upstream said no", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"}})
    );
    assert_eq!(
        api.body(Dialect::Anthropic),
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "upstream said no"}})
    );
}

#[test]
fn overloaded_is_529_for_anthropic_and_503_for_openai() {
    let api = ApiError::from_provider(&provider(ErrorKind::Overloaded), None);
    assert_eq!(api.status(Dialect::Anthropic).as_u16(), 529);
    assert_eq!(api.status(Dialect::OpenAi), 503);
    assert_eq!(
        api.body(Dialect::Anthropic)["error"]["type"],
        "overloaded_error"
    );
}

#[test]
fn provider_failures_the_caller_cannot_fix_are_5xx() {
    for (kind, status) in [
        (ErrorKind::Auth, 502),
        (ErrorKind::Timeout, 504),
        (ErrorKind::Network, 503),
        (ErrorKind::InvalidRequest, 400),
        (ErrorKind::ContextOverflow, 400),
    ] {
        let api = ApiError::from_provider(&provider(kind), None);
        assert_eq!(api.status(Dialect::OpenAi), status, "{kind:?}");
    }
}

#[test]
fn a_validation_status_keeps_its_field_as_param() {
    let status = crate::status::invalid("generation.messages[0].role", "required");
    let api = ApiError::from_status(&status);
    assert_eq!(api.status(Dialect::OpenAi), 400);
    assert_eq!(api.param.as_deref(), Some("generation.messages[0].role"));
    assert_eq!(
        api.body(Dialect::OpenAi)["error"]["param"],
        "generation.messages[0].role"
    );
}

#[test]
fn an_unknown_model_is_404_naming_the_model() {
    let e = StartError::UnknownModel {
        unconfigured: None,
        model: "openai/nope".into(),
        close: vec![],
        served: (vec!["openai/gpt-4o".into()], 1),
    };
    let api = ApiError::from_start(&e);
    assert_eq!(api.status(Dialect::OpenAi), 404);
    assert_eq!(
        api.body(Dialect::Anthropic)["error"]["type"],
        "not_found_error"
    );
    assert!(api.message.contains("openai/nope"), "{}", api.message);
}

#[test]
fn the_in_flight_limit_is_a_429_with_a_retry_after() {
    let api = ApiError::from_start(&StartError::TooManyGenerations { limit: 4 });
    assert_eq!(api.status(Dialect::Anthropic), 429);
    assert_eq!(api.retry_after_header().as_deref(), Some("1"));
}

/// A provider error as classification makes it from an HTTP response.
fn answered(status: u16, headers: &[(&str, &str)], body: &str) -> ProviderError {
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_str(value).unwrap(),
        );
    }
    crate::adapter::transport::classify::classify(Some(status), Some(&map), body)
}

const OPENAI_OVERFLOW: &str = r#"{
  "error": {
    "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
    "type": "invalid_request_error",
    "param": "messages",
    "code": "context_length_exceeded"
  }
}"#;

const ANTHROPIC_OVERLOADED: &str = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}"#;

#[test]
fn the_door_of_the_providers_protocol_relays_its_error_object_as_it_is() {
    let e = answered(400, &[("x-request-id", "req_1")], OPENAI_OVERFLOW);
    for protocol in [
        Protocol::OpenaiChat,
        Protocol::AzureChat,
        Protocol::OpenaiResponses,
    ] {
        let api = ApiError::from_provider(&e, Some(protocol));
        assert_eq!(api.status(Dialect::OpenAi), 400);
        let sent: Value = serde_json::from_str(OPENAI_OVERFLOW).unwrap();
        assert_eq!(api.body(Dialect::OpenAi), sent, "{protocol:?}");
    }
    let e = answered(529, &[("x-should-retry", "true")], ANTHROPIC_OVERLOADED);
    let api = ApiError::from_provider(&e, Some(Protocol::VertexAnthropic));
    assert_eq!(api.status(Dialect::Anthropic).as_u16(), 529);
    let sent: Value = serde_json::from_str(ANTHROPIC_OVERLOADED).unwrap();
    assert_eq!(api.body(Dialect::Anthropic), sent);
}

#[test]
fn another_protocols_error_is_mapped_keeping_its_status_and_what_clients_act_on() {
    // An OpenAI overflow through the Anthropic door: Anthropic's words for it.
    let e = answered(400, &[], OPENAI_OVERFLOW);
    let api = ApiError::from_provider(&e, Some(Protocol::OpenaiChat));
    assert_eq!(api.status(Dialect::Anthropic), 400);
    let body = api.body(Dialect::Anthropic);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("prompt is too long: This model's"),
        "{body}"
    );
    // An Anthropic overflow through the OpenAI door: OpenAI's code for it.
    let e = answered(
        400,
        &[],
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208656 tokens > 200000 maximum"}}"#,
    );
    let api = ApiError::from_provider(&e, Some(Protocol::Anthropic));
    assert_eq!(
        api.body(Dialect::OpenAi),
        json!({"error": {
            "message": "prompt is too long: 208656 tokens > 200000 maximum",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }})
    );
    // Statuses are the provider's: a 500 stays a 500, a 529 a 529.
    let e = answered(
        500,
        &[],
        r#"{"error":{"code":500,"message":"Internal error","status":"INTERNAL"}}"#,
    );
    let api = ApiError::from_provider(&e, Some(Protocol::Gemini));
    assert_eq!(api.status(Dialect::OpenAi), 500);
    assert_eq!(api.status(Dialect::Anthropic), 500);
    assert_eq!(api.body(Dialect::Anthropic)["error"]["type"], "api_error");
    let e = answered(529, &[], ANTHROPIC_OVERLOADED);
    let api = ApiError::from_provider(&e, Some(Protocol::Anthropic));
    assert_eq!(api.status(Dialect::OpenAi).as_u16(), 529);
    assert_eq!(api.body(Dialect::OpenAi)["error"]["type"], "server_error");
}

#[test]
fn a_refused_provider_key_is_a_502_not_the_callers_401() {
    for status in [401, 403] {
        let e = answered(
            status,
            &[],
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        );
        let api = ApiError::from_provider(&e, Some(Protocol::Anthropic));
        assert_eq!(api.status(Dialect::Anthropic), 502);
        assert_eq!(api.status(Dialect::OpenAi), 502);
    }
}

#[test]
fn the_providers_retry_and_rate_limit_headers_are_relayed_as_sent() {
    let sent = [
        ("retry-after", "7"),
        ("retry-after-ms", "6500"),
        ("x-ratelimit-limit-requests", "500"),
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "6.5s"),
        ("x-request-id", "req_abc"),
        ("x-should-retry", "true"),
        ("set-cookie", "a=b"),
    ];
    let e = answered(
        429,
        &sent,
        r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
    );
    let api = ApiError::from_provider(&e, Some(Protocol::OpenaiChat));
    assert_eq!(api.status(Dialect::OpenAi), 429);
    let relayed = api.headers();
    let expected: Vec<(String, String)> = sent[..6]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    assert_eq!(relayed, expected);
    // Without a provider `retry-after`, the gateway's own delay is sent.
    let mut e = ProviderError::new(ErrorKind::RateLimited, "slow down");
    e.retry_after = Some(Duration::from_millis(2500));
    let api = ApiError::from_provider(&e, None);
    assert_eq!(
        api.headers(),
        [("retry-after".to_string(), "3".to_string())]
    );
}
