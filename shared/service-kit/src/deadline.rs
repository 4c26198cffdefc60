//! Server-side deadlines: a caller's `grpc-timeout` bounds the whole call, streams included, and a call that runs
//! past it ends with `DEADLINE_EXCEEDED`, as the gRPC protocol says.
//!
//! tonic's server reads `grpc-timeout` too, but only until the handler returns its response (for a stream, until
//! the stream starts), and it answers `CANCELLED` ("Timeout expired"). [`DeadlineLayer`] replaces that: it takes the
//! header off the request (so tonic's own timer never races this one), bounds the handler's future and then the
//! response body by the same instant, and when the instant passes sends `grpc-status: 4` — as a trailers-only
//! response before the handler answered, as trailers after the messages already sent otherwise — and drops the
//! handler's future or stream, which cancels the work behind it. The instant is left in the request's extensions
//! as [`CallDeadline`] for handlers that pass it on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame};
use tokio::time::{Instant, Sleep};
use tonic::codegen::Bytes;
use tonic::codegen::http::{HeaderMap, HeaderValue, Request, Response};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The instant a call's `grpc-timeout` runs out, in the request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallDeadline(pub Instant);

/// The `grpc-timeout` value as a duration: 1 to 8 ASCII digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`). `None`
/// for anything else, which leaves the call without a deadline (as tonic does).
pub fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (digits, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b"H" => Duration::from_secs(n * 3600),
        b"M" => Duration::from_secs(n * 60),
        b"S" => Duration::from_secs(n),
        b"m" => Duration::from_millis(n),
        b"u" => Duration::from_micros(n),
        b"n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The `DEADLINE_EXCEEDED` status as headers (a trailers-only response) or trailers.
fn exceeded_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("grpc-status", HeaderValue::from_static("4"));
    headers.insert(
        "grpc-message",
        HeaderValue::from_static("Deadline%20Exceeded"),
    );
    headers
}

/// The trailers-only answer of a call whose deadline passed before the handler answered.
fn exceeded_response() -> Response<tonic::body::Body> {
    let mut res = Response::new(tonic::body::Body::default());
    let headers = res.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    headers.extend(exceeded_headers());
    res
}

/// Honours `grpc-timeout` on every call of a server (see the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct DeadlineLayer;

impl<S> tower::Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;
    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline { inner }
    }
}

/// [`DeadlineLayer`]'s service.
#[derive(Clone, Debug)]
pub struct Deadline<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for Deadline<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let timeout = req
            .headers_mut()
            .remove("grpc-timeout")
            .and_then(|v| parse_grpc_timeout(v.as_bytes()));
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        if let Some(at) = deadline {
            req.extensions_mut().insert(CallDeadline(at));
        }
        let fut = self.inner.call(req);
        Box::pin(async move {
            let Some(at) = deadline else {
                return Ok(fut.await?.map(tonic::body::Body::new));
            };
            match tokio::time::timeout_at(at, fut).await {
                Err(_) => Ok(exceeded_response()),
                Ok(res) => Ok(res?.map(|body| tonic::body::Body::new(DeadlineBody::new(body, at)))),
            }
        })
    }
}

/// A response body that ends with `DEADLINE_EXCEEDED` trailers when its deadline passes before it ended.
struct DeadlineBody<B> {
    /// `None` once the body ended (by itself or by the deadline).
    inner: Option<Pin<Box<B>>>,
    sleep: Pin<Box<Sleep>>,
}

impl<B> DeadlineBody<B> {
    fn new(inner: B, at: Instant) -> Self {
        DeadlineBody {
            inner: Some(Box::pin(inner)),
            sleep: Box::pin(tokio::time::sleep_until(at)),
        }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if this.sleep.as_mut().poll(cx).is_ready() {
            // Dropping the body drops the handler's stream: the work behind it stops.
            this.inner = None;
            return Poll::Ready(Some(Ok(Frame::trailers(exceeded_headers()))));
        }
        match inner.as_mut().poll_frame(cx) {
            Poll::Ready(None) => {
                this.inner = None;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                if frame.is_trailers() {
                    this.inner = None;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }
}

#[cfg(test)]
#[path = "deadline_tests.rs"]
mod tests;
