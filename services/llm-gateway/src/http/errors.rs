//! Errors of the HTTP front door: one [`ApiError`] built from whatever went wrong (a body that does not parse, a
//! validation status, a start error, a provider error), rendered in the caller's dialect: OpenAI's
//! `{"error": {"message", "type", "param", "code"}}` or Anthropic's `{"type": "error", "error": {"type", "message"}}`,
//! with the status code each API uses for that class of failure. A provider's failure keeps what the provider said
//! ([`Upstream`]): its status, its headers and, when the door speaks its protocol, its error object itself.

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};
use tonic::Code;
use tonic_types::StatusExt;

use crate::error::{ErrorKind, ProviderError};
use crate::http::upstream::Upstream;
use crate::protocol::Protocol;
use crate::start_error::StartError;

/// Which API's error shape and status codes a response uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI Chat Completions (and `GET /v1/models`).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// The classes of failure both APIs distinguish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The caller's request is wrong (400).
    InvalidRequest,
    /// No or a wrong token (401).
    Authentication,
    /// A policy (a hook) refused the request (403).
    Permission,
    /// Unknown model or path (404).
    NotFound,
    /// Method not allowed on this path (405).
    MethodNotAllowed,
    /// The request body did not arrive within `server.http_read_timeout_ms` (408).
    RequestTimeout,
    /// The request is larger than the gateway accepts (413).
    TooLarge,
    /// The body is not `application/json` (415).
    UnsupportedMediaType,
    /// Rate limited, by the provider or by the gateway's in-flight limit (429).
    RateLimited,
    /// The provider is overloaded (OpenAI 503, Anthropic 529).
    Overloaded,
    /// A dependency (hook service, provider) cannot be reached now (503).
    Unavailable,
    /// The provider did not answer in time (504).
    Timeout,
    /// The provider failed on its side, and may not the next time (500).
    ServerError,
    /// The provider failed in a way the caller cannot fix (502).
    Upstream,
    /// The gateway itself failed (500).
    Internal,
}

/// One error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// What kind of failure.
    pub class: Class,
    /// Human-readable message.
    pub message: String,
    /// The request field at fault, when there is one.
    pub param: Option<String>,
    /// The machine-readable code (OpenAI's `code`) when the failure has a more precise one than its class.
    pub code: Option<&'static str>,
    /// Sent as `retry-after` (whole seconds, rounded up) unless the provider sent its own.
    pub retry_after: Option<Duration>,
    /// What the provider said, for a provider's failure.
    pub upstream: Option<Box<Upstream>>,
}

impl ApiError {
    /// An error of `class` with `message`.
    pub fn new(class: Class, message: impl Into<String>) -> ApiError {
        ApiError {
            class,
            message: message.into(),
            param: None,
            code: None,
            retry_after: None,
            upstream: None,
        }
    }

    /// A caller mistake in `field`.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> ApiError {
        ApiError {
            param: Some(field.to_string()),
            ..ApiError::new(Class::InvalidRequest, format!("{field}: {message}"))
        }
    }

    /// This error naming its field as the request body names it (`origins`), when it names a field of the unified
    /// request: an error found after translation speaks of what the caller sent.
    pub fn located(mut self, origins: &crate::http::origins::Origins) -> ApiError {
        let Some(param) = self.param.clone().filter(|p| p.starts_with("generation.")) else {
            return self;
        };
        if let Some(ours) = origins.locate(&param) {
            if let Some(rest) = self.message.strip_prefix(param.as_str()) {
                self.message = format!("{ours}{rest}");
            }
            self.param = Some(ours);
        }
        self
    }

    /// From a validation status (`crate::validate`), keeping the field its `BadRequest` names.
    pub fn from_status(status: &tonic::Status) -> ApiError {
        let class = match status.code() {
            Code::InvalidArgument | Code::OutOfRange => Class::InvalidRequest,
            Code::NotFound => Class::NotFound,
            Code::ResourceExhausted => Class::TooLarge,
            Code::Unauthenticated => Class::Authentication,
            Code::PermissionDenied | Code::FailedPrecondition => Class::Permission,
            Code::Unavailable => Class::Unavailable,
            Code::DeadlineExceeded => Class::Timeout,
            _ => Class::Internal,
        };
        let param = status
            .get_details_bad_request()
            .and_then(|b| b.field_violations.into_iter().next())
            .map(|v| v.field);
        ApiError {
            param,
            ..ApiError::new(class, status.message())
        }
    }

    /// From a generation that could not start.
    pub fn from_start(e: &StartError) -> ApiError {
        match e {
            StartError::UnknownModel { .. } => ApiError {
                param: Some("model".into()),
                code: Some("model_not_found"),
                ..ApiError::new(Class::NotFound, e.to_string())
            },
            StartError::AmbiguousModel { .. } => ApiError {
                param: Some("model".into()),
                ..ApiError::new(Class::InvalidRequest, e.to_string())
            },
            StartError::Invalid(b) => ApiError {
                param: Some(b.field.clone()),
                ..ApiError::new(Class::InvalidRequest, e.to_string())
            },
            // Whichever door, the body names its model `model`.
            StartError::WrongKind { .. } => ApiError::invalid("model", e),
            StartError::Hook(h) if h.is_transient() => {
                ApiError::new(Class::Unavailable, e.to_string())
            }
            StartError::Hook(_) => ApiError::new(Class::Permission, e.to_string()),
            StartError::TooManyGenerations { .. } => ApiError {
                // Slots free up as streams end; a short delay spreads the callers' retries.
                retry_after: Some(Duration::from_secs(1)),
                ..ApiError::new(Class::RateLimited, e.to_string())
            },
        }
    }

    /// From a generation that failed (before any output when it becomes a status; in a stream otherwise), served
    /// by a provider speaking `protocol` when known.
    pub fn from_provider(e: &ProviderError, protocol: Option<Protocol>) -> ApiError {
        let class = match e.kind {
            ErrorKind::RateLimited => Class::RateLimited,
            ErrorKind::Overloaded => Class::Overloaded,
            ErrorKind::ContextOverflow | ErrorKind::InvalidRequest | ErrorKind::ContentFilter => {
                Class::InvalidRequest
            }
            ErrorKind::Timeout => Class::Timeout,
            ErrorKind::Network | ErrorKind::Cancelled => Class::Unavailable,
            ErrorKind::ProviderError if e.retryable => Class::ServerError,
            // The provider refused the gateway's own key: nothing the caller can fix.
            ErrorKind::Auth | ErrorKind::ProviderError => Class::Upstream,
        };
        let (code, param) = match e.kind {
            // What truncate-and-retry logic keys on, whichever provider overflowed.
            ErrorKind::ContextOverflow => {
                (Some("context_length_exceeded"), Some("messages".into()))
            }
            ErrorKind::ContentFilter => (Some("content_filter"), None),
            _ => (None, None),
        };
        ApiError {
            retry_after: e.retry_after,
            code,
            param,
            upstream: Some(Box::new(Upstream::of(e, protocol))),
            ..ApiError::new(class, e.message.clone())
        }
    }

    /// The HTTP status in `dialect`: the provider's own error status when there is one, else the class's.
    pub fn status(&self, dialect: Dialect) -> StatusCode {
        if let Some(status) = self
            .upstream
            .as_ref()
            .and_then(|u| u.status())
            .and_then(|s| StatusCode::from_u16(s).ok())
        {
            return status;
        }
        match self.class {
            Class::InvalidRequest => StatusCode::BAD_REQUEST,
            Class::Authentication => StatusCode::UNAUTHORIZED,
            Class::Permission => StatusCode::FORBIDDEN,
            Class::NotFound => StatusCode::NOT_FOUND,
            Class::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Class::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Class::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Class::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Class::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Class::Overloaded if dialect == Dialect::Anthropic => OVERLOADED,
            Class::Overloaded | Class::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Class::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Class::Upstream => StatusCode::BAD_GATEWAY,
            Class::ServerError | Class::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `retry-after` header value, in whole seconds rounded up.
    pub fn retry_after_header(&self) -> Option<String> {
        self.retry_after.map(|d| {
            let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
            secs.max(1).to_string()
        })
    }

    /// The response headers beyond the content type: the provider's retry, rate-limit and request-id headers as it
    /// sent them, and a `retry-after` of the gateway's own when the provider sent none.
    pub fn headers(&self) -> Vec<(String, String)> {
        let mut out = self
            .upstream
            .as_ref()
            .map(|u| u.headers.clone())
            .unwrap_or_default();
        if !self.upstream.as_ref().is_some_and(|u| u.has_retry_after())
            && let Some(v) = self.retry_after_header()
        {
            out.push(("retry-after".into(), v));
        }
        out
    }

    /// The error body in `dialect`: the provider's own when the door speaks its protocol, else the door's shape.
    pub fn body(&self, dialect: Dialect) -> Value {
        if let Some(body) = self.upstream.as_ref().and_then(|u| u.verbatim(dialect)) {
            return body;
        }
        match dialect {
            Dialect::OpenAi => json!({
                "error": {
                    "message": self.message,
                    "type": openai_type(self.class),
                    "param": self.param,
                    "code": self.code.or_else(|| openai_code(self.class)),
                }
            }),
            Dialect::Anthropic => {
                // Anthropic names a body too large for its front end by its status, whatever the cause.
                let status = self.upstream.as_ref().and_then(|u| u.status());
                let kind = if status == Some(413) {
                    "request_too_large"
                } else {
                    anthropic_type(self.class)
                };
                json!({
                    "type": "error",
                    "error": {"type": kind, "message": self.anthropic_message()},
                })
            }
        }
    }

    /// The message for an Anthropic client: an overflow says "prompt is too long", the words Anthropic's own
    /// overflow error starts with and clients look for, whichever provider overflowed.
    fn anthropic_message(&self) -> std::borrow::Cow<'_, str> {
        const OVERFLOW: &str = "prompt is too long";
        if self.code == Some("context_length_exceeded")
            && !self.message.to_ascii_lowercase().contains(OVERFLOW)
        {
            format!("{OVERFLOW}: {}", self.message).into()
        } else {
            self.message.as_str().into()
        }
    }
}

/// Anthropic's status for `overloaded_error`.
const OVERLOADED: StatusCode = match StatusCode::from_u16(529) {
    Ok(s) => s,
    Err(_) => StatusCode::SERVICE_UNAVAILABLE,
};

fn openai_type(class: Class) -> &'static str {
    match class {
        Class::InvalidRequest
        | Class::NotFound
        | Class::MethodNotAllowed
        | Class::RequestTimeout
        | Class::TooLarge
        | Class::UnsupportedMediaType => "invalid_request_error",
        Class::Authentication => "authentication_error",
        Class::Permission => "permission_error",
        Class::RateLimited => "rate_limit_error",
        Class::Overloaded
        | Class::Unavailable
        | Class::Timeout
        | Class::ServerError
        | Class::Upstream
        | Class::Internal => "server_error",
    }
}

fn openai_code(class: Class) -> Option<&'static str> {
    match class {
        Class::Authentication => Some("invalid_api_key"),
        Class::RateLimited => Some("rate_limit_exceeded"),
        Class::TooLarge => Some("request_too_large"),
        Class::RequestTimeout => Some("request_timeout"),
        Class::UnsupportedMediaType => Some("unsupported_media_type"),
        Class::Overloaded => Some("overloaded"),
        Class::Timeout => Some("timeout"),
        _ => None,
    }
}

fn anthropic_type(class: Class) -> &'static str {
    match class {
        Class::InvalidRequest
        | Class::MethodNotAllowed
        | Class::RequestTimeout
        | Class::UnsupportedMediaType => "invalid_request_error",
        Class::Authentication => "authentication_error",
        Class::Permission => "permission_error",
        Class::NotFound => "not_found_error",
        Class::TooLarge => "request_too_large",
        Class::RateLimited => "rate_limit_error",
        Class::Overloaded | Class::Unavailable => "overloaded_error",
        Class::Timeout => "timeout_error",
        Class::ServerError | Class::Upstream | Class::Internal => "api_error",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "errors_tests.rs"]
mod tests;
