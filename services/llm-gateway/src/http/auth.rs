//! Caller identification on the HTTP front door: the same keys as the gRPC API, presented the way each SDK sends its
//! key: `Authorization: Bearer <token>` (OpenAI SDKs) or `x-api-key: <token>` (Anthropic SDKs); `x-tenant` names
//! the tenant as on gRPC (a `processor` key's only).

use http::HeaderMap;

use crate::generate::Gateway;
use crate::http::errors::{ApiError, Class};
use crate::keys::{Caller, Refusal};

/// The caller of a request (the anonymous caller when the gateway runs unauthenticated).
pub fn check(gateway: &Gateway, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let tenant = match headers.get(crate::keys::caller::TENANT_HEADER) {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| refused(&Refusal::BadTenant))?),
    };
    crate::server::identify(gateway, presented(headers), tenant).map_err(|r| refused(&r))
}

fn refused(r: &Refusal) -> ApiError {
    let class = match r {
        Refusal::Missing => {
            return ApiError::new(
                Class::Authentication,
                "missing `Authorization: Bearer <token>` or `x-api-key: <token>` header",
            );
        }
        Refusal::Unknown => Class::Authentication,
        Refusal::ForeignTenant => Class::Permission,
        Refusal::BadTenant => Class::InvalidRequest,
    };
    ApiError::new(class, r.message())
}

/// The token the caller presented: the bearer token, else `x-api-key`.
fn presented(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(service_kit::auth::bearer);
    bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "auth_tests.rs"]
mod tests;
