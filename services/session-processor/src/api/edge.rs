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
mod tests {
    use super::*;

    fn response(code: &str, message: &str) -> http::Response<()> {
        let mut r = http::Response::new(());
        r.headers_mut()
            .insert("grpc-status", HeaderValue::from_str(code).unwrap());
        r.headers_mut()
            .insert("grpc-message", HeaderValue::from_str(message).unwrap());
        r
    }

    fn code(r: &http::Response<()>) -> &str {
        r.headers()["grpc-status"].to_str().unwrap()
    }

    #[test]
    fn refusals_before_the_handler_become_the_callers_mistake() {
        let r = rewrite(response(
            "11",
            "Error,%20decoded%20message%20length%20too%20large:%20found%209%20bytes",
        ));
        assert_eq!(code(&r), "8");
        let r = rewrite(response(
            "13",
            "failed%20to%20decode%20Protobuf%20message:%20invalid%20string",
        ));
        assert_eq!(code(&r), "3");
        for (c, m) in [("13", "storage%20broke"), ("11", "other"), ("5", "x")] {
            assert_eq!(code(&rewrite(response(c, m))), c);
        }
    }
}
