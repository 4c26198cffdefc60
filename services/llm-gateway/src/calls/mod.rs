//! The calls that are not generations (docs/gateway.md "Embeddings and token counting"): [`embed`] and
//! [`count`], one answer each, made of one provider request (or a few, for a batch of embeddings larger than the
//! provider takes at once).
//!
//! They share a generation's ways: the caller's token (checked by each door), a slot of
//! `server.max_inflight_generations`, the model resolved from the catalog, the provider's credentials (key, access
//! token or SigV4 signature), the retry policy before the answer, a span per call with one per provider request,
//! the metrics and the scrubbing of credentials from what providers echo. They never fall back to another model: an
//! embedding is only comparable with embeddings of its own model, and a count is of one model's tokenizer.

pub mod count;
pub mod embed;
mod spans;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use tracing::Instrument;

use crate::adapter::transport::{Answer, RequestSigner};
use crate::adapter::{Adapter, EncodedRequest};
use crate::catalog::ModelInfo;
use crate::config::Provider;
use crate::error::ProviderError;
use crate::generate::{Snapshot, StartError, authenticated, scrub};
use crate::metrics::{CallEnded, Embedded, Metrics, ModelLabels, Operation, Outcome};
use crate::protocol::Protocol;

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// It could not start: an unknown model, one of the wrong kind, a request that cannot be translated, a hook
    /// that refused, or no free slot.
    Start(StartError),
    /// The request broke a validation rule (the status names the field).
    Status(tonic::Status),
    /// The request is larger than a limit: `field` names what, `message` the limit.
    TooLarge {
        /// The field at fault.
        field: String,
        /// What is too large.
        message: String,
    },
    /// The model's tokens cannot be counted: its provider has no counting endpoint and the gateway no tokenizer of
    /// its.
    NoCounting {
        /// The model.
        model: String,
    },
    /// The provider failed, after the retries.
    Provider {
        /// What it said.
        error: ProviderError,
        /// Its wire protocol.
        protocol: Protocol,
    },
}

impl From<StartError> for CallError {
    fn from(e: StartError) -> Self {
        CallError::Start(e)
    }
}

impl From<crate::adapter::BuildError> for CallError {
    fn from(e: crate::adapter::BuildError) -> Self {
        CallError::Start(StartError::Invalid(e))
    }
}

impl CallError {
    /// The error kind, for metrics and spans.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Start(e) => crate::start_error::start_error_kind(e).as_str(),
            CallError::Status(_) | CallError::TooLarge { .. } | CallError::NoCounting { .. } => {
                "invalid_request"
            }
            CallError::Provider { error, .. } => error.kind.as_str(),
        }
    }

    /// The gRPC status: each start error as a generation's, `RESOURCE_EXHAUSTED` for a size, `FAILED_PRECONDITION`
    /// for a model that cannot be counted (the request is fine; the model lacks the means), a provider failure as
    /// `Generate` reports one.
    pub fn status(&self) -> tonic::Status {
        match self {
            CallError::Start(e) => crate::status::start_error_status(e),
            CallError::Status(s) => s.clone(),
            CallError::TooLarge { field, message } => {
                crate::validate::too_large(field, "fixed", message)
            }
            CallError::NoCounting { model } => service_kit::status::with_info(
                tonic::Code::FailedPrecondition,
                no_counting_message(model),
                crate::status::ERROR_DOMAIN,
                "TOKEN_COUNT_UNAVAILABLE",
                &[("model", model.as_str())],
            ),
            CallError::Provider { error, .. } => crate::status::provider_error_status(error),
        }
    }
}

/// Why a model has no token count.
pub fn no_counting_message(model: &str) -> String {
    format!(
        "`{model}` cannot be counted: its provider has no token-counting endpoint and the gateway has no tokenizer \
         for it (set `tokenizer` on its catalog entry if one fits)"
    )
}

/// A model a call goes to, resolved.
pub(crate) struct Target {
    pub(crate) model: ModelInfo,
    pub(crate) provider: Provider,
    pub(crate) labels: ModelLabels,
}

impl Target {
    /// The adapters' view of the target.
    pub(crate) fn adapter_target(&self) -> crate::adapter::Target<'_> {
        crate::adapter::Target {
            model: &self.model,
            azure: self.provider.azure.as_ref(),
        }
    }
}

/// What a call's provider requests share.
pub(crate) struct Sender<'a> {
    pub(crate) snapshot: &'a Snapshot,
    pub(crate) metrics: &'a Metrics,
    pub(crate) target: &'a Target,
    /// Provider requests made so far, across batches and retries.
    pub(crate) requests: AtomicU32,
}

impl<'a> Sender<'a> {
    /// A sender to `target`, with the call's snapshot and metrics.
    pub(crate) fn new(snapshot: &'a Snapshot, metrics: &'a Metrics, target: &'a Target) -> Self {
        Sender {
            snapshot,
            metrics,
            target,
            requests: AtomicU32::new(0),
        }
    }

    /// Sends `request` until it is answered, or fails in a way (or as often as) the retry policy does not retry.
    /// Each attempt is a provider request span; a failed one is counted in the provider-error metric.
    pub(crate) async fn send(&self, request: &EncodedRequest) -> Result<Answer, ProviderError> {
        let provider = &self.target.provider;
        let adapter = self.target.model.protocol.adapter();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let n = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
            let span = crate::tracing_spans::attempt_span(
                &provider.id,
                &provider.base_url,
                &request.path,
                n,
            );
            let mut sent = request.clone();
            llm_telemetry::inject_headers(&span, &mut sent.headers);
            let answered = self
                .attempt(provider, adapter, &sent)
                .instrument(span.clone())
                .await;
            let mut err = match answered {
                Ok(answer) => return Ok(answer),
                Err(e) => e,
            };
            scrub(&mut err, self.snapshot.secrets());
            crate::tracing_spans::attempt_failed(&span, &err);
            self.metrics
                .provider_error(&self.target.labels, err.kind.as_str());
            let Some(delay) = self.snapshot.config().retry.delay(attempt, &err) else {
                return Err(err);
            };
            tracing::warn!(
                message = "provider request failed; retrying",
                provider = %provider.id,
                model = %self.target.model.id,
                attempt,
                kind = err.kind.as_str(),
            );
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(
        &self,
        provider: &Provider,
        adapter: &'static dyn Adapter,
        request: &EncodedRequest,
    ) -> Result<Answer, ProviderError> {
        let transport = self.snapshot.transport();
        let signer = provider.signer.as_deref().map(|s| s as &dyn RequestSigner);
        authenticated(provider, adapter, |auth| async move {
            transport
                .call(&provider.base_url, &auth, request, signer)
                .await
        })
        .await
    }
}

/// Records one call's end in the metrics exactly once: when it is finished, or when it is dropped unfinished (the
/// caller went away).
pub(crate) struct Meter<'a> {
    metrics: &'a Metrics,
    labels: Option<ModelLabels>,
    operation: Operation,
    started: Instant,
    done: bool,
}

impl<'a> Meter<'a> {
    pub(crate) fn new(metrics: &'a Metrics, operation: Operation) -> Self {
        Meter {
            metrics,
            labels: None,
            operation,
            started: Instant::now(),
            done: false,
        }
    }

    /// The model the call went to, once resolved: calls refused before are not recorded, like generations.
    pub(crate) fn target(&mut self, labels: &ModelLabels) {
        self.labels = Some(labels.clone());
    }

    /// Records the end.
    pub(crate) fn end(
        &mut self,
        outcome: Outcome,
        error_kind: Option<&'static str>,
        embedded: Option<Embedded>,
    ) {
        if self.done {
            return;
        }
        self.done = true;
        if let Some(labels) = &self.labels {
            self.metrics.call_ended(&CallEnded {
                labels,
                operation: self.operation,
                outcome,
                duration: self.started.elapsed(),
                error_kind,
                embedded,
            });
        }
    }

    /// Records `result`'s end: an error by its kind.
    pub(crate) fn end_with<T>(
        &mut self,
        result: &Result<T, CallError>,
        embedded: Option<Embedded>,
    ) {
        match result {
            Ok(_) => self.end(Outcome::Ok, None, embedded),
            Err(e) => self.end(Outcome::Error, Some(e.kind()), None),
        }
    }
}

impl Drop for Meter<'_> {
    fn drop(&mut self) {
        self.end(Outcome::Cancelled, None, None);
    }
}
