//! Caller authentication on the HTTP front door: the same tokens as the gRPC API, presented the way each SDK sends
//! its key: `Authorization: Bearer <token>` (OpenAI SDKs) or `x-api-key: <token>` (Anthropic SDKs).

use http::HeaderMap;

use crate::config::Config;
use crate::http::errors::{ApiError, Class};

/// Ok when the request carries one of the configured tokens (or the gateway runs unauthenticated).
pub fn check(config: &Config, headers: &HeaderMap) -> Result<(), ApiError> {
    if config.allow_unauthenticated && config.auth_tokens.is_empty() {
        return Ok(());
    }
    let presented = presented(headers).ok_or_else(|| {
        ApiError::new(
            Class::Authentication,
            "missing `Authorization: Bearer <token>` or `x-api-key: <token>` header",
        )
    })?;
    if crate::server::known_token(config, presented) {
        Ok(())
    } else {
        Err(ApiError::new(Class::Authentication, "invalid token"))
    }
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
