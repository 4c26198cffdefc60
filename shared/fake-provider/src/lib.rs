//! Loopback HTTP/1.1 servers that replay LLM-provider responses byte-exactly.
//!
//! The gateway's end-to-end tests, benchmarks and demo need an upstream whose
//! every byte, pause and failure is scripted. [`FakeProvider`] listens on
//! loopback, answers each request with the next scripted [`Reply`] (SSE
//! streams replayed as is, JSON errors, resets, stalls) and records every
//! request as a [`Recorded`] so tests can assert on what the gateway sent.
//!
//! Every fake also checks each request the way the real provider does
//! ([`validate`]), answers one it would refuse with that provider's real error
//! body, and answers a request that did not ask for a stream with the whole
//! JSON body the scripted stream amounts to.
//!
//! HTTP/1.1 is implemented by hand on raw sockets instead of with hyper: a
//! general-purpose server would re-chunk, buffer and close politely, which is
//! exactly the control these tests need to take away from it.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use std::time::Duration;
//! use fake_provider::{FakeProvider, Reply};
//!
//! let fp = FakeProvider::start().await?;
//! fp.push(Reply::fixture("selftest/openai-text.sse").pace(Duration::from_millis(10)));
//! fp.push(Reply::json(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "1"));
//! // ... point the code under test at fp.base_url() ...
//! let reqs = fp.wait_requests(1, Duration::from_secs(5)).await;
//! assert_eq!(reqs[0].json()["stream"], true);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod azure;
mod conn;
pub mod demo;
pub mod embeddings;
pub mod google;
pub mod ledger;
pub mod openai_sse;
mod percent;
mod reply;
pub mod scenario;
mod sse;
pub mod validate;
mod whole;

pub use azure::{AzureResource, EntraTokens};
pub use google::GoogleTokens;
pub use ledger::IssuedTokens;
pub use reply::Reply;
pub use validate::{Protocol, Rejection};

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A running fake provider: a loopback HTTP/1.1 server plus its script and
/// request log.
///
/// Cloning is cheap and every clone controls the same server. The server
/// stops accepting when [`FakeProvider::shutdown`] is called or when the last
/// clone is dropped, so a test cannot leak a listener past its own scope.
#[derive(Clone)]
pub struct FakeProvider {
    handle: Arc<Handle>,
}

/// Owned by the user-facing clones only (never by server tasks), so that its
/// `Drop` runs exactly when the last user handle goes away.
struct Handle {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: watch::Sender<bool>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

/// Shared between the user handles and the server tasks.
pub(crate) struct State {
    queue: Mutex<VecDeque<Reply>>,
    fallback: Mutex<Reply>,
    // A watch channel rather than Mutex + Notify: waiters subscribe and
    // re-check the predicate atomically (`wait_for`), so no wake-up is lost
    // between checking the log and starting to wait.
    log: watch::Sender<Log>,
    /// False once [`FakeProvider::keep_request_log`] turned the log off.
    keep_log: std::sync::atomic::AtomicBool,
    /// Protocols whose request rules every request is checked against
    /// ([`FakeProvider::validate_requests`]); empty means no checking.
    validators: Mutex<Vec<Protocol>>,
    /// Requests validation refused, for the test to print.
    rejections: Mutex<Vec<Rejection>>,
    /// Why this fake checks nothing ([`FakeProvider::skip_validation`]); `None`: it checks every request.
    unvalidated: Mutex<Option<String>>,
    /// The API key requests must carry ([`FakeProvider::require_api_key`]).
    api_key: Mutex<Option<String>>,
    /// Numbers the request ids of the replies.
    request_ids: std::sync::atomic::AtomicU64,
    /// Tokens a bearer header must carry ([`FakeProvider::require_google_token`]).
    google: Mutex<Option<GoogleTokens>>,
    /// The Azure OpenAI resource this fake is ([`FakeProvider::serve_azure`]).
    azure: Mutex<Option<AzureResource>>,
}

#[derive(Default)]
pub(crate) struct Log {
    requests: Vec<Recorded>,
    /// Connection id that carried `requests[i]`.
    conn_of: Vec<u64>,
    /// When the server noticed the client closing each connection.
    closed: HashMap<u64, Instant>,
    /// When the reply to `requests[i]` ended: its last byte written, the client gone, a reset, or a shutdown.
    ended: HashMap<usize, Instant>,
}

/// Locks a mutex, ignoring poisoning: a panicking `fn_reply` closure must not
/// take the whole test kit down with it, and the guarded data (a queue of
/// replies) stays consistent across such a panic.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    /// Appends a request to the log and returns its index.
    pub(crate) fn record(&self, conn: u64, rec: Recorded) -> usize {
        if !self.keep_log.load(std::sync::atomic::Ordering::Relaxed) {
            return 0;
        }
        let mut index = 0;
        self.log.send_modify(|log| {
            index = log.requests.len();
            log.requests.push(rec);
            log.conn_of.push(conn);
        });
        index
    }

    /// Only the first close notice counts: later ones (e.g. a read error
    /// after a failed write) would move the instant later than reality.
    pub(crate) fn mark_closed(&self, conn: u64, at: Instant) {
        if !self.keep_log.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        self.log.send_if_modified(|log| {
            if log.closed.contains_key(&conn) {
                return false;
            }
            log.closed.insert(conn, at);
            true
        });
    }

    /// Notes when the reply to request `index` ended.
    pub(crate) fn mark_ended(&self, index: usize, at: Instant) {
        if !self.keep_log.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        self.log.send_modify(|log| {
            log.ended.entry(index).or_insert(at);
        });
    }

    /// A fresh request id for a reply's headers.
    pub(crate) fn next_request_id(&self) -> u64 {
        self.request_ids
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn next_reply(&self) -> Reply {
        if let Some(reply) = lock(&self.queue).pop_front() {
            return reply;
        }
        lock(&self.fallback).clone()
    }
}

impl FakeProvider {
    /// Starts a server on `127.0.0.1` with an OS-assigned port.
    pub async fn start() -> std::io::Result<FakeProvider> {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts a server on a chosen address (the binary's `--listen`).
    pub async fn bind(addr: SocketAddr) -> std::io::Result<FakeProvider> {
        let listener = listen(addr)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            queue: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(reply::default_fallback()),
            log: watch::Sender::new(Log::default()),
            keep_log: std::sync::atomic::AtomicBool::new(true),
            validators: Mutex::new(Vec::new()),
            rejections: Mutex::new(Vec::new()),
            unvalidated: Mutex::new(None),
            api_key: Mutex::new(None),
            request_ids: std::sync::atomic::AtomicU64::new(1),
            google: Mutex::new(None),
            azure: Mutex::new(None),
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        tokio::spawn(accept_loop(listener, Arc::clone(&state), shutdown_rx));
        Ok(FakeProvider {
            handle: Arc::new(Handle {
                addr,
                state,
                shutdown,
            }),
        })
    }

    /// The address the server is listening on.
    pub fn addr(&self) -> SocketAddr {
        self.handle.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.handle.addr)
    }

    /// Queues a reply; requests take queued replies in FIFO order.
    pub fn push(&self, reply: Reply) {
        lock(&self.handle.state.queue).push_back(reply);
    }

    /// Sets the reply used whenever the queue is empty.
    ///
    /// The default is a 500 with an OpenAI-shaped JSON error whose message is
    /// `fake-provider: no scripted reply`, so an unexpected extra request
    /// fails loudly instead of hanging.
    pub fn set_fallback(&self, reply: Reply) {
        *lock(&self.handle.state.fallback) = reply;
    }

    /// Keeps (the default) or stops keeping the request log. A long-running
    /// server (the binary, under a benchmark's hundreds of thousands of
    /// requests) turns it off so memory stays flat; [`requests`],
    /// [`wait_requests`] and [`wait_closed`] then see nothing new. Additive to
    /// the original brief.
    ///
    /// [`requests`]: FakeProvider::requests
    /// [`wait_requests`]: FakeProvider::wait_requests
    /// [`wait_closed`]: FakeProvider::wait_closed
    pub fn keep_request_log(&self, keep: bool) {
        self.handle
            .state
            .keep_log
            .store(keep, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.handle.state.log.borrow().requests.clone()
    }

    /// Waits until at least `n` requests have arrived and returns all of them.
    ///
    /// # Panics
    ///
    /// Panics if `timeout` elapses first; the message says how many arrived.
    pub async fn wait_requests(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let mut rx = self.handle.state.log.subscribe();
        let waited =
            tokio::time::timeout(timeout, rx.wait_for(|log| log.requests.len() >= n)).await;
        match waited {
            Ok(Ok(log)) => log.requests.clone(),
            // The sender lives in `State`, which `self` keeps alive, so the
            // channel cannot close while we wait.
            Ok(Err(_)) => unreachable!("request log closed while a handle is alive"),
            Err(_) => {
                let got = self.handle.state.log.borrow().requests.len();
                panic!(
                    "fake-provider at {}: expected {n} request(s) within {timeout:?}, got {got}",
                    self.handle.addr
                )
            }
        }
    }

    /// Waits until the server notices that the client closed the connection
    /// that carried request number `request_index` (0-based, arrival order).
    ///
    /// "Noticed" means a read on that connection returned end-of-file or an
    /// error, or a write to it failed. The server reads continuously, also
    /// while it streams, stalls or sleeps between paced events, so the
    /// instant is close to when the client actually closed. Returns `None` if
    /// `timeout` elapses first, and also when the *server* ended the
    /// connection (e.g. after [`Reply::reset_after`]) since no client close
    /// is then observable.
    pub async fn wait_closed(&self, request_index: usize, timeout: Duration) -> Option<Instant> {
        let closed_at = |log: &Log| {
            log.conn_of
                .get(request_index)
                .and_then(|conn| log.closed.get(conn))
                .copied()
        };
        let mut rx = self.handle.state.log.subscribe();
        let waited =
            tokio::time::timeout(timeout, rx.wait_for(|log| closed_at(log).is_some())).await;
        match waited {
            Ok(Ok(log)) => closed_at(&log),
            _ => None,
        }
    }

    /// Waits until the reply to request number `request_index` (0-based, arrival order) ended: its last byte was
    /// written, the client left while it was being written (or stalled), it was reset, or the server shut down.
    /// Returns that instant, or `None` if `timeout` elapses first. A test uses it to tell whether something happened
    /// while a scripted answer was still streaming.
    pub async fn wait_reply_ended(
        &self,
        request_index: usize,
        timeout: Duration,
    ) -> Option<Instant> {
        let mut rx = self.handle.state.log.subscribe();
        let ended = |log: &Log| log.ended.get(&request_index).copied();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|log| ended(log).is_some())).await;
        match waited {
            Ok(Ok(log)) => ended(&log),
            _ => None,
        }
    }

    /// Stops the server: no new connections are accepted and open
    /// connections are closed (a clean FIN, mid-response if need be).
    ///
    /// Closing open connections too makes "the provider went away" a single
    /// call in tests and keeps stalled connections from outliving the test.
    pub fn shutdown(&self) {
        self.handle.shutdown.send_replace(true);
    }
}

impl std::fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProvider")
            .field("addr", &self.handle.addr)
            .finish_non_exhaustive()
    }
}

/// Thousands of benchmark streams connect at once; the default backlog
/// (1024) would drop SYNs and add a one-second retransmit to their first
/// token. The kernel caps the value at `net.core.somaxconn`.
const BACKLOG: u32 = 8192;

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does on Unix: a restarted server can rebind at
    // once while old connections sit in TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<State>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut next_conn: u64 = 0;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = wait_shutdown(&mut shutdown) => return,
        };
        match accepted {
            Ok((stream, _peer)) => {
                // Nagle would merge our deliberately separate writes (split
                // frames, paced events) into fewer segments, hiding exactly
                // the boundaries the tests are about.
                let _ = stream.set_nodelay(true);
                next_conn += 1;
                tokio::spawn(conn::serve(
                    stream,
                    Arc::clone(&state),
                    next_conn,
                    shutdown.clone(),
                ));
            }
            // Accept errors are transient (EMFILE, aborted handshakes); a
            // short pause keeps a persistent one from spinning a core.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// Resolves once shutdown was requested or every handle is gone.
pub(crate) async fn wait_shutdown(rx: &mut watch::Receiver<bool>) {
    // An error means the sender (owned by the handle) was dropped, which is
    // also a shutdown.
    let _ = rx.wait_for(|stop| *stop).await;
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Request method as sent, e.g. `POST`.
    pub method: String,
    /// Request target as sent, including any query string.
    pub path: String,
    /// Headers in arrival order, names lower-cased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The request body (`Content-Length` bytes).
    pub body: Bytes,
    /// When the last byte of the request (end of body) had been read.
    pub received_at: Instant,
}

impl Recorded {
    /// The body parsed as JSON.
    ///
    /// # Panics
    ///
    /// Panics with the body's beginning if it is not valid JSON; in a test
    /// that is the assertion failure one wants to read.
    pub fn json(&self) -> serde_json::Value {
        match serde_json::from_slice(&self.body) {
            Ok(value) => value,
            Err(err) => {
                let shown = String::from_utf8_lossy(&self.body[..self.body.len().min(200)]);
                panic!(
                    "fake-provider: body of {} {} is not JSON ({err}): {shown}",
                    self.method, self.path
                )
            }
        }
    }

    /// The first header with this name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
