//! Reaching the processor: one address format everywhere, and a failure that names the address and its cause.

use tonic::transport::{Channel, Endpoint};

/// The URL for an address given as `host:port` or as a URL: `127.0.0.1:50152` and `http://127.0.0.1:50152` name the
/// same processor (a bare address is plaintext HTTP/2, as every listener of the product is without TLS).
pub(super) fn endpoint_url(addr: &str) -> String {
    let addr = addr.trim();
    if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    }
}

/// Connects to `addr`; an error says which address failed and why (the transport error's causes, innermost last).
pub(super) async fn connect(addr: &str) -> Result<Channel, String> {
    let url = endpoint_url(addr);
    let endpoint = Endpoint::from_shared(url.clone()).map_err(|e| {
        format!("`{addr}` is not a processor address ({e}); use host:port or http://host:port")
    })?;
    endpoint.connect().await.map_err(|e| {
        format!(
            "cannot reach the session-processor at {url}: {}",
            causes(&e)
        )
    })
}

/// An error and its sources, joined: `transport error: tcp connect error: Connection refused (os error 111)`.
pub(super) fn causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.ends_with(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}
