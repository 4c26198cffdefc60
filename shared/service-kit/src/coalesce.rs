//! Fewer writes per HTTP/2 flush: a connection wrapper under the HTTP/2 codec.
//!
//! The HTTP/2 codec copies small frames into its write buffer and hands a larger frame's payload to the socket
//! beside that buffer (vectored I/O). While such a payload waits it buffers nothing else: each payload above its
//! threshold (256 bytes over vectored I/O) costs a `writev` of its own, and the frames queued after it (the
//! trailers that end a call, the next call's events) another. Most events of a session are larger than that and
//! come in bursts, so the threshold splits the bursts into several system calls, each of which also wakes the
//! reader at the other end.
//!
//! [`Coalescing`] tells the codec it has no vectored writes, which raises the codec's threshold to 1 KiB (frames up
//! to that size are copied into its buffer and go out together), and holds a small write back until the next one
//! or the flush: the codec's buffer and the payload of a larger frame then leave in one `writev`, and a buffer
//! followed by nothing in one `write`. Nothing waits: the codec flushes at the end of every burst, and the held
//! bytes go out with that flush.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::{Stream, TryStreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::TcpIncoming;

/// The connections a gRPC server of the product accepts on `listener`: without Nagle's delay, each wrapped in
/// [`Coalescing`].
pub fn incoming(listener: TcpListener) -> impl Stream<Item = io::Result<Coalescing<TcpStream>>> {
    TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .map_ok(Coalescing::new)
}

/// Writes of at most this many bytes are held back for the next write or the flush: the codec's whole buffer (16
/// KiB, plus the head of the frame whose payload follows it).
const HOLD_UP_TO: usize = 16 * 1024 + 64;

/// A connection whose small writes ride with the next write or the flush (see the module's text).
#[derive(Debug)]
pub struct Coalescing<T> {
    inner: T,
    /// Bytes accepted, of which those from `sent` on are not written yet; empty after every flush.
    held: Vec<u8>,
    /// How many of `held` a short write already sent (an offset, so a run of short writes stays linear).
    sent: usize,
}

impl<T> Coalescing<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Coalescing<T> {
        Coalescing {
            inner,
            held: Vec::new(),
            sent: 0,
        }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T: AsyncWrite + Unpin> Coalescing<T> {
    /// Takes note that `n` more held bytes were written.
    fn advance(&mut self, n: usize) {
        self.sent += n;
        if self.sent >= self.held.len() {
            self.held.clear();
            self.sent = 0;
        }
    }

    /// Writes the held bytes until none are left.
    fn poll_write_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.held.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.advance(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalescing<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = &mut *self;
        loop {
            if me.held.is_empty() {
                if buf.len() <= HOLD_UP_TO {
                    me.held.extend_from_slice(buf);
                    return Poll::Ready(Ok(buf.len()));
                }
                return Pin::new(&mut me.inner).poll_write(cx, buf);
            }
            // What is held goes first, with this write in the same system call.
            let unsent = me.held.len() - me.sent;
            let slices = [IoSlice::new(&me.held[me.sent..]), IoSlice::new(buf)];
            let n = ready!(Pin::new(&mut me.inner).poll_write_vectored(cx, &slices))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            me.advance(n.min(unsent));
            if n > unsent {
                return Poll::Ready(Ok(n - unsent));
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_write_held(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_write_held(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    /// No: so the HTTP/2 codec copies frames up to 1 KiB into its buffer (see the module's text). Writes that
    /// follow a held one still leave vectored.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalescing<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: tonic::transport::server::Connected> tonic::transport::server::Connected for Coalescing<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
#[path = "coalesce_tests.rs"]
mod tests;
