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
        .and_then(crate::server::bearer);
    bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    const TOKEN: &str = "an-http-caller-token-0001";

    fn config() -> Config {
        Config::from_file(FileConfig::default(), &[("GATEWAY_AUTH_TOKENS", TOKEN)]).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn either_sdk_header_carries_the_token() {
        let c = config();
        assert!(
            check(
                &c,
                &headers(&[("authorization", &format!("Bearer {TOKEN}"))])
            )
            .is_ok()
        );
        assert!(
            check(
                &c,
                &headers(&[("authorization", &format!("bearer  {TOKEN}"))])
            )
            .is_ok()
        );
        assert!(check(&c, &headers(&[("x-api-key", TOKEN)])).is_ok());
    }

    #[test]
    fn a_missing_or_wrong_token_is_refused() {
        let c = config();
        for h in [
            headers(&[]),
            headers(&[("authorization", "Bearer not-the-token-at-all")]),
            headers(&[("x-api-key", "not-the-token-at-all")]),
            headers(&[("authorization", TOKEN)]),
        ] {
            assert_eq!(check(&c, &h).unwrap_err().class, Class::Authentication);
        }
    }
}
