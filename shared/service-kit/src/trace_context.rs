//! The caller's W3C trace context (`traceparent`, `tracestate`) read from a call's gRPC metadata, to be passed on to
//! the calls it makes (the gateway's provider request, the processor's gateway calls), so one trace id follows a
//! request through both services to the provider.
//!
//! Only a well-formed `traceparent` is passed on: `<2 hex version>-<32 hex trace id>-<16 hex parent id>-<2 hex
//! flags>`, neither id all zeros. A malformed one is dropped with its `tracestate` (a trace state means nothing
//! without its parent); a `tracestate` longer than [`MAX_TRACESTATE_BYTES`] is dropped alone.

use tonic::metadata::MetadataMap;

/// The longest `tracestate` passed on: the length every W3C participant must propagate.
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// The caller's trace context as header pairs, `traceparent` first; empty without a valid `traceparent`.
pub fn from_metadata(metadata: &MetadataMap) -> Vec<(String, String)> {
    let get = |k: &str| metadata.get(k).and_then(|v| v.to_str().ok());
    let Some(parent) = get("traceparent").filter(|t| valid_traceparent(t)) else {
        return Vec::new();
    };
    let mut out = vec![("traceparent".to_string(), parent.to_string())];
    if let Some(state) = get("tracestate").filter(|s| s.len() <= MAX_TRACESTATE_BYTES) {
        out.push(("tracestate".to_string(), state.to_string()));
    }
    out
}

/// `<2 hex>-<32 hex>-<16 hex>-<2 hex>`, the trace id and the parent id not all zeros.
pub fn valid_traceparent(t: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let not_zero = |s: &str| s.bytes().any(|b| b != b'0');
    let mut parts = t.split('-');
    match (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) {
        (Some(version), Some(trace), Some(parent), Some(flags), None) => {
            hex(version, 2)
                && hex(trace, 32)
                && hex(parent, 16)
                && hex(flags, 2)
                && not_zero(trace)
                && not_zero(parent)
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "trace_context_tests.rs"]
mod tests;
