//! One generation, end to end: resolve the model and its fallbacks, run the hooks, build the provider request, send
//! it, retry and fall back before the first event, decode, and price the step.
//!
//! The stream returned by [`Gateway::stream`] *is* the provider call: nothing is spawned and nothing is buffered, so
//! each decoded event is forwarded as soon as it exists and dropping the stream (the caller cancelled) drops the
//! upstream HTTP request, or a hook call in progress, at once.
//!
//! The gateway's configuration lives behind an [`ArcSwap`]: each generation takes a snapshot when it starts and keeps
//! it to the end, so [`Gateway::reload`] changes what new generations see without touching streams in flight.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures::Stream;
use llm_proto::gateway as pb;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use crate::adapter::transport::{Opening, ProviderStream, RequestSigner, Transport};
use crate::adapter::{Adapter, Decoder, HttpRequest, Target, classify};
use crate::catalog::ModelInfo;
use crate::config::{Config, ConfigError, Env, Provider};
use crate::convert;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, FinishReason, Usage};
use crate::hooks::HookRunner;
use crate::metrics::{Ended, Metrics, ModelLabels, Outcome, UNLISTED_MODEL};

pub use crate::start_error::{StartError, start_error_kind};

/// Why a reload did not take effect; the running configuration stays in force.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The configuration file or environment is invalid (the error names the key).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client for the new timeouts could not be built.
    #[error("transport: {0}")]
    Transport(#[from] ProviderError),
}

/// Everything a generation needs; cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    /// The reloadable part.
    state: ArcSwap<State>,
    /// Survives reloads, so counters keep counting.
    metrics: Arc<Metrics>,
    /// Global in-flight limit. Fixed at start-up: resizing a semaphore under load is not worth its edge cases.
    inflight: Arc<Semaphore>,
    inflight_limit: usize,
}

/// One consistent configuration and what is built from it.
struct State {
    config: Arc<Config>,
    transport: Transport,
    /// Every provider key, so error text from providers can be scrubbed before it reaches a caller or a log.
    secrets: Vec<String>,
    hooks: HookRunner,
}

impl State {
    fn new(config: Config) -> Result<State, ProviderError> {
        let transport = Transport::new(config.timeouts)?
            .with_max_event_bytes(config.limits.max_sse_event_bytes);
        let secrets = config
            .providers
            .values()
            .flat_map(|p| {
                let signer = p.signer.as_ref().map(|s| s.secrets()).unwrap_or_default();
                std::iter::once(p.api_key.expose().to_string()).chain(signer)
            })
            .filter(|k| !k.is_empty())
            .collect();
        let hooks = HookRunner::new(&config.hooks, &config.hook_services);
        Ok(State {
            config: Arc::new(config),
            transport,
            secrets,
            hooks,
        })
    }

    fn resolve(&self, id: &str) -> Result<Candidate, StartError> {
        let config = &self.config;
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
        let (model, label) = match config.catalog.get(id) {
            Some(m) => (m.clone(), id),
            None if provider.allow_unlisted_models && !name.is_empty() => {
                // Callers choose unlisted names freely; one label for all of them keeps the series bounded.
                (provider.unlisted_model(id, name), UNLISTED_MODEL)
            }
            None => return Err(unknown()),
        };
        Ok(Candidate {
            labels: ModelLabels {
                provider: Arc::from(provider.id.as_str()),
                model: Arc::from(label),
            },
            model,
            provider: provider.clone(),
        })
    }
}

impl Gateway {
    /// A gateway for this configuration.
    pub fn new(config: Config) -> Result<Gateway, ProviderError> {
        let limit = config.max_inflight_generations;
        Ok(Gateway {
            inner: Arc::new(Inner {
                state: ArcSwap::from_pointee(State::new(config)?),
                metrics: Arc::new(Metrics::new()),
                inflight: Arc::new(Semaphore::new(limit)),
                inflight_limit: limit,
            }),
        })
    }

    /// The configuration in force now (a snapshot: a reload does not change it).
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.inner.state.load().config)
    }

    /// The gateway's metrics, for the `/metrics` listener.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.inner.metrics)
    }

    /// Replaces the catalog, providers, hooks, fallbacks, timeouts, retry policy and caller tokens for generations
    /// that start from now on. Streams in flight keep the configuration they started with.
    ///
    /// The listen addresses, size and concurrency limits and the shutdown grace period are fixed at start-up; a
    /// change to them is logged and takes effect at the next restart.
    pub fn reload(&self, config: Config) -> Result<(), ReloadError> {
        let result = self.swap(config);
        self.inner.metrics.reload(result.is_ok());
        result
    }

    fn swap(&self, config: Config) -> Result<(), ReloadError> {
        let old = self.config();
        let fixed = [
            ("server.listen", old.listen != config.listen),
            (
                "server.metrics_listen",
                old.metrics_listen != config.metrics_listen,
            ),
            ("server.http_listen", old.http_listen != config.http_listen),
            (
                "server.max_request_bytes",
                old.max_request_bytes != config.max_request_bytes,
            ),
            (
                "server.max_concurrent_streams",
                old.max_concurrent_streams != config.max_concurrent_streams,
            ),
            (
                "server.max_inflight_generations",
                old.max_inflight_generations != config.max_inflight_generations,
            ),
            (
                "server.shutdown_grace_ms",
                old.shutdown_grace != config.shutdown_grace,
            ),
        ];
        for (key, changed) in fixed {
            if changed {
                tracing::warn!(
                    message = "configuration key changed but only takes effect after a restart",
                    key
                );
            }
        }
        let state = State::new(config)?;
        tracing::info!(
            message = "configuration reloaded",
            providers = state.config.providers.len(),
            models = state.config.catalog.iter().count(),
            hooks = state.config.hooks.len(),
            hook_services = state.config.hook_services.len(),
        );
        self.inner.state.store(Arc::new(state));
        Ok(())
    }

    /// Loads the configuration from `path` and the environment and [`reload`](Gateway::reload)s it. On any error
    /// the running configuration stays in force; the error names the offending key.
    pub fn reload_from(&self, path: Option<&Path>, env: &dyn Env) -> Result<(), ReloadError> {
        match Config::load(path, env) {
            Ok(config) => self.reload(config),
            Err(e) => {
                self.inner.metrics.reload(false);
                Err(e.into())
            }
        }
    }

    /// Resolves a `provider/model` id to its catalog entry and provider.
    pub fn resolve(&self, id: &str) -> Result<(ModelInfo, Provider), StartError> {
        let c = self.inner.state.load().resolve(id)?;
        Ok((c.model, c.provider))
    }

    /// Starts a generation: takes an in-flight slot, resolves the model and its fallbacks, runs the hooks and builds
    /// the request for the first model, then returns the event stream. Errors here happen before anything was sent
    /// to a provider.
    pub async fn stream(
        &self,
        generation: pb::Generation,
    ) -> Result<impl Stream<Item = pb::StreamResponse> + Send + 'static, StartError> {
        let started = Instant::now();
        let run = self.start(generation, started).await;
        let run = match run {
            Ok(run) => run,
            Err(e) => {
                self.inner.metrics.rejected(rejection_reason(&e));
                return Err(e);
            }
        };
        Ok(futures::stream::unfold(run, |mut run| async move {
            run.next().await.map(|ev| (ev, run))
        }))
    }

    async fn start(&self, generation: pb::Generation, started: Instant) -> Result<Run, StartError> {
        let permit = Arc::clone(&self.inner.inflight)
            .try_acquire_owned()
            .map_err(|_| StartError::TooManyGenerations {
                limit: self.inner.inflight_limit,
            })?;
        let state = self.inner.state.load_full();
        let mut candidates = vec![state.resolve(&generation.model)?];
        let fallbacks = if generation.fallback_models.is_empty() {
            state.config.catalog.fallbacks(&generation.model)
        } else {
            generation.fallback_models.as_slice()
        };
        for id in fallbacks {
            let c = state.resolve(id)?;
            if !candidates.iter().any(|o| o.model.id == c.model.id) {
                candidates.push(c);
            }
        }
        // Each fallback model gets the caller's request as sent, with its own hooks applied: keep a pristine copy
        // only when there is somewhere to fall back to.
        let pristine = (candidates.len() > 1).then(|| Box::new(generation.clone()));
        let metrics = Arc::clone(&self.inner.metrics);
        let prepared = prepare(&state, &metrics, &candidates[0], generation).await?;
        metrics.generation_started();
        let setup = started.elapsed();
        Ok(Run {
            state,
            metrics,
            permit: Some(permit),
            candidates,
            current: 0,
            pristine,
            prepared: Some(prepared),
            stream: None,
            attempt: 0,
            attempt_span: None,
            target_attempts: 0,
            failures: Vec::new(),
            last_error: None,
            started: false,
            saw_tool_call: false,
            done: false,
            // A read decodes one or two events and the first batch queues four (`stream_start`, `step_start`, the
            // block start and its first delta); both grow if a read ever brings more. Room for 16 held ~4 KiB per
            // open stream.
            decoded: Vec::with_capacity(4),
            pending: VecDeque::with_capacity(4),
            clock: Clock {
                started,
                busy: setup,
                waiting: Duration::ZERO,
                polled_at: None,
            },
            outcome: None,
        })
    }
}

/// The metrics `reason` of a start error.
fn rejection_reason(e: &StartError) -> &'static str {
    match e {
        StartError::UnknownModel { .. } => "unknown_model",
        StartError::Invalid(_) => "invalid_request",
        StartError::Hook(_) => "hook",
        StartError::TooManyGenerations { .. } => "too_many_generations",
    }
}

/// A model the generation may be served by, resolved when the generation starts.
struct Candidate {
    model: ModelInfo,
    provider: Provider,
    labels: ModelLabels,
}

/// A candidate's request, built and ready to send.
struct Prepared {
    adapter: &'static dyn Adapter,
    request: HttpRequest,
    decoder: Box<dyn Decoder>,
}

/// Applies `candidate`'s catalog sampling defaults to `generation`, runs its hooks and builds its provider request
/// with its protocol's adapter.
async fn prepare(
    state: &State,
    metrics: &Metrics,
    candidate: &Candidate,
    mut generation: pb::Generation,
) -> Result<Prepared, StartError> {
    let adapter = candidate.model.protocol.adapter();
    let target = Target {
        model: &candidate.model,
    };
    let min_budget = if candidate.model.capabilities.reasoning {
        adapter.min_thinking_budget(&target)
    } else {
        0
    };
    crate::validate::model_rules(&generation, &candidate.model, min_budget)?;
    // The model's catalog defaults come first, so the hooks (operator policy) see and may override them.
    if let Some(defaults) = state.config.catalog.defaults(&candidate.model.id) {
        defaults.apply(&mut generation);
    }
    let hook_headers = state
        .hooks
        .apply(&candidate.model, &mut generation, metrics)
        .await?;
    let model = candidate.model.clone();
    let large = crate::offload::is_large(&generation);
    // Building (schema lowering, the body) is the CPU-heavy part of a large request: off the async workers.
    crate::offload::run(large, move || {
        let target = Target { model: &model };
        let mut request = adapter.build(&generation, &target)?;
        // Hook headers are operator policy: they replace the adapter's (whose reserved ones hooks cannot name).
        for (name, value) in &hook_headers {
            crate::hooks::set_header(&mut request.headers, name, value);
        }
        // Caller headers go last but cannot replace anything already set (validation refused auth and framing
        // headers), so a caller can tag requests but never re-route, re-authenticate them or undo a hook.
        for (name, value) in &generation.extra_headers {
            let lower = name.to_ascii_lowercase();
            if !request.headers.iter().any(|(n, _)| *n == lower) {
                request.headers.push((lower, value.clone()));
            }
        }
        let decoder = adapter.decoder_for(&target, &generation);
        Ok(Prepared {
            adapter,
            request,
            decoder,
        })
    })
    .await
}

/// Opens one provider request: authenticated with the provider's API key, or with an access token from its token
/// source (Vertex AI), fetched or taken from the cache here so a token failure is an attempt failure like any other
/// (retried when it is transient).
async fn open_attempt(
    transport: &crate::adapter::transport::Transport,
    provider: &Provider,
    adapter: &'static dyn Adapter,
    request: &HttpRequest,
    opening: Opening<'_>,
) -> Result<crate::adapter::transport::ProviderStream, ProviderError> {
    let Some(tokens) = &provider.google else {
        let auth = adapter.auth_headers(provider.api_key.expose());
        return transport
            .open_with(&provider.base_url, &auth, request, opening)
            .await;
    };
    let token = tokens.token().await?;
    let auth = adapter.auth_headers(token.expose());
    let opened = transport
        .open_with(&provider.base_url, &auth, request, opening)
        .await;
    if let Err(e) = &opened
        && e.http_status == Some(401)
    {
        tokens.invalidate(&token).await;
    }
    opened
}

/// Error kinds another model may not share: fall back on these once the model's own retries are spent. Never on
/// invalid_request, content_filter or context_overflow (the request itself is the problem, or the caller must act,
/// e.g. compact), nor on cancelled.
fn falls_back(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::RateLimited
            | ErrorKind::Overloaded
            | ErrorKind::Timeout
            | ErrorKind::Network
            | ErrorKind::ProviderError
            | ErrorKind::Auth
    )
}

/// Where a generation's time went, measured at the few awaits that matter. `Instant::now` is a vDSO read: no lock,
/// no allocation.
struct Clock {
    started: Instant,
    /// Time inside the gateway's own code paths (start-up, and every poll of the stream), waits included.
    busy: Duration,
    /// Time of `busy` spent waiting on providers (open, body reads) or in retry delays.
    waiting: Duration,
    /// When the poll in progress began: the end is recorded inside a poll, whose time must count too.
    polled_at: Option<Instant>,
}

/// The state of one generation in flight.
struct Run {
    state: Arc<State>,
    metrics: Arc<Metrics>,
    /// The in-flight slot, given back as soon as the terminal event is queued (or the stream is dropped).
    permit: Option<OwnedSemaphorePermit>,
    /// The requested model, then its fallbacks, in order.
    candidates: Vec<Candidate>,
    /// Index into `candidates` of the model being tried.
    current: usize,
    /// The caller's request as sent, while a fallback may still need it.
    /// Boxed: most generations have no fallback, and the request type is large for a field every open stream holds.
    pristine: Option<Box<pb::Generation>>,
    /// The current candidate's request; `None` until a fallback candidate has been prepared.
    prepared: Option<Prepared>,
    /// The open provider response, if any.
    stream: Option<ProviderStream>,
    /// The span of the provider request in progress; dropped (ended) when its response ends.
    attempt_span: Option<tracing::Span>,
    /// 1-based number of provider requests made so far, across candidates.
    attempt: u32,
    /// Provider requests made to the current candidate.
    target_attempts: u32,
    /// One line per candidate that failed, for the final error message.
    failures: Vec<String>,
    /// The last provider error and the candidate it came from, reported if every candidate fails.
    last_error: Option<(usize, ProviderError)>,
    /// True once the first event went to the caller: from then on nothing is retried or fallen back.
    started: bool,
    /// A tool call was emitted, so a `stop` finish is reported as `tool_calls`.
    saw_tool_call: bool,
    /// The terminal event has been queued.
    done: bool,
    /// Scratch buffer the decoder pushes into, reused across reads.
    decoded: Vec<Event>,
    /// Events ready for the caller.
    pending: VecDeque<pb::StreamResponse>,
    clock: Clock,
    /// Set when the end has been recorded in the metrics.
    outcome: Option<Outcome>,
}

impl Run {
    fn candidate(&self) -> &Candidate {
        // `current` only ever indexes `candidates` (it advances only while a next one exists).
        &self.candidates[self.current]
    }

    async fn next(&mut self) -> Option<pb::StreamResponse> {
        let entered = Instant::now();
        self.clock.polled_at = Some(entered);
        let ev = self.step().await;
        self.clock.busy += entered.elapsed();
        self.clock.polled_at = None;
        ev
    }

    async fn step(&mut self) -> Option<pb::StreamResponse> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            // The rare paths (a fallback's hooks and request, a retry's back-off) are boxed: an async fn's state is
            // as large as its largest await, and this state lives as long as the stream (one allocation per open
            // stream), while those awaits happen at most a few times per generation.
            if self.prepared.is_none() {
                Box::pin(self.prepare_fallback()).await;
                continue;
            }
            if self.stream.is_none() {
                self.attempt += 1;
                self.target_attempts += 1;
                let (opened, span) = {
                    let candidate = &self.candidates[self.current];
                    let Some(prepared) = self.prepared.as_mut() else {
                        continue;
                    };
                    // One span per provider request, so retries and fallbacks show as separate attempts; the
                    // provider sees that span as its parent (W3C `traceparent`).
                    let span = crate::tracing_spans::attempt_span(
                        &candidate.provider.id,
                        &candidate.provider.base_url,
                        &prepared.request.path,
                        self.attempt,
                    );
                    llm_telemetry::inject_headers(&span, &mut prepared.request.headers);
                    let waited = Instant::now();
                    // Boxed for the same reason: the request future is large and done once the headers arrive.
                    let opening = Opening {
                        framing: prepared.adapter.framing(),
                        signer: candidate
                            .provider
                            .signer
                            .as_deref()
                            .map(|s| s as &dyn RequestSigner),
                    };
                    let opened = Box::pin(
                        open_attempt(
                            &self.state.transport,
                            &candidate.provider,
                            prepared.adapter,
                            &prepared.request,
                            opening,
                        )
                        .instrument(span.clone()),
                    )
                    .await;
                    self.clock.waiting += waited.elapsed();
                    (opened, span)
                };
                match opened {
                    Ok(s) => {
                        self.stream = Some(s);
                        self.attempt_span = Some(span);
                    }
                    Err(e) => {
                        crate::tracing_spans::attempt_failed(&span, &e);
                        Box::pin(self.fail_or_retry(e)).await;
                        continue;
                    }
                }
            }
            let (Some(stream), Some(prepared)) = (self.stream.as_mut(), self.prepared.as_mut())
            else {
                continue;
            };
            let waited = Instant::now();
            let pumped = stream
                .pump(prepared.decoder.as_mut(), &mut self.decoded)
                .await;
            self.clock.waiting += waited.elapsed();
            match pumped {
                Ok(_) => self.forward_decoded().await,
                Err(e) => Box::pin(self.fail_or_retry(e)).await,
            }
        }
    }

    /// Runs the hooks for the current (fallback) candidate and builds its request. A candidate that cannot be
    /// prepared (its hook refused, its adapter cannot translate the request) is skipped like a failed one.
    async fn prepare_fallback(&mut self) {
        let Some(generation) = self.pristine.as_deref().cloned() else {
            self.finish_failed();
            return;
        };
        let candidate = &self.candidates[self.current];
        match prepare(&self.state, &self.metrics, candidate, generation).await {
            Ok(p) => self.prepared = Some(p),
            Err(e) => {
                tracing::warn!(
                    message = "fallback model skipped",
                    model = %candidate.model.id,
                    error = %e,
                );
                self.failures
                    .push(format!("{}: not attempted: {e}", candidate.model.id));
                if self.current + 1 < self.candidates.len() {
                    self.advance();
                } else {
                    self.finish_failed();
                }
            }
        }
    }

    /// Moves to the next candidate.
    fn advance(&mut self) {
        self.current += 1;
        self.prepared = None;
        self.target_attempts = 0;
        self.metrics.fallback(&self.candidate().labels);
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
                Box::pin(self.fail_or_retry(e)).await;
                return;
            }
            self.started = true;
            // Nothing can fall back or retry any more: let the caller's request and the provider request body go,
            // rather than hold a copy of the whole conversation for the length of the stream.
            self.pristine = None;
            if let Some(p) = self.prepared.as_mut() {
                p.request.body = serde_json::Value::Null;
            }
            let c = self.candidate();
            let start = convert::stream_start(&c.provider.id, &c.model.id, self.attempt);
            self.metrics
                .first_event(&c.labels, self.clock.started.elapsed());
            self.pending.push_back(start);
            self.pending.push_back(convert::step_start());
        }
        let mut end: Option<(Outcome, Option<&'static str>, Option<Usage>)> = None;
        for mut ev in self.decoded.drain(..) {
            match &mut ev {
                Event::ToolCall { .. } => self.saw_tool_call = true,
                Event::Finish(f) => {
                    if self.saw_tool_call && f.reason == FinishReason::Stop {
                        f.reason = FinishReason::ToolCalls;
                    }
                    end = Some((Outcome::Ok, None, Some(f.usage)));
                }
                Event::Error(e) => {
                    scrub(e, &self.state.secrets);
                    self.metrics
                        .provider_error(&self.candidates[self.current].labels, e.kind.as_str());
                    end = Some((Outcome::Error, Some(e.kind.as_str()), None));
                }
                _ => {}
            }
            let model = &self.candidates[self.current].model;
            let pending = &mut self.pending;
            crate::limits::split_event(ev, self.state.config.limits.max_delta_bytes, |piece| {
                pending.push_back(convert::event_to_pb(piece, model));
            });
            if end.is_some() {
                break;
            }
        }
        self.decoded.clear();
        if let Some((outcome, kind, usage)) = end {
            self.done = true;
            self.stream = None;
            if let (Some(span), Outcome::Error) = (self.attempt_span.take(), &outcome) {
                span.record("error.type", kind.unwrap_or("provider_error"));
                span.record("otel.status_code", "ERROR");
            }
            self.record_end(outcome, kind, usage);
        }
    }

    /// Retries `err` when nothing reached the caller yet and the policy allows, else falls back to the next model
    /// when the error kind allows, else ends with it.
    async fn fail_or_retry(&mut self, mut err: ProviderError) {
        self.stream = None;
        // Before anything records it (span, logs, the caller): a decoded error frame may echo a key.
        scrub(&mut err, &self.state.secrets);
        if let Some(span) = self.attempt_span.take() {
            crate::tracing_spans::attempt_failed(&span, &err);
        }
        self.metrics
            .provider_error(&self.candidate().labels, err.kind.as_str());
        if self.started {
            let kind = err.kind.as_str();
            self.pending.push_back(convert::event_to_pb(
                Event::Error(err),
                &self.candidate().model,
            ));
            self.done = true;
            self.record_end(Outcome::Error, Some(kind), None);
            return;
        }
        if let Some(delay) = self.state.config.retry.delay(self.target_attempts, &err) {
            let c = self.candidate();
            tracing::warn!(
                message = "provider attempt failed; retrying",
                provider = %c.provider.id,
                model = %c.model.id,
                attempt = self.attempt,
                kind = err.kind.as_str(),
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            );
            if let Some(p) = self.prepared.as_mut() {
                p.decoder = p.decoder.restart();
            }
            let slept = Instant::now();
            tokio::time::sleep(delay).await;
            self.clock.waiting += slept.elapsed();
            return;
        }
        // Said so the caller knows a longer wait may still work (and that, otherwise, retrying is pointless).
        err.retry_after_beyond_cap = err.retryable
            && err
                .retry_after
                .is_some_and(|asked| asked > self.state.config.retry.max_retry_after);
        scrub(&mut err, &self.state.secrets);
        let model = &self.candidates[self.current].model.id;
        let summary = summarize(model, &err, self.target_attempts);
        let fall_back = falls_back(err.kind) && self.current + 1 < self.candidates.len();
        if fall_back {
            tracing::warn!(
                message = "model failed before any output; falling back",
                model = %model,
                kind = err.kind.as_str(),
                attempts = self.target_attempts,
                next = %self.candidates[self.current + 1].model.id,
            );
        }
        self.failures.push(summary);
        self.last_error = Some((self.current, err));
        if fall_back {
            self.advance();
        } else {
            self.finish_failed();
        }
    }

    /// Ends a generation that failed before any output: `stream_start` (naming the model that failed last and the
    /// attempt count) and the error, but no `step_start`, because no model step happened.
    fn finish_failed(&mut self) {
        let Some((index, mut err)) = self.last_error.take() else {
            // Unreachable in practice: the first candidate is always attempted before any fallback is prepared.
            let kind = ErrorKind::ProviderError;
            self.last_error = Some((
                self.current,
                ProviderError::new(kind, "no model could be attempted"),
            ));
            return self.finish_failed();
        };
        if self.failures.len() > 1 {
            err.message = self.failures.join("; ");
        } else if self.attempt > 1 {
            err.message = format!("{} (after {} attempts)", err.message, self.attempt);
        }
        self.current = index;
        let c = &self.candidates[index];
        self.started = true;
        self.pristine = None;
        self.pending.push_back(convert::stream_start(
            &c.provider.id,
            &c.model.id,
            self.attempt,
        ));
        let kind = err.kind.as_str();
        self.pending
            .push_back(convert::event_to_pb(Event::Error(err), &c.model));
        self.done = true;
        self.record_end(Outcome::Error, Some(kind), None);
    }

    fn record_end(
        &mut self,
        outcome: Outcome,
        error_kind: Option<&'static str>,
        usage: Option<Usage>,
    ) {
        if self.outcome.is_some() {
            return;
        }
        self.outcome = Some(outcome);
        self.permit = None;
        let c = &self.candidates[self.current];
        let cost_nano_usd =
            usage.and_then(|u| c.model.pricing.as_ref().map(|p| p.cost_nano_usd(&u)));
        // A cancel drops the poll mid-await, whose partial wait never reached `waiting`: count only whole polls then.
        let in_poll = match (outcome, self.clock.polled_at) {
            (Outcome::Cancelled, _) | (_, None) => Duration::ZERO,
            (_, Some(t)) => t.elapsed(),
        };
        self.metrics.generation_ended(&Ended {
            labels: &c.labels,
            outcome,
            duration: self.clock.started.elapsed(),
            overhead: (self.clock.busy + in_poll).saturating_sub(self.clock.waiting),
            error_kind,
            usage,
            cost_nano_usd,
        });
    }
}

impl Drop for Run {
    /// A stream dropped before its terminal event was cancelled by the caller (or the server shut down).
    fn drop(&mut self) {
        if self.outcome.is_none() {
            self.record_end(Outcome::Cancelled, None, None);
        }
    }
}

/// `"openai/gpt-4o: rate_limited (429) after 3 attempts: <message>"`: one candidate's failure in the final message.
fn summarize(model: &str, err: &ProviderError, attempts: u32) -> String {
    let mut line = format!("{model}: {}", err.kind.as_str());
    if let Some(status) = err.http_status {
        line.push_str(&format!(" ({status})"));
    }
    if attempts > 1 {
        line.push_str(&format!(" after {attempts} attempts"));
    }
    if !err.message.is_empty() {
        line.push_str(": ");
        line.push_str(&err.message);
    }
    line
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

#[cfg(test)]
#[path = "generate_tests.rs"]
mod tests;
