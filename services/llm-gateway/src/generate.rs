//! One generation, end to end: resolve the model, build the provider request, send it, retry before the first
//! event, decode, and price the step.
//!
//! The stream returned by [`Gateway::stream`] *is* the provider call: nothing is spawned and nothing is buffered, so
//! each decoded event is forwarded as soon as it exists and dropping the stream (the caller cancelled) drops the
//! upstream HTTP request at once.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::Stream;
use llm_proto::gateway as pb;

use crate::adapter::transport::{ProviderStream, Transport};
use crate::adapter::{Adapter, BuildError, Decoder, HttpRequest, Target, classify};
use crate::catalog::ModelInfo;
use crate::config::{Config, Provider};
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, FinishReason};
use crate::grpc;

/// Why a generation could not start; mapped to a gRPC status by [`crate::grpc`].
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The model is not served.
    #[error("model `{model}` is not in the catalog{}", suggestions(.close))]
    UnknownModel { model: String, close: Vec<String> },
    /// The request cannot be translated.
    #[error(transparent)]
    Invalid(#[from] BuildError),
}

fn suggestions(close: &[String]) -> String {
    if close.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}", close.join(", "))
    }
}

/// Everything a generation needs; cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    transport: Transport,
    /// Every provider key, so error text from providers can be scrubbed before it reaches a caller or a log.
    secrets: Vec<String>,
}

impl Gateway {
    /// A gateway for this configuration.
    pub fn new(config: Config) -> Result<Gateway, ProviderError> {
        let transport = Transport::new(config.timeouts)?;
        let secrets = config
            .providers
            .values()
            .map(|p| p.api_key.expose().to_string())
            .filter(|k| !k.is_empty())
            .collect();
        Ok(Gateway {
            inner: Arc::new(Inner {
                config,
                transport,
                secrets,
            }),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Resolves a `provider/model` id to its catalog entry and provider.
    pub fn resolve(&self, id: &str) -> Result<(ModelInfo, Provider), StartError> {
        let config = &self.inner.config;
        let unknown = || StartError::UnknownModel {
            model: id.to_string(),
            close: config
                .catalog
                .close_matches(id)
                .into_iter()
                .map(String::from)
                .collect(),
        };
        let (provider_id, name) = id.split_once('/').ok_or_else(unknown)?;
        let provider = config.providers.get(provider_id).ok_or_else(unknown)?;
        match config.catalog.get(id) {
            Some(m) => Ok((m.clone(), provider.clone())),
            None if provider.allow_unlisted_models && !name.is_empty() => {
                Ok((provider.unlisted_model(id, name), provider.clone()))
            }
            None => Err(unknown()),
        }
    }

    /// Starts a generation: validates, resolves and builds the request, then returns the event stream. Errors here
    /// happen before anything was sent to a provider.
    pub fn stream(
        &self,
        generation: &pb::Generation,
    ) -> Result<impl Stream<Item = pb::StreamResponse> + Send + 'static, StartError> {
        let (model, provider) = self.resolve(&generation.model)?;
        let adapter = model.protocol.adapter();
        let target = Target { model: &model };
        let mut request = adapter.build(generation, &target)?;
        // Caller headers go last but cannot replace the adapter's own (validation already refused auth and framing
        // headers), so a caller can tag requests but never re-route or re-authenticate them.
        for (name, value) in &generation.extra_headers {
            let lower = name.to_ascii_lowercase();
            if !request.headers.iter().any(|(n, _)| *n == lower) {
                request.headers.push((lower, value.clone()));
            }
        }
        let decoder = adapter.decoder(&target);
        let run = Run {
            gateway: self.clone(),
            adapter,
            model,
            provider,
            request,
            decoder,
            stream: None,
            attempt: 0,
            started: false,
            saw_tool_call: false,
            done: false,
            decoded: Vec::with_capacity(16),
            pending: VecDeque::with_capacity(16),
        };
        Ok(futures::stream::unfold(run, |mut run| async move {
            run.next().await.map(|ev| (ev, run))
        }))
    }
}

/// The state of one generation in flight.
struct Run {
    gateway: Gateway,
    adapter: &'static dyn Adapter,
    model: ModelInfo,
    provider: Provider,
    request: HttpRequest,
    decoder: Box<dyn Decoder>,
    /// The open provider response, if any.
    stream: Option<ProviderStream>,
    /// 1-based number of the attempt in progress.
    attempt: u32,
    /// True once the first event went to the caller: from then on nothing is retried.
    started: bool,
    /// A tool call was emitted, so a `stop` finish is reported as `tool_calls`.
    saw_tool_call: bool,
    /// The terminal event has been queued.
    done: bool,
    /// Scratch buffer the decoder pushes into, reused across reads.
    decoded: Vec<Event>,
    /// Events ready for the caller.
    pending: VecDeque<pb::StreamResponse>,
}

impl Run {
    async fn next(&mut self) -> Option<pb::StreamResponse> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            if self.stream.is_none() {
                self.attempt += 1;
                let auth = self.adapter.auth_headers(self.provider.api_key.expose());
                match self
                    .gateway
                    .inner
                    .transport
                    .open(&self.provider.base_url, &auth, &self.request)
                    .await
                {
                    Ok(s) => self.stream = Some(s),
                    Err(e) => {
                        self.fail_or_retry(e).await;
                        continue;
                    }
                }
            }
            let Some(stream) = self.stream.as_mut() else {
                continue;
            };
            match stream.pump(self.decoder.as_mut(), &mut self.decoded).await {
                Ok(_) => self.forward_decoded().await,
                Err(e) => self.fail_or_retry(e).await,
            }
        }
    }

    /// Moves decoded events to the caller's queue; a failure before the first forwarded event may be retried.
    async fn forward_decoded(&mut self) {
        if self.decoded.is_empty() {
            return;
        }
        if !self.started {
            if let Some(Event::Error(e)) = self.decoded.first() {
                let e = e.clone();
                self.decoded.clear();
                self.fail_or_retry(e).await;
                return;
            }
            self.started = true;
            self.pending.push_back(grpc::stream_start(
                &self.provider.id,
                &self.model.id,
                self.attempt,
            ));
            self.pending.push_back(grpc::step_start());
        }
        for mut ev in self.decoded.drain(..) {
            match &mut ev {
                Event::ToolCall { .. } => self.saw_tool_call = true,
                Event::Finish(f) => {
                    if self.saw_tool_call && f.reason == FinishReason::Stop {
                        f.reason = FinishReason::ToolCalls;
                    }
                    self.done = true;
                }
                Event::Error(e) => {
                    scrub(e, &self.gateway.inner.secrets);
                    self.done = true;
                }
                _ => {}
            }
            self.pending.push_back(grpc::event_to_pb(ev, &self.model));
            if self.done {
                break;
            }
        }
        self.decoded.clear();
        if self.done {
            self.stream = None;
        }
    }

    /// Retries `err` when nothing reached the caller yet and the policy allows; otherwise ends with it.
    ///
    /// A generation that fails before any output gets `stream_start` (which attempt failed last) and the error, but
    /// no `step_start`: no model step happened.
    async fn fail_or_retry(&mut self, mut err: ProviderError) {
        self.stream = None;
        if !self.started {
            if let Some(delay) = self.gateway.inner.config.retry.delay(self.attempt, &err) {
                tracing::warn!(
                    message = "provider attempt failed; retrying",
                    provider = %self.provider.id,
                    model = %self.model.id,
                    attempt = self.attempt,
                    kind = err.kind.as_str(),
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                );
                self.decoder = self.adapter.decoder(&Target { model: &self.model });
                tokio::time::sleep(delay).await;
                return;
            }
            if self.attempt > 1 {
                err.message = format!("{} (after {} attempts)", err.message, self.attempt);
            }
            self.started = true;
            self.pending.push_back(grpc::stream_start(
                &self.provider.id,
                &self.model.id,
                self.attempt,
            ));
        }
        scrub(&mut err, &self.gateway.inner.secrets);
        self.pending
            .push_back(grpc::event_to_pb(Event::Error(err), &self.model));
        self.done = true;
    }
}

/// Removes provider keys from anything a provider echoed back.
fn scrub(e: &mut ProviderError, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    e.message = classify::redact(&e.message, &refs);
    e.provider_body = classify::redact(&e.provider_body, &refs);
}

/// `ErrorKind` for a start error, for metrics and logs.
pub fn start_error_kind(e: &StartError) -> ErrorKind {
    match e {
        StartError::UnknownModel { .. } | StartError::Invalid(_) => ErrorKind::InvalidRequest,
    }
}
