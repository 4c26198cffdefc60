//! A gRPC service some of whose methods are served by hand (with a codec of the service's choosing) and the rest by
//! tonic's generated server, which also answers an unknown method (`UNIMPLEMENTED`).
//!
//! Both services wire a few methods by hand: the gateway to report a request that does not decode as the caller's
//! mistake and to hand large requests over still encoded, the processor to write streamed events straight from the
//! form it keeps them in. The routing itself (the method from the path, the hand-wired route or the generated server,
//! the service's name for the router) is this.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::codegen::http;

/// The response of a call.
pub type HttpResponse = http::Response<Body>;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What serving one call returns: the generated server's future type.
pub type RouteFuture = BoxFuture<Result<HttpResponse, Infallible>>;

/// The methods a service serves by hand.
pub trait HandRoutes: Clone + Send + Sync + 'static {
    /// The service's path prefix, `/<package>.<Service>/`.
    const SERVICE: &'static str;
    /// Which hand-wired method a call is.
    type Route;

    /// The hand-wired method named `method`, or `None` for the generated server.
    fn pick(method: &str) -> Option<Self::Route>;

    /// Serves a call of `route`.
    fn serve(&self, route: Self::Route, request: http::Request<Body>) -> RouteFuture;
}

/// `hand`'s methods by hand, every other call by `generated` (module docs).
#[derive(Clone)]
pub struct HandWired<H, G> {
    hand: H,
    generated: G,
}

impl<H, G> HandWired<H, G> {
    /// The service.
    pub fn new(hand: H, generated: G) -> Self {
        HandWired { hand, generated }
    }
}

impl<H, G: tonic::server::NamedService> tonic::server::NamedService for HandWired<H, G> {
    const NAME: &'static str = G::NAME;
}

impl<H, G> tower::Service<http::Request<Body>> for HandWired<H, G>
where
    H: HandRoutes,
    G: tower::Service<
            http::Request<Body>,
            Response = HttpResponse,
            Error = Infallible,
            Future = RouteFuture,
        >,
{
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = RouteFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> RouteFuture {
        let method = request.uri().path().strip_prefix(H::SERVICE);
        match method.and_then(H::pick) {
            Some(route) => self.hand.serve(route, request),
            None => self.generated.call(request),
        }
    }
}
