//! A provider's failure as the front door received it: its status, body, headers and wire protocol, and the rule
//! for when the body goes to the caller verbatim (docs/gateway.md "Errors over HTTP").
//!
//! When the front door speaks the protocol of the provider that failed (the OpenAI door and an OpenAI Chat or
//! Responses provider, the Anthropic door and an Anthropic provider), the provider's own error object is the answer:
//! `type`, `code`, `param` and `message` as the provider wrote them, which is what clients switch on
//! (`context_length_exceeded`, `insufficient_quota`, `overloaded_error`). Any other pairing gets the door's own
//! shape, mapped from the unified error kind.

use serde_json::Value;

use crate::error::ProviderError;
use crate::http::errors::Dialect;
use crate::protocol::Protocol;

/// What the provider said when it failed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Upstream {
    /// Its HTTP status, when the failure was an error response.
    pub status: Option<u16>,
    /// The wire protocol of the provider that failed, when known.
    pub protocol: Option<Protocol>,
    /// Its error body (redacted).
    pub body: String,
    /// Its retry, rate-limit and request-id headers.
    pub headers: Vec<(String, String)>,
}

impl Upstream {
    /// The provider side of `e`, which a provider speaking `protocol` returned.
    pub fn of(e: &ProviderError, protocol: Option<Protocol>) -> Upstream {
        Upstream {
            status: e.http_status,
            protocol: protocol.map(Protocol::wire),
            body: e.provider_body.clone(),
            headers: e.headers.clone(),
        }
    }

    /// The status the door answers with: the provider's own error status, except an authentication refusal (401,
    /// 403, 407: the provider refused the gateway's credentials, which the caller can neither see nor fix).
    pub fn status(&self) -> Option<u16> {
        self.status
            .filter(|s| (400..=599).contains(s) && !matches!(s, 401 | 403 | 407))
    }

    /// The body to send as it is, when `dialect` speaks the provider's protocol and the body is that protocol's
    /// error shape: OpenAI `{"error": {"message": …, …}}` (Responses' error event and `response.failed` carry the
    /// same object), Anthropic `{"type": "error", "error": {"type": …, "message": …}}`.
    pub fn verbatim(&self, dialect: Dialect) -> Option<Value> {
        let protocol = self.protocol?;
        let body: Value = serde_json::from_str(&self.body).ok()?;
        match (dialect, protocol) {
            (Dialect::OpenAi, Protocol::OpenaiChat | Protocol::OpenaiResponses) => {
                let error = body
                    .get("error")
                    .or_else(|| body.get("response").and_then(|r| r.get("error")))
                    .filter(|e| e.get("message").is_some_and(Value::is_string))?;
                Some(serde_json::json!({ "error": error }))
            }
            (Dialect::Anthropic, Protocol::Anthropic) => {
                let error = body.get("error")?;
                let typed = body.get("type").and_then(Value::as_str) == Some("error")
                    && error.get("type").is_some_and(Value::is_string)
                    && error.get("message").is_some_and(Value::is_string);
                typed.then_some(body)
            }
            _ => None,
        }
    }

    /// True when the provider sent a `retry-after` of its own, relayed as is.
    pub fn has_retry_after(&self) -> bool {
        self.headers.iter().any(|(n, _)| n == "retry-after")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "upstream_tests.rs"]
mod tests;
