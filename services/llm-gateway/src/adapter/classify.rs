//! HTTP and mid-stream error classification (docs/providers.md §1, §3, §4 "Errors", §6.7).
//!
//! Every provider error, whether an HTTP error response or an error frame inside a 200 stream, becomes one
//! [`ProviderError`] with a kind from the closed set, a retry decision and the provider's retry hint. The caller
//! (retry loop, processor) never looks at provider-specific shapes.
//!
//! Precedence, most specific first: billing failures disguised as 429s → context overflow (explicit codes, 413, or a
//! known message, unless the error is clearly a rate limit) → content filter → HTTP status → error type/code/status
//! fields → a numeric `code` in the body (Gemini) → "unknown server error". `x-should-retry` then overrides the retry
//! decision, as the provider SDKs do.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::error::{ErrorKind, ProviderError};

/// Longest provider body kept in [`ProviderError::provider_body`]: enough to diagnose, small enough for logs.
pub const MAX_PROVIDER_BODY: usize = 8 * 1024;

/// Placeholder that [`redact`] puts where a secret was.
pub const REDACTED: &str = "[REDACTED]";

/// Classifies a provider error from its HTTP status (`None` for an error that arrived mid-stream), its response
/// headers (retry hints) and its body (any provider's JSON error shape, or plain text).
pub fn classify(
    status: Option<u16>,
    headers: Option<&http::HeaderMap>,
    body: &str,
) -> ProviderError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let fields = parsed.as_ref().map(Fields::from_body).unwrap_or_default();
    // A 2xx status carries no failure information: classify such a body like a mid-stream error.
    let http = status.filter(|s| !(200..300).contains(s));

    let (kind, mut retryable) = decide(http, &fields);

    if let Some(force) = headers.and_then(|h| header_str(h, "x-should-retry")) {
        if force.eq_ignore_ascii_case("true") {
            retryable = true;
        } else if force.eq_ignore_ascii_case("false") {
            retryable = false;
        }
    }

    let retry_after = headers
        .and_then(header_retry_after)
        .or(fields.retry_delay)
        .or_else(|| fields.message.and_then(message_retry_after));

    let message = match fields.message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => describe(status, parsed.is_some(), body),
    };

    ProviderError {
        kind,
        message,
        retryable,
        retry_after,
        http_status: status,
        provider_body: truncate(body, MAX_PROVIDER_BODY).to_string(),
        retry_after_beyond_cap: false,
    }
}

/// Replaces every occurrence of each non-empty secret in `text` with `[REDACTED]`.
///
/// Longer secrets are replaced first, so a secret that contains another (`Bearer sk-…` and `sk-…`) leaves no
/// fragment behind.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut secrets: Vec<&str> = secrets.iter().copied().filter(|s| !s.is_empty()).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_string();
    for secret in secrets {
        if out.contains(secret) {
            out = out.replace(secret, REDACTED);
        }
    }
    out
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The fields of an error body that classification looks at, whatever the provider's shape.
#[derive(Debug, Default)]
struct Fields<'a> {
    message: Option<&'a str>,
    /// OpenAI/Anthropic `type` (not the Anthropic envelope's `"error"`).
    kind: Option<&'a str>,
    /// OpenAI `code` when it is a string.
    code: Option<&'a str>,
    /// Gemini/vLLM `code` when it is a number (an HTTP status).
    code_num: Option<u16>,
    /// Gemini `status`, e.g. `RESOURCE_EXHAUSTED`.
    status: Option<&'a str>,
    /// Anthropic `error.details.error_code`; Azure `innererror.code`.
    detail_code: Option<&'a str>,
    /// Gemini `RetryInfo.retryDelay`.
    retry_delay: Option<Duration>,
}

impl<'a> Fields<'a> {
    fn from_body(root: &'a Value) -> Self {
        // Gemini without `alt=sse` wraps the error in a one-element array.
        let root = match root {
            Value::Array(items) => items.first().unwrap_or(root),
            _ => root,
        };
        let mut fields = Fields::default();
        // Responses `response.failed` carries the error under `response.error`.
        let error = root
            .get("error")
            .or_else(|| root.get("response").and_then(|r| r.get("error")));
        let obj = match error {
            Some(e @ Value::Object(_)) => e,
            // `{"error": "…"}` (Ollama and some compatible servers): the string is the message.
            Some(Value::String(m)) => {
                fields.message = Some(m);
                root
            }
            // Flat shapes: Responses `{type:"error",code,message}`, vLLM `{object:"error",message,type,code}`.
            _ => root,
        };
        fields.message = fields.message.or_else(|| str_field(obj, "message"));
        fields.kind = str_field(obj, "type").filter(|t| *t != "error");
        match obj.get("code") {
            Some(Value::String(c)) => fields.code = Some(c),
            Some(Value::Number(n)) => {
                fields.code_num = n.as_u64().and_then(|n| u16::try_from(n).ok())
            }
            _ => {}
        }
        fields.status = str_field(obj, "status");
        match obj.get("details") {
            Some(Value::Object(d)) => fields.detail_code = str_field_of(d, "error_code"),
            Some(Value::Array(details)) => {
                fields.retry_delay = details
                    .iter()
                    .filter(|d| {
                        str_field(d, "@type").is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
                    })
                    .find_map(|d| str_field(d, "retryDelay").and_then(parse_proto_duration));
            }
            _ => {}
        }
        if fields.detail_code.is_none() {
            fields.detail_code = obj.get("innererror").and_then(|i| str_field(i, "code"));
        }
        fields
    }

    /// The type, code and status labels, for matching against known names.
    fn labels(&self) -> impl Iterator<Item = &'a str> + '_ {
        [self.kind, self.code, self.status, self.detail_code]
            .into_iter()
            .flatten()
    }

    fn has_label(&self, names: &[&str]) -> bool {
        self.labels()
            .any(|l| names.iter().any(|n| l.eq_ignore_ascii_case(n)))
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn str_field_of<'a>(m: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

/// Billing failures that providers report as 429 or 402: retrying cannot help (§1, §6.7).
const BILLING: &[&str] = &[
    "insufficient_quota",
    "billing_error",
    "enforced_spend_limit_reached",
    "billing_hard_limit_reached",
];

const CONTEXT_CODES: &[&str] = &["context_length_exceeded", "request_too_large"];

/// Lower-case message fragments that mean "the prompt does not fit", across providers and compatible servers.
const CONTEXT_PHRASES: &[&str] = &[
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "maximum prompt length",
    "context window",
    "context limit",
    "context size",
    "input is too long",
    "too many tokens",
    "too many input tokens",
    "reduce the length of the messages",
    "exceeds the maximum number of tokens",
    "input token count",
    "prompt token count",
];

const CONTENT_FILTER: &[&str] = &[
    "content_filter",
    "content_policy_violation",
    "responsibleaipolicyviolation",
];

const OVERLOADED: &[&str] = &[
    "overloaded_error",
    "server_is_overloaded",
    "overloaded",
    "unavailable",
    "service_unavailable",
    "service_unavailable_error",
];

const RATE_LIMITED: &[&str] = &[
    "rate_limit_error",
    "rate_limit_exceeded",
    "resource_exhausted",
    "too_many_requests",
    // OpenAI 429 `type`: which limit was hit.
    "tokens",
    "requests",
];

const SERVER_ERROR: &[&str] = &[
    "api_error",
    "server_error",
    "internal",
    "internal_error",
    "internal_server_error",
];

const TIMEOUT: &[&str] = &["timeout_error", "deadline_exceeded", "timeout"];

const AUTH: &[&str] = &[
    "authentication_error",
    "permission_error",
    "invalid_api_key",
    "unauthenticated",
    "permission_denied",
];

const INVALID: &[&str] = &[
    "invalid_request_error",
    "not_found_error",
    "invalid_argument",
    "not_found",
    "failed_precondition",
    "model_not_found",
    "unsupported_parameter",
    "invalid_prompt",
];

/// The kind and retry decision, before `x-should-retry`.
fn decide(http: Option<u16>, f: &Fields<'_>) -> (ErrorKind, bool) {
    if f.has_label(BILLING) {
        return (ErrorKind::Auth, false);
    }
    let rate_limit = http == Some(429) || f.has_label(RATE_LIMITED);
    // "Too many tokens per minute" is a rate limit, not an overflow: only explicit codes override a rate limit.
    if f.has_label(CONTEXT_CODES)
        || http == Some(413)
        || (!rate_limit && f.message.is_some_and(is_context_message))
    {
        return (ErrorKind::ContextOverflow, false);
    }
    if f.has_label(CONTENT_FILTER) {
        return (ErrorKind::ContentFilter, false);
    }
    let by_label = kind_from_labels(f);
    if let Some(status) = http
        && let Some((kind, retryable)) = kind_from_status(status)
    {
        // A generic 5xx whose body says the provider is overloaded or rate limiting (Anthropic 500
        // `overloaded_error`) takes that kind: callers back off differently for those.
        if kind == ErrorKind::ProviderError
            && let Some(precise @ (ErrorKind::Overloaded | ErrorKind::RateLimited, _)) = by_label
        {
            return precise;
        }
        return (kind, retryable);
    }
    if let Some(found) = by_label {
        return found;
    }
    if let Some(found) = f.code_num.and_then(kind_from_status) {
        return found;
    }
    match http {
        Some(s) if (400..500).contains(&s) => (ErrorKind::InvalidRequest, false),
        Some(s) if (300..400).contains(&s) => (ErrorKind::ProviderError, false),
        // A 5xx, or a mid-stream error saying nothing more: treated as a transient server failure, like the SDKs
        // retry any 5xx and vercel treats an unlabelled stream error as a 500.
        _ => (ErrorKind::ProviderError, true),
    }
}

fn kind_from_status(status: u16) -> Option<(ErrorKind, bool)> {
    Some(match status {
        429 => (ErrorKind::RateLimited, true),
        401..=403 => (ErrorKind::Auth, false),
        400 | 404 | 422 => (ErrorKind::InvalidRequest, false),
        413 => (ErrorKind::ContextOverflow, false),
        408 => (ErrorKind::Timeout, true),
        409 => (ErrorKind::ProviderError, true),
        503 | 529 => (ErrorKind::Overloaded, true),
        500..=599 => (ErrorKind::ProviderError, true),
        _ => return None,
    })
}

fn kind_from_labels(f: &Fields<'_>) -> Option<(ErrorKind, bool)> {
    Some(if f.has_label(OVERLOADED) {
        (ErrorKind::Overloaded, true)
    } else if f.has_label(RATE_LIMITED) {
        (ErrorKind::RateLimited, true)
    } else if f.has_label(TIMEOUT) {
        (ErrorKind::Timeout, true)
    } else if f.has_label(SERVER_ERROR) {
        (ErrorKind::ProviderError, true)
    } else if f.has_label(AUTH) {
        (ErrorKind::Auth, false)
    } else if f.has_label(INVALID) {
        (ErrorKind::InvalidRequest, false)
    } else {
        return None;
    })
}

fn is_context_message(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    CONTEXT_PHRASES.iter().any(|p| lower.contains(p))
}

/// A message for an error body that has none: the status and, for a short plain-text body, the text itself.
fn describe(status: Option<u16>, is_json: bool, body: &str) -> String {
    let mut out = match status {
        Some(s) => match http::StatusCode::from_u16(s)
            .ok()
            .and_then(|c| c.canonical_reason())
        {
            Some(reason) => format!("HTTP {s} ({reason})"),
            None => format!("HTTP {s}"),
        },
        None => "provider reported an error mid-stream".to_string(),
    };
    let text = body.trim();
    // HTML error pages (proxies, load balancers) are noise in a message; they stay in `provider_body`.
    if !is_json && !text.is_empty() && !text.starts_with('<') {
        let first = text.lines().next().unwrap_or_default();
        out.push_str(": ");
        out.push_str(truncate(first, 200));
    }
    out
}

fn header_str<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// `retry-after-ms` first, then `retry-after` (seconds or HTTP-date), as the OpenAI SDK does.
fn header_retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    if let Some(ms) = header_str(headers, "retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && let Some(d) = secs(ms / 1000.0)
    {
        return Some(d);
    }
    let value = header_str(headers, "retry-after")?;
    if let Ok(s) = value.parse::<f64>() {
        return secs(s);
    }
    let at = parse_http_date(value)?;
    // A date already past means "now".
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// A non-negative, finite number of seconds; `None` for anything `Duration` cannot hold (it would panic).
fn secs(s: f64) -> Option<Duration> {
    if s.is_finite() && s >= 0.0 {
        Duration::try_from_secs_f64(s).ok()
    } else {
        None
    }
}

/// A protobuf JSON duration: `"34s"`, `"1.5s"`.
fn parse_proto_duration(text: &str) -> Option<Duration> {
    secs(text.trim().strip_suffix('s')?.parse().ok()?)
}

/// OpenAI's "… Please try again in 1.574s." / "in 20ms" / "in 6m0s".
fn message_retry_after(message: &str) -> Option<Duration> {
    const PHRASE: &str = "try again in ";
    let lower = message.to_ascii_lowercase();
    let start = lower.find(PHRASE)? + PHRASE.len();
    let token = lower[start..].split_whitespace().next()?;
    parse_go_duration(token.trim_end_matches(['.', ',', ';', ')']))
}

/// A Go-style duration such as `1.574s`, `20ms`, `6m0s`, `1h2m3.5s`.
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = 0.0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let (scale, unit_len) = if rest.starts_with("ms") {
            (1e-3, 2)
        } else if rest.starts_with("us") {
            (1e-6, 2)
        } else if rest.starts_with("µs") {
            (1e-6, "µs".len())
        } else if rest.starts_with("ns") {
            (1e-9, 2)
        } else if rest.starts_with('s') {
            (1.0, 1)
        } else if rest.starts_with('m') {
            (60.0, 1)
        } else if rest.starts_with('h') {
            (3600.0, 1)
        } else {
            return None;
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    secs(total)
}

/// Parses an RFC 7231 IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT` (the only format servers may send).
pub fn parse_http_date(text: &str) -> Option<SystemTime> {
    let mut parts = text.split_ascii_whitespace();
    let _weekday = parts.next()?.strip_suffix(',')?;
    let day: u32 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':');
    let hour: u64 = hms.next()?.parse().ok()?;
    let minute: u64 = hms.next()?.parse().ok()?;
    let second: u64 = hms.next()?.parse().ok()?;
    if parts.next()? != "GMT" || parts.next().is_some() || hms.next().is_some() {
        return None;
    }
    if !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
        || !(1970..=9999).contains(&year)
    {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
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

    #[test]
    fn redact_replaces_every_secret() {
        let text = "key sk-abc123 and Bearer sk-abc123, also goog-xyz twice goog-xyz";
        assert_eq!(
            redact(text, &["", "sk-abc123", "goog-xyz"]),
            "key [REDACTED] and Bearer [REDACTED], also [REDACTED] twice [REDACTED]"
        );
        // A secret containing another is removed whole, whatever the order given.
        assert_eq!(redact("x-sk-abc-y", &["sk", "x-sk-abc-y"]), "[REDACTED]");
        assert_eq!(redact("nothing here", &[]), "nothing here");
    }
}
