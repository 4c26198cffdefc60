//! HTTP and mid-stream error classification (stub: being completed).

use crate::error::{ErrorKind, ProviderError};

/// Classifies a provider error from its HTTP status (`None` for an error that arrived mid-stream), its response
/// headers (retry hints) and its body (any provider's JSON error shape, or plain text).
pub fn classify(status: Option<u16>, headers: Option<&http::HeaderMap>, body: &str) -> ProviderError {
    let _ = headers;
    let mut e = ProviderError::new(ErrorKind::ProviderError, body.to_string());
    e.http_status = status;
    e
}
