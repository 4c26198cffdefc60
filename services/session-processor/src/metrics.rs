//! Prometheus metrics of the processor, served on `server.metrics_listen`.
//!
//! FixedLabels are closed sets (finish reasons, tool kinds and outcomes, store operations) plus the provider and model
//! ids of the configured agents, so callers cannot mint series. Recording happens once per step, tool call or store
//! call, never per streamed delta.

use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use llm_telemetry::gen_ai_metrics::GenAiMetrics;
use llm_telemetry::labels::FixedLabels;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Label: a step's finish (`stop`, `tool_calls`, `error`, ...).
pub const LABEL_FINISH: &str = "finish";
/// Label: `auto` or `manual` compaction.
pub const LABEL_TRIGGER: &str = "trigger";
/// Label: tool kind, `builtin` or `client`.
pub const LABEL_KIND: &str = "kind";
/// Label: tool call outcome, `completed`, `error` or `denied`.
pub const LABEL_OUTCOME: &str = "outcome";
/// Label: the store operation timed (`put_message`, `put_part`, `put_parts`, `publish`).
pub const LABEL_OP: &str = "op";

/// Session loops running on this replica.
pub const ACTIVE_SESSIONS: &str = "session_processor_active_sessions";
/// Finished steps by finish.
pub const STEPS: &str = "session_processor_steps";
/// Compactions by trigger.
pub const COMPACTIONS: &str = "session_processor_compactions";
/// Tool calls by kind and outcome.
pub const TOOL_CALLS: &str = "session_processor_tool_calls";
/// Latency of the loop's Redis calls, by operation.
pub const REDIS: &str = "session_processor_redis";
/// Workspace snapshots or diffs that failed (git missing, failing or too slow), by operation.
pub const SNAPSHOT_FAILURES: &str = "session_processor_snapshot_failures";
/// A prompt's critical path: time from the prompt reaching the engine to the end of each phase.
pub const PROMPT_PHASE: &str = "session_processor_prompt_phase";
/// Label: a phase of a prompt's critical path (see [`PromptPhase`]).
pub const LABEL_PHASE: &str = "phase";
/// Requests the store sent Redis on its shared connection (a command or a pipeline: one round trip each).
pub const REDIS_REQUESTS: &str = "session_processor_redis_requests";
/// `[redis] wait_replicas`: acknowledged writes by how their `WAIT` went (`acknowledged`, `short`, `skipped`).
pub const REDIS_WAITS: &str = "session_processor_redis_waits";
/// Streams (`Prompt`, `Subscribe`, `Compact`) open on this replica.
pub const OPEN_STREAMS: &str = "session_processor_open_streams";
/// Event-log waits that polled because `[redis] max_blocking_reads` blocking reads were already waiting.
pub const EVENT_LOG_POLLS: &str = "session_processor_event_log_polls";

/// The phases of a prompt's critical path, each timed from the prompt reaching the engine to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptPhase {
    /// The lease taken, the user message stored and the history read (`begun`).
    Begun,
    /// The step's request built and the gateway call started (`gateway_called`).
    GatewayCalled,
    /// The gateway's first event for the step received (`first_event`).
    FirstEvent,
}

impl PromptPhase {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            PromptPhase::Begun => "begun",
            PromptPhase::GatewayCalled => "gateway_called",
            PromptPhase::FirstEvent => "first_event",
        }
    }
}

/// Tool kind label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Run by the processor in the session's workspace.
    Builtin,
    /// Answered by the caller.
    Client,
}

/// Tool call outcome label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOutcome {
    /// The tool returned a result.
    Completed,
    /// The tool failed (or was unknown, or its input invalid).
    Error,
    /// A permission rule, the user or the doom-loop check refused it.
    Denied,
}

/// 100 µs … 10 s: Redis calls are normally sub-millisecond; the tail shows a struggling server.
const REDIS_BUCKETS: [f64; 16] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.3,
    10.0,
];

/// Every metric the processor exports, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    active_sessions: Gauge,
    open_streams: Gauge,
    steps: Family<FixedLabels, Counter>,
    compactions: Family<FixedLabels, Counter>,
    tool_calls: Family<FixedLabels, Counter>,
    redis: ByValue<Histogram>,
    prompt_phase: ByValue<Histogram>,
    snapshot_failures: Family<FixedLabels, Counter>,
    gen_ai: GenAiMetrics,
    /// The store's traffic, once [`Metrics::count_store_traffic`] names it.
    store_traffic: Arc<OnceLock<Arc<crate::store::Traffic>>>,
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

impl Metrics {
    /// A fresh registry with every family registered.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        llm_telemetry::process_metrics::register(&mut registry);
        let active_sessions = Gauge::default();
        let open_streams = Gauge::default();
        registry.register(
            OPEN_STREAMS,
            "Streams (Prompt, Subscribe, Compact) open on this replica",
            open_streams.clone(),
        );
        let steps = Family::<FixedLabels, Counter>::default();
        let compactions = Family::<FixedLabels, Counter>::default();
        let tool_calls = Family::<FixedLabels, Counter>::default();
        let redis = Family::<FixedLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(REDIS_BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            ACTIVE_SESSIONS,
            "Session loops running on this replica",
            active_sessions.clone(),
        );
        registry.register(STEPS, "Finished steps by finish", steps.clone());
        registry.register(
            COMPACTIONS,
            "Completed compactions by trigger (auto, manual)",
            compactions.clone(),
        );
        registry.register(
            TOOL_CALLS,
            "Tool calls by kind (builtin, client) and outcome (completed, error, denied)",
            tool_calls.clone(),
        );
        registry.register_with_unit(
            REDIS,
            "Latency of the loop's Redis calls, by operation",
            Unit::Seconds,
            redis.clone(),
        );
        let prompt_phase = Family::<FixedLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(REDIS_BUCKETS)) as fn() -> Histogram,
        );
        registry.register_with_unit(
            PROMPT_PHASE,
            "Time from a prompt reaching the engine to the end of each phase of its critical path (begun: lease, \
             user message and history; gateway_called: the first step's call started; first_event: its first \
             gateway event)",
            Unit::Seconds,
            prompt_phase.clone(),
        );
        let snapshot_failures = Family::<FixedLabels, Counter>::default();
        registry.register(
            SNAPSHOT_FAILURES,
            "Workspace snapshots (op=track) and diffs (op=diff) that failed",
            snapshot_failures.clone(),
        );
        let gen_ai = GenAiMetrics::register(&mut registry);
        let store_traffic = Arc::new(OnceLock::new());
        registry.register_collector(Box::new(StoreCollector(store_traffic.clone())));
        Metrics {
            store_traffic,
            snapshot_failures,
            registry,
            active_sessions,
            open_streams,
            steps,
            compactions,
            tool_calls,
            redis: ByValue::new(LABEL_OP, redis),
            prompt_phase: ByValue::new(LABEL_PHASE, prompt_phase),
            gen_ai,
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        llm_telemetry::metrics_http::encode_registry(&self.registry)
    }

    /// A session loop started (`+1`) or ended (`-1`) on this replica.
    pub fn loop_started(&self) {
        self.active_sessions.inc();
    }

    /// See [`Metrics::loop_started`].
    pub fn loop_ended(&self) {
        self.active_sessions.dec();
    }

    /// The gauge of open streams, which their slots move (`api::stream_slots`).
    pub fn open_streams(&self) -> Gauge {
        self.open_streams.clone()
    }

    /// A step finished. `model` is `provider/model`; `duration` is the gateway call's; `tokens` are (input,
    /// output) as the GenAI conventions count them; `error_type` is set when the step failed.
    pub fn step(
        &self,
        finish: &str,
        model: &str,
        duration: Duration,
        tokens: (u64, u64),
        error_type: Option<&'static str>,
    ) {
        // Finishes the processor writes are a handful of fixed words; an empty one (never finished) reads as such.
        let finish = if finish.is_empty() { "none" } else { finish };
        self.steps
            .get_or_create(&FixedLabels(vec![(LABEL_FINISH, Arc::from(finish))]))
            .inc();
        let provider: Arc<str> = Arc::from(model.split_once('/').map_or(model, |(p, _)| p));
        let model: Arc<str> = Arc::from(model);
        // A step that failed before any usage arrived has no token counts; zeros would drag the histogram down.
        let tokens = (error_type.is_none() || tokens != (0, 0)).then_some(tokens);
        self.gen_ai
            .operation(&provider, &model, duration, error_type, tokens);
    }

    /// A compaction completed.
    pub fn compaction(&self, auto: bool) {
        let trigger = if auto { "auto" } else { "manual" };
        self.compactions
            .get_or_create(&FixedLabels(vec![(LABEL_TRIGGER, Arc::from(trigger))]))
            .inc();
    }

    /// A tool call ended.
    pub fn tool_call(&self, kind: ToolKind, outcome: ToolOutcome) {
        let kind = match kind {
            ToolKind::Builtin => "builtin",
            ToolKind::Client => "client",
        };
        let outcome = match outcome {
            ToolOutcome::Completed => "completed",
            ToolOutcome::Error => "error",
            ToolOutcome::Denied => "denied",
        };
        self.tool_calls
            .get_or_create(&FixedLabels(vec![
                (LABEL_KIND, Arc::from(kind)),
                (LABEL_OUTCOME, Arc::from(outcome)),
            ]))
            .inc();
    }

    /// A workspace snapshot (`track`) or diff (`diff`) failed.
    pub fn snapshot_failure(&self, op: &'static str) {
        self.snapshot_failures
            .get_or_create(&FixedLabels(vec![(LABEL_OP, Arc::from(op))]))
            .inc();
    }

    /// A prompt's critical path reached the end of `phase`, `elapsed` after the prompt reached the engine.
    pub fn prompt_phase(&self, phase: PromptPhase, elapsed: Duration) {
        self.prompt_phase
            .with(phase.as_str(), |h| h.observe(elapsed.as_secs_f64()));
    }

    /// Exports the store's request and `WAIT` counts (the first store named wins).
    pub fn count_store_traffic(&self, traffic: Arc<crate::store::Traffic>) {
        let _ = self.store_traffic.set(traffic);
    }

    /// A store call took `elapsed`.
    pub fn redis(&self, op: &'static str, elapsed: Duration) {
        self.redis.with(op, |h| h.observe(elapsed.as_secs_f64()));
    }
}

/// A family labelled by one name whose values are static strings, with each series' handle kept once made: every
/// prompt records a few of these, and finding a handle by a short scan spares building, hashing and dropping a label
/// set each time.
struct ByValue<M> {
    name: &'static str,
    family: Family<FixedLabels, M>,
    known: RwLock<Vec<(&'static str, M)>>,
}

impl<M: Clone> ByValue<M>
where
    fn() -> M: prometheus_client::metrics::family::MetricConstructor<M>,
{
    fn new(name: &'static str, family: Family<FixedLabels, M>) -> ByValue<M> {
        ByValue {
            name,
            family,
            known: RwLock::new(Vec::new()),
        }
    }

    /// Runs `f` on the series of `value`, made on first use.
    fn with(&self, value: &'static str, f: impl FnOnce(&M)) {
        {
            let known = self.known.read().unwrap_or_else(|p| p.into_inner());
            if let Some((_, m)) = known.iter().find(|(v, _)| *v == value) {
                return f(m);
            }
        }
        let m = self
            .family
            .get_or_create(&FixedLabels(vec![(self.name, Arc::from(value))]))
            .clone();
        f(&m);
        self.known
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push((value, m));
    }
}

/// Reads the store's counters at each scrape.
#[derive(Debug)]
struct StoreCollector(Arc<OnceLock<Arc<crate::store::Traffic>>>);

impl Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(traffic) = self.0.get() else {
            return Ok(());
        };
        let counts = traffic.counts();
        let requests = ConstCounter::new(counts.requests);
        requests.encode(encoder.encode_descriptor(
            REDIS_REQUESTS,
            "Requests the store sent Redis on its shared connection (a command or a pipeline: one round trip each)",
            None,
            requests.metric_type(),
        )?)?;
        {
            let mut waits = encoder.encode_descriptor(
                REDIS_WAITS,
                "Writes a caller is told about, by how their WAIT for replicas went (acknowledged; short: fewer \
                 replicas within redis.wait_timeout_ms, the write stands; skipped: waiting suspended after a short one)",
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for (outcome, n) in [
                ("acknowledged", counts.acknowledged),
                ("short", counts.short),
                ("skipped", counts.skipped),
            ] {
                let labels = FixedLabels(vec![(LABEL_OUTCOME, Arc::from(outcome))]);
                ConstCounter::new(n).encode(waits.encode_family(&labels)?)?;
            }
        }
        let polls = ConstCounter::new(counts.log_polls);
        polls.encode(encoder.encode_descriptor(
            EVENT_LOG_POLLS,
            "Event-log waits that polled (every 250 ms) because redis.max_blocking_reads blocking reads were \
             already waiting: raise it, or Redis's maxclients, when this grows",
            None,
            polls.metric_type(),
        )?)?;
        Ok(())
    }
}

impl llm_telemetry::metrics_http::Exposition for Metrics {
    fn encode(&self) -> String {
        Metrics::encode(self)
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
