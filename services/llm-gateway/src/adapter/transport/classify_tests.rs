use super::*;
use http::{HeaderMap, HeaderValue};

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

const OPENAI_CONTEXT: &str = r#"{
  "error": {
    "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9012 tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error",
    "param": "messages",
    "code": "context_length_exceeded"
  }
}"#;

const OPENAI_RATE: &str = r#"{
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 1600. Please try again in 1.574s. Visit https://platform.openai.com/account/rate-limits to learn more.",
        "type": "tokens",
        "param": null,
        "code": "rate_limit_exceeded"
    }
}"#;

const OPENAI_QUOTA: &str = r#"{
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota"
    }
}"#;

const OPENAI_SERVER: &str = r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#;

const ANTHROPIC_OVERLOADED: &str = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}"#;

const ANTHROPIC_TOO_LONG: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208656 tokens > 200000 maximum"},"request_id":"req_01"}"#;

const GEMINI_429: &str = r#"{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
          {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.Help",
        "links": [
          {
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": "34s"
      }
    ]
  }
}"#;

const GEMINI_UNAVAILABLE: &str = r#"{
  "error": {
    "code": 503,
    "message": "The model is overloaded. Please try again later.",
    "status": "UNAVAILABLE"
  }
}"#;

#[test]
fn openai_context_length_exceeded() {
    let e = classify(Some(400), None, OPENAI_CONTEXT);
    assert_eq!(e.kind, ErrorKind::ContextOverflow);
    assert!(!e.retryable);
    assert_eq!(e.http_status, Some(400));
    assert!(e.message.starts_with("This model's maximum context length"));
    assert_eq!(e.provider_body, OPENAI_CONTEXT);
}

#[test]
fn openai_rate_limit_with_message_hint() {
    let e = classify(Some(429), Some(&HeaderMap::new()), OPENAI_RATE);
    assert_eq!(e.kind, ErrorKind::RateLimited);
    assert!(e.retryable);
    assert_eq!(e.retry_after, Some(Duration::from_millis(1574)));
}

#[test]
fn openai_message_hint_in_milliseconds_and_go_durations() {
    assert_eq!(
        message_retry_after("Please try again in 20ms."),
        Some(Duration::from_millis(20))
    );
    assert_eq!(
        message_retry_after("please try again in 6m0s"),
        Some(Duration::from_secs(360))
    );
    assert_eq!(
        parse_go_duration("1h2m3.5s"),
        Some(Duration::from_millis(3_723_500))
    );
    assert_eq!(message_retry_after("try again in a bit"), None);
}

#[test]
fn openai_insufficient_quota_is_auth_not_retryable() {
    let e = classify(
        Some(429),
        Some(&headers(&[("retry-after", "20")])),
        OPENAI_QUOTA,
    );
    assert_eq!(e.kind, ErrorKind::Auth);
    assert!(!e.retryable);
}

#[test]
fn openai_server_error_http_and_mid_stream() {
    let e = classify(Some(500), None, OPENAI_SERVER);
    assert_eq!((e.kind, e.retryable), (ErrorKind::ProviderError, true));
    let e = classify(None, None, OPENAI_SERVER);
    assert_eq!((e.kind, e.retryable), (ErrorKind::ProviderError, true));
    assert_eq!(e.http_status, None);
    let e = classify(Some(503), None, OPENAI_SERVER);
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
}

#[test]
fn openai_responses_error_event_flat_and_nested() {
    let flat = r#"{"type":"error","code":"server_is_overloaded","message":"Our servers are currently overloaded.","param":null,"sequence_number":3}"#;
    let e = classify(None, None, flat);
    assert_eq!(e.kind, ErrorKind::Overloaded);
    assert_eq!(e.message, "Our servers are currently overloaded.");
    let nested = r#"{"type":"error","sequence_number":2,"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota.","param":null}}"#;
    let e = classify(None, None, nested);
    assert_eq!((e.kind, e.retryable), (ErrorKind::Auth, false));
    let failed = r#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}"#;
    let e = classify(None, None, failed);
    assert_eq!(
        (e.kind, e.retryable, e.message.as_str()),
        (ErrorKind::ProviderError, true, "boom")
    );
}

#[test]
fn anthropic_overloaded_http_and_mid_stream() {
    let h = headers(&[("x-should-retry", "true")]);
    let e = classify(Some(529), Some(&h), ANTHROPIC_OVERLOADED);
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    assert_eq!(e.message, "Overloaded");
    let e = classify(None, None, ANTHROPIC_OVERLOADED);
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    // A 500 whose body says overloaded is overloaded.
    let e = classify(Some(500), None, ANTHROPIC_OVERLOADED);
    assert_eq!(e.kind, ErrorKind::Overloaded);
}

#[test]
fn anthropic_prompt_too_long() {
    let e = classify(Some(400), None, ANTHROPIC_TOO_LONG);
    assert_eq!((e.kind, e.retryable), (ErrorKind::ContextOverflow, false));
}

#[test]
fn anthropic_status_table() {
    let cases = [
        (401, "authentication_error", ErrorKind::Auth, false),
        (402, "billing_error", ErrorKind::Auth, false),
        (403, "permission_error", ErrorKind::Auth, false),
        (404, "not_found_error", ErrorKind::InvalidRequest, false),
        (413, "request_too_large", ErrorKind::ContextOverflow, false),
        (429, "rate_limit_error", ErrorKind::RateLimited, true),
        (500, "api_error", ErrorKind::ProviderError, true),
        (504, "timeout_error", ErrorKind::ProviderError, true),
        (529, "overloaded_error", ErrorKind::Overloaded, true),
    ];
    for (status, kind, expect, retryable) in cases {
        let body = format!(
            r#"{{"type":"error","error":{{"type":"{kind}","message":"m"}},"request_id":"req_1"}}"#
        );
        let e = classify(Some(status), None, &body);
        assert_eq!(
            (e.kind, e.retryable),
            (expect, retryable),
            "{status} {kind}"
        );
    }
}

#[test]
fn anthropic_mid_stream_types() {
    for (kind, expect, retryable) in [
        ("overloaded_error", ErrorKind::Overloaded, true),
        ("rate_limit_error", ErrorKind::RateLimited, true),
        ("api_error", ErrorKind::ProviderError, true),
        ("timeout_error", ErrorKind::Timeout, true),
        ("invalid_request_error", ErrorKind::InvalidRequest, false),
        ("authentication_error", ErrorKind::Auth, false),
        ("something_new", ErrorKind::ProviderError, true),
    ] {
        let body = format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"m"}}}}"#);
        let e = classify(None, None, &body);
        assert_eq!((e.kind, e.retryable), (expect, retryable), "{kind}");
    }
}

#[test]
fn anthropic_spend_limit_429_not_retryable() {
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Spend limit reached","details":{"error_code":"enforced_spend_limit_reached"}}}"#;
    let e = classify(Some(429), Some(&headers(&[("retry-after", "30")])), body);
    assert_eq!((e.kind, e.retryable), (ErrorKind::Auth, false));
}

#[test]
fn gemini_429_retry_info_and_wrapped_array() {
    let e = classify(Some(429), Some(&HeaderMap::new()), GEMINI_429);
    assert_eq!((e.kind, e.retryable), (ErrorKind::RateLimited, true));
    assert_eq!(e.retry_after, Some(Duration::from_secs(34)));
    let wrapped = format!("[{GEMINI_429}]");
    let e = classify(Some(429), None, &wrapped);
    assert_eq!(e.kind, ErrorKind::RateLimited);
    assert_eq!(e.retry_after, Some(Duration::from_secs(34)));
    let fractional = GEMINI_429.replace("\"34s\"", "\"1.5s\"");
    assert_eq!(
        classify(Some(429), None, &fractional).retry_after,
        Some(Duration::from_millis(1500))
    );
}

#[test]
fn gemini_unavailable_http_and_bare_mid_stream() {
    let e = classify(Some(503), None, GEMINI_UNAVAILABLE);
    assert_eq!((e.kind, e.retryable), (ErrorKind::Overloaded, true));
    assert_eq!(
        e.message,
        "The model is overloaded. Please try again later."
    );
    let e = classify(None, None, GEMINI_UNAVAILABLE);
    assert_eq!(e.kind, ErrorKind::Overloaded);
    // Mid-stream Gemini 429 is a rate limit, by status name and by numeric code alike.
    let e = classify(None, None, GEMINI_429);
    assert_eq!(e.kind, ErrorKind::RateLimited);
    let e = classify(
        None,
        None,
        r#"{"error":{"code":500,"message":"Internal error encountered."}}"#,
    );
    assert_eq!((e.kind, e.retryable), (ErrorKind::ProviderError, true));
}

#[test]
fn gemini_token_count_overflow() {
    let body = r#"{
  "error": {
    "code": 400,
    "message": "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).",
    "status": "INVALID_ARGUMENT"
  }
}"#;
    assert_eq!(
        classify(Some(400), None, body).kind,
        ErrorKind::ContextOverflow
    );
    let schema = r#"{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"additionalProperties\"","status":"INVALID_ARGUMENT"}}"#;
    assert_eq!(
        classify(Some(400), None, schema).kind,
        ErrorKind::InvalidRequest
    );
}

#[test]
fn context_overflow_phrases_from_compatible_servers() {
    for message in [
        "This model's maximum context length is 65536 tokens.",
        "Prompt contains 40000 tokens, too large for model with 32768 maximum context length",
        "input length and `max_tokens` exceed context limit: 198000 + 21333 > 200000",
        "the request exceeds the available context size, try increasing it",
        "Input is too long for requested model.",
        "This request exceeds the context window of the model",
        "Too many tokens in the prompt",
    ] {
        let body = serde_json::json!({"error": {"message": message}}).to_string();
        assert_eq!(
            classify(Some(400), None, &body).kind,
            ErrorKind::ContextOverflow,
            "{message}"
        );
        assert_eq!(
            classify(Some(500), None, &body).kind,
            ErrorKind::ContextOverflow,
            "{message}"
        );
    }
    // A token-rate 429 is not an overflow even if the message talks about too many tokens.
    let body = r#"{"error":{"message":"Too many tokens per minute","type":"tokens","code":"rate_limit_exceeded"}}"#;
    assert_eq!(classify(Some(429), None, body).kind, ErrorKind::RateLimited);
    // 413 without a body.
    assert_eq!(
        classify(Some(413), None, "").kind,
        ErrorKind::ContextOverflow
    );
}

#[test]
fn anthropic_context_window_stop_reason_is_not_an_overflow_phrase() {
    assert!(!is_context_message("model_context_window_exceeded"));
}

#[test]
fn content_filter_shapes() {
    let azure = r#"{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}"#;
    let e = classify(Some(400), None, azure);
    assert_eq!((e.kind, e.retryable), (ErrorKind::ContentFilter, false));
    let images = r#"{"error":{"code":"content_policy_violation","message":"Your request was rejected as a result of our safety system.","param":null,"type":"invalid_request_error"}}"#;
    assert_eq!(
        classify(Some(400), None, images).kind,
        ErrorKind::ContentFilter
    );
}

#[test]
fn status_mapping_without_body() {
    let cases = [
        (400, ErrorKind::InvalidRequest, false),
        (401, ErrorKind::Auth, false),
        (402, ErrorKind::Auth, false),
        (403, ErrorKind::Auth, false),
        (404, ErrorKind::InvalidRequest, false),
        (408, ErrorKind::Timeout, true),
        (409, ErrorKind::ProviderError, true),
        (413, ErrorKind::ContextOverflow, false),
        (422, ErrorKind::InvalidRequest, false),
        (429, ErrorKind::RateLimited, true),
        (500, ErrorKind::ProviderError, true),
        (502, ErrorKind::ProviderError, true),
        (503, ErrorKind::Overloaded, true),
        (504, ErrorKind::ProviderError, true),
        (529, ErrorKind::Overloaded, true),
        (418, ErrorKind::InvalidRequest, false),
        (599, ErrorKind::ProviderError, true),
        (302, ErrorKind::ProviderError, false),
    ];
    for (status, kind, retryable) in cases {
        let e = classify(Some(status), None, "");
        assert_eq!((e.kind, e.retryable), (kind, retryable), "{status}");
        assert!(
            e.message.starts_with(&format!("HTTP {status}")),
            "{}",
            e.message
        );
    }
}

#[test]
fn plain_text_and_html_bodies() {
    let e = classify(
        Some(502),
        None,
        "upstream connect error or disconnect/reset before headers\n",
    );
    assert_eq!(
        e.message,
        "HTTP 502 (Bad Gateway): upstream connect error or disconnect/reset before headers"
    );
    let e = classify(Some(502), None, "<html><body>Bad gateway</body></html>");
    assert_eq!(e.message, "HTTP 502 (Bad Gateway)");
    assert_eq!(e.provider_body, "<html><body>Bad gateway</body></html>");
    let e = classify(None, None, "");
    assert_eq!(e.message, "provider reported an error mid-stream");
    let e = classify(Some(404), None, r#"{"error":"model 'llama9' not found"}"#);
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::InvalidRequest, "model 'llama9' not found")
    );
}

#[test]
fn retry_hint_precedence() {
    let h = headers(&[("retry-after-ms", "250"), ("retry-after", "3")]);
    assert_eq!(
        classify(Some(429), Some(&h), GEMINI_429).retry_after,
        Some(Duration::from_millis(250))
    );
    let h = headers(&[("retry-after", "2.5")]);
    assert_eq!(
        classify(Some(429), Some(&h), GEMINI_429).retry_after,
        Some(Duration::from_millis(2500))
    );
    let h = headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]);
    assert_eq!(
        classify(Some(429), Some(&h), "").retry_after,
        Some(Duration::ZERO)
    );
    let h = headers(&[("retry-after", "garbage"), ("retry-after-ms", "-5")]);
    assert_eq!(
        classify(Some(429), Some(&h), OPENAI_RATE).retry_after,
        Some(Duration::from_millis(1574))
    );
    assert_eq!(classify(Some(429), Some(&h), "").retry_after, None);
}

#[test]
fn retry_after_http_date_in_future() {
    let future = SystemTime::now() + Duration::from_secs(120);
    let secs_since = future
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Render the date by hand with the inverse of the parser's arithmetic.
    let days = secs_since / 86_400;
    let rem = secs_since % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let date = format!(
        "Mon, {d:02} {} {y} {:02}:{:02}:{:02} GMT",
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    let h = headers(&[("retry-after", &date)]);
    let d = classify(Some(503), Some(&h), "").retry_after.unwrap();
    assert!(
        d <= Duration::from_secs(120) && d >= Duration::from_secs(115),
        "{d:?}"
    );
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[test]
fn http_date_parsing() {
    let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
    assert_eq!(
        t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
        784_111_777
    );
    let t = parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT").unwrap();
    assert_eq!(
        t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
        1_709_164_800
    );
    assert!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT").is_none());
    assert!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC").is_none());
    assert!(parse_http_date("Sun, 06 Foo 1994 08:49:37 GMT").is_none());
    assert!(parse_http_date("").is_none());
}

#[test]
fn x_should_retry_overrides() {
    let h = headers(&[("x-should-retry", "false")]);
    assert!(!classify(Some(503), Some(&h), "").retryable);
    let h = headers(&[("x-should-retry", "true")]);
    assert!(classify(Some(400), Some(&h), "").retryable);
}

#[test]
fn provider_body_truncated_at_char_boundary() {
    let body = "é".repeat(MAX_PROVIDER_BODY); // 2 bytes each
    let e = classify(Some(500), None, &body);
    assert_eq!(e.provider_body.len(), MAX_PROVIDER_BODY);
    let odd = format!("a{body}");
    let e = classify(Some(500), None, &odd);
    assert_eq!(e.provider_body.len(), MAX_PROVIDER_BODY - 1);
    assert!(e.message.len() < 300);
}
