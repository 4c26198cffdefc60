use super::*;

fn provider(kind: ErrorKind) -> ProviderError {
    ProviderError::new(kind, "upstream said no")
}

#[test]
fn a_rate_limit_is_429_with_retry_after_in_both_dialects() {
    let mut e = provider(ErrorKind::RateLimited);
    e.retry_after = Some(Duration::from_millis(1500));
    let api = ApiError::from_provider(&e);
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
    let api = ApiError::from_provider(&provider(ErrorKind::Overloaded));
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
        let api = ApiError::from_provider(&provider(kind));
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
        model: "openai/nope".into(),
        close: vec![],
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
