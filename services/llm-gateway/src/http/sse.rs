//! Server-sent events framing for the HTTP front door, and the response bodies it sends.
//!
//! A streamed response body is the generation's event stream mapped frame by frame: each unified event is encoded
//! into its SSE frames when it arrives and handed to hyper, which writes it out at once. Nothing is batched, and
//! when the caller goes away hyper drops the body, which drops the generation and with it the provider request.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::Stream;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use llm_proto::gateway as pb;

/// The body of every front-door response.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A whole body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(bytes.into()).boxed_unsync()
}

/// `data: <json>\n\n`.
pub fn data<T: serde::Serialize + ?Sized>(out: &mut BytesMut, json: &T) {
    out.put_slice(b"data: ");
    write_json(out, json);
    out.put_slice(b"\n\n");
}

/// `event: <name>\ndata: <json>\n\n`.
pub fn event<T: serde::Serialize + ?Sized>(out: &mut BytesMut, name: &str, json: &T) {
    out.put_slice(b"event: ");
    out.put_slice(name.as_bytes());
    out.put_slice(b"\ndata: ");
    write_json(out, json);
    out.put_slice(b"\n\n");
}

/// `data: [DONE]\n\n`, OpenAI's end of stream.
pub fn done(out: &mut BytesMut) {
    out.put_slice(b"data: [DONE]\n\n");
}

fn write_json<T: serde::Serialize + ?Sized>(out: &mut BytesMut, json: &T) {
    // Serialising our own types into memory cannot fail (every map key is a string); JSON never contains a raw
    // newline, so one `data:` line holds it.
    let mut w = out.writer();
    let _ = serde_json::to_writer(&mut w, json);
}

/// Turns a stream of encoded frames into a response body, writing `keep_alive` whenever `idle` passes with nothing
/// to send (so proxies and clients do not time out a long silence, such as a model thinking).
pub fn body<S>(frames: S, keep_alive: Bytes, idle: Duration) -> Body
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let frames = KeepAlive {
        inner: Box::pin(frames),
        keep_alive,
        idle,
        timer: Box::pin(tokio::time::sleep(idle)),
    };
    http_body_util::StreamBody::new(futures::StreamExt::map(frames, |b| {
        Ok::<_, Infallible>(hyper::body::Frame::data(b))
    }))
    .boxed_unsync()
}

/// What an OpenAI-style streamed response (Chat Completions, Responses) sends after a silence: an SSE comment, so
/// idle proxies keep the connection.
pub const COMMENT_KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Silence after which a streamed response gets its dialect's keep-alive frame.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A streamed response body: each of the generation's `events` written by `encode` into its dialect's frames as it
/// arrives, and `keep_alive` after [`KEEP_ALIVE`] of silence.
pub fn encoded<S>(
    events: S,
    mut encode: impl FnMut(pb::StreamResponse, &mut BytesMut) + Send + 'static,
    keep_alive: &'static [u8],
) -> Body
where
    S: Stream<Item = pb::StreamResponse> + Send + 'static,
{
    let frames = futures::StreamExt::map(events, move |ev| {
        let mut out = BytesMut::new();
        encode(ev, &mut out);
        out.freeze()
    });
    body(frames, Bytes::from_static(keep_alive), KEEP_ALIVE)
}

/// Frames from `inner`, with `keep_alive` after every `idle` of silence.
struct KeepAlive {
    inner: Pin<Box<dyn Stream<Item = Bytes> + Send>>,
    keep_alive: Bytes,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Stream for KeepAlive {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let idle = self.idle;
        let this = &mut *self;
        loop {
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(b)) if b.is_empty() => continue,
                Poll::Ready(item) => {
                    this.timer
                        .as_mut()
                        .reset(tokio::time::Instant::now() + idle);
                    return Poll::Ready(item);
                }
                Poll::Pending => break,
            }
        }
        match this.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + idle);
                Poll::Ready(Some(this.keep_alive.clone()))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "sse_tests.rs"]
mod tests;
