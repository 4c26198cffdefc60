//! A call's span through the call: [`CallSpan`] holds it until the final status, [`CallFuture`] carries it while
//! the response is awaited (and takes a trailers-only answer's status from the headers), [`SpanBody`] to the end of
//! the response body (and takes the status from the trailers). The span ends when the body is dropped: after its
//! end, or earlier when the call is cancelled.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use tonic::codegen::http::Response;

use super::{BoxError, CANCELLED, Side, UNKNOWN, code_name, is_error, status_in, status_of_http};

/// One call's span until the call's final status is known: [`CallSpan::end`] records it, and dropping it before
/// that records `CANCELLED`. The span itself ends when this is dropped.
pub(crate) struct CallSpan {
    span: tracing::Span,
    side: Side,
    ended: bool,
}

impl CallSpan {
    pub(crate) fn new(span: tracing::Span, side: Side) -> CallSpan {
        CallSpan {
            span,
            side,
            ended: false,
        }
    }

    /// Records the call's final status (only the first one counts).
    pub(crate) fn end(&mut self, code: i32) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        self.span.record("rpc.grpc.status_code", i64::from(code));
        if is_error(self.side, code) {
            self.span.record("otel.status_code", "ERROR");
            self.span.record("error.type", code_name(code));
        }
    }

    /// Records the status of a failure given as an error (the status tonic makes of it), and gives the error back as
    /// that status, so the caller sees the code the span has.
    fn fail(&mut self, error: impl Into<BoxError>) -> BoxError {
        let status = tonic::Status::from_error(error.into());
        self.end(status.code() as i32);
        Box::new(status)
    }
}

impl Drop for CallSpan {
    fn drop(&mut self) {
        self.end(CANCELLED);
    }
}

pin_project_lite::pin_project! {
    /// The response future of a traced call, polled inside the call's span (so a server handler's own spans are its
    /// children). Dropped before the answer (a client that gave up), it ends the span as `CANCELLED`.
    pub struct CallFuture<F> {
        #[pin]
        inner: F,
        call: Option<CallSpan>,
    }
}

impl<F> CallFuture<F> {
    pub(crate) fn new(inner: F, call: Option<CallSpan>) -> CallFuture<F> {
        CallFuture { inner, call }
    }
}

impl<F, ResBody, E> Future for CallFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<SpanBody<ResBody>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let polled = {
            let _entered = this.call.as_ref().map(|c| c.span.enter());
            this.inner.poll(cx)
        };
        let result = match polled {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        let mut call = this.call.take();
        Poll::Ready(match result {
            Ok(res) => {
                if let Some(c) = call.as_mut() {
                    // A trailers-only answer (an error before any message) has its status in the headers; an HTTP
                    // error from something in between has none, and counts as a gRPC client maps it.
                    if let Some(code) = status_in(res.headers()) {
                        c.end(code);
                    } else if res.status() != 200 {
                        c.end(status_of_http(res.status().as_u16()));
                    }
                }
                Ok(res.map(|b| SpanBody { inner: b, call }))
            }
            Err(e) => Err(match call.as_mut() {
                Some(c) => c.fail(e),
                None => e.into(),
            }),
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that carries its call's span to the body's end: every frame passes on unchanged, and the
    /// status in the trailers is recorded as they pass.
    pub struct SpanBody<B> {
        #[pin]
        inner: B,
        // After `inner`: the body (and any span it holds, such as a generation's) is dropped before the call's span
        // ends.
        call: Option<CallSpan>,
    }
}

impl<B> Body for SpanBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        let Some(call) = this.call.as_mut() else {
            return polled.map_err(Into::into);
        };
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    call.end(status_in(trailers).unwrap_or(UNKNOWN));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(call.fail(e)))),
            Poll::Ready(None) => {
                // The end without trailers is a protocol error (a trailers-only answer's status is already taken).
                call.end(UNKNOWN);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
