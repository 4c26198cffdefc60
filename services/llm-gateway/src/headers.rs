//! Which HTTP headers stay the gateway's own: neither callers (`extra_headers`) nor hooks may set them.

/// Headers a caller may not set: authentication, routing and framing stay the gateway's.
const FORBIDDEN_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "cookie",
    "anthropic-version",
];

/// True for headers only the gateway may set (authentication, routing, framing, provider API versions): neither
/// callers (`extra_headers`) nor hooks can set them.
pub fn reserved_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    FORBIDDEN_HEADERS.contains(&lower.as_str()) || lower.starts_with("x-goog-")
}
