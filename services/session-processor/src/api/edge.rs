//! Statuses tonic produces before a handler runs, mapped to what the API promises for a caller's mistake: a request
//! over the size limit is `OUT_OF_RANGE` in tonic and `RESOURCE_EXHAUSTED` here (the gRPC convention for size
//! limits); a request that is not the message it should be (bytes that do not decode, a string field that is not
//! UTF-8) is `INTERNAL` in tonic and `INVALID_ARGUMENT` here.

use http::HeaderValue;

/// True when a `grpc-message` header says `needle` (the header is percent-encoded, so spaces may be `%20`).
fn says(message: Option<&HeaderValue>, needle: &str) -> bool {
    message
        .and_then(|m| m.to_str().ok())
        .is_some_and(|m| m.contains(needle) || m.contains(&needle.replace(' ', "%20")))
}

/// Rewrites the status of a trailers-only response (an error before any message, where the status is in the
/// headers) when tonic refused the request itself.
pub fn rewrite<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    let code = headers.get("grpc-status").cloned();
    let message = headers.get("grpc-message");
    let rewritten = match code.as_ref().and_then(|c| c.to_str().ok()) {
        Some("11") if says(message, "message length too large") => Some("8"),
        Some("13") if says(message, "failed to decode Protobuf message") => Some("3"),
        _ => None,
    };
    if let Some(code) = rewritten {
        headers.insert("grpc-status", HeaderValue::from_static(code));
    }
    response
}

#[cfg(test)]
#[path = "edge_tests.rs"]
mod tests;
