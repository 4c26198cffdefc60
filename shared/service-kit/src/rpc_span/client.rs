//! The client side: a `CLIENT` span for every call made through a channel, a child of the current span, whose
//! context goes out in the call's `traceparent` (so the server's span is its child), ended with the response body.

use std::sync::Arc;

use tonic::codegen::http::Request;

use super::service::{Maker, SpanService};
use super::{CallSpan, Side, new_span, split_path};

/// Traces every call made through the service it wraps, naming the server (the host and port the client was
/// configured with) as `server.address` and `server.port`.
#[derive(Debug, Clone, Default)]
pub struct ClientSpanLayer {
    server: Option<Arc<(String, u16)>>,
}

impl ClientSpanLayer {
    /// Spans naming `server` (host, port) when the channel has one target; `None` when it balances over several.
    pub fn new(server: Option<(String, u16)>) -> ClientSpanLayer {
        ClientSpanLayer {
            server: server.map(Arc::new),
        }
    }
}

impl<S> tower::Layer<S> for ClientSpanLayer {
    type Service = SpanService<S>;
    fn layer(&self, inner: S) -> SpanService<S> {
        SpanService::new(inner, Maker::Client(self.server.clone()))
    }
}

/// The span of a call to `req`'s path, its context written into `req`'s `traceparent`, when spans are recorded.
pub(super) fn span_for<B>(
    server: Option<&(String, u16)>,
    req: &mut Request<B>,
) -> Option<CallSpan> {
    let path = req.uri().path();
    let (service, method) = split_path(path)?;
    let span = new_span(Side::Client, &path[1..], service, method);
    if span.is_disabled() {
        return None;
    }
    if let Some((host, port)) = server {
        span.record("server.address", host.as_str());
        span.record("server.port", i64::from(*port));
    }
    llm_telemetry::inject_header_map(&span, req.headers_mut());
    Some(CallSpan::new(span, Side::Client))
}
