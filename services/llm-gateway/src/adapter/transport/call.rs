//! One request, one whole JSON answer: the transport of the calls that are not generations (embeddings, token
//! counts). The same client, timeouts, signing, classification and redaction as a stream's [`Transport::open_with`];
//! the answer is read whole, up to [`MAX_ANSWER_BYTES`].

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use super::{
    Framing, RequestSigner, Transport, bounded, build_headers, refused, request_error, scrub,
    secrets_of, sign, timeout, total_timeout,
};
use crate::adapter::EncodedRequest;
use crate::adapter::transport::classify::{Relay, redact, relayed_headers};
use crate::error::{ErrorKind, ProviderError};

/// Largest answer read: 2048 embeddings of 3072 dimensions, OpenAI's largest batch of its largest model, are 33 MB
/// as base64 and about twice that as JSON numbers. A larger answer is a provider error, not retried.
pub const MAX_ANSWER_BYTES: usize = 128 * 1024 * 1024;

/// A provider's 2xx answer to one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The response headers, lower-case names (values that are not text are left out).
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Bytes,
    /// The provider's rate-limit and request-id headers, as a stream's are relayed to callers.
    pub relayed: Vec<(String, String)>,
    /// The request's credential values, scrubbed from the body an error keeps ([`Answer::json`]).
    pub(crate) secrets: Vec<String>,
}

impl Answer {
    /// The first header named `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as `T`; a body that is not is a provider error naming `api`, with the body's start kept (the
    /// request's credentials scrubbed from it).
    pub fn json<'a, T: serde::Deserialize<'a>>(&'a self, api: &str) -> Result<T, ProviderError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            let mut err =
                ProviderError::malformed(format!("{api} answered an unreadable body: {e}"));
            // Scrubbed like an error response's body: what a provider echoes may hold the request's credentials.
            let secrets: Vec<&str> = self.secrets.iter().map(String::as_str).collect();
            let body = redact(&String::from_utf8_lossy(&self.body), &secrets);
            err.provider_body = crate::error::truncate(
                &body,
                crate::adapter::transport::classify::MAX_PROVIDER_BODY,
            )
            .to_string();
            err
        })
    }
}

impl Transport {
    /// Sends `req` to `base_url` + `req.path` with `auth` headers (or `signer`'s signature) and reads the whole
    /// answer: a 2xx's body, or the classified error. The answer's headers arrive only when the provider has done
    /// the work, so their wait is bounded by the total timeout; each read of the body by the idle timeout.
    pub async fn call(
        &self,
        base_url: &str,
        auth: &[(&'static str, String)],
        req: &EncodedRequest,
        signer: Option<&dyn RequestSigner>,
    ) -> Result<Answer, ProviderError> {
        let deadline = Instant::now().checked_add(self.timeouts.total);
        let url = format!("{}{}", base_url.trim_end_matches('/'), req.path);
        let mut secrets = secrets_of(auth, &url);
        let signer_secrets = signer.map(|s| s.secrets()).unwrap_or_default();
        secrets.extend(signer_secrets.iter().map(String::as_str));
        let mut headers = build_headers(&req.headers, auth, Framing::Json)?;
        if let Some(signer) = signer {
            sign(signer, &url, &req.body, &mut headers)?;
        }
        let send = self
            .client
            .post(&url)
            .headers(headers)
            .body(req.body.clone())
            .send();
        let (wait, _) = bounded(self.timeouts.total, deadline, Instant::now());
        let mut response = match tokio::time::timeout(wait, send).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(scrub(request_error(&e, &self.timeouts), &secrets)),
            Err(_) => return Err(total_timeout(self.timeouts.total)),
        };
        if !response.status().is_success() {
            return Err(refused(&mut response, self.timeouts.idle, deadline, &secrets).await);
        }
        let headers = response
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let relayed = relayed_headers(response.headers(), Relay::Success);
        let body = self.read_answer(&mut response, deadline).await?;
        Ok(Answer {
            headers,
            body,
            relayed,
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// The whole body of a 2xx answer, each read within the idle timeout, all of it within the deadline and
    /// [`MAX_ANSWER_BYTES`].
    async fn read_answer(
        &self,
        response: &mut reqwest::Response,
        deadline: Option<Instant>,
    ) -> Result<Bytes, ProviderError> {
        let mut body = BytesMut::new();
        loop {
            let (wait, total_bound) = bounded(self.timeouts.idle, deadline, Instant::now());
            match tokio::time::timeout(wait, response.chunk()).await {
                Ok(Ok(Some(chunk))) => {
                    if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                        let mut e = ProviderError::new(
                            ErrorKind::ProviderError,
                            format!(
                                "the provider's answer is larger than {MAX_ANSWER_BYTES} bytes"
                            ),
                        );
                        e.retryable = false;
                        return Err(e);
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(Ok(None)) => return Ok(body.freeze()),
                Ok(Err(e)) => {
                    return Err(ProviderError::new(
                        ErrorKind::Network,
                        format!(
                            "connection lost reading the answer: {}",
                            super::root_cause(&e)
                        ),
                    ));
                }
                Err(_) if total_bound => return Err(total_timeout(self.timeouts.total)),
                Err(_) => {
                    return Err(timeout(format!(
                        "no data for {}",
                        super::fmt_duration(self.timeouts.idle)
                    )));
                }
            }
        }
    }
}
