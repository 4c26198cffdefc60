//! Redis persistence: sessions, messages, parts, the event log, leases with fencing tokens, the prompt queue, the
//! client tool-result and permission mailboxes, and idempotency keys.
//!
//! # Encoding
//!
//! Redis holds the API's own protobuf encoding (`llm.sessions.v1`), so there is one schema for the wire and for
//! storage and no mapping layer to drift. Live data that is not state (a session's status, a message's parts) is
//! stripped before encoding and rebuilt on read.
//!
//! # Key layout
//!
//! Every key of a session shares the hash tag `{sess:<id>}`, so Redis Cluster keeps a session in one slot and one
//! Lua script may touch all of them (`<P>` is the store's prefix):
//!
//! | key | type | content |
//! |---|---|---|
//! | `<P>sessions` | ZSET | global index: member = session id, score = created ms (operator listings) |
//! | `<P>tenant:<name>:sessions` | ZSET | a tenant's index, same members and scores as the global one; the unnamed tenant's is `<P>tenant::sessions` (`tenancy`) |
//! | `<P>tenants:indexed` | STRING | created ms up to which every global index entry is also in its tenant's index (`tenancy`) |
//! | `<P>{sess:<id>}:session` | STRING | `Session` without `status` |
//! | `<P>{sess:<id>}:messages` | ZSET | message ids, score 0: lexicographic order = chronological |
//! | `<P>{sess:<id>}:msg:<mid>` | STRING | `Message` with `parts` cleared |
//! | `<P>{sess:<id>}:parts:<mid>` | HASH | part id → `Part`; order = sort by part id |
//! | `<P>{sess:<id>}:events` | STREAM | field `b` = a batch of events with their ids (`crate::events`), entry id = its last event's id; or field `e` = one `SessionEvent` without ids, entry id = event id; `MAXLEN ~ cap` |
//! | `<P>{sess:<id>}:lease` | STRING | `<owner>:<token>`, PX ttl |
//! | `<P>{sess:<id>}:fence` | STRING | INCR counter the fencing tokens come from |
//! | `<P>{sess:<id>}:queue` | LIST | `PromptRequest`s that arrived while the session was busy, each tagged (`queue.rs`) |
//! | `<P>{sess:<id>}:delivered` | HASH | tag → user message id of the queued prompts delivered (empty while queued); a day's PX ttl |
//! | `<P>{sess:<id>}:toolresults` | HASH | call id → `SubmitToolResultRequest` (durable record) |
//! | `<P>{sess:<id>}:awaiting` | SET | `tool:<call id>`, `permission:<id>`: the questions the loop asked; only they can be answered |
//! | `<P>{sess:<id>}:toolresult:<call>` | LIST | doorbell the waiting loop BLPOPs |
//! | `<P>{sess:<id>}:permissions` | HASH | permission id → `ReplyPermissionRequest` (durable record) |
//! | `<P>{sess:<id>}:permission:<pid>` | LIST | doorbell |
//! | `<P>{sess:<id>}:idem:<sha256(key)>` | STRING | user message id, PX ttl |
//! | `<P>{sess:<id>}:aux` | SET | names of the doorbell and idempotency keys, so deletion needs no SCAN |
//! | `<P>{sess:<id>}:retrystatus` | HASH | `lease`, `s` = `SessionStatus`: retry status of the loop holding that lease (`diag`) |
//! | `<P>{sess:<id>}:writefailures` | HASH | `count`, `at_ms`, `message`: the session's flushed storage write failures (`diag`) |
//! | `<P>{sess:<id>}:inputs` | STRING | `PromptRequest` with only `model`, `client_tools`, `system`: the current run's inputs, for a resumed loop |
//! | `<P>{sess:<id>}:watched` | STRING | `1`, PX ttl: a stream on a replica that does not run the loop follows the session (the loop's event channel then uses its short flush window) |
//! | `<P>tenant:<name>:spend` | STRING | a tenant's spend in nano-USD (INCRBY); outside every session's slot |
//!
//! # Consistency rules
//!
//! - Every write to a session runs as one Lua script that first checks that `:session` exists. Deletion removes
//!   `:session` first, so after that no write can recreate a key that nothing would ever delete; a loop racing a
//!   delete gets [`StoreError::NotFound`].
//! - A write given a [`Fence`] happens only if `:lease` still holds exactly that fence, checked in the same script,
//!   so a replica whose lease expired can never overwrite its successor's data ([`StoreError::Fenced`]).
//! - Events are published unfenced: the stream is a log, and a stale replica's last events are harmless and, if
//!   anything, useful to see. They still require the session to exist. A running loop's event channel writes its
//!   batch and the parts whose text streamed in one script ([`EventLog::flush_events`]); the parts in it are fenced.
//! - The event stream is capped by length only (`MAXLEN ~`), never expired: a session's history of events lives as
//!   long as the session, and `delete_session` removes it.
//! - The indexes (global and per tenant) are in other slots, so they cannot share a script with session keys:
//!   creation adds the index entries before the session, deletion removes them after, and listing skips index
//!   entries without a session. A crash between the two steps therefore leaves at worst an invisible index entry,
//!   never an unlisted session.

mod active;
mod asking;
mod begin;
mod blocking;
mod conn;
mod db;
mod diag;
mod event_log;
mod idempotency;
mod index;
mod keys;
mod lease;
mod mailboxes;
mod messages;
mod queue;
mod records;
mod replicas;
mod script_call;
mod scripts;
mod sessions;
mod spend;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use active::{ActiveMark, ActiveSet};
pub use begin::{Begin, BeginArgs, Begun, Prompts};
use conn::Counted;
use db::Db;
pub use diag::{Statuses, WriteFailures};
pub use event_log::{EventLog, EventPage, FlushWrites, Flushed, SessionCas, SessionWritten};
pub use index::{Listed, Scope, SessionIndex};
use keys::check_id;
pub use lease::Leases;
pub use mailboxes::{Asked, Mailboxes};
pub use messages::Messages;
pub use queue::{Delivery, MAX_QUEUED_PROMPTS, PromptQueue, Queued};
pub use redis_kit::{RedisAccess, RedisTarget};
pub use replicas::{ReplicaWait, Traffic, TrafficCounts};
pub use sessions::Sessions;
pub use spend::Spend;

/// Default number of events kept per session stream (approximately: `MAXLEN ~` trims whole stream nodes).
pub const DEFAULT_EVENT_CAP: usize = 10_000;

/// Default bound on the event-log reads that block at once (`[redis] max_blocking_reads`).
pub const DEFAULT_LOG_WAITS: usize = 256;

/// How long an event-log wait beyond that bound waits between its reads.
pub const LOG_POLL: Duration = Duration::from_millis(250);

/// Bound on every non-blocking command on the shared connection: long enough for a large script, short enough that
/// a silently dropped TCP connection surfaces as an error instead of a session stuck busy.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on establishing a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Extra time a blocking command gets beyond its own block time before the client gives up on the socket.
const BLOCKING_GRACE: Duration = Duration::from_secs(5);
/// Largest page `list_messages` asks Redis for, so `limit + 1` fits Redis's signed 64-bit counts.
const MAX_LIMIT: usize = (i64::MAX - 1) as usize;
/// Keys per DEL when deleting a session, to keep each command small on sessions with many messages.
const DELETE_CHUNK: usize = 512;
/// Attempts of an optimistic session update before giving up: writers of one session are few (its loop and its
/// title task), so more than a couple of conflicts in a row means something is wrong.
const UPDATE_ATTEMPTS: usize = 16;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis failed or the connection broke.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A blocking command got no answer within its block time plus a grace period.
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    /// A stored value is not the protobuf it should be.
    #[error("cannot decode {what}: {source}")]
    Decode {
        /// What was being decoded, with its key.
        what: String,
        /// The protobuf error.
        #[source]
        source: prost::DecodeError,
    },
    /// Redis answered something the store never writes.
    #[error("unexpected reply from redis: {0}")]
    Unexpected(String),
    /// The session id is already taken.
    #[error("{0} already exists")]
    Exists(String),
    /// The session (or the message a part belongs to) does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The write carried a fence that no longer holds the session's lease; nothing was written.
    #[error("fenced out: the lease of session {session_id} is no longer held by {owner}:{token}")]
    Fenced {
        /// The session.
        session_id: String,
        /// The stale fence's owner.
        owner: String,
        /// The stale fence's token.
        token: u64,
    },
    /// An id, cursor or prefix the store cannot use.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The session already has this many prompts queued; nothing was written.
    #[error("the session already has {0} prompts queued")]
    QueueFull(usize),
    /// An answer to a question the session's loop never asked (the field that names it); nothing was written.
    #[error("no question of the session is named by this {0}")]
    NotAwaited(&'static str),
    /// The session's tenant already holds this many sessions; nothing was written.
    #[error("the tenant already holds {0} sessions")]
    TooManySessions(u64),
}

impl StoreError {
    /// True for failures of Redis itself (as opposed to a refused write), the ones `write_failures` counts.
    fn is_transport(&self) -> bool {
        matches!(
            self,
            Self::Redis(_) | Self::Timeout(_) | Self::Unexpected(_)
        )
    }

    /// Redis answered that it is still loading its data (an AOF or RDB file after a restart).
    pub fn is_loading(&self) -> bool {
        matches!(self, Self::Redis(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading))
    }

    fn decode(what: impl Into<String>, source: prost::DecodeError) -> Self {
        Self::Decode {
            what: what.into(),
            source,
        }
    }
}

/// Proof of holding a session's lease: the owner that acquired it and the fencing token it got. Tokens of a
/// session only grow, so a write carrying an older token is recognisably stale.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    /// Who holds the lease (a replica or loop id).
    pub owner: String,
    /// The fencing token handed out with this acquisition.
    pub token: u64,
}

impl Fence {
    /// The exact value `:lease` holds while this fence is current.
    fn lease_value(&self) -> String {
        format!("{}:{}", self.owner, self.token)
    }
}

/// The bounds of the shared connection (and of each thread's, [`Store::connect_here`]).
const SHARED_TIMEOUTS: redis_kit::Timeouts = redis_kit::Timeouts {
    connect: CONNECT_TIMEOUT,
    response: RESPONSE_TIMEOUT,
};

/// The script argument for an optional fence: empty means unfenced (a real fence value always contains `:`).
fn fence_arg(fence: Option<&Fence>) -> String {
    fence.map(Fence::lease_value).unwrap_or_default()
}

/// The session store: one connection to Redis (per node, on a cluster) and the handles over it, one per concern.
/// Cheap to clone, as is each handle: clones share the connection, the script cache, the pool of blocking
/// connections and the counters.
///
/// | handle | holds |
/// |---|---|
/// | [`Sessions`] | session records: create (within a quota), read, compare-and-set, the run's inputs, delete |
/// | [`SessionIndex`] | listings by scope, and the tenants' indexes kept complete |
/// | [`Messages`] | messages and parts: fenced upserts, reads, pages |
/// | [`EventLog`] | a session's event log: appends, the loop's window writes, reads, watched marks |
/// | [`Leases`] | a session's lease and fencing tokens |
/// | [`ActiveSet`] | the marks of running loops the recovery sweep resumes |
/// | [`Prompts`] | a prompt's first write (lease, message, history in one script) and its idempotency key |
/// | [`PromptQueue`] | prompts waiting for a busy session's loop, and where each went |
/// | [`Mailboxes`] | client tool results and permission replies the loop waits on |
/// | [`Spend`] | tenants' spend counters |
/// | [`Statuses`] | the live status (retry, busy, idle) and a session's storage write failures |
#[derive(Clone)]
pub struct Store {
    db: Arc<Db>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("prefix", &self.db.prefix)
            .field("event_cap", &self.db.event_cap)
            .field("write_failures", &self.write_failures())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Connects to Redis at `url` (e.g. `redis://127.0.0.1:6379`); every key starts with `prefix`.
    ///
    /// The prefix must not contain braces: a hash tag in the prefix would put every session in one cluster slot.
    pub async fn connect(url: &str, prefix: &str) -> Result<Store, StoreError> {
        Self::connect_with(url, &RedisAccess::default(), prefix).await
    }

    /// Like [`Store::connect`], with ACL credentials and TLS (see [`RedisAccess`]).
    pub async fn connect_with(
        url: &str,
        access: &RedisAccess,
        prefix: &str,
    ) -> Result<Store, StoreError> {
        Self::connect_to(&RedisTarget::standalone(url), access, prefix).await
    }

    /// Opens another connection to `target` (the one this store was connected to) for the current thread: requests
    /// this thread makes through the store (or its clones and handles) take it, so a runtime per core drives its own
    /// Redis requests (`crate::runtimes`). The blocking reads keep their shared pool.
    pub async fn connect_here(
        &self,
        target: &RedisTarget,
        access: &RedisAccess,
    ) -> Result<(), StoreError> {
        let (conn, _) = redis_kit::connect(target, access, SHARED_TIMEOUTS).await?;
        self.db.conn.set_local(conn);
        Ok(())
    }

    /// Connects to a standalone Redis, a cluster or a sentinel-managed primary (see [`RedisTarget`]).
    pub async fn connect_to(
        target: &RedisTarget,
        access: &RedisAccess,
        prefix: &str,
    ) -> Result<Store, StoreError> {
        if prefix.contains(['{', '}']) {
            return Err(StoreError::InvalidArgument(format!(
                "key prefix {prefix:?} must not contain braces (it would override the per-session hash tag)"
            )));
        }
        let (conn, opener) = redis_kit::connect(target, access, SHARED_TIMEOUTS).await?;
        let traffic = Arc::new(Traffic::default());
        let db = Db {
            conn: Counted::new(conn, traffic.clone()),
            prefix: prefix.into(),
            scripts: Arc::new(scripts::Scripts::new()),
            blocking: Arc::new(blocking::Pool::new(opener, CONNECT_TIMEOUT)),
            log_waits: Arc::new(tokio::sync::Semaphore::new(DEFAULT_LOG_WAITS)),
            event_cap: DEFAULT_EVENT_CAP,
            event_commands: Arc::new(AtomicU64::new(0)),
            write_failures: Arc::new(AtomicU64::new(0)),
            tallies: Arc::new(diag::Tallies::default()),
            waiter: None,
            traffic,
            records: Arc::new(records::Records::default()),
        };
        Ok(Store { db: Arc::new(db) })
    }

    /// Lets at most `n` reads of event logs block at once (default [`DEFAULT_LOG_WAITS`]; at least 1). Each
    /// blocking read holds a Redis connection of its own for up to its block time, so without a bound every stream
    /// following an idle session (any caller can open many) would hold one, and enough of them would exhaust
    /// Redis's `maxclients` for every tenant. A wait beyond the bound reads without blocking and, when nothing was
    /// there, waits [`LOG_POLL`] here before its caller reads again.
    pub fn with_log_waits(mut self, n: usize) -> Self {
        Arc::make_mut(&mut self.db).log_waits = Arc::new(tokio::sync::Semaphore::new(n.max(1)));
        self
    }

    /// Caps each session's event stream at about `n` entries (default [`DEFAULT_EVENT_CAP`]; at least 1).
    pub fn with_event_cap(mut self, n: usize) -> Self {
        Arc::make_mut(&mut self.db).event_cap = n.max(1);
        self
    }

    /// Waits for `wait` replicas after each acknowledged write (`None`: never, the default; see `replicas`).
    pub fn with_replica_wait(mut self, wait: Option<ReplicaWait>) -> Self {
        Arc::make_mut(&mut self.db).waiter = wait.map(|w| Arc::new(replicas::Waiter::new(w)));
        self
    }

    /// Checks that Redis answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(())
    }

    /// Writes that failed in Redis (errors, timeouts, broken connections) since start. Refused writes (fenced, not
    /// found, exists, invalid) are outcomes, not failures, and are not counted.
    pub fn write_failures(&self) -> u64 {
        self.db.write_failures.load(Ordering::Relaxed)
    }

    /// The store's request and wait counts (shared by clones and handles).
    pub fn traffic(&self) -> Arc<Traffic> {
        self.db.traffic.clone()
    }

    /// Session records.
    pub fn sessions(&self) -> Sessions {
        Sessions {
            db: self.db.clone(),
        }
    }

    /// Listings of sessions and the tenants' indexes.
    pub fn index(&self) -> SessionIndex {
        SessionIndex {
            db: self.db.clone(),
        }
    }

    /// Messages and parts.
    pub fn messages(&self) -> Messages {
        Messages {
            db: self.db.clone(),
        }
    }

    /// Sessions' event logs.
    pub fn event_log(&self) -> EventLog {
        EventLog {
            db: self.db.clone(),
        }
    }

    /// Sessions' leases.
    pub fn leases(&self) -> Leases {
        Leases {
            db: self.db.clone(),
        }
    }

    /// The active set.
    pub fn active(&self) -> ActiveSet {
        ActiveSet {
            db: self.db.clone(),
        }
    }

    /// A prompt's first write and idempotency keys.
    pub fn prompts(&self) -> Prompts {
        Prompts {
            db: self.db.clone(),
        }
    }

    /// Busy sessions' prompt queues.
    pub fn queue(&self) -> PromptQueue {
        PromptQueue {
            db: self.db.clone(),
        }
    }

    /// Answers to the questions a loop asks the caller.
    pub fn mailboxes(&self) -> Mailboxes {
        Mailboxes {
            db: self.db.clone(),
        }
    }

    /// Tenants' spend.
    pub fn spend(&self) -> Spend {
        Spend {
            db: self.db.clone(),
        }
    }

    /// Live statuses and write failures.
    pub fn statuses(&self) -> Statuses {
        Statuses {
            db: self.db.clone(),
        }
    }
}

/// A stream entry id as XREAD accepts it after STREAMS: `<ms>` or `<ms>-<seq>`.
#[cfg(test)]
fn is_stream_id(s: &str) -> bool {
    s.parse::<crate::event_wire::EventId>().is_ok()
}

/// Whole milliseconds, rounded up and at least 1: Redis treats 0 as "no timeout" or rejects it.
fn ceil_millis(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000))
        .unwrap_or(u64::MAX)
        .max(1)
}

fn timestamp_millis(ts: Option<&prost_types::Timestamp>) -> Option<i64> {
    ts.map(|t| {
        t.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(t.nanos) / 1_000_000)
    })
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
