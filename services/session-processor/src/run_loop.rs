//! The runLoop: one gateway `Stream` call per step, the Processor turning events into persisted parts, tools
//! executed between steps, and the continue / stop decision, under a lease with a fencing token.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use llm_proto::gateway as gw;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use llm_proto::sessions as pb;
use prost_types::Timestamp;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tracing::Instrument;

use crate::config::{Agent, Config};
use crate::context;
use crate::events::Hub;
use crate::history;
use crate::ids;
use crate::metrics::{Metrics, ToolKind, ToolOutcome as CallOutcome};
use crate::processor::{Effect, Outcome, Processor};
use crate::retry;
use crate::store::{Fence, Store, StoreError};
use crate::structured;
use crate::tools::{self, Decision, DoomLoopDetector, DoomPolicy, ToolOutcome, Workspace};

mod budget;
mod compact;
mod titling;

use compact::{Compacted, Compaction};

/// The system section of the last step `max_steps` allows.
const LAST_STEP_SYSTEM: &str =
    "This is the last step allowed: answer with text only, without calling tools.";

/// A gateway client that sends the processor's bearer token.
pub type GatewayClient = GatewayServiceClient<InterceptedService<Channel, GatewayAuth>>;

/// Adds `authorization: Bearer <token>` to gateway calls.
#[derive(Clone)]
pub struct GatewayAuth(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for GatewayAuth {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// Connects (lazily) to the gateway over one HTTP/2 connection.
pub fn gateway_client(
    url: &str,
    token: &str,
) -> Result<GatewayClient, Box<dyn std::error::Error + Send + Sync>> {
    gateway_client_balanced(url, token, crate::gateway_pool::Balance::Connection)
}

/// Connects (lazily) to the gateway, spreading calls as `balance` says (see [`crate::gateway_pool`]).
pub fn gateway_client_balanced(
    url: &str,
    token: &str,
    balance: crate::gateway_pool::Balance,
) -> Result<GatewayClient, Box<dyn std::error::Error + Send + Sync>> {
    let channel = crate::gateway_pool::channel(url, balance)?;
    let auth = if token.is_empty() {
        None
    } else {
        Some(format!("Bearer {token}").parse()?)
    };
    Ok(
        GatewayServiceClient::with_interceptor(channel, GatewayAuth(auth))
            .max_decoding_message_size(64 * 1024 * 1024),
    )
}

/// Why a loop could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// Redis failed or refused a write.
    #[error("storage: {0}")]
    Store(#[from] StoreError),
    /// The session (or its agent) does not exist.
    #[error("session {0} not found")]
    NotFound(String),
    /// The request cannot run in the session's current state (busy, nothing to compact).
    #[error("{0}")]
    Precondition(String),
}

/// What a loop run keeps in memory: the prompt-scoped inputs that are not part of the history.
#[derive(Debug, Clone, Default)]
pub struct RunInputs {
    /// The model the prompt asked for.
    pub model: Option<String>,
    /// Client tools declared by the prompt.
    pub client_tools: Vec<pb::ClientTool>,
    /// Extra system text of the prompt.
    pub system: String,
    /// The caller's W3C trace context (`traceparent`, `tracestate`), sent on every gateway call of this run.
    pub trace: Vec<(String, String)>,
    /// A manual compaction (the `Compact` RPC) runs first.
    pub compact: bool,
}

impl RunInputs {
    /// The inputs a prompt brings to the run it starts.
    fn from_prompt(req: &pb::PromptRequest, trace: Vec<(String, String)>) -> RunInputs {
        RunInputs {
            model: Some(req.model.clone()).filter(|m| !m.is_empty()),
            client_tools: req.client_tools.clone(),
            system: req.system.clone(),
            trace,
            compact: false,
        }
    }

    /// A prompt delivered to the running loop (queued while it was busy) brings its own model, system text and
    /// client tools from then on: a newer client tool replaces one of the same name. Returns whether anything
    /// changed.
    fn absorb(&mut self, req: &pb::PromptRequest) -> bool {
        let mut changed = false;
        if !req.model.is_empty() && self.model.as_deref() != Some(req.model.as_str()) {
            self.model = Some(req.model.clone());
            changed = true;
        }
        if !req.system.is_empty() && self.system != req.system {
            self.system = req.system.clone();
            changed = true;
        }
        for tool in &req.client_tools {
            self.client_tools.retain(|t| t.name != tool.name);
            self.client_tools.push(tool.clone());
            changed = true;
        }
        changed
    }

    /// What [`Store::put_run_inputs`] keeps of these inputs.
    fn stored(&self) -> pb::PromptRequest {
        pb::PromptRequest {
            model: self.model.clone().unwrap_or_default(),
            client_tools: self.client_tools.clone(),
            system: self.system.clone(),
            ..Default::default()
        }
    }
}

/// Attaches the run's trace context to a gateway request.
///
/// When spans are exported, the gateway call becomes a child of the current span (the step); otherwise the caller's
/// own context is passed through unchanged, so the trace id still reaches the gateway and the provider.
fn with_trace<T>(request: &mut tonic::Request<T>, trace: &[(String, String)]) {
    if llm_telemetry::inject_metadata(&tracing::Span::current(), request.metadata_mut()) {
        return;
    }
    for (k, v) in trace {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(k.as_bytes()),
            tonic::metadata::MetadataValue::try_from(v.as_str()),
        ) {
            request.metadata_mut().insert(key, value);
        }
    }
}

/// The step's tokens (as the GenAI conventions count them: input includes cached, output includes reasoning), its
/// exact cost and its finish, on the step's span.
fn record_step(span: &tracing::Span, message: &pb::Message) {
    let t = message.tokens.unwrap_or_default();
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    span.record(
        "gen_ai.usage.input_tokens",
        as_i64(t.input + t.cache_read + t.cache_write),
    );
    span.record("gen_ai.usage.output_tokens", as_i64(t.output + t.reasoning));
    span.record("llm.cost_nano_usd", message.cost_nano_usd);
    span.record("llm.finish", message.finish.as_str());
}

/// The metrics outcome of a finished tool call.
fn tool_outcome<T, E>(result: &Result<T, E>) -> CallOutcome {
    match result {
        Ok(_) => CallOutcome::Completed,
        Err(_) => CallOutcome::Error,
    }
}

/// Shared state of the processor: storage, the gateway, configuration and the loops this replica runs.
pub struct Engine {
    /// Storage.
    pub store: Store,
    /// The gateway.
    pub gateway: GatewayClient,
    /// Configuration.
    pub config: Arc<Config>,
    /// This replica's lease owner id.
    pub owner: String,
    /// Loops running on this replica, by session, for Abort.
    running: Mutex<HashMap<String, (u64, CancellationToken)>>,
    /// Prometheus metrics, served by the `/metrics` listener when one is configured.
    pub metrics: Arc<Metrics>,
    /// Session events: live to this replica's streams, coalesced into the sessions' event logs.
    pub events: Hub,
    /// What each running loop of this replica knows of its session, so a step does not re-read it (see
    /// [`LoopState`]).
    loop_state: Mutex<HashMap<String, LoopState>>,
}

/// What a running loop carries between steps instead of reading it back from Redis: the session record as last
/// read or written (for the budget check), and each assistant message's share of the session's totals, seeded from
/// the history the loop reads at the top of every iteration (the stored truth) and updated as it settles steps.
#[derive(Debug, Default)]
struct LoopState {
    /// The session record as last read or written by this loop.
    session: Option<pb::Session>,
    /// Its stored bytes, when known: the next `settle_session` updates from them without reading the record.
    session_bytes: Option<Vec<u8>>,
    /// Cost and tokens per assistant message id; `None` until the loop has read the history.
    totals: Option<HashMap<String, (i64, pb::Tokens)>>,
    /// This run may have stored a retry status under its fence (set before trying to store one, cleared once it
    /// is cleared): only then does the run's end have one to clear, since a retry status counts only under the
    /// lease that stored it.
    retry_status: bool,
    /// Messages this run wrote successfully: the session lists them, so rewriting one skips the listing.
    listed: HashSet<String>,
}

/// A session record a caller read just before starting a loop: the session, and its stored bytes when known.
type Carried = (pb::Session, Option<Vec<u8>>);

/// An assistant message's share of the session's totals: its cost, and the tokens of its step-finish parts.
fn message_totals(message: &pb::Message, parts: &[pb::Part]) -> (i64, pb::Tokens) {
    let mut tokens = pb::Tokens::default();
    for p in parts {
        if let Some(pb::part::Kind::StepFinish(f)) = &p.kind {
            let t = f.tokens.unwrap_or_default();
            tokens.input += t.input;
            tokens.output += t.output;
            tokens.reasoning += t.reasoning;
            tokens.cache_read += t.cache_read;
            tokens.cache_write += t.cache_write;
        }
    }
    (message.cost_nano_usd, tokens)
}

/// Every assistant message's share of the totals in a history as stored.
fn history_totals(history: &[pb::Message]) -> HashMap<String, (i64, pb::Tokens)> {
    history
        .iter()
        .filter(|m| m.role() == pb::Role::Assistant)
        .map(|m| (m.id.clone(), message_totals(m, &m.parts)))
        .collect()
}

/// The session's totals: the sum of its assistant messages' shares.
fn sum_totals(shares: &HashMap<String, (i64, pb::Tokens)>) -> (i64, pb::Tokens) {
    let mut cost = 0i64;
    let mut tokens = pb::Tokens::default();
    for (c, t) in shares.values() {
        cost += c;
        tokens.input += t.input;
        tokens.output += t.output;
        tokens.reasoning += t.reasoning;
        tokens.cache_read += t.cache_read;
        tokens.cache_write += t.cache_write;
    }
    (cost, tokens)
}

/// The `error.type` of a failed step: the conventions' low-cardinality snake_case names (`_OTHER` for anything
/// unnamed), the same words the gateway uses for its own errors where they overlap.
fn error_type_name(kind: pb::message_error::Kind) -> &'static str {
    use pb::message_error::Kind;
    match kind {
        Kind::Aborted => "cancelled",
        Kind::Auth => "auth",
        Kind::Api => "api_error",
        Kind::ContextOverflow => "context_overflow",
        Kind::OutputLength => "output_length",
        Kind::StructuredOutput => "structured_output",
        Kind::BudgetExceeded => "budget_exceeded",
        Kind::Unspecified => "_OTHER",
    }
}

fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

impl Engine {
    /// A new engine.
    pub fn new(store: Store, gateway: GatewayClient, config: Arc<Config>) -> Arc<Engine> {
        let events = Hub::new(store.clone(), config.events);
        Arc::new(Engine {
            events,
            store,
            gateway,
            config,
            owner: ids::new("rep"),
            running: Mutex::new(HashMap::new()),
            metrics: Arc::new(Metrics::new()),
            loop_state: Mutex::new(HashMap::new()),
        })
    }

    /// Records a finished step in the metrics: its finish, and the GenAI client view of its gateway call (tokens
    /// counted as the conventions do, like [`record_step`]).
    fn record_step_metrics(&self, message: &pb::Message, model: &str, duration: Duration) {
        let t = message.tokens.unwrap_or_default();
        let error_type = message
            .error
            .as_ref()
            .map(|e| pb::message_error::Kind::try_from(e.kind).map_or("_OTHER", error_type_name));
        self.metrics.step(
            &message.finish,
            model,
            duration,
            (
                t.input + t.cache_read + t.cache_write,
                t.output + t.reasoning,
            ),
            error_type,
        );
    }

    /// The agent for a name (the default agent for an empty or unknown one).
    pub fn agent(&self, name: &str) -> Option<&Agent> {
        let name = if name.is_empty() { "default" } else { name };
        self.config.agents.get(name)
    }

    /// Accepts a prompt: persists the user message and starts the loop, or queues the prompt when another loop
    /// holds the session. Returns the event id after which the caller's stream starts.
    pub async fn prompt(
        self: &Arc<Self>,
        req: pb::PromptRequest,
        trace: Vec<(String, String)>,
    ) -> Result<String, LoopError> {
        let (session, bytes) = self
            .store
            .get_session_record(&req.session_id)
            .await?
            .ok_or_else(|| LoopError::NotFound(req.session_id.clone()))?;
        let carried = Some((session.clone(), Some(bytes)));
        let start = match self
            .store
            .acquire_lease(&session.id, &self.owner, self.config.lease_ttl)
            .await?
        {
            Some(fence) => {
                self.open_events(&session.id, &fence).await;
                // Taken from the channel just opened (no Redis read) and before the user message is published, so
                // the caller's stream starts with it.
                let persisted = match self.events.last_event_id(&session.id).await {
                    Ok(start) => self
                        .persist_user_message(&session, &req, Some(&fence))
                        .await
                        .map(|_| start),
                    Err(e) => Err(e),
                };
                let start = match persisted {
                    Ok(start) => start,
                    Err(e) => {
                        self.close_events(&session.id).await;
                        return Err(e.into());
                    }
                };
                let inputs = RunInputs::from_prompt(&req, trace);
                self.spawn_loop(session.id.clone(), carried.clone(), fence, inputs);
                start
            }
            None => {
                let start = self.events.last_event_id(&session.id).await?;
                // Busy: the running loop delivers it at its next step boundary (see `deliver_queued`).
                self.store.enqueue_prompt(&session.id, &req).await?;
                // The loop may have made its last queue check and released the lease between our failed acquire
                // and the enqueue; then nobody would deliver the prompt. Trying again closes that window: whoever
                // holds the lease next (that loop re-checking after its release, or us) delivers the queue.
                if let Some(fence) = self
                    .store
                    .acquire_lease(&session.id, &self.owner, self.config.lease_ttl)
                    .await?
                {
                    self.open_events(&session.id, &fence).await;
                    // The queued prompt is delivered by the loop, which takes its inputs then.
                    let inputs = RunInputs {
                        trace,
                        ..RunInputs::default()
                    };
                    self.spawn_loop(session.id.clone(), carried.clone(), fence, inputs);
                }
                start
            }
        };
        Ok(start)
    }

    /// Opens the session's event channel on this replica for the loop holding `fence` (its loop runs here from now
    /// on). On failure the loop's events go straight to Redis, one command each, and its parts are written by
    /// `put_part` (streamed text at the part's end), which is slower but loses nothing.
    async fn open_events(&self, session_id: &str, fence: &Fence) {
        if let Err(e) = self.events.open_fenced(session_id, fence).await {
            tracing::warn!(message = "cannot open the session's event channel; publishing directly", session_id = %session_id, error = %e);
        }
    }

    /// Writes the session's remaining events and closes its channel (the loop is over and its lease released).
    async fn close_events(&self, session_id: &str) {
        if let Err(e) = self.events.close(session_id).await {
            tracing::warn!(message = "cannot write the session's last events", session_id = %session_id, error = %e);
        }
    }

    /// Stops a loop running on this replica. Returns whether one was running.
    pub fn abort(&self, session_id: &str) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.get(session_id) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Whether a loop for this session runs on this replica.
    pub fn is_running(&self, session_id: &str) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(session_id)
    }

    /// Resumes a session whose lease is free but whose loop never finished (its replica died mid-step): the new
    /// loop closes the orphaned parts and carries on. Returns whether this replica took it.
    pub async fn resume(self: &Arc<Self>, session_id: &str) -> Result<bool, LoopError> {
        let Some(fence) = self
            .store
            .acquire_lease(session_id, &self.owner, self.config.lease_ttl)
            .await?
        else {
            return Ok(false);
        };
        let Some((session, bytes)) = self.store.get_session_record(session_id).await? else {
            self.store.clear_active(session_id).await?;
            return Ok(false);
        };
        tracing::info!(message = "resuming a session whose replica stopped mid-loop", session_id = %session_id);
        // The run's client tools, system text and model survive the replica: a pending client tool call is still
        // the caller's to answer, and the next step offers the same tools.
        let mut inputs = RunInputs::default();
        match self.store.run_inputs(session_id).await {
            Ok(Some(stored)) => {
                inputs.absorb(&stored);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(message = "cannot read the run's inputs; resuming without them", session_id = %session_id, error = %e);
            }
        }
        self.spawn_loop(
            session_id.to_string(),
            Some((session, Some(bytes))),
            fence,
            inputs,
        );
        Ok(true)
    }

    /// Every `interval`, looks for sessions marked active with no lease holder and resumes them. Runs until
    /// `stop` is cancelled. Sessions whose lease is still held are left alone, so a live owner never loses them.
    pub async fn recover(self: Arc<Self>, interval: Duration, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let ids = match self.store.active_sessions().await {
                Ok(ids) => ids,
                Err(e) => {
                    tracing::warn!(message = "recovery scan failed", error = %e);
                    continue;
                }
            };
            for id in ids {
                if self
                    .running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains_key(&id)
                {
                    continue;
                }
                if matches!(self.store.lease_holder(&id).await, Ok(None))
                    && let Err(e) = self.resume(&id).await
                {
                    tracing::warn!(message = "resume failed", session_id = %id, error = %e);
                }
            }
        }
    }

    async fn persist_user_message(
        &self,
        session: &pb::Session,
        req: &pb::PromptRequest,
        fence: Option<&Fence>,
    ) -> Result<pb::Message, StoreError> {
        let agent = if req.agent.is_empty() {
            session.agent.clone()
        } else {
            req.agent.clone()
        };
        let message = pb::Message {
            id: ids::new("msg"),
            session_id: session.id.clone(),
            role: pb::Role::User as i32,
            model: req.model.clone(),
            agent,
            // Kept with the message, so the format survives queuing, crash recovery and compaction replays.
            format: req
                .format
                .clone()
                .filter(|f| f.r#type() == pb::output_format::Type::JsonSchema),
            created_at: Some(now()),
            ..Default::default()
        };
        let parts: Vec<pb::Part> = req
            .parts
            .iter()
            .filter_map(|p| {
                let kind = match p.kind.as_ref()? {
                    pb::prompt_part::Kind::Text(t) => pb::part::Kind::Text(pb::TextPart {
                        text: t.clone(),
                        started_at: message.created_at,
                        ended_at: message.created_at,
                        synthetic: false,
                    }),
                    pb::prompt_part::Kind::File(f) => pb::part::Kind::File(f.clone()),
                };
                Some(pb::Part {
                    id: ids::new("prt"),
                    message_id: message.id.clone(),
                    session_id: session.id.clone(),
                    kind: Some(kind),
                })
            })
            .collect();
        // The message and its parts in one script.
        let stored = pb::Message {
            parts: parts.clone(),
            ..message.clone()
        };
        self.store.put_message(&stored, fence).await?;
        self.events
            .publish(
                &session.id,
                pb::session_event::Event::MessageUpdated(message.clone()),
            )
            .await?;
        for p in &parts {
            self.events
                .publish(
                    &session.id,
                    pb::session_event::Event::PartUpdated(p.clone()),
                )
                .await?;
        }
        Ok(message)
    }

    /// Runs the session's loop under `fence` on a task of its own; `session` is the record the caller just read
    /// (the first run uses it instead of reading it again), `None` to have the loop read it.
    fn spawn_loop(
        self: &Arc<Self>,
        session_id: String,
        session: Option<Carried>,
        fence: Fence,
        inputs: RunInputs,
    ) {
        static LOOPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        // Each loop knows its own entry, so a loop ending just as the next one for the session starts (a prompt
        // that took the released lease) removes only itself.
        let loop_id = LOOPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session_id.clone(), (loop_id, token.clone()));
        let engine = Arc::clone(self);
        // The loop's span: a child of the caller's trace context when the prompt carried one.
        let span = tracing::info_span!(
            "session.prompt",
            "otel.name" = "invoke_agent",
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.conversation.id" = %session_id,
            "session.id" = %session_id,
        );
        let mut parent = tonic::metadata::MetadataMap::new();
        for (k, v) in &inputs.trace {
            if let (Ok(key), Ok(value)) = (
                tonic::metadata::MetadataKey::from_bytes(k.as_bytes()),
                tonic::metadata::MetadataValue::try_from(v.as_str()),
            ) {
                parent.insert(key, value);
            }
        }
        llm_telemetry::set_parent_from_metadata(&span, &parent);
        tokio::spawn(async move {
            engine.metrics.loop_started();
            engine.open_events(&session_id, &fence).await;
            if let Err(e) = engine.store.mark_active(&session_id).await {
                tracing::warn!(message = "cannot mark the session active", session_id = %session_id, error = %e);
            }
            let mut fence = fence;
            let mut inputs = inputs;
            let mut session = session;
            loop {
                if let Err(e) = engine
                    .run(&session_id, session.take(), &fence, &inputs, &token)
                    .await
                {
                    tracing::error!(message = "session loop failed", session_id = %session_id, error = %e);
                    let _ = engine
                        .events
                        .publish(
                            &session_id,
                            pb::session_event::Event::Error(pb::MessageError {
                                kind: pb::message_error::Kind::Api as i32,
                                message: format!("session loop failed: {e}"),
                                http_status: 0,
                                retryable: true,
                            }),
                        )
                        .await;
                }
                let state = engine.forget_loop_state(&session_id);
                // Cleared before the lease is released, so a sweeper never sees "active, no lease" for a loop that
                // simply finished.
                if state.retry_status {
                    let _ = engine.store.clear_retry_status(&session_id, &fence).await;
                }
                let _ = engine.store.clear_active(&session_id).await;
                let _ = engine.store.release_lease(&session_id, &fence).await;
                // `done` was written to the log when published (before the release, so a successor's ids follow
                // it); this replica's streams get it now that the session is idle.
                engine.close_events(&session_id).await;
                // A prompt queued between the loop's last check and the release would otherwise wait forever.
                let queued = engine
                    .store
                    .has_queued_prompts(&session_id)
                    .await
                    .unwrap_or(false);
                if !queued || token.is_cancelled() {
                    break;
                }
                match engine
                    .store
                    .acquire_lease(&session_id, &engine.owner, engine.config.lease_ttl)
                    .await
                {
                    Ok(Some(f)) => {
                        fence = f;
                        inputs = RunInputs::default();
                        let _ = engine.store.mark_active(&session_id).await;
                        engine.open_events(&session_id, &fence).await;
                    }
                    _ => break,
                }
            }
            {
                let mut running = engine.running.lock().unwrap_or_else(|p| p.into_inner());
                if running.get(&session_id).is_some_and(|(id, _)| *id == loop_id) {
                    running.remove(&session_id);
                }
            }
            engine.metrics.loop_ended();
        }.instrument(span));
    }

    /// Runs the loop until the session has no work, holding the lease.
    async fn run(
        &self,
        session_id: &str,
        session: Option<Carried>,
        fence: &Fence,
        inputs: &RunInputs,
        cancel: &CancellationToken,
    ) -> Result<(), LoopError> {
        let lost = cancel.child_token();
        let renew = {
            // Through the hub: while a step streams, the event channel's writes renew the lease on the way, and
            // this renews only what they did not (a third of the ttl after the last renewal, as always).
            let events = self.events.clone();
            let fence = fence.clone();
            let ttl = self.config.lease_ttl;
            let session_id = session_id.to_string();
            let lost = lost.clone();
            tokio::spawn(async move {
                loop {
                    let due = events.lease_renewal_due(&session_id, ttl);
                    tokio::select! {
                        _ = lost.cancelled() => break,
                        _ = tokio::time::sleep(due) => {}
                    }
                    match events.renew_lease(&session_id, &fence, ttl).await {
                        Ok(true) => {}
                        _ => {
                            tracing::warn!(message = "lease lost; stopping the loop", session_id = %session_id);
                            lost.cancel();
                            break;
                        }
                    }
                }
            })
        };
        let result = self
            .run_steps(session_id, session, fence, inputs, &lost)
            .await;
        lost.cancel();
        let _ = renew.await;
        result
    }

    async fn run_steps(
        &self,
        session_id: &str,
        session: Option<Carried>,
        fence: &Fence,
        inputs: &RunInputs,
        cancel: &CancellationToken,
    ) -> Result<(), LoopError> {
        let mut own_inputs = inputs.clone();
        let mut inputs_saved = false;
        // The record the prompt (or resume) just read, else read now; carried from here on (see `LoopState`).
        let (session, bytes) = match session {
            Some(carried) => carried,
            None => self
                .store
                .get_session_record(session_id)
                .await?
                .map(|(s, b)| (s, Some(b)))
                .ok_or_else(|| LoopError::NotFound(session_id.into()))?,
        };
        self.with_loop_state(session_id, |s| {
            *s = LoopState {
                session: Some(session.clone()),
                session_bytes: bytes,
                ..LoopState::default()
            };
        });
        let agent = self
            .agent(&session.agent)
            .cloned()
            .ok_or_else(|| LoopError::NotFound(format!("agent {}", session.agent)))?;
        self.status(session_id, pb::session_status::Kind::Busy, 0, None, "")
            .await?;
        let workspace = self.workspace(&session);
        let snapshots = crate::snapshot::StepSnapshots::new(self, &session, workspace.as_ref());
        let mut steps = 0u32;
        let mut retries = 0u32;
        let mut last: Option<pb::Message> = None;
        // A compaction to run before anything else: asked for by the caller, or by the previous step's closeout.
        let mut pending = inputs.compact.then_some(Compaction {
            auto: false,
            overflow: false,
        });
        // True from an automatic compaction until a step fits: needing another one before that means compacting
        // does not shrink the context, and the loop stops instead of compacting forever.
        let mut compacted = false;
        let mut first = true;
        // Set after a step that answered the last user message completely (no tool calls, no compaction due): the
        // history as this loop wrote it needs no more work, so unless the queue delivers a prompt the loop ends
        // without reading the history back just to find that out.
        let mut answered = false;
        loop {
            if cancel.is_cancelled() {
                break;
            }
            // Stored when the run starts and whenever a delivered prompt changes them, so a loop that resumes
            // this run elsewhere offers exactly its client tools, system text and model.
            let (changed, delivered) = self
                .deliver_queued(&session, fence, &mut own_inputs)
                .await?;
            if changed || !inputs_saved {
                self.save_inputs(session_id, &own_inputs).await;
                inputs_saved = true;
            }
            if std::mem::take(&mut answered) && delivered == 0 && pending.is_none() {
                break;
            }
            let inputs = &own_inputs;
            let (history, _) = self
                .store
                .list_messages(session_id, None, usize::MAX)
                .await?;
            // Every message's share of the totals, as stored: `settle_session` adds this iteration's steps to it.
            let shares = history_totals(&history);
            self.with_loop_state(session_id, |s| s.totals = Some(shares));
            let history = self.close_orphans(history, fence).await?;
            let Some(model) = history::pick_model(
                inputs.model.as_deref(),
                &history,
                &agent.model,
                &session.default_model,
            )
            .map(String::from) else {
                self.fail(
                    session_id,
                    "no model: set one on the prompt, the agent or the session",
                )
                .await?;
                break;
            };
            if std::mem::take(&mut first) {
                self.spawn_title(&session, &agent, &history, &model, &inputs.trace);
            }
            // From here on the loop sees the conversation from the last completed compaction.
            let history = history::since_compaction(history);
            let work = history::needs_work(&history);
            if pending.is_none()
                && work
                && history
                    .last()
                    .is_some_and(|m| m.finish == history::FINISH_OVERFLOW)
            {
                // An overflowed step whose compaction never ran (its replica stopped in between).
                pending = Some(Compaction {
                    auto: true,
                    overflow: true,
                });
            }
            if !work && pending.is_none() {
                break;
            }
            if let Some(reason) = self.budget_spent(session_id).await? {
                let error = budget::budget_error(reason);
                if work {
                    last = Some(
                        self.stop_with(session_id, &history, &model, &agent, error, fence)
                            .await?,
                    );
                } else if !pending.is_some_and(|c| c.auto) {
                    // A manual compaction is refused; an automatic one after a complete answer is simply skipped.
                    self.events
                        .publish(session_id, pb::session_event::Event::Error(error))
                        .await?;
                }
                break;
            }
            let limits = self.model_limits(&model, &inputs.trace).await;
            let usable = limits.map(|l| l.usable(agent.compaction_reserve));
            if let Some(cause) = pending.take() {
                match self
                    .compact(
                        &session, &agent, &history, cause, &model, usable, inputs, fence, cancel,
                    )
                    .await?
                {
                    Compacted::Done(m) => {
                        self.metrics.compaction(cause.auto);
                        compacted = cause.auto;
                        // `done` names the answer, not housekeeping: only a manual compaction is the result.
                        if !cause.auto {
                            last = Some(m);
                        }
                        continue;
                    }
                    Compacted::Failed(m) | Compacted::Aborted(m) => {
                        last = Some(m);
                        break;
                    }
                }
            }
            if !work {
                break;
            }
            steps += 1;
            let final_step = steps >= agent.max_steps;
            let format = history::output_format(&history).and_then(|f| {
                structured::Format::from_proto(&f)
                    .inspect_err(
                        |e| tracing::warn!(message = "ignoring a stored output format", error = %e),
                    )
                    .ok()
                    .flatten()
            });
            let mut turn = structured::Turn::new(format, structured::failures_so_far(&history));
            let protect = usable.map_or(agent.prune_protect, |u| agent.prune_protect.min(u / 2));
            let render = history::Render {
                pruned: history::prunable(&history, protect, agent.prune_minimum.min(protect)),
                summary: false,
            };
            let mut generation = self.build_generation(
                &session,
                &agent,
                &history,
                &render,
                &model,
                inputs,
                workspace.is_some(),
                final_step,
            );
            turn.decorate(&mut generation, final_step, LAST_STEP_SYSTEM);
            // The pre-call overflow check, on an estimate (see `context`); skipped when auto-compaction is off, so
            // that only the provider's own answer can fail the step.
            let estimate = context::estimate_generation(&generation);
            if let Some(usable) = usable
                && agent.auto_compact
                && estimate >= usable
            {
                steps -= 1;
                if compacted {
                    let error = compact::overflow_error(format!(
                        "the context still does not fit {model} after compacting (about {estimate} tokens, \
                         {usable} usable): start a new session or send less at once"
                    ));
                    last = Some(
                        self.stop_with(session_id, &history, &model, &agent, error, fence)
                            .await?,
                    );
                    break;
                }
                pending = Some(Compaction {
                    auto: true,
                    overflow: true,
                });
                continue;
            }
            let parent = history
                .iter()
                .rev()
                .find(|m| m.role() == pb::Role::User)
                .map(|m| m.id.clone())
                .unwrap_or_default();
            let message = pb::Message {
                id: ids::new("msg"),
                session_id: session_id.into(),
                role: pb::Role::Assistant as i32,
                parent_id: parent,
                model: model.clone(),
                agent: agent.name.clone(),
                created_at: Some(now()),
                ..Default::default()
            };
            let mut processor = Processor::new(message, usable);
            if let Some(s) = &snapshots {
                processor.set_start_snapshot(s.start().await);
            }
            self.apply(
                &[Effect::Message(processor.message().clone())],
                fence,
                &processor,
            )
            .await?;
            let step_span = tracing::info_span!(
                "session.step",
                "otel.name" = %format!("step {steps}"),
                "session.id" = %session_id,
                "llm.step" = steps,
                "gen_ai.request.model" = %model,
                "gen_ai.usage.input_tokens" = tracing::field::Empty,
                "gen_ai.usage.output_tokens" = tracing::field::Empty,
                "llm.cost_nano_usd" = tracing::field::Empty,
                "llm.finish" = tracing::field::Empty,
            );
            let step_started = Instant::now();
            let aborted = self
                .stream_step(&mut processor, generation, &inputs.trace, fence, cancel)
                .instrument(step_span.clone())
                .await?;
            let step_duration = step_started.elapsed();
            if !aborted {
                let detector = doom_detector(&history);
                self.run_tools(
                    &mut processor,
                    &agent,
                    workspace.as_ref(),
                    inputs,
                    &mut turn,
                    detector,
                    fence,
                    cancel,
                )
                .await?;
            }
            // The step's tools ran after its step-finish event: the end snapshot (and the patch) covers them.
            if let Some(s) = &snapshots
                && let Some((after, changes)) = s.finish(processor.start_snapshot()).await
            {
                let mut out = Vec::new();
                processor.finish_snapshot(after.clone(), changes, &mut out);
                self.apply(&out, fence, &processor).await?;
                s.update_summary(&self.store, &after, fence).await?;
            }
            let mut out = Vec::new();
            processor.cleanup(now(), aborted || cancel.is_cancelled(), &mut out);
            if processor.outcome() == Outcome::Continue
                && let Some(error) = turn.missing(processor.message(), final_step)
            {
                processor.fail(error, &mut out);
            }
            self.apply(&out, fence, &processor).await?;
            self.settle_session(session_id, processor.message(), processor.parts(), fence)
                .await?;
            self.charge_tenant(&session, processor.message().cost_nano_usd)
                .await;
            record_step(&step_span, processor.message());
            self.record_step_metrics(processor.message(), &model, step_duration);
            last = Some(processor.message().clone());
            if aborted || cancel.is_cancelled() {
                break;
            }
            // A step that reached the usable limit but failed otherwise (the output limit cut it) stops on its error.
            let outcome = match processor.outcome() {
                Outcome::Compact
                    if processor.message().error.is_some() && !processor.overflowed() =>
                {
                    Outcome::Stop
                }
                o => o,
            };
            match outcome {
                Outcome::Continue => {
                    retries = 0;
                    compacted = false;
                    // The stored history is now this iteration's plus the step's message (as completed).
                    let mut now_stored = history.clone();
                    now_stored.push(processor.message().clone());
                    answered = !history::needs_work(&now_stored);
                }
                Outcome::Compact => {
                    let stop = if !agent.auto_compact {
                        // Off: an overflow is a plain error; a context merely near the limit goes on until the
                        // provider refuses it.
                        processor.overflowed().then(|| {
                            compact::overflow_error(format!(
                                "the context does not fit {model} and automatic compaction is off for agent `{}`",
                                agent.name
                            ))
                        })
                    } else if compacted {
                        Some(compact::overflow_error(format!(
                            "compacting did not shrink the context enough for {model}: start a new session or \
                             send less at once"
                        )))
                    } else {
                        pending = Some(Compaction {
                            auto: true,
                            overflow: processor.overflowed(),
                        });
                        None
                    };
                    if let Some(error) = stop {
                        let mut out = Vec::new();
                        processor.fail(error.clone(), &mut out);
                        self.apply(&out, fence, &processor).await?;
                        self.events
                            .publish(session_id, pb::session_event::Event::Error(error))
                            .await?;
                        last = Some(processor.message().clone());
                        break;
                    }
                    retries = 0;
                }
                Outcome::Stop => {
                    let decision = processor.failure().map(|f| {
                        retry::decide(&f, retries + 1, &agent.retry, rand::random::<f64>())
                    });
                    if let Some(retry::Decision::RetryAfter(delay)) = decision {
                        retries += 1;
                        self.record_retry(processor.message(), retries, delay, fence)
                            .await?;
                        tokio::select! {
                            _ = cancel.cancelled() => break,
                            _ = tokio::time::sleep(delay) => {}
                        }
                        self.store.clear_retry_status(session_id, fence).await?;
                        self.with_loop_state(session_id, |s| s.retry_status = false);
                        self.status(session_id, pb::session_status::Kind::Busy, 0, None, "")
                            .await?;
                        // The failed message keeps its error; the retry is a new assistant message for the same
                        // user message, so the exit rule must not read the failure as the answer.
                        self.clear_error_for_retry(processor.message(), fence)
                            .await?;
                        continue;
                    }
                    if let Some(retry::Decision::Stop(reason)) = decision {
                        tracing::info!(message = "step failed; not retried", session_id = %session_id, reason = ?reason, attempt = retries + 1);
                    }
                    if let Some(e) = processor.message().error.clone() {
                        self.events
                            .publish(session_id, pb::session_event::Event::Error(e))
                            .await?;
                    }
                    break;
                }
            }
            if final_step && pending.is_none() {
                break;
            }
        }
        self.status(session_id, pb::session_status::Kind::Idle, 0, None, "")
            .await?;
        let (message_id, finish) = last.map(|m| (m.id, m.finish)).unwrap_or_default();
        self.events
            .publish(
                session_id,
                pb::session_event::Event::Done(pb::Done { message_id, finish }),
            )
            .await?;
        Ok(())
    }

    fn workspace(&self, session: &pb::Session) -> Option<Workspace> {
        if session.workspace.is_empty() {
            return None;
        }
        Workspace::for_session(
            &self.config.workspace_root,
            &session.tenant,
            &session.workspace,
        )
        .ok()
    }

    #[allow(clippy::too_many_arguments)]
    fn build_generation(
        &self,
        session: &pb::Session,
        agent: &Agent,
        history: &[pb::Message],
        render: &history::Render,
        model: &str,
        inputs: &RunInputs,
        has_workspace: bool,
        final_step: bool,
    ) -> gw::Generation {
        // Stable first (role prompt, skills), then what changes (environment, the caller's text), so provider prompt
        // caches keep hitting.
        let mut system = vec![agent.role_prompt.clone()];
        for (name, text) in &agent.skills {
            system.push(format!("<skill name=\"{name}\">\n{text}\n</skill>"));
        }
        let date = httpdate_day(SystemTime::now());
        let mut env = format!("<env>\ndate: {date}\nplatform: {}\n", std::env::consts::OS);
        if has_workspace {
            env.push_str(&format!("workspace: {}\n", session.workspace));
        }
        env.push_str("</env>");
        system.push(env);
        if !inputs.system.is_empty() {
            system.push(inputs.system.clone());
        }
        if final_step {
            system.push(LAST_STEP_SYSTEM.into());
        }
        let mut tools = Vec::new();
        if !final_step {
            if has_workspace {
                for spec in tools::builtin_specs() {
                    if agent.tools.contains(&spec.name)
                        && agent.permissions.tool_enabled(&spec.name)
                    {
                        tools.push(gw::Tool {
                            name: spec.name,
                            description: spec.description,
                            input_schema_json: spec.input_schema.to_string(),
                        });
                    }
                }
            }
            for c in &inputs.client_tools {
                tools.push(gw::Tool {
                    name: c.name.clone(),
                    description: c.description.clone(),
                    input_schema_json: c.input_schema_json.clone(),
                });
            }
        }
        gw::Generation {
            model: model.into(),
            system: system.into_iter().filter(|s| !s.is_empty()).collect(),
            messages: history::to_gateway_with(history, render),
            tools,
            context: Some(gw::RequestContext {
                session_id: session.id.clone(),
                request_id: ids::new("req"),
                agent: agent.name.clone(),
            }),
            ..Default::default()
        }
    }

    /// Streams one step through the processor. Returns true when the step was aborted.
    async fn stream_step(
        &self,
        processor: &mut Processor,
        generation: gw::Generation,
        trace: &[(String, String)],
        fence: &Fence,
        cancel: &CancellationToken,
    ) -> Result<bool, LoopError> {
        let mut request = tonic::Request::new(gw::StreamRequest {
            generation: Some(generation),
        });
        request.set_timeout(self.config.step_timeout);
        with_trace(&mut request, trace);
        let mut gateway = self.gateway.clone();
        let mut out = Vec::with_capacity(8);
        let stream = tokio::select! {
            _ = cancel.cancelled() => return Ok(true),
            r = gateway.stream(request) => r,
        };
        let mut stream = match stream {
            Ok(s) => s.into_inner(),
            Err(status) => {
                let e = gw::Error {
                    kind: gw::ErrorKind::ProviderError as i32,
                    message: format!("gateway: {}", status.message()),
                    retryable: matches!(
                        status.code(),
                        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
                    ),
                    ..Default::default()
                };
                processor.handle(
                    gw::StreamResponse {
                        event: Some(gw::stream_response::Event::Error(e)),
                    },
                    now(),
                    &mut out,
                );
                self.apply(&out, fence, processor).await?;
                return Ok(false);
            }
        };
        loop {
            let next = tokio::select! {
                _ = cancel.cancelled() => {
                    // Dropping the stream cancels the gateway call, which drops the provider request.
                    self.events.flush_parts(&processor.message().session_id).await?;
                    return Ok(true);
                }
                n = stream.message() => n,
            };
            match next {
                Ok(Some(ev)) => {
                    out.clear();
                    processor.handle(ev, now(), &mut out);
                    self.apply(&out, fence, processor).await?;
                }
                Ok(None) => break,
                Err(status) => {
                    out.clear();
                    let e = gw::Error {
                        kind: gw::ErrorKind::Network as i32,
                        message: format!("gateway stream broke: {}", status.message()),
                        retryable: true,
                        ..Default::default()
                    };
                    processor.handle(
                        gw::StreamResponse {
                            event: Some(gw::stream_response::Event::Error(e)),
                        },
                        now(),
                        &mut out,
                    );
                    self.apply(&out, fence, processor).await?;
                    break;
                }
            }
        }
        self.events
            .flush_parts(&processor.message().session_id)
            .await?;
        Ok(false)
    }

    /// Persists and publishes effects. Deltas are published at once; the event channel writes their part's text
    /// with its next window (see [`Hub::put_part`]).
    async fn apply(
        &self,
        effects: &[Effect],
        fence: &Fence,
        processor: &Processor,
    ) -> Result<(), LoopError> {
        let session_id = &processor.message().session_id;
        for effect in effects {
            match effect {
                Effect::Message(m) => {
                    let t = Instant::now();
                    let listed = self.with_loop_state(session_id, |s| s.listed.contains(&m.id));
                    self.store
                        .put_message_listed(m, Some(fence), listed)
                        .await?;
                    if !listed {
                        self.with_loop_state(session_id, |s| s.listed.insert(m.id.clone()));
                    }
                    self.metrics.redis("put_message", t.elapsed());
                    let t = Instant::now();
                    self.events
                        .publish(
                            session_id,
                            pb::session_event::Event::MessageUpdated(m.clone()),
                        )
                        .await?;
                    self.metrics.redis("publish", t.elapsed());
                }
                Effect::Part(p) => {
                    let t = Instant::now();
                    self.events.put_part(p, fence).await?;
                    self.metrics.redis("put_part", t.elapsed());
                }
                Effect::Delta {
                    part_id,
                    message_id,
                    delta,
                } => {
                    self.events
                        .publish(
                            session_id,
                            pb::session_event::Event::PartDelta(pb::PartDelta {
                                part_id: part_id.clone(),
                                message_id: message_id.clone(),
                                delta: delta.clone(),
                            }),
                        )
                        .await?;
                }
                Effect::ToolCall { .. } => {}
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_tools(
        &self,
        processor: &mut Processor,
        agent: &Agent,
        workspace: Option<&Workspace>,
        inputs: &RunInputs,
        structured: &mut structured::Turn,
        mut detector: DoomLoopDetector,
        fence: &Fence,
        cancel: &CancellationToken,
    ) -> Result<(), LoopError> {
        let calls: Vec<(String, String, String)> = processor
            .tool_calls()
            .filter(|t| {
                t.state
                    .as_ref()
                    .is_some_and(|s| s.status() == pb::tool_state::Status::Running)
            })
            .map(|t| {
                (
                    t.call_id.clone(),
                    t.tool.clone(),
                    t.state
                        .as_ref()
                        .map(|s| s.input_json.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        let session_id = processor.message().session_id.clone();
        for (call_id, tool, input) in calls {
            if cancel.is_cancelled() {
                break;
            }
            let mut out = Vec::new();
            // The structured-output tool is the answer, not an action: no permission, no doom-loop check.
            if structured.intercept(processor, &call_id, &tool, &input, now(), &mut out) {
                self.apply(&out, fence, processor).await?;
                continue;
            }
            if let Some(doom) = detector.record(&tool, &input) {
                let allowed = match agent.doom_loop {
                    DoomPolicy::Allow => true,
                    DoomPolicy::Deny => false,
                    DoomPolicy::Ask => {
                        self.ask(
                            &session_id,
                            &tool,
                            &input,
                            "doom_loop",
                            agent.permission_timeout,
                            cancel,
                        )
                        .await?
                    }
                };
                if !allowed {
                    let kind = if inputs.client_tools.iter().any(|c| c.name == tool) {
                        ToolKind::Client
                    } else {
                        ToolKind::Builtin
                    };
                    self.metrics.tool_call(kind, CallOutcome::Denied);
                    processor.block(
                        &call_id,
                        "refused: the same tool calls keep repeating (doom loop)",
                        now(),
                        &mut out,
                    );
                    self.apply(&out, fence, processor).await?;
                    continue;
                }
                detector.allow_pattern(&doom);
            }
            if let Some(client) = inputs.client_tools.iter().find(|c| c.name == tool) {
                let schema: serde_json::Value = serde_json::from_str(&client.input_schema_json)
                    .unwrap_or(serde_json::json!({}));
                if let Err(e) = tools::validate_input(&schema, &input) {
                    self.metrics.tool_call(ToolKind::Client, CallOutcome::Error);
                    processor.tool_finished(&call_id, Err(e), now(), &mut out);
                    self.apply(&out, fence, processor).await?;
                    continue;
                }
                processor.mark_client_tool(&call_id);
                let part_id = processor.tool_calls().position(|t| t.call_id == call_id);
                let part = part_id.and_then(|_| processor.parts().iter().find(|p| matches!(&p.kind, Some(pb::part::Kind::Tool(t)) if t.call_id == call_id)).cloned());
                if let Some(part) = &part {
                    self.store.put_part(part, Some(fence)).await?;
                }
                let deadline = SystemTime::now() + agent.client_tool_timeout;
                self.events
                    .publish(
                        &session_id,
                        pb::session_event::Event::ToolCallAwaiting(pb::ToolCallAwaiting {
                            part_id: part.map(|p| p.id).unwrap_or_default(),
                            message_id: processor.message().id.clone(),
                            call_id: call_id.clone(),
                            tool: tool.clone(),
                            input_json: input.clone(),
                            deadline: Some(Timestamp::from(deadline)),
                        }),
                    )
                    .await?;
                let answer = tokio::select! {
                    _ = cancel.cancelled() => break,
                    a = self.store.wait_tool_result(&session_id, &call_id, agent.client_tool_timeout) => a?,
                };
                let result = match answer {
                    Some((output, false)) => Ok(output),
                    Some((output, true)) => Err(output),
                    None => Err(format!(
                        "the client did not answer within {:?}",
                        agent.client_tool_timeout
                    )),
                };
                self.metrics
                    .tool_call(ToolKind::Client, tool_outcome(&result));
                processor.tool_finished(&call_id, result, now(), &mut out);
                self.apply(&out, fence, processor).await?;
                continue;
            }
            let (Some(ws), true) = (workspace, agent.tools.contains(&tool)) else {
                self.metrics
                    .tool_call(ToolKind::Builtin, CallOutcome::Error);
                processor.tool_finished(
                    &call_id,
                    Err(format!("unknown tool `{tool}`")),
                    now(),
                    &mut out,
                );
                self.apply(&out, fence, processor).await?;
                continue;
            };
            let parsed: serde_json::Value =
                serde_json::from_str(&input).unwrap_or(serde_json::Value::Null);
            let allowed = match agent.permissions.decide(&tool, &parsed) {
                Decision::Allow => true,
                Decision::Deny => false,
                Decision::Ask => {
                    self.ask(
                        &session_id,
                        &tool,
                        &input,
                        "rule",
                        agent.permission_timeout,
                        cancel,
                    )
                    .await?
                }
            };
            if !allowed {
                self.metrics
                    .tool_call(ToolKind::Builtin, CallOutcome::Denied);
                processor.block(
                    &call_id,
                    &format!("permission denied for `{tool}`"),
                    now(),
                    &mut out,
                );
                self.apply(&out, fence, processor).await?;
                continue;
            }
            let result =
                match tools::run_builtin(ws, &tool, &input, &tools::Limits::default()).await {
                    ToolOutcome::Ok(s) => Ok(s),
                    ToolOutcome::Err(s) => Err(s),
                };
            self.metrics
                .tool_call(ToolKind::Builtin, tool_outcome(&result));
            processor.tool_finished(&call_id, result, now(), &mut out);
            self.apply(&out, fence, processor).await?;
        }
        Ok(())
    }

    /// Publishes a permission request and waits for the reply; no reply within the timeout is a denial.
    async fn ask(
        &self,
        session_id: &str,
        tool: &str,
        input: &str,
        reason: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<bool, LoopError> {
        let permission_id = ids::new("per");
        self.events
            .publish(
                session_id,
                pb::session_event::Event::PermissionAsked(pb::PermissionAsked {
                    permission_id: permission_id.clone(),
                    tool: tool.into(),
                    input_json: input.into(),
                    reason: reason.into(),
                    deadline: Some(Timestamp::from(SystemTime::now() + timeout)),
                }),
            )
            .await?;
        let reply = tokio::select! {
            _ = cancel.cancelled() => return Ok(false),
            r = self.store.wait_permission(session_id, &permission_id, timeout) => r?,
        };
        Ok(reply.unwrap_or(false))
    }

    /// Persists the prompts queued while the loop was busy and takes their inputs into `inputs`; returns whether
    /// the inputs changed and how many prompts were delivered.
    async fn deliver_queued(
        &self,
        session: &pb::Session,
        fence: &Fence,
        inputs: &mut RunInputs,
    ) -> Result<(bool, usize), LoopError> {
        let mut changed = false;
        let prompts = self.store.take_queued_prompts(&session.id).await?;
        for prompt in &prompts {
            self.persist_user_message(session, prompt, Some(fence))
                .await?;
            changed |= inputs.absorb(prompt);
        }
        Ok((changed, prompts.len()))
    }

    /// Stores the run's inputs for a loop that resumes it elsewhere. Best effort: a failure only means a resumed
    /// loop would not offer this run's client tools, so it is logged, not fatal.
    async fn save_inputs(&self, session_id: &str, inputs: &RunInputs) {
        if let Err(e) = self
            .store
            .put_run_inputs(session_id, &inputs.stored())
            .await
        {
            tracing::warn!(message = "cannot store the run's inputs", session_id = %session_id, error = %e);
        }
    }

    /// A replica that died mid-step left an assistant message without a completion time: close it the way cleanup
    /// would have (open parts ended, unfinished tools `error: aborted`), then carry on.
    async fn close_orphans(
        &self,
        mut history: Vec<pb::Message>,
        fence: &Fence,
    ) -> Result<Vec<pb::Message>, LoopError> {
        let ts = now();
        let orphaned = history
            .iter()
            .any(|m| m.role() == pb::Role::Assistant && m.completed_at.is_none());
        let streamed = if orphaned {
            self.streamed_text(&history).await?
        } else {
            HashMap::new()
        };
        for m in history
            .iter_mut()
            .filter(|m| m.role() == pb::Role::Assistant && m.completed_at.is_none())
        {
            let mut changed = Vec::new();
            // Deltas are published at once but written to the part coalesced: what the dead replica published and
            // did not yet write is recovered from the event log, so nothing a caller saw is lost.
            for p in m.parts.iter_mut() {
                let Some(full) = streamed.get(&p.id) else {
                    continue;
                };
                let text = match p.kind.as_mut() {
                    Some(pb::part::Kind::Text(t)) => &mut t.text,
                    Some(pb::part::Kind::Reasoning(r)) => &mut r.text,
                    _ => continue,
                };
                if full.len() > text.len() && full.starts_with(text.as_str()) {
                    text.clone_from(full);
                    changed.push(p.clone());
                }
            }
            for p in m.parts.iter_mut() {
                let touched = match p.kind.as_mut() {
                    Some(pb::part::Kind::Text(t)) if t.ended_at.is_none() => {
                        t.ended_at = Some(ts);
                        true
                    }
                    Some(pb::part::Kind::Reasoning(r)) if r.ended_at.is_none() => {
                        r.ended_at = Some(ts);
                        true
                    }
                    Some(pb::part::Kind::Tool(t)) => {
                        let s = t.state.get_or_insert_with(Default::default);
                        if matches!(
                            s.status(),
                            pb::tool_state::Status::Completed | pb::tool_state::Status::Error
                        ) {
                            false
                        } else {
                            s.status = pb::tool_state::Status::Error as i32;
                            s.error = "aborted".into();
                            s.interrupted = true;
                            s.ended_at = Some(ts);
                            true
                        }
                    }
                    _ => false,
                };
                if touched {
                    changed.retain(|c: &pb::Part| c.id != p.id);
                    changed.push(p.clone());
                }
            }
            m.completed_at = Some(ts);
            let has_tools = m
                .parts
                .iter()
                .any(|p| matches!(p.kind, Some(pb::part::Kind::Tool(_))));
            if m.finish.is_empty() {
                // The step never finished: with tool calls, their (aborted) results go back to the model; without,
                // the user message still needs its answer, so the message is marked interrupted and retried.
                m.finish = if has_tools {
                    "tool_calls".into()
                } else {
                    "interrupted".into()
                };
            }
            self.store.put_parts(&changed, Some(fence)).await?;
            let mut stored = m.clone();
            stored.parts.clear();
            self.store.put_message(&stored, Some(fence)).await?;
            self.events
                .publish(
                    &m.session_id,
                    pb::session_event::Event::MessageUpdated(stored),
                )
                .await?;
        }
        // An interrupted answer with no output is dropped from the conversation so the step simply runs again.
        Ok(history
            .into_iter()
            .filter(|m| m.finish != "interrupted")
            .collect())
    }

    /// The text each part received through `part_delta` events still in the session's event log.
    async fn streamed_text(
        &self,
        history: &[pb::Message],
    ) -> Result<HashMap<String, String>, LoopError> {
        let Some(session_id) = history.first().map(|m| m.session_id.clone()) else {
            return Ok(HashMap::new());
        };
        let mut text: HashMap<String, String> = HashMap::new();
        // Paged by entry; each event counted once even if a retried write logged it twice.
        let mut cursor = crate::events::EventId::ZERO;
        let mut seen = crate::events::EventId::ZERO;
        loop {
            let page = self
                .store
                .read_event_page(&session_id, cursor, None, 1000)
                .await?;
            let Some(next) = page.cursor else { break };
            cursor = next;
            for ev in page.events {
                match ev.event_id.parse::<crate::events::EventId>() {
                    Ok(id) if id > seen => seen = id,
                    _ => continue,
                }
                if let Some(pb::session_event::Event::PartDelta(d)) = ev.event {
                    text.entry(d.part_id).or_default().push_str(&d.delta);
                }
            }
        }
        Ok(text)
    }

    /// The loop's state of a session, changed by `f` under the lock.
    fn with_loop_state<T>(&self, session_id: &str, f: impl FnOnce(&mut LoopState) -> T) -> T {
        let mut states = self.loop_state.lock().unwrap_or_else(|p| p.into_inner());
        f(states.entry(session_id.to_string()).or_default())
    }

    /// Forgets what the loop of a session carried (its run is over) and returns it.
    fn forget_loop_state(&self, session_id: &str) -> LoopState {
        self.loop_state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id)
            .unwrap_or_default()
    }

    /// Writes the session's totals (cost and tokens, the sum over its assistant messages) after `message` (with its
    /// `parts`) changed. The other messages' shares come from the history the loop read at the top of this
    /// iteration, so the history is not read again; a loop that has not read it (none today) reads it here.
    pub(super) async fn settle_session(
        &self,
        session_id: &str,
        message: &pb::Message,
        parts: &[pb::Part],
        fence: &Fence,
    ) -> Result<(), LoopError> {
        let share = message_totals(message, parts);
        let known = self.with_loop_state(session_id, |s| {
            s.totals.as_mut().map(|t| {
                t.insert(message.id.clone(), share);
                sum_totals(t)
            })
        });
        let (cost, tokens) = match known {
            Some(totals) => totals,
            None => {
                let (history, _) = self
                    .store
                    .list_messages(session_id, None, usize::MAX)
                    .await?;
                let mut shares = history_totals(&history);
                shares.insert(message.id.clone(), share);
                let totals = sum_totals(&shares);
                self.with_loop_state(session_id, |s| s.totals = Some(shares));
                totals
            }
        };
        // A compare-and-set, so the title task's write (it may land at any moment) is never overwritten. It starts
        // from the record as this loop last read or wrote it; anything written since makes it read and retry.
        let known = self.with_loop_state(session_id, |s| s.session_bytes.take());
        let written = self
            .store
            .update_session_from(session_id, Some(fence), known, |s| {
                s.cost_nano_usd = cost;
                s.tokens = Some(tokens);
                s.updated_at = Some(now());
            })
            .await?;
        // The record as written is the freshest view of it: the next budget check reads it from here.
        self.with_loop_state(session_id, |s| {
            let (session, bytes) = written.unzip();
            s.session = session;
            s.session_bytes = bytes;
        });
        Ok(())
    }

    async fn record_retry(
        &self,
        message: &pb::Message,
        attempt: u32,
        delay: Duration,
        fence: &Fence,
    ) -> Result<(), LoopError> {
        let next = Timestamp::from(SystemTime::now() + delay);
        let part = pb::Part {
            id: ids::new("prt"),
            message_id: message.id.clone(),
            session_id: message.session_id.clone(),
            kind: Some(pb::part::Kind::Retry(pb::RetryPart {
                attempt,
                error: message.error.clone(),
                next_attempt_at: Some(next),
            })),
        };
        self.store.put_part(&part, Some(fence)).await?;
        self.events
            .publish(
                &message.session_id,
                pb::session_event::Event::PartUpdated(part),
            )
            .await?;
        let msg = message
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        // Stored for GetSession / ListSessions (believed only under this lease; advisory, so a failure is logged).
        let status = pb::SessionStatus {
            kind: pb::session_status::Kind::Retry as i32,
            attempt,
            next_attempt_at: Some(next),
            message: msg.clone(),
        };
        self.with_loop_state(&message.session_id, |s| s.retry_status = true);
        if let Err(e) = self
            .store
            .set_retry_status(&message.session_id, &status, fence, delay)
            .await
        {
            tracing::warn!(message = "cannot store the retry status", session_id = %message.session_id, error = %e);
        }
        self.status(
            &message.session_id,
            pb::session_status::Kind::Retry,
            attempt,
            Some(next),
            &msg,
        )
        .await
    }

    async fn clear_error_for_retry(
        &self,
        message: &pb::Message,
        fence: &Fence,
    ) -> Result<(), LoopError> {
        // The failed attempt stays in the history with its parts and its retry part; its finish says it was retried
        // so the exit rule looks past it.
        let mut m = message.clone();
        m.parts.clear();
        m.finish = "retried".into();
        m.error = None;
        self.store.put_message(&m, Some(fence)).await?;
        Ok(())
    }

    async fn fail(&self, session_id: &str, message: &str) -> Result<(), LoopError> {
        self.events
            .publish(
                session_id,
                pb::session_event::Event::Error(pb::MessageError {
                    kind: pb::message_error::Kind::Api as i32,
                    message: message.into(),
                    http_status: 0,
                    retryable: false,
                }),
            )
            .await?;
        Ok(())
    }

    async fn status(
        &self,
        session_id: &str,
        kind: pb::session_status::Kind,
        attempt: u32,
        next: Option<Timestamp>,
        message: &str,
    ) -> Result<(), LoopError> {
        self.events
            .publish(
                session_id,
                pb::session_event::Event::Status(pb::SessionStatus {
                    kind: kind as i32,
                    attempt,
                    next_attempt_at: next,
                    message: message.into(),
                }),
            )
            .await?;
        Ok(())
    }
}

/// Rebuilds the doom-loop detector from every tool call in the session, so repeats are caught across turns and
/// replicas without storing the detector itself.
fn doom_detector(history: &[pb::Message]) -> DoomLoopDetector {
    let mut d = DoomLoopDetector::new();
    for m in history {
        for p in &m.parts {
            if let Some(pb::part::Kind::Tool(t)) = &p.kind {
                let input = t
                    .state
                    .as_ref()
                    .map(|s| s.input_json.as_str())
                    .unwrap_or("{}");
                let _ = d.record(&t.tool, input);
            }
        }
    }
    d
}

/// `YYYY-MM-DD` (UTC) for the environment section: the day, not the time, so the system stays stable all day.
fn httpdate_day(t: SystemTime) -> String {
    let days = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    // Civil-from-days (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    format!("{:04}-{:02}-{:02}", if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_formatting() {
        assert_eq!(httpdate_day(SystemTime::UNIX_EPOCH), "1970-01-01");
        assert_eq!(
            httpdate_day(SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_083_200)),
            "2026-12-01"
        );
    }

    #[test]
    fn a_delivered_prompt_brings_its_inputs_and_newer_tools_win() {
        let tool = |name: &str, description: &str| pb::ClientTool {
            name: name.into(),
            description: description.into(),
            input_schema_json: "{}".into(),
        };
        let first = pb::PromptRequest {
            model: "openai/gpt-4o".into(),
            client_tools: vec![tool("a", "old"), tool("b", "kept")],
            system: "be brief".into(),
            ..Default::default()
        };
        let mut inputs = RunInputs::from_prompt(&first, Vec::new());
        assert!(
            !inputs.absorb(&pb::PromptRequest::default()),
            "an empty prompt changes nothing"
        );
        let queued = pb::PromptRequest {
            client_tools: vec![tool("a", "new"), tool("c", "added")],
            ..Default::default()
        };
        assert!(inputs.absorb(&queued));
        let names: Vec<(&str, &str)> = inputs
            .client_tools
            .iter()
            .map(|t| (t.name.as_str(), t.description.as_str()))
            .collect();
        assert_eq!(names, [("b", "kept"), ("a", "new"), ("c", "added")]);
        assert_eq!(inputs.model.as_deref(), Some("openai/gpt-4o"));
        assert_eq!(inputs.system, "be brief");
        let stored = inputs.stored();
        let mut resumed = RunInputs::default();
        assert!(resumed.absorb(&stored));
        assert_eq!(resumed.client_tools, inputs.client_tools);
        assert_eq!(resumed.model, inputs.model);
        assert_eq!(resumed.system, inputs.system);
    }
}
