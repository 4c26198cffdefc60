//! Prometheus metrics and the `/metrics` endpoint on its own listener (`server.metrics_listen`).
//!
//! Labels are few and bounded: provider and model ids come from the configuration (a provider that serves unlisted
//! models reports them all as [`UNLISTED_MODEL`], so callers cannot mint series), outcomes and error kinds are closed
//! sets. A generation records at three points only: when it starts, when its first event goes out and when it
//! ends, so the per-event path takes no lock and allocates nothing for metrics.
//!
//! The OpenTelemetry GenAI client metrics ([`llm_telemetry::gen_ai_metrics`]) are recorded at the same points.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use llm_telemetry::gen_ai_metrics::GenAiMetrics;
use llm_telemetry::labels::FixedLabels;
use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry, Unit};
use tokio::net::TcpListener;

use crate::event::Usage;

#[path = "metrics_calls.rs"]
mod calls;
pub use calls::{CallEnded, Embedded, Operation};

/// Label: provider id from the configuration.
pub const LABEL_PROVIDER: &str = "provider";
/// Label: model id (`provider/model`), or [`UNLISTED_MODEL`].
pub const LABEL_MODEL: &str = "model";
/// Label: how a generation ended, one of [`Outcome`].
pub const LABEL_OUTCOME: &str = "outcome";
/// Label: error kind (`rate_limited`, `overloaded`, ...), as in the API's `ErrorKind`.
pub const LABEL_KIND: &str = "kind";
/// Label: token type (`input`, `cache_read`, `cache_write`, `output`, `reasoning`).
pub const LABEL_TYPE: &str = "type";
/// Label: why a generation was refused before it started.
pub const LABEL_REASON: &str = "reason";
/// Label: the configured name of a hook service.
pub const LABEL_HOOK: &str = "hook";
/// Label: a hook transform (`system`, `params`, `headers`).
pub const LABEL_TRANSFORM: &str = "transform";
/// Label: a hook policy (`fail_open`, `fail_closed`).
pub const LABEL_POLICY: &str = "policy";
/// Label: whether a configuration reload succeeded (`ok`, `error`).
pub const LABEL_RESULT: &str = "result";
/// Label: the tenant a call is attributed to (`""` is the unnamed tenant); keys are never labels.
pub const LABEL_TENANT: &str = "tenant";

/// The `model` label of every model a provider serves without a catalog entry.
pub const UNLISTED_MODEL: &str = "(unlisted)";

/// Generations by the model that served them (or failed last) and outcome.
pub const REQUESTS: &str = "llm_gateway_requests";
/// Generations that ended with an error event, by the final error kind.
pub const ERRORS: &str = "llm_gateway_errors";
/// Failed provider attempts by error kind, including attempts that were retried or fell back.
pub const PROVIDER_ERRORS: &str = "llm_gateway_provider_errors";
/// Fallbacks, by the model fallen back to.
pub const FALLBACKS: &str = "llm_gateway_fallbacks";
/// Calls refused before a generation started, by reason.
pub const REJECTED: &str = "llm_gateway_rejected";
/// Time from the call to the first event sent to the caller.
pub const TIME_TO_FIRST_EVENT: &str = "llm_gateway_time_to_first_event";
/// Time from the call to the terminal event (or the cancel).
pub const STREAM_DURATION: &str = "llm_gateway_stream_duration";
/// Time the gateway itself spent on a generation: its total time minus the time spent waiting on the provider.
pub const OVERHEAD: &str = "llm_gateway_overhead";
/// Tokens by type, from each finished step's usage.
pub const TOKENS: &str = "llm_gateway_tokens";
/// Cost in nano-USD, from each finished step.
pub const COST: &str = "llm_gateway_cost_nano_usd";
/// Generations in flight.
pub const INFLIGHT: &str = "llm_gateway_inflight_generations";
/// Hook service calls that failed, by hook, transform and policy.
pub const HOOK_FAILURES: &str = "llm_gateway_hook_failures";
/// Configuration reloads by result.
pub const RELOADS: &str = "llm_gateway_config_reloads";
/// Calls admitted, by the tenant they are attributed to and operation (`chat`, `embeddings`, `count_tokens`).
pub const TENANT_CALLS: &str = "llm_gateway_tenant_calls";

/// How a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// A `step_finish` was sent.
    Ok,
    /// An `error` event was sent.
    Error,
    /// The caller went away before the terminal event.
    Cancelled,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// Provider and model label values of one generation target. `Arc<str>` so that recording clones a pointer, not
/// the strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelLabels {
    /// Provider id.
    pub provider: Arc<str>,
    /// Model id, or [`UNLISTED_MODEL`].
    pub model: Arc<str>,
}

impl EncodeLabelSet for ModelLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        (LABEL_PROVIDER, &*self.provider).encode(encoder.encode_label())?;
        (LABEL_MODEL, &*self.model).encode(encoder.encode_label())
    }
}

/// [`ModelLabels`] plus one more label with a closed set of values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelAnd {
    model: ModelLabels,
    name: &'static str,
    value: &'static str,
}

impl EncodeLabelSet for ModelAnd {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        self.model.encode(encoder)?;
        (self.name, self.value).encode(encoder.encode_label())
    }
}

/// Builds histograms with one bucket layout per family.
#[derive(Clone, Copy)]
pub struct Buckets {
    start: f64,
    factor: f64,
    count: u16,
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(exponential_buckets(self.start, self.factor, self.count))
    }
}

/// 10 ms … ~164 s: first events arrive after the provider's queueing and the model's thinking.
const TTFE_BUCKETS: Buckets = Buckets {
    start: 0.01,
    factor: 2.0,
    count: 15,
};
/// 50 ms … ~27 min: the longest streams run up to the total timeout.
const DURATION_BUCKETS: Buckets = Buckets {
    start: 0.05,
    factor: 2.0,
    count: 16,
};
/// 50 µs … ~3.3 s: the gateway's own work is normally well under a millisecond; hooks push it up.
const OVERHEAD_BUCKETS: Buckets = Buckets {
    start: 0.000_05,
    factor: 2.0,
    count: 17,
};

/// Every metric the gateway exports, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    requests: Family<ModelAnd, Counter>,
    errors: Family<ModelAnd, Counter>,
    provider_errors: Family<ModelAnd, Counter>,
    fallbacks: Family<ModelLabels, Counter>,
    rejected: Family<FixedLabels, Counter>,
    time_to_first_event: Family<ModelLabels, Histogram, Buckets>,
    stream_duration: Family<ModelAnd, Histogram, Buckets>,
    overhead: Family<ModelLabels, Histogram, Buckets>,
    tokens: Family<ModelAnd, Counter>,
    cost: Family<ModelLabels, Counter>,
    inflight: Gauge,
    hook_failures: Family<FixedLabels, Counter>,
    reloads: Family<FixedLabels, Counter>,
    tenant_calls: Family<FixedLabels, Counter>,
    gen_ai: GenAiMetrics,
    /// Embeddings and token counts ([`Metrics::call_ended`]).
    calls: calls::CallMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Registers `metric` under `name` and returns it (the registry keeps a clone; both share the values).
fn register<M: Metric + Clone>(r: &mut Registry, name: &str, help: &str, metric: M) -> M {
    r.register(name, help, metric.clone());
    metric
}

/// [`register`] for a metric measured in seconds.
fn register_seconds<M: Metric + Clone>(r: &mut Registry, name: &str, help: &str, metric: M) -> M {
    r.register_with_unit(name, help, Unit::Seconds, metric.clone());
    metric
}

/// A latency histogram family.
/// The families labelled by fixed names: hook failures, reloads and the tenants' calls.
fn register_fixed(
    r: &mut Registry,
) -> (
    Family<FixedLabels, Counter>,
    Family<FixedLabels, Counter>,
    Family<FixedLabels, Counter>,
) {
    let hook_failures = register(
        r,
        HOOK_FAILURES,
        "Hook service calls that failed or timed out, by hook, transform and policy",
        Family::<FixedLabels, Counter>::default(),
    );
    let reloads = register(
        r,
        RELOADS,
        "Configuration reloads (SIGHUP) by result",
        Family::<FixedLabels, Counter>::default(),
    );
    let tenant_calls = register(
        r,
        TENANT_CALLS,
        "Calls admitted, by the tenant they are attributed to and operation (chat, embeddings, count_tokens)",
        Family::<FixedLabels, Counter>::default(),
    );
    (hook_failures, reloads, tenant_calls)
}

type Timing = Family<ModelLabels, Histogram, Buckets>;

/// The three latency histograms: to the first event, to the end, and the gateway's own share.
fn register_timings(r: &mut Registry) -> (Timing, Family<ModelAnd, Histogram, Buckets>, Timing) {
    let time_to_first_event = register_seconds(
        r,
        TIME_TO_FIRST_EVENT,
        "Time from the call to the first event sent to the caller",
        Family::new_with_constructor(TTFE_BUCKETS),
    );
    let stream_duration = register_seconds(
        r,
        STREAM_DURATION,
        "Time from the call to the terminal event or the cancel",
        Family::new_with_constructor(DURATION_BUCKETS),
    );
    let overhead = register_seconds(
        r,
        OVERHEAD,
        "Time the gateway spent on a generation itself (hooks, translation, decoding), excluding provider waits, retry delays and time the caller was not reading",
        Family::new_with_constructor(OVERHEAD_BUCKETS),
    );
    (time_to_first_event, stream_duration, overhead)
}

impl Metrics {
    /// A fresh registry with every family registered.
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        llm_telemetry::process_metrics::register(&mut r);
        let requests = register(
            &mut r,
            REQUESTS,
            "Generations by the model that served them (or failed last) and outcome (ok, error, cancelled)",
            Family::<ModelAnd, Counter>::default(),
        );
        let errors = register(
            &mut r,
            ERRORS,
            "Generations that ended with an error event, by the final error kind",
            Family::<ModelAnd, Counter>::default(),
        );
        let provider_errors = register(
            &mut r,
            PROVIDER_ERRORS,
            "Failed provider attempts by error kind, including attempts that were retried or fell back",
            Family::<ModelAnd, Counter>::default(),
        );
        let fallbacks = register(
            &mut r,
            FALLBACKS,
            "Fallbacks to another model after a failure before any output, by the model fallen back to",
            Family::<ModelLabels, Counter>::default(),
        );
        let rejected = register(
            &mut r,
            REJECTED,
            "Calls refused before a generation started, by reason",
            Family::<FixedLabels, Counter>::default(),
        );
        let (time_to_first_event, stream_duration, overhead) = register_timings(&mut r);
        let tokens = register(
            &mut r,
            TOKENS,
            "Tokens of finished steps by type (input, cache_read, cache_write, output, reasoning)",
            Family::<ModelAnd, Counter>::default(),
        );
        let cost = register(
            &mut r,
            COST,
            "Cost of finished steps in nano-USD (1 USD = 1e9), from the catalog's prices",
            Family::<ModelLabels, Counter>::default(),
        );
        let inflight = register(&mut r, INFLIGHT, "Generations in flight", Gauge::default());
        let (hook_failures, reloads, tenant_calls) = register_fixed(&mut r);
        Metrics {
            // The GenAI client metrics repeat some of the gateway's own under the semantic conventions' names, so
            // dashboards built for those conventions work unchanged.
            gen_ai: GenAiMetrics::register(&mut r),
            calls: calls::CallMetrics::register(&mut r),
            registry: r,
            requests,
            errors,
            provider_errors,
            fallbacks,
            rejected,
            time_to_first_event,
            stream_duration,
            overhead,
            tokens,
            cost,
            inflight,
            hook_failures,
            reloads,
            tenant_calls,
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        llm_telemetry::metrics_http::encode_registry(&self.registry)
    }

    /// A generation started.
    pub fn generation_started(&self) {
        self.inflight.inc();
    }

    /// The first event of a generation went to the caller.
    pub fn first_event(&self, labels: &ModelLabels, elapsed: Duration) {
        self.time_to_first_event
            .get_or_create(labels)
            .observe(elapsed.as_secs_f64());
        self.gen_ai
            .first_chunk(&labels.provider, &labels.model, elapsed);
    }

    /// A generation ended (or was cancelled). `error_kind` is the kind of its error event, if it ended with one;
    /// `usage` and `cost` are its finished step's, if it finished.
    pub fn generation_ended(&self, end: &Ended<'_>) {
        self.inflight.dec();
        let outcome = ModelAnd {
            model: end.labels.clone(),
            name: LABEL_OUTCOME,
            value: end.outcome.as_str(),
        };
        self.requests.get_or_create(&outcome).inc();
        self.stream_duration
            .get_or_create(&outcome)
            .observe(end.duration.as_secs_f64());
        self.overhead
            .get_or_create(end.labels)
            .observe(end.overhead.as_secs_f64());
        if let Some(kind) = end.error_kind {
            self.errors
                .get_or_create(&ModelAnd {
                    model: end.labels.clone(),
                    name: LABEL_KIND,
                    value: kind,
                })
                .inc();
        }
        if let Some(u) = end.usage {
            for (kind, n) in [
                ("input", u.input),
                ("cache_read", u.cache_read),
                ("cache_write", u.cache_write),
                ("output", u.output),
                ("reasoning", u.reasoning),
            ] {
                self.tokens
                    .get_or_create(&ModelAnd {
                        model: end.labels.clone(),
                        name: LABEL_TYPE,
                        value: kind,
                    })
                    .inc_by(n);
            }
        }
        // As the conventions count them: input includes cached tokens, output includes reasoning. A cancel is
        // reported as an error type, since the operation did not complete.
        let error_type = match end.outcome {
            Outcome::Ok => None,
            Outcome::Error => Some(end.error_kind.unwrap_or("provider_error")),
            Outcome::Cancelled => Some("cancelled"),
        };
        self.gen_ai.operation(
            &end.labels.provider,
            &end.labels.model,
            end.duration,
            error_type,
            end.usage.map(|u| {
                (
                    u.input + u.cache_read + u.cache_write,
                    u.output + u.reasoning,
                )
            }),
        );
        if let Some(cost) = end.cost_nano_usd {
            self.cost
                .get_or_create(end.labels)
                .inc_by(u64::try_from(cost).unwrap_or(0));
        }
    }

    /// A provider attempt failed (retried, fallen back from, or final).
    pub fn provider_error(&self, labels: &ModelLabels, kind: &'static str) {
        self.provider_errors
            .get_or_create(&ModelAnd {
                model: labels.clone(),
                name: LABEL_KIND,
                value: kind,
            })
            .inc();
    }

    /// The generation falls back to the model `labels` names.
    pub fn fallback(&self, labels: &ModelLabels) {
        self.fallbacks.get_or_create(labels).inc();
    }

    /// A call was refused before a generation started.
    pub fn rejected(&self, reason: &'static str) {
        self.rejected
            .get_or_create(&FixedLabels(vec![(LABEL_REASON, Arc::from(reason))]))
            .inc();
    }

    /// A hook service call failed.
    pub fn hook_failure(&self, hook: &Arc<str>, transform: &'static str, policy: &'static str) {
        self.hook_failures
            .get_or_create(&FixedLabels(vec![
                (LABEL_HOOK, Arc::clone(hook)),
                (LABEL_TRANSFORM, Arc::from(transform)),
                (LABEL_POLICY, Arc::from(policy)),
            ]))
            .inc();
    }

    /// A call of `operation` was admitted for `tenant`.
    pub fn tenant_call(&self, tenant: &Arc<str>, operation: &'static str) {
        self.tenant_calls
            .get_or_create(&FixedLabels(vec![
                (LABEL_TENANT, Arc::clone(tenant)),
                (calls::LABEL_OPERATION, Arc::from(operation)),
            ]))
            .inc();
    }

    /// A configuration reload was attempted.
    pub fn reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reloads
            .get_or_create(&FixedLabels(vec![(LABEL_RESULT, Arc::from(result))]))
            .inc();
    }
}

/// What [`Metrics::generation_ended`] records.
#[derive(Debug)]
pub struct Ended<'a> {
    /// The model that served the generation, or failed last.
    pub labels: &'a ModelLabels,
    /// How it ended.
    pub outcome: Outcome,
    /// Call to terminal event.
    pub duration: Duration,
    /// The gateway's own share of that time.
    pub overhead: Duration,
    /// The error kind, when it ended with an error event.
    pub error_kind: Option<&'static str>,
    /// The finished step's usage.
    pub usage: Option<Usage>,
    /// The finished step's cost, when the model is priced.
    pub cost_nano_usd: Option<i64>,
}

impl llm_telemetry::metrics_http::Exposition for Metrics {
    fn encode(&self) -> String {
        Metrics::encode(self)
    }
}

/// Serves `GET /metrics` on `listener` until `shutdown` resolves (see [`llm_telemetry::metrics_http::serve`]).
pub async fn serve(
    metrics: Arc<Metrics>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) {
    llm_telemetry::metrics_http::serve(metrics, listener, shutdown).await;
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
