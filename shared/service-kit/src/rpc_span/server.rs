//! The server side: a `SERVER` span for every call of the services a server names, a child of the caller's W3C
//! trace context, entered while the handler runs (so the handler's own spans are its children) and ended with the
//! response body.

use std::net::SocketAddr;

use tonic::codegen::http::Request;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

use super::service::{Maker, SpanService};
use super::{CallSpan, Side, new_span, split_path};

/// Traces every call of `services` (full names, such as `llm.gateway.v1.GatewayService`); calls of other services
/// (health checks, reflection) pass untraced. The outermost layer of a server, so the span sees the status the
/// caller gets.
#[derive(Debug, Clone, Copy)]
pub struct ServerSpanLayer {
    services: &'static [&'static str],
}

impl ServerSpanLayer {
    /// Traces the calls of `services`.
    pub const fn new(services: &'static [&'static str]) -> ServerSpanLayer {
        ServerSpanLayer { services }
    }
}

impl<S> tower::Layer<S> for ServerSpanLayer {
    type Service = SpanService<S>;
    fn layer(&self, inner: S) -> SpanService<S> {
        SpanService::new(inner, Maker::Server(self.services))
    }
}

/// The span of a call to `req`'s path, when it is a method of one of `services` and spans are recorded.
pub(super) fn span_for<B>(services: &[&str], req: &Request<B>) -> Option<CallSpan> {
    let path = req.uri().path();
    let (service, method) = split_path(path)?;
    if !services.contains(&service) {
        return None;
    }
    let span = new_span(Side::Server, &path[1..], service, method);
    if span.is_disabled() {
        return None;
    }
    llm_telemetry::set_parent_from_headers(&span, req.headers());
    let (local, peer) = addresses(req);
    // The server as the caller named it (`:authority`), else the address the connection came in on.
    match req.uri().host() {
        Some(host) => {
            span.record("server.address", host);
            if let Some(port) = req.uri().port_u16().or(local.map(|a| a.port())) {
                span.record("server.port", i64::from(port));
            }
        }
        None => {
            if let Some(local) = local {
                span.record("server.address", tracing::field::display(local.ip()));
                span.record("server.port", i64::from(local.port()));
            }
        }
    }
    if let Some(peer) = peer {
        span.record("network.peer.address", tracing::field::display(peer.ip()));
        span.record("network.peer.port", i64::from(peer.port()));
    }
    Some(CallSpan::new(span, Side::Server))
}

/// The connection's local and peer addresses, as the server's listener left them in the request (plain TCP or TLS).
fn addresses<B>(req: &Request<B>) -> (Option<SocketAddr>, Option<SocketAddr>) {
    let ext = req.extensions();
    let tcp = ext.get::<TcpConnectInfo>().or_else(|| {
        ext.get::<TlsConnectInfo<TcpConnectInfo>>()
            .map(TlsConnectInfo::get_ref)
    });
    tcp.map_or((None, None), |c| (c.local_addr(), c.remote_addr()))
}
