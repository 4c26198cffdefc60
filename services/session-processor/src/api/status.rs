//! Every error status the sessions API returns, with rich details: a `google.rpc.BadRequest` field violation
//! naming the field for the caller's mistakes, and a `google.rpc.ErrorInfo` with a stable reason (and the
//! [`ERROR_DOMAIN`]) on every status built here.
//!
//! | code | `ErrorInfo.reason` | when |
//! |---|---|---|
//! | `INVALID_ARGUMENT` | `INVALID_ARGUMENT` (metadata `field`) | a malformed field, named in `BadRequest` |
//! | `RESOURCE_EXHAUSTED` | `TOO_LARGE` (metadata `field`, `limit`) | a field over its documented size limit |
//! | `RESOURCE_EXHAUSTED` | `QUEUE_FULL` (metadata `field`, `limit`) | the session has as many prompts queued as it may |
//! | `RESOURCE_EXHAUSTED` | `TOO_MANY_STREAMS` (metadata `limit`) | the tenant has as many streams open as it may |
//! | `RESOURCE_EXHAUSTED` | `TOO_MANY_SESSIONS` (metadata `limit`) | the tenant holds as many sessions as it may |
//! | `NOT_FOUND` | `SESSION_NOT_FOUND`, `MESSAGE_NOT_FOUND`, `TENANT_NOT_FOUND` | missing, or another tenant's |
//! | `NOT_FOUND` | `QUESTION_NOT_FOUND` (metadata `field`) | an answer to a tool call or permission never asked |
//! | `PERMISSION_DENIED` | `AGENT_NOT_ALLOWED` (metadata `agent`) | the caller's tenant may not select the agent |
//! | `UNAUTHENTICATED` | `UNAUTHENTICATED` | no or an unknown bearer token |
//! | `UNAVAILABLE` | `STORAGE_UNAVAILABLE` | Redis failed or did not answer (retry) |
//! | `INTERNAL` | `STORAGE_CORRUPT` | a stored value the processor cannot read |

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::store::StoreError;

/// `google.rpc.ErrorInfo.domain` of every error the sessions API returns.
pub const ERROR_DOMAIN: &str = "session-processor";

fn info(code: Code, message: String, reason: &str, meta: &[(&str, &str)]) -> Status {
    service_kit::status::with_info(code, message, ERROR_DOMAIN, reason, meta)
}

/// `INVALID_ARGUMENT` naming `field`.
pub fn invalid(field: &str, message: &str) -> Status {
    service_kit::status::invalid(ERROR_DOMAIN, field, message)
}

/// `RESOURCE_EXHAUSTED`: the session already has `limit` prompts queued (reason `QUEUE_FULL`, field `session_id`).
pub fn queue_full(limit: usize) -> Status {
    exhausted(
        "QUEUE_FULL",
        "session_id",
        format!("the session already has {limit} prompts queued; wait for their answers"),
        &format!("{limit} queued prompts"),
    )
}

/// `RESOURCE_EXHAUSTED`: the caller's tenant has `limit` streams open on this replica (reason `TOO_MANY_STREAMS`).
pub fn too_many_streams(limit: usize) -> Status {
    info(
        Code::ResourceExhausted,
        format!("the tenant has {limit} streams open on this replica; close one first"),
        "TOO_MANY_STREAMS",
        &[("limit", &limit.to_string())],
    )
}

/// `RESOURCE_EXHAUSTED`: `field` is over its size limit (`limit`, as documented, e.g. `16384 bytes`).
pub fn too_large(field: &str, limit: &str) -> Status {
    exhausted(
        "TOO_LARGE",
        field,
        format!("over the limit of {limit}"),
        limit,
    )
}

/// `RESOURCE_EXHAUSTED` naming `field` (a field violation and an `ErrorInfo` with `reason`, `field`, `limit`).
fn exhausted(reason: &str, field: &str, message: String, limit: &str) -> Status {
    let mut details = ErrorDetails::new();
    details.add_bad_request_violation(field, &message);
    details.set_error_info(
        reason,
        ERROR_DOMAIN,
        [
            ("field".to_string(), field.to_string()),
            ("limit".to_string(), limit.to_string()),
        ],
    );
    Status::with_error_details(
        Code::ResourceExhausted,
        format!("{field}: {message}"),
        details,
    )
}

/// `NOT_FOUND` for a session: the same status, byte for byte, whether the session does not exist or belongs to
/// another tenant, so a caller learns nothing about other tenants' ids.
pub fn session_not_found() -> Status {
    info(
        Code::NotFound,
        "session not found".into(),
        "SESSION_NOT_FOUND",
        &[],
    )
}

/// `NOT_FOUND` for a message of a session the caller may see.
pub fn message_not_found(message_id: &str) -> Status {
    info(
        Code::NotFound,
        format!("message {message_id} not found"),
        "MESSAGE_NOT_FOUND",
        &[],
    )
}

/// `NOT_FOUND` for a tenant: the same whether it does not exist or is not the caller's.
pub fn tenant_not_found() -> Status {
    info(
        Code::NotFound,
        "tenant not found".into(),
        "TENANT_NOT_FOUND",
        &[],
    )
}

/// `PERMISSION_DENIED`: the caller's tenant may not select `agent` (in `field`).
pub fn agent_not_allowed(field: &str, agent: &str) -> Status {
    info(
        Code::PermissionDenied,
        format!("{field}: agent `{agent}` is not available to this tenant"),
        "AGENT_NOT_ALLOWED",
        &[("field", field), ("agent", agent)],
    )
}

/// `UNAUTHENTICATED`.
pub fn unauthenticated(message: &str) -> Status {
    info(
        Code::Unauthenticated,
        message.into(),
        "UNAUTHENTICATED",
        &[],
    )
}

/// The status of a store failure. The handlers validate ids and check the session before they write, so what
/// reaches here is Redis failing (`UNAVAILABLE`, retry), a session deleted meanwhile (`NOT_FOUND`), or data the
/// processor cannot read (`INTERNAL`).
pub fn storage(e: StoreError) -> Status {
    match e {
        StoreError::NotFound(_) | StoreError::Fenced { .. } => session_not_found(),
        StoreError::InvalidArgument(m) => invalid("request", &m),
        StoreError::QueueFull(limit) => queue_full(limit),
        StoreError::NotAwaited(field) => info(
            Code::NotFound,
            format!("{field}: the session's loop asked no such question"),
            "QUESTION_NOT_FOUND",
            &[("field", field)],
        ),
        StoreError::TooManySessions(quota) => info(
            Code::ResourceExhausted,
            format!("the tenant already holds {quota} sessions; delete some first"),
            "TOO_MANY_SESSIONS",
            &[("limit", &quota.to_string())],
        ),
        StoreError::Exists(m) => Status::already_exists(m),
        StoreError::Decode { .. } | StoreError::Unexpected(_) => {
            tracing::error!(message = "stored data cannot be read", error = %e);
            info(
                Code::Internal,
                "stored data cannot be read".into(),
                "STORAGE_CORRUPT",
                &[],
            )
        }
        StoreError::Redis(_) | StoreError::Timeout(_) => {
            tracing::error!(message = "storage failure", error = %e);
            info(
                Code::Unavailable,
                "storage unavailable; retry".into(),
                "STORAGE_UNAVAILABLE",
                &[],
            )
        }
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
