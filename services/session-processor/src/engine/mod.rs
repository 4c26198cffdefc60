//! The engine: storage, the gateway, the configuration and the loops this replica runs, one task per running
//! session.
//!
//! A loop is the runLoop of the design: one gateway `Stream` call per step, the Processor turning its events into
//! persisted parts, tools run between steps, under a lease with a fencing token. Every decision of the loop is made
//! by a pure policy; the rest of this module performs what it decides.
//!
//! - [`policy`]: the loop's state and `next(observation) -> action`, pure (no I/O, no clock), tested rule by rule.
//! - `driver`: the task of a running session: the lease and its renewal, and the actions the policy asks for.
//! - `accept`: prompts accepted (run now, or queued for the running loop), resumed sessions, the recovery sweep.
//! - `step`: one model step (request, stream through the Processor, tools, snapshots, accounting).
//! - `tools_run`: a step's tool calls (structured output, doom loop, client tools, built-ins and permissions).
//! - `request`: the gateway request of a step (system sections, tools, reasoning).
//! - `orphans`: what a stopped loop left open, closed; client calls it waited on, awaited again.
//! - `persist`: user messages (model resolved), retry bookkeeping, status, stops and the loop's end.
//! - `compact`, `budget`, `titling`, `totals`, `step_metrics`, `inputs`, `gateway`: one concern each.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use llm_proto::sessions as pb;
use prost_types::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::config::{Agent, Config};
use crate::events::{Hub, LoopLease, Publisher};
use crate::ids;
use crate::maps::IdMap;
use crate::metrics::Metrics;
use crate::store::{Store, StoreError};
use crate::tools::Workspace;

mod accept;
mod budget;
mod compact;
mod driver;
mod gateway;
mod inputs;
mod lease;
mod orphans;
mod persist;
pub mod policy;
#[cfg(test)]
mod policy_tests;
mod request;
mod step;
mod step_metrics;
mod titling;
mod tools_run;
mod totals;

pub use accept::Accepted;
pub use gateway::{
    GatewayAuth, GatewayClient, configured_gateway_client, gateway_client, gateway_client_balanced,
    set_local_client,
};
pub use inputs::RunInputs;

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
    /// A prompt was validated against a session record or prompt model that is not Redis's any more; nothing was
    /// written, and the caller validates it again against a fresh read.
    #[error("the session changed while the prompt began")]
    Stale,
}

/// A session record a caller read just before starting a loop: the session, and its stored bytes when known.
pub type Carried = (pb::Session, Option<Vec<u8>>);

/// What a `Prompt` read before it begins (one round trip): the session record with its bytes, and the model its
/// latest prompt ran with.
#[derive(Debug, Clone)]
pub struct PromptSession {
    /// The session.
    pub session: pb::Session,
    /// Its stored bytes.
    pub bytes: Vec<u8>,
    /// The stored prompt model, if any.
    pub model: Option<String>,
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
    running: Mutex<IdMap<String, (u64, CancellationToken)>>,
    /// Prometheus metrics, served by the `/metrics` listener when one is configured.
    pub metrics: Arc<Metrics>,
    /// Session events: live to this replica's streams, coalesced into the sessions' event logs.
    pub events: Hub,
    /// What the loops publish and persist through `events`.
    publisher: Publisher,
    /// The loops' leases as their channels see them.
    loop_lease: LoopLease,
    /// What each running loop of this replica knows of its session, so a step does not re-read it (see
    /// [`totals::RunCache`]). Boxed: a map's empty slots are the size of its entries, and a cache is half a kilobyte.
    caches: Mutex<IdMap<String, Box<totals::RunCache>>>,
    /// Catalog limits by model (see `gateway::model_limits`).
    limits: gateway::LimitsCache,
}

fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

impl Engine {
    /// A new engine.
    pub fn new(store: Store, gateway: GatewayClient, config: Arc<Config>) -> Arc<Engine> {
        let events = Hub::new(store.clone(), config.events);
        Arc::new(Engine {
            publisher: events.publisher(),
            loop_lease: events.loop_lease(),
            events,
            store,
            gateway,
            config,
            owner: ids::new("rep"),
            running: Mutex::new(IdMap::default()),
            metrics: Arc::new(Metrics::new()),
            caches: Mutex::new(IdMap::default()),
            limits: Default::default(),
        })
    }

    /// The agent for a name (the default agent for an empty or unknown one).
    pub fn agent(&self, name: &str) -> Option<&Arc<Agent>> {
        let name = if name.is_empty() { "default" } else { name };
        self.config.agents.get(name)
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

    /// A new token for `Engine::abort` to cancel this loop's next run (the loop `loop_id` of the session).
    pub(super) fn fresh_abort_token(&self, session_id: &str, loop_id: u64) -> CancellationToken {
        let token = CancellationToken::new();
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((id, current)) = running.get_mut(session_id)
            && *id == loop_id
        {
            *current = token.clone();
        }
        token
    }

    /// Whether a loop for this session runs on this replica.
    pub fn is_running(&self, session_id: &str) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(session_id)
    }

    /// Every message of the session as stored, once what this replica's event channel holds for it is written (a
    /// step's last parts, its message and the session's totals wait for the channel's next write: see
    /// `Hub::stage_session`).
    async fn stored_messages(&self, session_id: &str) -> Result<Vec<pb::Message>, LoopError> {
        self.publisher.flush(session_id).await?;
        Ok(self
            .store
            .messages()
            .list_messages(session_id, None, usize::MAX)
            .await?
            .0)
    }

    /// The session's workspace, when it has one that opens.
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
}
