//! Error statuses with rich details (`google.rpc.ErrorInfo`, `google.rpc.BadRequest`), built the same way by both
//! services: every status carries an `ErrorInfo` with a stable reason in the service's domain, and a caller's
//! mistake a `BadRequest` violation naming the field.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// A status of `code` whose `ErrorInfo` says `reason` in `domain`, with `metadata`.
pub fn with_info(
    code: Code,
    message: impl Into<String>,
    domain: &str,
    reason: &str,
    metadata: &[(&str, &str)],
) -> Status {
    let mut details = ErrorDetails::new();
    details.set_error_info(
        reason,
        domain,
        metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::HashMap<_, _>>(),
    );
    Status::with_error_details(code, message.into(), details)
}

/// `INVALID_ARGUMENT`: a `BadRequest` violation naming `field`, and `ErrorInfo` reason `INVALID_ARGUMENT` in
/// `domain` with metadata `field`. The message is `<field>: <message>`.
pub fn invalid(domain: &str, field: &str, message: &str) -> Status {
    let mut details = ErrorDetails::new();
    details.add_bad_request_violation(field, message);
    details.set_error_info(
        "INVALID_ARGUMENT",
        domain,
        [("field".to_string(), field.to_string())],
    );
    Status::with_error_details(
        Code::InvalidArgument,
        format!("{field}: {message}"),
        details,
    )
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
