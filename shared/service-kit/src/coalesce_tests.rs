#![allow(clippy::unwrap_used)]

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::*;

/// A socket that records each write call's bytes, takes at most `max_per_call` bytes a call, and answers every
/// other call `Pending` (waking at once) when `stalls` is set.
#[derive(Default)]
struct Recorder {
    calls: Vec<Vec<u8>>,
    flushes: usize,
    max_per_call: usize,
    stalls: bool,
    stalled: bool,
}

impl Recorder {
    fn taking(max_per_call: usize, stalls: bool) -> Recorder {
        Recorder {
            max_per_call,
            stalls,
            ..Recorder::default()
        }
    }

    fn stall(&mut self, cx: &mut Context<'_>) -> bool {
        if self.stalls {
            self.stalled = !self.stalled;
            if self.stalled {
                cx.waker().wake_by_ref();
                return true;
            }
        }
        false
    }

    fn written(&self) -> Vec<u8> {
        self.calls.concat()
    }
}

impl AsyncWrite for Recorder {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.stall(cx) {
            return Poll::Pending;
        }
        let call: Vec<u8> = bufs
            .iter()
            .flat_map(|b| b.iter().copied())
            .take(self.max_per_call)
            .collect();
        let n = call.len();
        self.calls.push(call);
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.flushes += 1;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_burst_of_small_writes_leaves_in_one_call_at_the_flush_or_with_the_next_write() {
    let mut w = Coalescing::new(Recorder::taking(usize::MAX, false));
    assert!(!w.is_write_vectored());
    w.write_all(b"frames ").await.unwrap();
    assert!(w.get_ref().calls.is_empty(), "a small write is held");
    w.flush().await.unwrap();
    assert_eq!(w.get_ref().calls, [b"frames ".to_vec()]);
    assert_eq!(w.get_ref().flushes, 1);

    // The codec's buffer, then the payload of a frame too large for it: one call.
    let payload = vec![b'p'; 4096];
    w.write_all(b"head").await.unwrap();
    w.write_all(&payload).await.unwrap();
    assert_eq!(w.get_ref().calls.len(), 2);
    assert_eq!(
        w.get_ref().calls[1],
        [b"head".as_slice(), &payload].concat()
    );
    w.flush().await.unwrap();
    assert_eq!(w.get_ref().calls.len(), 2, "nothing was left to write");

    // Larger than the codec's whole buffer, with nothing held: straight through.
    let big = vec![b'b'; HOLD_UP_TO + 1];
    w.write_all(&big).await.unwrap();
    assert_eq!(w.get_ref().calls.len(), 3);
    assert_eq!(w.get_ref().calls[2], big);
}

#[tokio::test]
async fn every_byte_arrives_once_in_order_through_short_and_refused_writes() {
    for (max_per_call, stalls) in [(1, false), (7, true), (1000, true), (usize::MAX, true)] {
        let mut w = Coalescing::new(Recorder::taking(max_per_call, stalls));
        let mut sent = Vec::new();
        for i in 0..200usize {
            let len = [3, 300, 17_000, 40, 1024, 0][i % 6] + i % 5;
            let chunk: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
            w.write_all(&chunk).await.unwrap();
            sent.extend_from_slice(&chunk);
            if i % 7 == 0 {
                w.flush().await.unwrap();
                assert_eq!(
                    w.get_ref().written(),
                    sent,
                    "after a flush everything is out"
                );
            }
        }
        w.shutdown().await.unwrap();
        assert_eq!(w.get_ref().written(), sent, "{max_per_call} {stalls}");
    }
}
