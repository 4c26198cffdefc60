//! The engine: the loops this replica runs, one task per running session, and the services they are made of.
//!
//! A loop is the runLoop of the design: one gateway `Stream` call per step, the Processor turning its events into
//! persisted parts, tools run between steps, under a lease with a fencing token. Every decision of the loop is made
//! by a pure policy; the rest of this module performs what it decides. Each service below holds only the store
//! handles and the other services it uses; [`Engine`] builds them and is what the API calls.
//!
//! - [`policy`]: the loop's state and `next(observation) -> action`, pure (no I/O, no clock), tested rule by rule.
//! - `accept`: prompts accepted (run now, or queued for the running loop), resumed sessions, the recovery sweep,
//!   manual compactions: the engine's entry points.
//! - `driver` (`Driver`): the task of a running session: the lease and its renewal, the run's start and end, the
//!   policy asked what to do; `actions` (`Actions`): each action the policy asks for, performed.
//! - `step` (`Steps`): one model step (request, stream through the Processor, tools, snapshots, accounting);
//!   `effects` (`Effects`): the Processor's effects persisted and published.
//! - `tools_run` (`ToolRunner`): a step's tool calls (structured output, doom loop, client tools, built-ins).
//! - `persist` (`LoopWrites`): user messages (model resolved), retry bookkeeping, status, stops, the loop's end.
//! - `orphans` (`Orphans`): what a stopped loop left open, closed; client calls it waited on, awaited again.
//! - `compact` (`Compactor`), `budget` (`Budget`), `totals` (`Totals`, `RunCaches`), `titling` (`Titles`),
//!   `gateway` (the client, `CatalogLimits`), `loops` (`Loops`), `lease`, `request`, `inputs`, `step_metrics`: one
//!   concern each.

use std::sync::Arc;
use std::time::SystemTime;

use llm_proto::sessions as pb;
use prost_types::Timestamp;

use crate::config::{Agent, Config};
use crate::events::{Hub, Publisher};
use crate::ids;
use crate::metrics::Metrics;
use crate::store::{Messages, Store, StoreError};
use crate::tools::Workspace;

mod accept;
mod actions;
mod budget;
mod compact;
mod driver;
mod effects;
mod gateway;
mod inputs;
mod lease;
mod loops;
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

/// The processor's engine: what the API calls to run sessions' loops on this replica. It builds the loop's services
/// (see the module docs) and holds what its entry points use; everything else belongs to the service that uses it.
pub struct Engine {
    /// Storage.
    store: Store,
    /// The gateway.
    gateway: GatewayClient,
    /// Configuration.
    config: Arc<Config>,
    /// This replica's lease owner id.
    owner: Arc<str>,
    /// Prometheus metrics, served by the `/metrics` listener when one is configured.
    metrics: Arc<Metrics>,
    /// Session events: live to this replica's streams, coalesced into the sessions' event logs.
    events: Hub,
    /// The loops running here.
    loops: Arc<loops::Loops>,
    /// Runs the loops.
    driver: Arc<driver::Driver>,
    /// A prompt's user message, and the loop's other writes.
    writes: Arc<persist::LoopWrites>,
}

fn now() -> Timestamp {
    Timestamp::from(SystemTime::now())
}

/// The agent for a name (the default agent for an empty or unknown one).
fn agent<'a>(config: &'a Config, name: &str) -> Option<&'a Arc<Agent>> {
    let name = if name.is_empty() { "default" } else { name };
    config.agents.get(name)
}

/// The session's workspace, when it has one that opens.
fn workspace(config: &Config, session: &pb::Session) -> Option<Workspace> {
    if session.workspace.is_empty() {
        return None;
    }
    Workspace::for_session(&config.workspace_root, &session.tenant, &session.workspace).ok()
}

/// Every message of the session as stored, once what this replica's event channel holds for it is written (a step's
/// last parts, its message and the session's totals wait for the channel's next write: see
/// [`Publisher::stage_session`]).
async fn stored_messages(
    publisher: &Publisher,
    messages: &Messages,
    session_id: &str,
) -> Result<Vec<pb::Message>, LoopError> {
    publisher.flush(session_id).await?;
    Ok(messages
        .list_messages(session_id, None, usize::MAX)
        .await?
        .0)
}

impl Engine {
    /// A new engine.
    pub fn new(store: Store, gateway: GatewayClient, config: Arc<Config>) -> Arc<Engine> {
        let events = Hub::new(store.clone(), config.events);
        let metrics = Arc::new(Metrics::new());
        let owner: Arc<str> = ids::new("rep").into();
        let loops = Arc::new(loops::Loops::default());
        let caches = Arc::new(totals::RunCaches::default());
        let publisher = events.publisher();
        let writes = Arc::new(persist::LoopWrites {
            config: config.clone(),
            publisher: publisher.clone(),
            loop_lease: events.loop_lease(),
            messages: store.messages(),
            statuses: store.statuses(),
            caches: caches.clone(),
        });
        let effects = Arc::new(effects::Effects {
            publisher: publisher.clone(),
            messages: store.messages(),
            metrics: metrics.clone(),
        });
        let totals = Arc::new(totals::Totals {
            publisher: publisher.clone(),
            sessions: store.sessions(),
            messages: store.messages(),
            spend: store.spend(),
            caches: caches.clone(),
        });
        let steps = Arc::new(step::Steps {
            config: config.clone(),
            gateway: gateway.clone(),
            publisher: publisher.clone(),
            metrics: metrics.clone(),
            sessions: store.sessions(),
            messages: store.messages(),
            effects: effects.clone(),
            totals: totals.clone(),
            tools: tools_run::ToolRunner {
                publisher: publisher.clone(),
                mailboxes: store.mailboxes(),
                metrics: metrics.clone(),
                effects: effects.clone(),
            },
        });
        let actions = actions::Actions {
            config: config.clone(),
            publisher: publisher.clone(),
            metrics: metrics.clone(),
            sessions: store.sessions(),
            messages: store.messages(),
            leases: store.leases(),
            queue: store.queue(),
            caches: caches.clone(),
            writes: writes.clone(),
            budget: budget::Budget {
                config: config.clone(),
                sessions: store.sessions(),
                spend: store.spend(),
                caches: caches.clone(),
            },
            orphans: orphans::Orphans {
                publisher: publisher.clone(),
                messages: store.messages(),
                mailboxes: store.mailboxes(),
                log: store.event_log(),
            },
            compactor: compact::Compactor {
                steps: steps.clone(),
                effects,
                writes: writes.clone(),
                totals,
            },
            steps,
            limits: gateway::CatalogLimits::new(gateway.clone()),
            titles: titling::Titles {
                config: config.clone(),
                gateway: gateway.clone(),
                sessions: store.sessions(),
                spend: store.spend(),
            },
        };
        let driver = Arc::new(driver::Driver {
            config: config.clone(),
            owner: owner.clone(),
            metrics: metrics.clone(),
            events: events.clone(),
            loop_lease: events.loop_lease(),
            sessions: store.sessions(),
            leases: store.leases(),
            active: store.active(),
            statuses: store.statuses(),
            loops: loops.clone(),
            caches,
            writes: writes.clone(),
            actions,
        });
        Arc::new(Engine {
            store,
            gateway,
            config,
            owner,
            metrics,
            events,
            loops,
            driver,
            writes,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The gateway client.
    pub fn gateway(&self) -> &GatewayClient {
        &self.gateway
    }

    /// The session events of this replica.
    pub fn events(&self) -> &Hub {
        &self.events
    }

    /// The processor's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// This replica's lease owner id.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The agent for a name (the default agent for an empty or unknown one).
    pub fn agent(&self, name: &str) -> Option<&Arc<Agent>> {
        agent(&self.config, name)
    }

    /// Stops a loop running on this replica. Returns whether one was running.
    pub fn abort(&self, session_id: &str) -> bool {
        self.loops.abort(session_id)
    }

    /// Whether a loop for this session runs on this replica.
    pub fn is_running(&self, session_id: &str) -> bool {
        self.loops.is_running(session_id)
    }
}
