//! The token endpoint's and metadata server's answers, and when a cached token must be replaced. Pure.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::truncate;
use crate::error::{ErrorKind, ProviderError};

/// `{"access_token": "…", "expires_in": 3599, "token_type": "Bearer"}` (Entra's v1 endpoint writes `expires_in` as a
/// string of digits; both forms are read).
#[derive(Debug, serde::Deserialize)]
pub struct TokenResponse {
    pub access_token: String,
    #[serde(deserialize_with = "seconds")]
    pub expires_in: u64,
    #[serde(default)]
    pub token_type: Option<String>,
}

/// `3599` or `"3599"`.
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Seconds {
        Number(u64),
        Text(String),
    }
    match <Seconds as serde::Deserialize>::deserialize(d)? {
        Seconds::Number(n) => Ok(n),
        Seconds::Text(t) => t.trim().parse().map_err(serde::de::Error::custom),
    }
}

/// `{"error": "invalid_grant", "error_description": "Invalid JWT Signature."}`.
#[derive(serde::Deserialize)]
struct OAuthError {
    error: Option<String>,
    error_description: Option<String>,
}

/// Longest part of Google's error description quoted in an error.
const MAX_DESCRIPTION: usize = 200;

/// True when a token expiring at `expires_at` has less than `margin` left at `now` (or has expired).
pub fn needs_refresh(expires_at: Instant, now: Instant, margin: Duration) -> bool {
    expires_at.saturating_duration_since(now) <= margin
}

/// Reads the answer of `source`: the token on a 2xx, else a typed error whose message begins with `label`. A
/// refused grant (4xx) is `auth` and not retried; a 5xx is retried as the provider being unavailable. Only the
/// OAuth `error` code and description are quoted, never the body, which could echo what was sent.
pub(super) fn parse(
    status: u16,
    body: &str,
    label: &str,
    source: &str,
) -> Result<TokenResponse, ProviderError> {
    if (200..300).contains(&status) {
        let token: TokenResponse = serde_json::from_str(body).map_err(|_| {
            ProviderError::new(
                ErrorKind::Auth,
                format!("{label}: {source} answered without a token"),
            )
        })?;
        if token.access_token.is_empty()
            || token
                .token_type
                .as_deref()
                .is_some_and(|t| !t.eq_ignore_ascii_case("bearer"))
        {
            return Err(ProviderError::new(
                ErrorKind::Auth,
                format!("{label}: {source} answered without a bearer token"),
            ));
        }
        return Ok(token);
    }
    let detail = serde_json::from_str::<OAuthError>(body)
        .ok()
        .map(|e| {
            let code = e.error.unwrap_or_default();
            let description = e.error_description.unwrap_or_default();
            format!(": {code} {}", truncate(&description, MAX_DESCRIPTION))
        })
        .unwrap_or_default();
    let kind = if status >= 500 || status == 429 {
        ErrorKind::Overloaded
    } else {
        ErrorKind::Auth
    };
    let mut err = ProviderError::new(
        kind,
        format!("{label}: {source} answered {status}{}", detail.trim_end()),
    );
    err.http_status = Some(status);
    Err(err)
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
