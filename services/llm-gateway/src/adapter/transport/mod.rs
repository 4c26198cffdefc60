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

pub mod classify;
pub mod redact;

use std::pin::Pin;
use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::{Instant, Sleep};

use crate::adapter::framing::Framing;
use crate::adapter::framing::{self, Parser};
use crate::adapter::transport::classify::{Relay, classify, redact, relayed_headers};
use crate::adapter::{Decoder, EncodedRequest};
use crate::error::{ErrorKind, ProviderError};
use crate::event::Event;
pub use call::Answer;

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
            max_event_bytes: crate::adapter::framing::sse::DEFAULT_LIMIT,
        })
    }

    /// The same transport, with streams capped at `bytes` per SSE line, event or bare JSON value.
    pub fn with_max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// Sends `req` to `base_url` + `req.path` with `auth` headers; returns the open stream after a 2xx response, or
    /// the classified error. The tests' shorthand for [`open_with`](Transport::open_with).
    #[cfg(test)]
    pub async fn open(
        &self,
        base_url: &str,
        auth: &[(&'static str, String)],
        req: &crate::adapter::HttpRequest,
    ) -> Result<ProviderStream, ProviderError> {
        self.open_with(base_url, auth, &req.clone().encode(), Opening::default())
            .await
    }

    /// Sends `req` to `base_url` + `req.path` with `auth` headers, with the response framing and, for signed providers, the signer that adds the
    /// auth headers once the body bytes are known.
    pub async fn open_with(
        &self,
        base_url: &str,
        auth: &[(&'static str, String)],
        req: &EncodedRequest,
        opening: Opening<'_>,
    ) -> Result<ProviderStream, ProviderError> {
        // The total budget covers the whole generation, including the wait for the headers.
        let deadline = Instant::now().checked_add(self.timeouts.total);
        let url = format!("{}{}", base_url.trim_end_matches('/'), req.path);
        let secrets = secrets_of(auth, &url);

        let mut headers = build_headers(&req.headers, auth, opening.framing)?;
        // A clone of `Bytes` shares the buffer: a retry sends the same bytes without serialising them again.
        let body = req.body.clone();
        let signer_secrets = opening.signer.map(|s| s.secrets()).unwrap_or_default();
        let mut secrets = secrets;
        secrets.extend(signer_secrets.iter().map(String::as_str));
        if let Some(signer) = opening.signer {
            sign(signer, &url, &body, &mut headers)?;
        }

        // A whole JSON answer (Bedrock's non-streaming Converse) has no headers until the model has finished: its
        // wait is the total budget, not the first-byte timeout meant for streams.
        let first_byte = match opening.framing {
            Framing::Json => self.timeouts.total,
            Framing::Sse | Framing::EventStream => self.timeouts.first_byte,
        };
        let (wait, total_bound) = bounded(first_byte, deadline, Instant::now());
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

        if !response.status().is_success() {
            return Err(refused(&mut response, self.timeouts.idle, deadline, &secrets).await);
        }

        let parser = self
            .parser_for(&mut response, opening.framing, deadline, &secrets)
            .await?;
        let relayed = relayed_headers(response.headers(), Relay::Success);
        // hyper parses the response head in place: every header value is a slice of the connection's read buffer,
        // so while the headers live that buffer cannot be reused and each later read allocates a fresh one (8 KiB
        // per open stream). Nothing reads them after this.
        drop(std::mem::take(response.headers_mut()));
        let now = Instant::now();
        let (wait, _) = bounded(self.timeouts.idle, deadline, now);
        Ok(ProviderStream {
            response,
            parser,
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            idle: self.timeouts.idle,
            total: self.timeouts.total,
            deadline,
            idle_timer: Box::pin(tokio::time::sleep_until(after(now, wait))),
            ended: false,
            relayed,
        })
    }
}

impl Transport {
    /// The framing parser for a 2xx `response` to a request that asked for `expected`, chosen by its content type
    /// ([`framing::answered`]); a media type no adapter reads is an error carrying the start of the body.
    async fn parser_for(
        &self,
        response: &mut reqwest::Response,
        expected: Framing,
        deadline: Option<Instant>,
        secrets: &[&str],
    ) -> Result<Parser, ProviderError> {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        match framing::answered(expected, content_type) {
            Ok(Some(framing)) => Ok(Parser::new(framing, self.max_event_bytes)),
            Ok(None) => Ok(Parser::sniffing(expected, self.max_event_bytes)),
            Err(media) => {
                let status = response.status().as_u16();
                let raw = read_error_body(response, self.timeouts.idle, deadline).await;
                Err(unreadable(status, &media, expected, redact(&raw, secrets)))
            }
        }
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
    /// The request's credential values (its auth headers, a signer's secrets), scrubbed from errors the stream
    /// carries: a short-lived access token is in no configuration-wide list.
    secrets: Vec<String>,
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
    /// The response headers relayed to callers ([`relayed_headers`]), until taken.
    relayed: Vec<(String, String)>,
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
    #[cfg(test)]
    pub fn status(&self) -> u16 {
        self.response.status().as_u16()
    }

    /// The provider's rate-limit and request-id headers of this response ([`relayed_headers`]); empty once taken.
    pub fn take_headers(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.relayed)
    }

    /// Removes this request's credentials from `err` (a mid-stream error echoing what was sent).
    pub fn scrub(&self, err: &mut ProviderError) {
        let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
        err.message = redact(&err.message, &secrets);
        err.provider_body = redact(&err.provider_body, &secrets);
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
    extra: &[(String, String)],
    auth: &[(&'static str, String)],
    framing: Framing,
) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::with_capacity(extra.len() + auth.len() + 2);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static(framing.media_type()));
    for (name, value) in extra {
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

/// The classified error of a non-2xx `response`, its body read (within `idle` per read) and scrubbed of `secrets`.
async fn refused(
    response: &mut reqwest::Response,
    idle: Duration,
    deadline: Option<Instant>,
    secrets: &[&str],
) -> ProviderError {
    let raw = read_error_body(response, idle, deadline).await;
    // Redact before classifying: classification truncates the body, which could cut a secret in half and leave a
    // prefix that redaction would no longer recognise.
    let body = redact(&raw, secrets);
    classify(
        Some(response.status().as_u16()),
        Some(response.headers()),
        &body,
    )
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

/// A 2xx response whose content type no adapter reads (an HTML page from a proxy, say): a provider error that keeps
/// the start of the body for diagnosis. Not retried: the same request would be answered the same way.
fn unreadable(status: u16, media: &str, expected: Framing, body: String) -> ProviderError {
    let mut err = ProviderError::new(
        ErrorKind::ProviderError,
        format!(
            "the provider answered {status} with content type `{media}`, not `{}` or JSON",
            expected.media_type()
        ),
    );
    err.http_status = Some(status);
    err.retryable = false;
    err.provider_body = body;
    err
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

mod call;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
