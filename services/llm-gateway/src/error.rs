//! Provider-side failures as one typed value (docs/architecture.md "Unified events", "Errors"), and their classification from HTTP.

use std::time::Duration;

/// The closed set of error kinds callers can switch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    RateLimited,
    Overloaded,
    ContextOverflow,
    Auth,
    InvalidRequest,
    ContentFilter,
    Timeout,
    Network,
    Cancelled,
    ProviderError,
}

impl ErrorKind {
    /// Stable lower-case label for metrics, logs and `google.rpc.ErrorInfo.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::ContextOverflow => "context_overflow",
            ErrorKind::Auth => "auth",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::ContentFilter => "content_filter",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Network => "network",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::ProviderError => "provider_error",
        }
    }
}

/// A failed generation, as the caller sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// Human-readable message (never contains credentials).
    pub message: String,
    /// Whether the same request may succeed when retried.
    pub retryable: bool,
    /// The delay the provider asked for, when it gave one.
    pub retry_after: Option<Duration>,
    /// HTTP status, when the failure was an HTTP error response.
    pub http_status: Option<u16>,
    /// The provider's error body (redacted), for diagnosis.
    pub provider_body: String,
    /// The gateway stopped retrying because `retry_after` is longer than it waits (`retry.max_retry_after_ms`).
    pub retry_after_beyond_cap: bool,
    /// The provider's retry, rate-limit and request-id headers of the failed response
    /// ([`relayed_headers`](crate::adapter::transport::classify::relayed_headers)), relayed to callers as they were sent.
    pub headers: Vec<(String, String)>,
}

impl ProviderError {
    /// A new error with no HTTP status, retry hint or body.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let retryable = matches!(
            kind,
            ErrorKind::RateLimited
                | ErrorKind::Overloaded
                | ErrorKind::Timeout
                | ErrorKind::Network
        );
        ProviderError {
            kind,
            message: message.into(),
            retryable,
            retry_after: None,
            http_status: None,
            provider_body: String::new(),
            retry_after_beyond_cap: false,
            headers: Vec::new(),
        }
    }

    /// A malformed provider stream: never a panic, always this.
    pub fn malformed(message: impl Into<String>) -> Self {
        ProviderError::new(ErrorKind::ProviderError, message)
    }

    /// A stream that ended before `what` (the provider's last word: `message_stop`, a finish reason, …): the
    /// connection was cut, so it is a network error and retryable.
    pub fn cut_before(what: &str) -> Self {
        ProviderError::new(ErrorKind::Network, format!("stream ended before {what}"))
    }
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for ProviderError {}

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
