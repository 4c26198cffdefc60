//! Errors → `tonic::Status`: every status the gateway returns carries `google.rpc.ErrorInfo` (domain
//! [`ERROR_DOMAIN`]) and, for a caller's mistake, a `BadRequest` violation naming the field. Messages and echoed
//! values are bounded so a client can always read its own error.

use std::time::Duration;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::error::{ErrorKind, ProviderError, truncate};
use crate::hooks::HookError;
use crate::limits::echo;
use crate::start_error::StartError;

/// `google.rpc.ErrorInfo.domain` of every error this service returns.
pub const ERROR_DOMAIN: &str = "llm-gateway";

/// An `INVALID_ARGUMENT` status with a `BadRequest` field violation naming `field`.
///
/// Both are cut to [`crate::limits::MAX_ECHO_BYTES`]: a field path can hold a caller's header name, and an error
/// must stay well inside the metadata size gRPC clients read.
pub fn invalid(field: &str, message: &str) -> Status {
    service_kit::status::invalid(ERROR_DOMAIN, &echo(field), &echo(message))
}

/// Maps a start error to its status: `NOT_FOUND` for unknown models, `INVALID_ARGUMENT` naming the field otherwise.
pub fn start_error_status(e: &StartError) -> Status {
    match e {
        StartError::UnknownModel { model, .. } => {
            let model = echo(model);
            let model = model.as_ref();
            let mut details = ErrorDetails::new();
            details.set_error_info(
                "MODEL_NOT_FOUND",
                ERROR_DOMAIN,
                [("model".to_string(), model.to_string())],
            );
            details.set_resource_info("model", model, "", "not in the gateway's catalog");
            Status::with_error_details(Code::NotFound, bounded(&e.to_string()), details)
        }
        StartError::AmbiguousModel { .. } => invalid("generation.model", &e.to_string()),
        StartError::Invalid(b) => invalid(&b.field, &b.message),
        StartError::WrongKind { field, .. } => invalid(field, &e.to_string()),
        StartError::Hook(h) => hook_error_status(h),
        StartError::TooManyGenerations { limit } => {
            let mut details = ErrorDetails::new();
            details.set_error_info(
                "TOO_MANY_GENERATIONS",
                ERROR_DOMAIN,
                [("limit".to_string(), limit.to_string())],
            );
            // Slots free up as streams end; a short delay spreads the callers' retries.
            details.set_retry_info(Some(Duration::from_secs(1)));
            Status::with_error_details(
                Code::ResourceExhausted,
                "too many concurrent generations",
                details,
            )
        }
    }
}

/// A `fail_closed` hook failure: `UNAVAILABLE` when the hook did not answer in time or was unreachable (retrying
/// later may work), `FAILED_PRECONDITION` when it refused the generation or answered something invalid (the same
/// request will fail the same way until the hook or the configuration changes).
pub fn hook_error_status(e: &HookError) -> Status {
    let (code, reason) = if e.is_transient() {
        (Code::Unavailable, "HOOK_UNAVAILABLE")
    } else {
        (Code::FailedPrecondition, "HOOK_FAILED")
    };
    service_kit::status::with_info(
        code,
        bounded(&e.to_string()),
        ERROR_DOMAIN,
        reason,
        &[("hook", e.hook())],
    )
}

/// The gRPC status a generation error becomes when the caller asked for one reply (`Generate`).
pub fn provider_error_status(e: &ProviderError) -> Status {
    let code = match e.kind {
        ErrorKind::RateLimited => Code::ResourceExhausted,
        ErrorKind::Overloaded | ErrorKind::Network => Code::Unavailable,
        ErrorKind::ContextOverflow | ErrorKind::InvalidRequest => Code::InvalidArgument,
        ErrorKind::Auth | ErrorKind::ContentFilter => Code::FailedPrecondition,
        ErrorKind::Timeout => Code::DeadlineExceeded,
        ErrorKind::Cancelled => Code::Cancelled,
        ErrorKind::ProviderError if e.retryable => Code::Unavailable,
        ErrorKind::ProviderError => Code::Internal,
    };
    let mut details = ErrorDetails::new();
    let mut meta = vec![("kind".to_string(), e.kind.as_str().to_string())];
    if let Some(s) = e.http_status {
        meta.push(("http_status".to_string(), s.to_string()));
    }
    meta.push(("retryable".to_string(), e.retryable.to_string()));
    details.set_error_info(
        e.kind.as_str().to_ascii_uppercase(),
        ERROR_DOMAIN,
        meta.into_iter()
            .collect::<std::collections::HashMap<_, _>>(),
    );
    if let Some(d) = e.retry_after {
        details.set_retry_info(Some(d));
    }
    Status::with_error_details(code, bounded(&e.message), details)
}

/// Longest status message returned, in bytes: `grpc-message` is percent-encoded (up to three bytes per byte) and
/// rides in the same trailers as the details, which clients read up to 8–16 KiB.
pub const MAX_STATUS_MESSAGE_BYTES: usize = 2048;

/// `message` cut to [`MAX_STATUS_MESSAGE_BYTES`] at a character boundary.
pub fn bounded(message: &str) -> String {
    if message.len() <= MAX_STATUS_MESSAGE_BYTES {
        return message.to_string();
    }
    let kept = truncate(message, MAX_STATUS_MESSAGE_BYTES);
    format!("{kept}… (cut, {} bytes)", message.len())
}
