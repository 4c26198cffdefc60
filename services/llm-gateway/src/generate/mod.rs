//! One generation, end to end: resolve the model and its fallbacks, run the hooks, build the provider request, send
//! it, retry and fall back before the first event, decode, and price the step.
//!
//! The stream returned by [`Gateway::stream`] *is* the provider call: nothing is spawned and nothing is buffered, so
//! each decoded event is forwarded as soon as it exists and dropping the stream (the caller cancelled) drops the
//! upstream HTTP request, or a hook call in progress, at once.
//!
//! The gateway's configuration lives behind an [`ArcSwap`]: each generation takes a snapshot when it starts and keeps
//! it to the end, so [`Gateway::reload`] changes what new generations see without touching streams in flight.

mod attempt;
mod run;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures::Stream;
use llm_proto::gateway as pb;
use tokio::sync::Semaphore;

use crate::adapter::transport::Transport;
use crate::catalog::ModelInfo;
use crate::config::{Config, ConfigError, Env, Provider};
use crate::error::ProviderError;
use crate::hooks::HookRunner;
use crate::metrics::{Metrics, ModelLabels, UNLISTED_MODEL};
use crate::model_names::Named;

use attempt::Candidate;
pub(crate) use attempt::authenticated;
use attempt::prepare;
pub(crate) use run::scrub;
use run::{Clock, Run};

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
    pub(super) state: ArcSwap<State>,
    /// Survives reloads, so counters keep counting.
    pub(super) metrics: Arc<Metrics>,
    /// Global in-flight limit. Fixed at start-up: resizing a semaphore under load is not worth its edge cases.
    pub(super) inflight: Arc<Semaphore>,
    pub(super) inflight_limit: usize,
    /// The keys created at run time, this replica's copy (empty without `[redis]`).
    pub(super) keys: Arc<crate::keys::cache::RuntimeKeys>,
}

/// A model name resolved for a caller ([`Gateway::resolve`]).
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The catalog entry (under the alias's name for an alias).
    pub model: ModelInfo,
    /// The provider serving it.
    pub provider: Provider,
    /// For an alias, the catalog id it names.
    pub alias_of: Option<String>,
}

/// Up to eight served model names and how many there are, for an unknown model's message.
fn served_sample(config: &Config) -> (Vec<String>, usize) {
    let listed = config.names.listed(&config.catalog);
    let sample = listed.iter().take(8).map(|l| l.id.to_string()).collect();
    (sample, listed.len())
}

/// One consistent configuration and what is built from it.
struct State {
    pub(super) config: Arc<Config>,
    pub(super) transport: Transport,
    /// Every provider key (and signing secret, and Entra client secret), so error text from providers can be
    /// scrubbed before it reaches a caller or a log.
    pub(super) secrets: Vec<String>,
    pub(super) hooks: HookRunner,
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
                let tokens = p.tokens.as_ref().map(|t| t.secrets()).unwrap_or_default();
                std::iter::once(p.api_key.expose().to_string())
                    .chain(signer)
                    .chain(tokens)
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

    /// The candidate serving the name a caller wrote (an id, an alias or a bare name; [`ModelNames::lookup`]), with
    /// the fallbacks that name comes with: an alias's own, else the model's from the catalog.
    fn resolve_named<'s>(
        &'s self,
        requested: &str,
    ) -> Result<(Candidate, &'s [String]), StartError> {
        let config = &self.config;
        let named = config
            .names
            .lookup(
                &config.catalog,
                |p| config.providers.contains_key(p),
                requested,
            )
            .map_err(|a| StartError::AmbiguousModel {
                model: requested.to_string(),
                candidates: a.candidates,
            })?;
        let candidate = match named {
            Named::Id(id) => self.resolve(id)?,
            Named::Alias(alias) => self.resolve(&alias.model)?,
        };
        // Looked up again rather than taken from `named`, whose borrow also holds `requested`: the fallbacks live
        // in the configuration.
        let own = config
            .names
            .alias(requested)
            .map(|a| a.fallbacks.as_slice());
        let catalog = config.catalog.fallbacks(&candidate.model.id);
        Ok((candidate, own.filter(|f| !f.is_empty()).unwrap_or(catalog)))
    }

    fn resolve(&self, id: &str) -> Result<Candidate, StartError> {
        let config = &self.config;
        let unknown = || StartError::UnknownModel {
            model: id.to_string(),
            // A bundled model whose provider has no credentials here: say what would enable it.
            unconfigured: crate::config::enable_hint(config.catalog.unconfigured_providers(id)),
            close: config
                .catalog
                .close_matches(id)
                .into_iter()
                .map(String::from)
                .collect(),
            served: served_sample(config),
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

    /// Refuses an embedding model as a generation's model (`field` names it).
    fn chat_model(&self, c: &Candidate, field: &str) -> Result<(), StartError> {
        match self.config.catalog.kind(&c.model.id) {
            crate::catalog::ModelKind::Chat => Ok(()),
            kind => Err(StartError::WrongKind {
                field: field.to_string(),
                model: c.model.id.clone(),
                kind,
            }),
        }
    }
}

impl Gateway {
    /// A gateway for this configuration.
    pub fn new(config: Config) -> Result<Gateway, ProviderError> {
        let limit = config.max_inflight_generations;
        let staleness = config.redis.as_ref().and_then(|r| r.max_staleness);
        Ok(Gateway {
            inner: Arc::new(Inner {
                keys: Arc::new(crate::keys::cache::RuntimeKeys::new(staleness)),
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

    /// This replica's copy of the keys created at run time (kept current by the task [`crate::server::run`] starts
    /// when `[redis]` is configured).
    pub fn keys(&self) -> Arc<crate::keys::cache::RuntimeKeys> {
        Arc::clone(&self.inner.keys)
    }

    /// Replaces the catalog, providers, hooks, fallbacks, timeouts, retry policy and caller keys for generations
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
                "server.stream_window_bytes",
                old.receive_window != config.receive_window,
            ),
            (
                "server.max_inflight_generations",
                old.max_inflight_generations != config.max_inflight_generations,
            ),
            (
                "server.shutdown_grace_ms",
                old.shutdown_grace != config.shutdown_grace,
            ),
            (
                "redis",
                old.redis.as_ref().map(|r| (&r.target, &r.prefix))
                    != config.redis.as_ref().map(|r| (&r.target, &r.prefix)),
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

    /// Resolves a model name as a caller writes it (an id, an alias, a bare name) to its catalog entry and provider.
    /// For an alias, the entry is the aliased model's under the alias's name, with the model's id in `alias_of`.
    pub fn resolve(&self, requested: &str) -> Result<Resolved, StartError> {
        let state = self.inner.state.load();
        let (c, _) = state.resolve_named(requested)?;
        let alias_of = state.config.names.alias(requested).map(|a| a.model.clone());
        let mut model = c.model;
        if alias_of.is_some() {
            model.id = requested.to_string();
        }
        Ok(Resolved {
            model,
            provider: c.provider,
            alias_of,
        })
    }

    /// The configuration in force and what is built from it, held for one call that is not a generation
    /// (embeddings, token counts: `crate::calls`), as a generation holds its own.
    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot(self.inner.state.load_full())
    }

    /// One of the `server.max_inflight_generations` slots: a generation's, or a call's that is not a generation (it
    /// loads providers as one does).
    pub(crate) fn slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, StartError> {
        Arc::clone(&self.inner.inflight)
            .try_acquire_owned()
            .map_err(|_| StartError::TooManyGenerations {
                limit: self.inner.inflight_limit,
            })
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
        let permit = self.slot()?;
        let state = self.inner.state.load_full();
        let (first, configured) = state.resolve_named(&generation.model)?;
        state.chat_model(&first, "generation.model")?;
        let mut candidates = vec![first];
        let fallbacks = if generation.fallback_models.is_empty() {
            configured
        } else {
            generation.fallback_models.as_slice()
        };
        for (i, id) in fallbacks.iter().enumerate() {
            let (c, _) = state.resolve_named(id)?;
            state.chat_model(&c, &format!("generation.fallback_models[{i}]"))?;
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
            last_keep_alive: None,
        })
    }
}

/// A configuration snapshot for one call ([`Gateway::snapshot`]).
pub(crate) struct Snapshot(Arc<State>);

impl Snapshot {
    /// The configuration.
    pub(crate) fn config(&self) -> &Config {
        &self.0.config
    }

    /// The provider transport.
    pub(crate) fn transport(&self) -> &Transport {
        &self.0.transport
    }

    /// Every provider credential, to scrub from what providers echo.
    pub(crate) fn secrets(&self) -> &[String] {
        &self.0.secrets
    }

    /// The hooks.
    pub(crate) fn hooks(&self) -> &HookRunner {
        &self.0.hooks
    }

    /// `id`'s catalog entry, provider and metric labels.
    pub(crate) fn resolve(
        &self,
        id: &str,
    ) -> Result<(ModelInfo, Provider, ModelLabels), StartError> {
        let c = self.0.resolve(id)?;
        Ok((c.model, c.provider, c.labels))
    }
}

/// The metrics `reason` of a start error.
fn rejection_reason(e: &StartError) -> &'static str {
    match e {
        StartError::UnknownModel { .. } | StartError::AmbiguousModel { .. } => "unknown_model",
        StartError::Invalid(_) | StartError::WrongKind { .. } => "invalid_request",
        StartError::Hook(_) => "hook",
        StartError::TooManyGenerations { .. } => "too_many_generations",
    }
}

#[cfg(test)]
mod tests;
