//! HTTP transport (stub: being completed). The one place that talks HTTP to providers.

use std::time::Duration;

use crate::adapter::{Decoder, HttpRequest};
use crate::error::ProviderError;
use crate::event::Event;

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

impl RetryPolicy {
    /// The delay before attempt `attempt + 1` after `err` on attempt `attempt` (1-based), or `None` when the error
    /// must not be retried.
    pub fn delay(&self, attempt: u32, err: &ProviderError) -> Option<Duration> {
        let _ = (attempt, err);
        None
    }
}

/// The shared HTTP client.
#[derive(Debug, Clone)]
pub struct Transport {
    client: reqwest::Client,
    timeouts: Timeouts,
}

impl Transport {
    /// A transport with these timeouts.
    pub fn new(timeouts: Timeouts) -> Result<Self, ProviderError> {
        let client = reqwest::Client::new();
        Ok(Transport { client, timeouts })
    }

    /// Sends `req` to `base_url` + `req.path` with `auth` headers; returns the open stream after a 2xx response, or
    /// the classified error.
    pub async fn open(
        &self,
        base_url: &str,
        auth: &[(&'static str, String)],
        req: &HttpRequest,
    ) -> Result<ProviderStream, ProviderError> {
        let _ = (&self.client, self.timeouts, base_url, auth, req);
        Err(ProviderError::malformed("transport not yet implemented"))
    }
}

/// An open provider response body.
pub struct ProviderStream {
    _private: (),
}

impl ProviderStream {
    /// Reads the next chunk of the body and feeds every complete SSE frame to `decoder`, which pushes events to
    /// `out`. Returns `Ok(false)` once the body has ended (after calling `decoder.end`).
    pub async fn pump(&mut self, decoder: &mut dyn Decoder, out: &mut Vec<Event>) -> Result<bool, ProviderError> {
        let _ = (decoder, out);
        Ok(false)
    }
}
