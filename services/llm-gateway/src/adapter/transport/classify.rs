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
        headers: headers
            .map(|h| relayed_headers(h, Relay::Failure))
            .unwrap_or_default(),
    }
}

/// Which of a provider's responses headers are relayed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relay {
    /// A response that served the generation: rate-limit state and request ids.
    Success,
    /// A failed response: those, and the retry hints (`retry-after`, `retry-after-ms`).
    Failure,
}

/// Most headers relayed from one response, and the longest value: bounds on what a provider can make the gateway
/// copy to its callers.
const MAX_RELAYED: usize = 32;
const MAX_RELAYED_VALUE: usize = 256;

/// The response headers callers act on, in the order received, lower-case names: the rate-limit state
/// (`x-ratelimit-*`, `anthropic-ratelimit-*`, which clients read to pace themselves), the request ids (`x-request-id`,
/// `request-id`, what a provider's support asks for) and, on a failure, the retry hints the SDKs honour
/// (`retry-after-ms`, `retry-after`). Values that are not visible ASCII or longer than 256 bytes are left out.
pub fn relayed_headers(headers: &http::HeaderMap, relay: Relay) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, value) in headers {
        let name = name.as_str();
        let wanted = name.starts_with("x-ratelimit-")
            || name.starts_with("anthropic-ratelimit-")
            || matches!(name, "x-request-id" | "request-id")
            || (relay == Relay::Failure && matches!(name, "retry-after" | "retry-after-ms"));
        let Ok(value) = value.to_str() else { continue };
        if wanted && value.len() <= MAX_RELAYED_VALUE {
            out.push((name.to_string(), value.to_string()));
            if out.len() == MAX_RELAYED {
                break;
            }
        }
    }
    out
}

pub use crate::adapter::transport::redact::redact;

pub use crate::error::truncate;

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
#[path = "classify_tests.rs"]
mod tests;
