//! HTTP transport: the one place that talks HTTP to providers (docs/architecture.md "Retries", "A generation, step by step").
//!
//! [`Transport::open`] sends one request and returns either an open [`ProviderStream`] (2xx) or the classified error;
//! [`ProviderStream::pump`] moves one body read through the framing parser (SSE, or the AWS eventstream) into a
//! [`Decoder`]. Nothing is buffered
//! beyond the unfinished SSE line: each frame reaches the decoder in the read that completes it.
//!
//! Credentials: auth headers are marked sensitive (hyper never logs them), every error body is redacted with the auth
//! values before classification, and no message ever contains the request URL (only its path is ours; a query could
//! carry a key) or a header value.

use std::pin::Pin;
use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::{Instant, Sleep};

use crate::adapter::classify::{classify, redact};
pub use crate::adapter::framing::Framing;
use crate::adapter::framing::Parser;
use crate::adapter::{Decoder, HttpRequest};
use crate::error::{ErrorKind, ProviderError};
use crate::event::Event;

/// Largest error body read from a non-2xx response: enough for any provider's JSON error, bounded so a misbehaving
/// server cannot make us buffer without limit.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// Transport timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP (and TLS) connect.
    pub connect: Duration,
    /// From sending the request to the response headers.
    pub first_byte: Duration,
    /// Longest gap between two body reads.
    pub idle: Duration,
    /// Whole generation.
    pub total: Duration,
}

impl Default for Timeouts {
    /// Connect 10 s, first byte 60 s (reasoning models can think before the headers), idle 60 s, total 10 min.
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(60),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(600),
        }
    }
}

/// Retry policy for errors that happen before the first event reached the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (1 = no retry).
    pub max_attempts: u32,
    /// First backoff delay.
    pub base_delay: Duration,
    /// Largest backoff delay.
    pub max_delay: Duration,
    /// Largest provider-requested delay the gateway honours; a longer one is not retried.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// 3 attempts, 500 ms base, 8 s cap, provider delays honoured up to 60 s (vercel's cap).
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The delay before attempt `attempt + 1` after `err` on attempt `attempt` (1-based), or `None` when the error
    /// must not be retried.
    ///
    /// A provider-requested delay is used exactly (it knows when its limit resets); a longer one than
    /// `max_retry_after` means "not soon", so the caller should fail over instead of waiting. Otherwise the delay is
    /// `base * 2^(attempt-1)` capped at `max_delay`, jittered uniformly into `[d/2, d]` so that callers that failed
    /// together do not retry together.
    pub fn delay(&self, attempt: u32, err: &ProviderError) -> Option<Duration> {
        if !err.retryable || attempt >= self.max_attempts {
            return None;
        }
        if let Some(asked) = err.retry_after {
            return (asked <= self.max_retry_after).then_some(asked);
        }
        // Shifts past 31 would overflow u32; the cap is reached long before anyway.
        let exp = attempt.saturating_sub(1).min(31);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let hi = u64::try_from(full.as_nanos()).unwrap_or(u64::MAX);
        let lo = hi / 2;
        Some(Duration::from_nanos(rand::random_range(lo..=hi)))
    }
}

/// Authenticates a request from its exact bytes (AWS SigV4), for providers whose credentials are not a fixed header.
pub trait RequestSigner: Send + Sync + std::fmt::Debug {
    /// The auth headers of a POST of `body` to `url` with this content type; values are marked sensitive.
    fn sign(
        &self,
        url: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<Vec<(HeaderName, HeaderValue)>, ProviderError>;

    /// Credential values that must be scrubbed from anything a provider echoes back.
    fn secrets(&self) -> Vec<String>;
}

/// What [`Transport::open_with`] needs beyond the request: the response framing and an optional signer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opening<'a> {
    pub framing: Framing,
    pub signer: Option<&'a dyn RequestSigner>,
}

/// The shared HTTP client.
#[derive(Debug, Clone)]
pub struct Transport {
    client: reqwest::Client,
    timeouts: Timeouts,
    /// Largest SSE line, event or bare JSON value read from a provider (`limits.max_sse_event_bytes`).
    max_event_bytes: usize,
}

impl Transport {
    /// A transport with these timeouts.
    pub fn new(timeouts: Timeouts) -> Result<Self, ProviderError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("llm-gateway/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(timeouts.connect)
            // Deltas are small and latency-sensitive: do not let Nagle hold them back.
            .tcp_nodelay(true)
            // Generations can sit silent for a long time while the model thinks; keepalive detects dead peers.
            .tcp_keepalive(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(64)
            // A redirect could send the request, with its credentials, to a host the operator did not configure.
            .redirect(reqwest::redirect::Policy::none())
            // No `.timeout()`: a total request timeout would cut healthy long streams; ours are enforced per read.
            .build()
            .map_err(|e| {
                ProviderError::new(
                    ErrorKind::ProviderError,
                    format!("building the HTTP client failed: {}", root_cause(&e)),
                )
            })?;
        Ok(Transport {
            client,
            timeouts,
            max_event_bytes: crate::adapter::sse::DEFAULT_LIMIT,
        })
    }

    /// The same transport, with streams capped at `bytes` per SSE line, event or bare JSON value.
    pub fn with_max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// The timeouts this transport applies.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Sends `req` to `base_url` + `req.path` with `auth` headers; returns the open stream after a 2xx response, or
    /// the classified error.
    pub async fn open(
        &self,
        base_url: &str,
        auth: &[(&'static str, String)],
        req: &HttpRequest,
    ) -> Result<ProviderStream, ProviderError> {
        self.open_with(base_url, auth, req, Opening::default())
            .await
    }

    /// [`open`](Transport::open) with the response framing and, for signed providers, the signer that adds the
    /// auth headers once the body bytes are known.
    pub async fn open_with(
        &self,
        base_url: &str,
        auth: &[(&'static str, String)],
        req: &HttpRequest,
        opening: Opening<'_>,
    ) -> Result<ProviderStream, ProviderError> {
        // The total budget covers the whole generation, including the wait for the headers.
        let deadline = Instant::now().checked_add(self.timeouts.total);
        let url = format!("{}{}", base_url.trim_end_matches('/'), req.path);
        let secrets = secrets_of(auth, &url);

        let mut headers = build_headers(req, auth, opening.framing)?;
        let body = serde_json::to_vec(&req.body).map_err(|e| {
            ProviderError::new(
                ErrorKind::InvalidRequest,
                format!("serializing the request body failed: {e}"),
            )
        })?;
        let signer_secrets = opening.signer.map(|s| s.secrets()).unwrap_or_default();
        let mut secrets = secrets;
        secrets.extend(signer_secrets.iter().map(String::as_str));
        if let Some(signer) = opening.signer {
            sign(signer, &url, &body, &mut headers)?;
        }

        let (wait, total_bound) = bounded(self.timeouts.first_byte, deadline, Instant::now());
        let send = self.client.post(&url).headers(headers).body(body).send();
        let mut response = match tokio::time::timeout(wait, send).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(scrub(request_error(&e, &self.timeouts), &secrets)),
            Err(_) if total_bound => return Err(total_timeout(self.timeouts.total)),
            Err(_) => {
                return Err(timeout(format!(
                    "first byte timeout after {}",
                    fmt_duration(self.timeouts.first_byte)
                )));
            }
        };

        let status = response.status();
        if !status.is_success() {
            let raw = read_error_body(&mut response, self.timeouts.idle, deadline).await;
            // Redact before classifying: classification truncates the body, which could cut a secret in half
            // and leave a prefix that redaction would no longer recognise.
            let body = redact(&raw, &secrets);
            return Err(classify(
                Some(status.as_u16()),
                Some(response.headers()),
                &body,
            ));
        }

        // hyper parses the response head in place: every header value is a slice of the connection's read buffer,
        // so while the headers live that buffer cannot be reused and each later read allocates a fresh one (8 KiB
        // per open stream). Nothing reads them after the status check.
        drop(std::mem::take(response.headers_mut()));
        let now = Instant::now();
        let (wait, _) = bounded(self.timeouts.idle, deadline, now);
        let parser = Parser::new(opening.framing, self.max_event_bytes);
        Ok(ProviderStream {
            response,
            parser,
            idle: self.timeouts.idle,
            total: self.timeouts.total,
            deadline,
            idle_timer: Box::pin(tokio::time::sleep_until(after(now, wait))),
            ended: false,
        })
    }
}

/// `now + wait`, or as far ahead as the clock allows (a wait that large never fires in practice).
fn after(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait)
        .or_else(|| now.checked_add(Duration::from_secs(86_400 * 365)))
        .unwrap_or(now)
}

/// An open provider response body.
pub struct ProviderStream {
    response: reqwest::Response,
    parser: Parser,
    idle: Duration,
    total: Duration,
    /// `None` when `total` is too large to add to the clock, i.e. effectively unbounded.
    deadline: Option<Instant>,
    /// The idle (or total) timeout of the read in progress: one timer per stream, moved forward before every read,
    /// instead of a timer registered and cancelled per read (`tokio::time::timeout`). Moving a registered timer
    /// later is an atomic store; the timer wheel is touched only when it actually comes due.
    idle_timer: Pin<Box<Sleep>>,
    /// The body ended or failed: `pump` does nothing more.
    ended: bool,
}

impl std::fmt::Debug for ProviderStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderStream")
            .field("status", &self.response.status())
            .field("idle", &self.idle)
            .field("total", &self.total)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl ProviderStream {
    /// The response status (always 2xx).
    pub fn status(&self) -> u16 {
        self.response.status().as_u16()
    }

    /// Reads the next chunk of the body and feeds every complete SSE frame to `decoder`, which pushes events to
    /// `out`. Returns `Ok(false)` once the body has ended (after calling `decoder.end`).
    ///
    /// Frames that arrive after the decoder is done are not fed to it (its contract is to push nothing more). After
    /// an error or the end of the body the stream stays ended and further calls return `Ok(false)`.
    pub async fn pump(
        &mut self,
        decoder: &mut dyn Decoder,
        out: &mut Vec<Event>,
    ) -> Result<bool, ProviderError> {
        if self.ended {
            return Ok(false);
        }
        // Checked up front because the read is polled before the timer: a body that always has data ready would
        // otherwise never hit the total deadline.
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            self.ended = true;
            return Err(total_timeout(self.total));
        }
        let (wait, total_bound) = bounded(self.idle, self.deadline, now);
        self.idle_timer.as_mut().reset(after(now, wait));
        let read = tokio::select! {
            biased;
            read = self.response.chunk() => Ok(read),
            () = self.idle_timer.as_mut() => Err(()),
        };

        match read {
            Ok(Ok(Some(chunk))) => match self.parser.feed(&chunk, decoder, out) {
                Ok(()) => Ok(true),
                Err(e) => {
                    // Returning the error drops this stream, and with it the provider connection.
                    self.ended = true;
                    Err(e)
                }
            },
            Ok(Ok(None)) => {
                self.ended = true;
                self.parser.finish(decoder, out)?;
                if !decoder.is_done() {
                    decoder.end(out);
                }
                Ok(false)
            }
            Ok(Err(e)) => {
                self.ended = true;
                Err(ProviderError::new(
                    ErrorKind::Network,
                    format!("connection lost mid-stream: {}", root_cause(&e)),
                ))
            }
            Err(_) => {
                self.ended = true;
                Err(if total_bound {
                    total_timeout(self.total)
                } else {
                    timeout(format!("no data for {}", fmt_duration(self.idle)))
                })
            }
        }
    }
}

/// Adds `signer`'s auth headers for this exact body.
fn sign(
    signer: &dyn RequestSigner,
    url: &str,
    body: &[u8],
    headers: &mut HeaderMap,
) -> Result<(), ProviderError> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    for (name, value) in signer.sign(url, &content_type, body)? {
        headers.insert(name, value);
    }
    Ok(())
}

/// Default headers, then the adapter's, then auth last so nothing can replace the provider credentials.
fn build_headers(
    req: &HttpRequest,
    auth: &[(&'static str, String)],
    framing: Framing,
) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::with_capacity(req.headers.len() + auth.len() + 2);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let accept = match framing {
        Framing::Sse => "text/event-stream",
        Framing::EventStream => "application/vnd.amazon.eventstream",
    };
    headers.insert(ACCEPT, HeaderValue::from_static(accept));
    for (name, value) in &req.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ProviderError::new(
                ErrorKind::InvalidRequest,
                format!("invalid request header name {name:?}"),
            )
        })?;
        // The value is not echoed: hook-supplied headers may carry tokens.
        let value = HeaderValue::from_str(value).map_err(|_| {
            ProviderError::new(
                ErrorKind::InvalidRequest,
                format!("invalid value for request header {name}"),
            )
        })?;
        headers.insert(name, value);
    }
    for (name, value) in auth {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ProviderError::new(
                ErrorKind::Auth,
                format!("invalid auth header name {name:?}"),
            )
        })?;
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            ProviderError::new(
                ErrorKind::Auth,
                format!("the API key for header {name} is not a valid header value"),
            )
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    Ok(headers)
}

/// Strings that must not appear in an error: each auth value, its credential part (`Bearer <key>` → `<key>`), and
/// the URL's query.
fn secrets_of<'a>(auth: &'a [(&'static str, String)], url: &'a str) -> Vec<&'a str> {
    let mut secrets = Vec::with_capacity(auth.len() * 2 + 1);
    for (_, value) in auth {
        secrets.push(value.as_str());
        if let Some((_, credential)) = value.split_once(' ') {
            secrets.push(credential.trim());
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        secrets.push(query);
    }
    secrets
}

fn scrub(mut err: ProviderError, secrets: &[&str]) -> ProviderError {
    err.message = redact(&err.message, secrets);
    err.provider_body = redact(&err.provider_body, secrets);
    err
}

/// The wait allowed for the next step: `limit`, or what is left of the total budget if that is shorter (and then
/// `true`, so the caller reports the right timeout).
fn bounded(limit: Duration, deadline: Option<Instant>, now: Instant) -> (Duration, bool) {
    match deadline {
        Some(deadline) => {
            let left = deadline.saturating_duration_since(now);
            if left < limit {
                (left, true)
            } else {
                (limit, false)
            }
        }
        None => (limit, false),
    }
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of an error response; a stall or a broken connection just ends the read,
/// since a partial body still classifies better than none.
async fn read_error_body(
    response: &mut reqwest::Response,
    idle: Duration,
    deadline: Option<Instant>,
) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        let (wait, _) = bounded(idle, deadline, Instant::now());
        match tokio::time::timeout(wait, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                let room = MAX_ERROR_BODY - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// Maps a reqwest failure before the response headers arrived.
fn request_error(e: &reqwest::Error, timeouts: &Timeouts) -> ProviderError {
    if e.is_connect() && e.is_timeout() {
        timeout(format!(
            "connect timeout after {}",
            fmt_duration(timeouts.connect)
        ))
    } else if e.is_connect() {
        ProviderError::new(
            ErrorKind::Network,
            format!("connecting to the provider failed: {}", root_cause(e)),
        )
    } else if e.is_timeout() {
        timeout(format!("request timed out: {}", root_cause(e)))
    } else if e.is_builder() {
        // A malformed base URL or header: configuration, not a transient failure.
        ProviderError::new(
            ErrorKind::ProviderError,
            format!("invalid provider request: {}", root_cause(e)),
        )
    } else {
        ProviderError::new(
            ErrorKind::Network,
            format!("sending the request failed: {}", root_cause(e)),
        )
    }
}

/// The innermost cause of `e`. reqwest's own `Display` appends the URL, which may carry a query we must not log; its
/// sources (hyper, io, DNS) describe the failure without it.
fn root_cause(e: &reqwest::Error) -> String {
    let mut cause: Option<&dyn std::error::Error> = None;
    let mut next = std::error::Error::source(e);
    while let Some(source) = next {
        cause = Some(source);
        next = source.source();
    }
    match cause {
        Some(cause) => cause.to_string(),
        None if e.is_body() || e.is_decode() => "error reading the response body".to_string(),
        None => "unknown error".to_string(),
    }
}

fn timeout(message: String) -> ProviderError {
    ProviderError::new(ErrorKind::Timeout, message)
}

fn total_timeout(total: Duration) -> ProviderError {
    timeout(format!(
        "generation exceeded total timeout of {}",
        fmt_duration(total)
    ))
}

/// `30s`, or `200ms` for a duration that is not whole seconds.
fn fmt_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::event::Finish;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::oneshot;

    // ---- RetryPolicy ----

    fn retryable() -> ProviderError {
        ProviderError::new(ErrorKind::Overloaded, "busy")
    }

    #[test]
    fn defaults() {
        let t = Timeouts::default();
        assert_eq!(
            (t.connect, t.first_byte, t.idle, t.total),
            (
                Duration::from_secs(10),
                Duration::from_secs(60),
                Duration::from_secs(60),
                Duration::from_secs(600)
            )
        );
        let p = RetryPolicy::default();
        assert_eq!(p.max_attempts, 3);
        assert_eq!(p.base_delay, Duration::from_millis(500));
        assert_eq!(p.max_delay, Duration::from_secs(8));
        assert_eq!(p.max_retry_after, Duration::from_secs(60));
    }

    #[test]
    fn retry_backoff_jitter_within_half_to_full_and_capped() {
        let policy = RetryPolicy {
            max_attempts: 40,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(60),
        };
        let err = retryable();
        for attempt in 1..40u32 {
            let full = Duration::from_millis(100)
                .saturating_mul(1u32 << (attempt - 1).min(31))
                .min(Duration::from_secs(1));
            for _ in 0..200 {
                let d = policy.delay(attempt, &err).unwrap();
                assert!(
                    d >= full / 2 && d <= full,
                    "attempt {attempt}: {d:?} not in [{:?}, {full:?}]",
                    full / 2
                );
            }
        }
        // The jitter actually varies.
        let samples: std::collections::HashSet<_> =
            (0..50).map(|_| policy.delay(3, &err)).collect();
        assert!(samples.len() > 1);
    }

    #[test]
    fn retry_uses_provider_delay_exactly_unless_too_long() {
        let policy = RetryPolicy::default();
        let mut err = retryable();
        err.retry_after = Some(Duration::from_millis(1574));
        assert_eq!(policy.delay(1, &err), Some(Duration::from_millis(1574)));
        err.retry_after = Some(Duration::from_secs(60));
        assert_eq!(policy.delay(2, &err), Some(Duration::from_secs(60)));
        err.retry_after = Some(Duration::from_secs(61));
        assert_eq!(policy.delay(1, &err), None);
    }

    #[test]
    fn retry_none_when_not_retryable_or_attempts_exhausted() {
        let policy = RetryPolicy::default();
        let auth = ProviderError::new(ErrorKind::Auth, "bad key");
        assert_eq!(policy.delay(1, &auth), None);
        assert!(policy.delay(2, &retryable()).is_some());
        assert_eq!(policy.delay(3, &retryable()), None);
        let once = RetryPolicy {
            max_attempts: 1,
            ..policy
        };
        assert_eq!(once.delay(1, &retryable()), None);
    }

    #[test]
    fn duration_formatting() {
        assert_eq!(fmt_duration(Duration::from_secs(30)), "30s");
        assert_eq!(fmt_duration(Duration::from_millis(200)), "200ms");
    }

    #[test]
    fn secrets_include_bearer_credential_and_query() {
        let auth = [("authorization", "Bearer sk-1".to_string())];
        assert_eq!(
            secrets_of(&auth, "http://h/p?key=abc"),
            vec!["Bearer sk-1", "sk-1", "key=abc"]
        );
    }

    // ---- transport against a raw loopback HTTP/1.1 server ----

    /// A request as the test server saw it.
    #[derive(Debug)]
    struct Seen {
        head: String,
        body: Vec<u8>,
    }

    async fn read_request(sock: &mut TcpStream) -> Seen {
        let mut buf = Vec::new();
        let mut tmp = [0u8; 4096];
        loop {
            let n = sock.read(&mut tmp).await.unwrap();
            assert!(n > 0, "client closed before sending a full request");
            buf.extend_from_slice(&tmp[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8(buf[..end].to_vec()).unwrap();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                let mut body = buf[end + 4..].to_vec();
                while body.len() < len {
                    let n = sock.read(&mut tmp).await.unwrap();
                    assert!(n > 0);
                    body.extend_from_slice(&tmp[..n]);
                }
                return Seen { head, body };
            }
        }
    }

    /// Serves one connection with `handler`; returns the base URL.
    async fn serve<F, Fut>(handler: F) -> String
    where
        F: FnOnce(TcpStream, Seen) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let seen = read_request(&mut sock).await;
            handler(sock, seen).await;
        });
        format!("http://{addr}/v1/")
    }

    fn chunk(data: &str) -> Vec<u8> {
        format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
    }

    const SSE_HEAD: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

    fn request() -> HttpRequest {
        HttpRequest {
            path: "/chat/completions".to_string(),
            headers: vec![("anthropic-version".to_string(), "2023-06-01".to_string())],
            body: serde_json::json!({"model": "m", "stream": true}),
        }
    }

    fn auth() -> Vec<(&'static str, String)> {
        vec![("authorization", "Bearer sk-test-secret".to_string())]
    }

    fn timeouts(idle_ms: u64, total_ms: u64) -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(5),
            idle: Duration::from_millis(idle_ms),
            total: Duration::from_millis(total_ms),
        }
    }

    /// Records what reached it; `end` finishes the stream.
    #[derive(Default)]
    struct Recorder {
        frames: Vec<(String, String)>,
        bare: Vec<String>,
        ended: bool,
    }

    impl Decoder for Recorder {
        fn frame(&mut self, event: &str, data: &str, out: &mut Vec<Event>) {
            self.frames.push((event.to_string(), data.to_string()));
            out.push(Event::TextDelta {
                id: event.to_string(),
                delta: data.to_string(),
            });
        }

        fn bare_json(&mut self, json: &str, _out: &mut Vec<Event>) {
            self.bare.push(json.to_string());
        }

        fn end(&mut self, out: &mut Vec<Event>) {
            self.ended = true;
            out.push(Event::Finish(Finish::default()));
        }

        fn is_done(&self) -> bool {
            self.ended
        }

        fn restart(&self) -> Box<dyn Decoder> {
            Box::new(Recorder::default())
        }
    }

    #[tokio::test]
    async fn sends_json_with_headers_and_classifies_429_retry_after_ms() {
        let (seen_tx, seen_rx) = oneshot::channel();
        let base = serve(|mut sock, seen| async move {
            let body = r#"{"error":{"message":"Rate limit reached. Please try again in 9s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
            let reply = format!(
                "HTTP/1.1 429 Too Many Requests\r\nretry-after-ms: 1500\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(reply.as_bytes()).await.unwrap();
            let _ = seen_tx.send(seen);
        })
        .await;
        let transport = Transport::new(timeouts(1000, 5000)).unwrap();
        let err = transport
            .open(&base, &auth(), &request())
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::RateLimited);
        assert!(err.retryable);
        assert_eq!(err.http_status, Some(429));
        assert_eq!(err.retry_after, Some(Duration::from_millis(1500)));
        assert_eq!(err.message, "Rate limit reached. Please try again in 9s.");

        let seen = seen_rx.await.unwrap();
        let head = seen.head.to_ascii_lowercase();
        assert!(
            head.starts_with("post /v1/chat/completions http/1.1\r\n"),
            "{head}"
        );
        for line in [
            "authorization: bearer sk-test-secret",
            "accept: text/event-stream",
            "content-type: application/json",
            "anthropic-version: 2023-06-01",
        ] {
            assert!(head.contains(line), "missing {line:?} in {head}");
        }
        let body: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
        assert_eq!(body, request().body);
    }

    #[tokio::test]
    async fn error_body_is_redacted() {
        let base = serve(|mut sock, _| async move {
            let body = r#"{"error":{"message":"Incorrect API key provided: sk-test-secret.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
            let reply = format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(reply.as_bytes()).await.unwrap();
        })
        .await;
        let transport = Transport::new(timeouts(1000, 5000)).unwrap();
        let err = transport
            .open(&base, &auth(), &request())
            .await
            .unwrap_err();
        assert_eq!((err.kind, err.retryable), (ErrorKind::Auth, false));
        assert_eq!(err.message, "Incorrect API key provided: [REDACTED].");
        assert!(!err.provider_body.contains("sk-test-secret"));
    }

    #[tokio::test]
    async fn chunked_sse_split_mid_frame_reaches_decoder() {
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let base = serve(|mut sock, _| async move {
            sock.write_all(SSE_HEAD.as_bytes()).await.unwrap();
            sock.write_all(&chunk(": OPENROUTER PROCESSING\n\ndata: {\"a\":1}\n\nda"))
                .await
                .unwrap();
            // Hold the rest back until the client has processed the first read, so the split is real.
            let _ = go_rx.await;
            sock.write_all(&chunk("ta: {\"b\":2}\n\n")).await.unwrap();
            sock.write_all(b"0\r\n\r\n").await.unwrap();
        })
        .await;
        let transport = Transport::new(timeouts(2000, 10_000)).unwrap();
        let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
        assert_eq!(stream.status(), 200);
        let mut decoder = Recorder::default();
        let mut out = Vec::new();
        // The gRPC layer drives these futures from spawned tasks: they must be `Send`.
        fn assert_send<T: Send>(_: &T) {}
        assert_send(&stream.pump(&mut decoder, &mut out));
        assert_send(&transport.open(&base, &[], &request()));
        while decoder.frames.is_empty() {
            assert!(stream.pump(&mut decoder, &mut out).await.unwrap());
        }
        assert_eq!(
            decoder.frames,
            vec![(String::new(), "{\"a\":1}".to_string())]
        );
        go_tx.send(()).unwrap();
        while stream.pump(&mut decoder, &mut out).await.unwrap() {}
        assert_eq!(
            decoder.frames,
            vec![
                (String::new(), "{\"a\":1}".to_string()),
                (String::new(), "{\"b\":2}".to_string())
            ]
        );
        assert!(decoder.ended);
        assert_eq!(out.last(), Some(&Event::Finish(Finish::default())));
        // Ended streams stay ended.
        assert!(!stream.pump(&mut decoder, &mut out).await.unwrap());
    }

    #[tokio::test]
    async fn content_length_body_with_bare_json_and_unterminated_frame() {
        let base = serve(|mut sock, _| async move {
            let body = "event: e\r\ndata: x\r\n\r\n{\n  \"error\": {\n    \"code\": 503\n  }\n}\ndata: [DONE]";
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(reply.as_bytes()).await.unwrap();
        })
        .await;
        let transport = Transport::new(timeouts(2000, 10_000)).unwrap();
        let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
        let mut decoder = Recorder::default();
        let mut out = Vec::new();
        while stream.pump(&mut decoder, &mut out).await.unwrap() {}
        assert_eq!(
            decoder.frames,
            vec![
                ("e".to_string(), "x".to_string()),
                (String::new(), "[DONE]".to_string())
            ]
        );
        assert_eq!(
            decoder.bare,
            vec!["{\n  \"error\": {\n    \"code\": 503\n  }\n}".to_string()]
        );
        assert!(decoder.ended);
    }

    #[tokio::test]
    async fn idle_timeout_fires_when_server_stalls() {
        let (hold_tx, hold_rx) = oneshot::channel::<()>();
        let base = serve(|mut sock, _| async move {
            sock.write_all(SSE_HEAD.as_bytes()).await.unwrap();
            sock.write_all(&chunk("data: x\n\n")).await.unwrap();
            // Never write again; keep the socket open until the test is over.
            let _ = hold_rx.await;
        })
        .await;
        let transport = Transport::new(timeouts(200, 10_000)).unwrap();
        let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
        let mut decoder = Recorder::default();
        let mut out = Vec::new();
        while decoder.frames.is_empty() {
            assert!(stream.pump(&mut decoder, &mut out).await.unwrap());
        }
        let started = std::time::Instant::now();
        let err = stream.pump(&mut decoder, &mut out).await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert_eq!((err.kind, err.retryable), (ErrorKind::Timeout, true));
        assert_eq!(err.message, "no data for 200ms");
        assert!(!decoder.ended);
        drop(hold_tx);
    }

    #[tokio::test]
    async fn total_timeout_bounds_the_stream() {
        let (hold_tx, hold_rx) = oneshot::channel::<()>();
        let base = serve(|mut sock, _| async move {
            sock.write_all(SSE_HEAD.as_bytes()).await.unwrap();
            sock.write_all(&chunk("data: x\n\n")).await.unwrap();
            let _ = hold_rx.await;
        })
        .await;
        let transport = Transport::new(timeouts(10_000, 300)).unwrap();
        let started = std::time::Instant::now();
        let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
        let mut decoder = Recorder::default();
        let mut out = Vec::new();
        let err = loop {
            match stream.pump(&mut decoder, &mut out).await {
                Ok(true) => {}
                Ok(false) => panic!("body ended"),
                Err(e) => break e,
            }
        };
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(err.kind, ErrorKind::Timeout);
        assert_eq!(err.message, "generation exceeded total timeout of 300ms");
        drop(hold_tx);
    }

    #[tokio::test]
    async fn first_byte_timeout_when_headers_never_come() {
        let (hold_tx, hold_rx) = oneshot::channel::<()>();
        let base = serve(|sock, _| async move {
            // Keep the connection open, silent, until the test is over.
            let _sock = sock;
            let _ = hold_rx.await;
        })
        .await;
        let transport = Transport::new(Timeouts {
            first_byte: Duration::from_millis(200),
            ..timeouts(1000, 10_000)
        })
        .unwrap();
        let err = transport
            .open(&base, &auth(), &request())
            .await
            .unwrap_err();
        assert_eq!((err.kind, err.retryable), (ErrorKind::Timeout, true));
        assert_eq!(err.message, "first byte timeout after 200ms");
        drop(hold_tx);
    }

    #[tokio::test]
    async fn connection_lost_mid_stream_is_network() {
        let base = serve(|mut sock, _| async move {
            sock.write_all(SSE_HEAD.as_bytes()).await.unwrap();
            sock.write_all(&chunk("data: x\n\n")).await.unwrap();
            // Close without the terminating zero-length chunk.
            drop(sock);
        })
        .await;
        let transport = Transport::new(timeouts(2000, 10_000)).unwrap();
        let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
        let mut decoder = Recorder::default();
        let mut out = Vec::new();
        let err = loop {
            match stream.pump(&mut decoder, &mut out).await {
                Ok(true) => {}
                Ok(false) => panic!("truncated body reported as a clean end"),
                Err(e) => break e,
            }
        };
        assert_eq!((err.kind, err.retryable), (ErrorKind::Network, true));
        assert!(
            err.message.starts_with("connection lost mid-stream"),
            "{}",
            err.message
        );
        assert_eq!(decoder.frames.len(), 1);
    }

    #[tokio::test]
    async fn connect_refused_is_network_without_url() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let transport = Transport::new(timeouts(1000, 5000)).unwrap();
        let base = format!("http://{addr}/v1?key=query-secret");
        let err = transport
            .open(&base, &auth(), &request())
            .await
            .unwrap_err();
        assert_eq!((err.kind, err.retryable), (ErrorKind::Network, true));
        assert!(!err.message.contains("query-secret"), "{}", err.message);
        assert!(!err.message.contains("127.0.0.1"), "{}", err.message);
    }

    #[tokio::test]
    async fn redirects_are_not_followed() {
        let base = serve(|mut sock, _| async move {
            sock.write_all(
                b"HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:1/elsewhere\r\ncontent-length: 0\r\n\r\n",
            )
            .await
            .unwrap();
        })
        .await;
        let transport = Transport::new(timeouts(1000, 5000)).unwrap();
        let err = transport
            .open(&base, &auth(), &request())
            .await
            .unwrap_err();
        assert_eq!(err.http_status, Some(302));
        assert!(!err.retryable);
        assert_eq!(err.message, "HTTP 302 (Found)");
    }

    #[tokio::test]
    async fn invalid_auth_value_is_rejected_without_echo() {
        let transport = Transport::new(timeouts(1000, 5000)).unwrap();
        let auth = vec![("x-api-key", "bad\nkey".to_string())];
        let err = transport
            .open("http://127.0.0.1:1", &auth, &request())
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Auth);
        assert!(!err.message.contains("bad"));
    }
}
