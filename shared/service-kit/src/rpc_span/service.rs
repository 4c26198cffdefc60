//! The one tower service both layers make: it opens the call's span the server's or the client's way, and hands the
//! span to the response future and body ([`super::call`]).

use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::codegen::http::{Request, Response};

use super::{BoxError, CallFuture, CallSpan, SpanBody};

/// How a call's span is made: which side, and what that side knows.
#[derive(Debug, Clone)]
pub(crate) enum Maker {
    /// A server tracing the calls of these services.
    Server(&'static [&'static str]),
    /// A client of this server (host, port), when it has one target.
    Client(Option<Arc<(String, u16)>>),
}

/// A service whose calls each get a span ([`super::ServerSpanLayer`], [`super::ClientSpanLayer`]).
#[derive(Debug, Clone)]
pub struct SpanService<S> {
    inner: S,
    maker: Maker,
}

impl<S> SpanService<S> {
    pub(crate) fn new(inner: S, maker: Maker) -> SpanService<S> {
        SpanService { inner, maker }
    }
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for SpanService<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Error: Into<BoxError>,
{
    type Response = Response<SpanBody<ResBody>>;
    type Error = BoxError;
    type Future = CallFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let call: Option<CallSpan> = match &self.maker {
            Maker::Server(services) => super::server::span_for(services, &req),
            Maker::Client(server) => super::client::span_for(server.as_deref(), &mut req),
        };
        // A server's handler runs when the future is polled, inside the call's span: its own spans (a generation,
        // a session's loop) are the call's children.
        CallFuture::new(self.inner.call(req), call)
    }
}
