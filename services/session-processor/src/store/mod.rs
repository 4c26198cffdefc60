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
//! | `<P>{sess:<id>}:queue` | LIST | `PromptRequest`s that arrived while the session was busy |
//! | `<P>{sess:<id>}:toolresults` | HASH | call id → `SubmitToolResultRequest` (durable record) |
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
//!   batch and the parts whose text streamed in one script ([`Store::flush_events`]); the parts in it are fenced.
//! - The event stream is capped by length only (`MAXLEN ~`), never expired: a session's history of events lives as
//!   long as the session, and `delete_session` removes it.
//! - The indexes (global and per tenant) are in other slots, so they cannot share a script with session keys:
//!   creation adds the index entries before the session, deletion removes them after, and listing skips index
//!   entries without a session. A crash between the two steps therefore leaves at worst an invisible index entry,
//!   never an unlisted session.

mod access;
mod asking;
mod begin;
mod blocking;
mod conn;
mod diag;
mod keys;
mod scripts;
mod sentinel;
mod tenancy;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use llm_proto::sessions as pb;
use prost::Message as _;
use redis::streams::{StreamRangeReply, StreamReadReply};

pub use access::{RedisAccess, url_has_credentials};
pub use begin::{Begin, Begun};
use conn::Conn;
pub use conn::RedisTarget;
pub use diag::WriteFailures;
use keys::{SessionKeys, check_id};
pub use tenancy::{Listed, Scope};

use crate::events::EventId;

/// Default number of events kept per session stream (approximately: `MAXLEN ~` trims whole stream nodes).
pub const DEFAULT_EVENT_CAP: usize = 10_000;

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

/// The script argument for an optional fence: empty means unfenced (a real fence value always contains `:`).
fn fence_arg(fence: Option<&Fence>) -> String {
    fence.map(Fence::lease_value).unwrap_or_default()
}

/// Handle to the session store. Cheap to clone: clones share one multiplexed connection (per node, on a cluster), the
/// script cache, the pool of blocking connections and the failure counter.
#[derive(Clone)]
pub struct Store {
    conn: Conn,
    prefix: Arc<str>,
    scripts: Arc<scripts::Scripts>,
    blocking: Arc<blocking::Pool>,
    event_cap: usize,
    /// Redis commands issued for event logs (see [`Store::event_log_commands`]).
    event_commands: Arc<AtomicU64>,
    write_failures: Arc<AtomicU64>,
    /// Per-session write failures not yet flushed to Redis (see `diag`).
    tallies: Arc<diag::Tallies>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("prefix", &self.prefix)
            .field("event_cap", &self.event_cap)
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
        let timeouts = access::Timeouts {
            connect: CONNECT_TIMEOUT,
            response: RESPONSE_TIMEOUT,
        };
        let (conn, opener) = access::connect(target, access, timeouts).await?;
        Ok(Store {
            conn,
            prefix: prefix.into(),
            scripts: Arc::new(scripts::Scripts::new()),
            blocking: Arc::new(blocking::Pool::new(opener, CONNECT_TIMEOUT)),
            event_cap: DEFAULT_EVENT_CAP,
            event_commands: Arc::new(AtomicU64::new(0)),
            write_failures: Arc::new(AtomicU64::new(0)),
            tallies: Arc::new(diag::Tallies::default()),
        })
    }

    /// Caps each session's event stream at about `n` entries (default [`DEFAULT_EVENT_CAP`]; at least 1).
    pub fn with_event_cap(mut self, n: usize) -> Self {
        self.event_cap = n.max(1);
        self
    }

    /// Checks that Redis answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// Writes that failed in Redis (errors, timeouts, broken connections) since start. Refused writes (fenced, not
    /// found, exists, invalid) are outcomes, not failures, and are not counted.
    pub fn write_failures(&self) -> u64 {
        self.write_failures.load(Ordering::Relaxed)
    }

    fn keys(&self, session_id: &str) -> Result<SessionKeys, StoreError> {
        SessionKeys::new(&self.prefix, session_id)
    }

    /// Runs a write and counts it in `write_failures` when Redis fails it.
    async fn write<T>(
        &self,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let result = op.await;
        if let Err(e) = &result
            && e.is_transport()
        {
            self.write_failures.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Maps a write script's status code to the caller's result.
    fn status(
        code: i64,
        session_id: &str,
        fence: Option<&Fence>,
        missing_message: impl FnOnce() -> String,
    ) -> Result<(), StoreError> {
        match code {
            scripts::OK => Ok(()),
            scripts::FENCED => Err(StoreError::Fenced {
                session_id: session_id.to_string(),
                owner: fence.map(|f| f.owner.clone()).unwrap_or_default(),
                token: fence.map_or(0, |f| f.token),
            }),
            scripts::NO_SESSION => Err(StoreError::NotFound(format!("session {session_id}"))),
            scripts::NO_MESSAGE => Err(StoreError::NotFound(missing_message())),
            other => Err(StoreError::Unexpected(format!("script status {other}"))),
        }
    }

    // ----- sessions -----

    /// Creates a session; [`StoreError::Exists`] when the id is taken. The live `status` is not stored.
    pub async fn create_session(&self, s: &pb::Session) -> Result<(), StoreError> {
        self.write_session(&s.id, async {
            let keys = self.keys(&s.id)?;
            let mut stored = s.clone();
            stored.status = None;
            let score = timestamp_millis(s.created_at.as_ref()).unwrap_or_else(now_millis);
            // Indexes first (ZADD NX leaves an existing entry alone): a crash in between leaves an index entry that
            // listing skips, never a session that listing cannot find.
            let (_, _, set): (i64, i64, redis::Value) = redis::pipe()
                .cmd("ZADD")
                .arg(keys::index(&self.prefix))
                .arg("NX")
                .arg(score)
                .arg(&s.id)
                .cmd("ZADD")
                .arg(keys::tenant_sessions(&self.prefix, &s.tenant))
                .arg("NX")
                .arg(score)
                .arg(&s.id)
                .cmd("SET")
                .arg(keys.session())
                .arg(stored.encode_to_vec())
                .arg("NX")
                .query_async(&mut self.conn.clone())
                .await?;
            if matches!(set, redis::Value::Nil) {
                return Err(StoreError::Exists(format!("session {}", s.id)));
            }
            Ok(())
        })
        .await
    }

    /// The session, without live status (`status` is `None`: the caller knows it from the lease); `None` when
    /// missing.
    pub async fn get_session(&self, id: &str) -> Result<Option<pb::Session>, StoreError> {
        Ok(self.get_session_record(id).await?.map(|(s, _)| s))
    }

    /// The session as [`Store::get_session`] reads it, with the stored bytes it was decoded from (what
    /// [`Store::update_session_from`] compares against).
    pub async fn get_session_record(
        &self,
        id: &str,
    ) -> Result<Option<(pb::Session, Vec<u8>)>, StoreError> {
        let keys = self.keys(id)?;
        let bytes: Option<Vec<u8>> = redis::cmd("GET")
            .arg(keys.session())
            .query_async(&mut self.conn.clone())
            .await?;
        bytes
            .map(|b| {
                pb::Session::decode(b.as_slice())
                    .map(|s| (s, b))
                    .map_err(|e| StoreError::decode(keys.session(), e))
            })
            .transpose()
    }

    /// Replaces an existing session (title, totals, ...); [`StoreError::NotFound`] when it does not exist. Does not
    /// move it in the index: the index orders by creation.
    pub async fn put_session(
        &self,
        s: &pb::Session,
        fence: Option<&Fence>,
    ) -> Result<(), StoreError> {
        self.write_session(&s.id, async {
            let keys = self.keys(&s.id)?;
            let mut stored = s.clone();
            stored.status = None;
            let code: i64 = self
                .scripts
                .put_session
                .key(keys.session())
                .key(keys.lease())
                .arg(fence_arg(fence))
                .arg(stored.encode_to_vec())
                .invoke_async(&mut self.conn.clone())
                .await?;
            Self::status(code, &s.id, fence, String::new)
        })
        .await
    }

    /// Changes a session with `change` and writes it back only if nobody wrote it in between (a compare-and-set on
    /// the stored bytes, retried on conflict), so two writers of different fields (the loop's totals, the title)
    /// never undo each other. Returns the session as written; `None` when it does not exist. With a fence, the
    /// write also requires the lease ([`StoreError::Fenced`]).
    pub async fn update_session(
        &self,
        id: &str,
        fence: Option<&Fence>,
        change: impl FnMut(&mut pb::Session),
    ) -> Result<Option<pb::Session>, StoreError> {
        Ok(self
            .update_session_from(id, fence, None, change)
            .await?
            .map(|(s, _)| s))
    }

    /// [`Store::update_session`] starting from `known`, the stored bytes the caller last read or wrote
    /// ([`Store::get_session_record`], or a previous call's result): the first attempt changes that record without
    /// reading it, and the compare-and-set catches anything written since (then it reads and retries as usual).
    /// Returns the session as written and its stored bytes.
    pub async fn update_session_from(
        &self,
        id: &str,
        fence: Option<&Fence>,
        known: Option<Vec<u8>>,
        mut change: impl FnMut(&mut pb::Session),
    ) -> Result<Option<(pb::Session, Vec<u8>)>, StoreError> {
        self.write_session(id, async {
            let keys = self.keys(id)?;
            let mut known = known;
            for _ in 0..UPDATE_ATTEMPTS {
                let bytes: Option<Vec<u8>> = match known.take() {
                    Some(bytes) => Some(bytes),
                    None => {
                        redis::cmd("GET")
                            .arg(keys.session())
                            .query_async(&mut self.conn.clone())
                            .await?
                    }
                };
                let Some(bytes) = bytes else { return Ok(None) };
                let mut session = pb::Session::decode(bytes.as_slice())
                    .map_err(|e| StoreError::decode(keys.session(), e))?;
                change(&mut session);
                session.status = None;
                let written = session.encode_to_vec();
                let code: i64 = self
                    .scripts
                    .cas_session
                    .key(keys.session())
                    .key(keys.lease())
                    .arg(fence_arg(fence))
                    .arg(bytes)
                    .arg(&written)
                    .invoke_async(&mut self.conn.clone())
                    .await?;
                match code {
                    scripts::CONFLICT => continue,
                    scripts::NO_SESSION => return Ok(None),
                    code => {
                        Self::status(code, id, fence, String::new)?;
                        return Ok(Some((session, written)));
                    }
                }
            }
            Err(StoreError::Unexpected(format!(
                "session {id} kept changing during {UPDATE_ATTEMPTS} update attempts"
            )))
        })
        .await
    }

    // ----- tenants -----

    /// Adds `nano_usd` to a tenant's spend and returns the new total. Not fenced and not in a session's script:
    /// the counter lives outside every session's slot, and an increment is never stale.
    pub async fn add_tenant_spend(&self, tenant: &str, nano_usd: i64) -> Result<i64, StoreError> {
        self.write(async {
            let total: i64 = redis::cmd("INCRBY")
                .arg(keys::tenant_spend(&self.prefix, tenant))
                .arg(nano_usd)
                .query_async(&mut self.conn.clone())
                .await?;
            Ok(total)
        })
        .await
    }

    /// Stores the inputs of the session's current run (only `model`, `client_tools` and `system` of `inputs` are
    /// kept), so a loop resumed after a crash, on any replica, runs with them.
    pub async fn put_run_inputs(
        &self,
        session_id: &str,
        inputs: &pb::PromptRequest,
    ) -> Result<(), StoreError> {
        let kept = pb::PromptRequest {
            model: inputs.model.clone(),
            client_tools: inputs.client_tools.clone(),
            system: inputs.system.clone(),
            ..Default::default()
        };
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let _: () = redis::cmd("SET")
                .arg(keys.run_inputs())
                .arg(kept.encode_to_vec())
                .query_async(&mut self.conn.clone())
                .await?;
            Ok(())
        })
        .await
    }

    /// The inputs [`put_run_inputs`](Store::put_run_inputs) stored last, if any.
    pub async fn run_inputs(
        &self,
        session_id: &str,
    ) -> Result<Option<pb::PromptRequest>, StoreError> {
        let keys = self.keys(session_id)?;
        let bytes: Option<Vec<u8>> = redis::cmd("GET")
            .arg(keys.run_inputs())
            .query_async(&mut self.conn.clone())
            .await?;
        bytes
            .map(|b| {
                pb::PromptRequest::decode(b.as_slice())
                    .map_err(|e| StoreError::decode(format!("run inputs of {session_id}"), e))
            })
            .transpose()
    }

    /// A tenant's spend in nano-USD (0 before its first charge).
    pub async fn tenant_spend(&self, tenant: &str) -> Result<i64, StoreError> {
        let total: Option<i64> = redis::cmd("GET")
            .arg(keys::tenant_spend(&self.prefix, tenant))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(total.unwrap_or(0))
    }

    /// One page of the sessions in `scope`, newest first, each with its own cursor, and the cursor of the next
    /// page (`None` on the last page). `after` is a cursor returned with an earlier page; it stays valid when
    /// sessions are created or deleted meanwhile. A `page_size` of 0 is taken as 1. A tenant's listing reads that
    /// tenant's index, never the others' sessions.
    pub async fn list_sessions(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        after: Option<&str>,
    ) -> Result<(Vec<Listed>, Option<String>), StoreError> {
        let page_size = page_size.max(1);
        let index = scope.index(&self.prefix);
        let batch = page_size.saturating_add(1).clamp(16, 512);
        let mut conn = self.conn.clone();
        // Keyset paging on (score, id) rather than ranks, so concurrent inserts and deletes neither repeat nor skip
        // sessions. Equal scores come in descending id order, so "after the cursor" is: lower score, or the same
        // score and a smaller id.
        let mut cursor = after.map(parse_session_cursor).transpose()?;
        let mut offset = 0usize;
        let mut page: Vec<Listed> = Vec::new();
        let mut last: Option<(i64, String)> = None;
        loop {
            let max = cursor
                .as_ref()
                .map_or_else(|| "+inf".to_string(), |(score, _)| score.to_string());
            let entries: Vec<(String, f64)> = redis::cmd("ZREVRANGEBYSCORE")
                .arg(&index)
                .arg(max)
                .arg("-inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(offset)
                .arg(batch)
                .query_async(&mut conn)
                .await?;
            let exhausted = entries.len() < batch;
            let seen = entries.len();
            let fresh: Vec<(i64, String)> = entries
                .into_iter()
                .map(|(id, score)| (score as i64, id))
                .filter(|(score, id)| match &cursor {
                    Some((cursor_score, cursor_id)) => !(score == cursor_score && id >= cursor_id),
                    None => true,
                })
                .collect();
            if fresh.is_empty() {
                if exhausted {
                    return Ok((page, None));
                }
                // The whole batch tied with the cursor and was already listed: step over it.
                offset += seen;
                continue;
            }
            let sessions = self.fetch_sessions(&fresh).await?;
            for (position, session) in fresh.iter().zip(sessions) {
                // Index entries without a session are a creation in progress or a crashed one: not listed. Nor is
                // a session of another tenant (a tenant's index never holds one; this keeps it so).
                let Some(session) = session.filter(|s| scope.holds(s)) else {
                    continue;
                };
                if page.len() == page_size {
                    // A next cursor only when another session really exists, so the last page is never empty.
                    return Ok((page, last.map(|(score, id)| format!("{score}:{id}"))));
                }
                page.push(Listed {
                    cursor: format!("{}:{}", position.0, position.1),
                    session,
                });
                last = Some(position.clone());
            }
            cursor = fresh.last().cloned();
            offset = 0;
            if exhausted {
                return Ok((page, None));
            }
        }
    }

    /// Loads sessions by id in one round trip (a pipeline of GETs, not MGET: the keys live in different slots).
    async fn fetch_sessions(
        &self,
        ids: &[(i64, String)],
    ) -> Result<Vec<Option<pb::Session>>, StoreError> {
        let mut pipe = redis::pipe();
        let mut names = Vec::with_capacity(ids.len());
        for (_, id) in ids {
            let key = self.keys(id)?.session();
            pipe.cmd("GET").arg(&key);
            names.push(key);
        }
        let values: Vec<Option<Vec<u8>>> = pipe.query_async(&mut self.conn.clone()).await?;
        values
            .into_iter()
            .zip(names)
            .map(|(bytes, key)| {
                bytes
                    .map(|b| {
                        pb::Session::decode(b.as_slice()).map_err(|e| StoreError::decode(key, e))
                    })
                    .transpose()
            })
            .collect()
    }

    /// Deletes every key of a session; true when the session existed. Safe to repeat: a retry after a failure
    /// finishes the cleanup even though the session is already gone.
    pub async fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        self.write_session(id, async {
            let keys = self.keys(id)?;
            let mut conn = self.conn.clone();
            // `:session` goes first: from then on every write script refuses this session, so the key set read
            // next cannot grow behind our back. Read just before, for its tenant (which never changes).
            let (stored, existed): (Option<Vec<u8>>, i64) = redis::pipe()
                .cmd("GET")
                .arg(keys.session())
                .cmd("DEL")
                .arg(keys.session())
                .query_async(&mut conn)
                .await?;
            let tenant = stored
                .and_then(|b| pb::Session::decode(b.as_slice()).ok())
                .map(|s| s.tenant);
            let (message_ids, aux): (Vec<String>, Vec<String>) = redis::pipe()
                .cmd("ZRANGE")
                .arg(keys.messages())
                .arg(0)
                .arg(-1)
                .cmd("SMEMBERS")
                .arg(keys.aux())
                .query_async(&mut conn)
                .await?;
            let mut all = keys.fixed();
            for m in &message_ids {
                all.push(keys.message(m));
                all.push(keys.parts(m));
            }
            all.extend(aux);
            let mut pipe = redis::pipe();
            for chunk in all.chunks(DELETE_CHUNK) {
                pipe.cmd("DEL").arg(chunk).ignore();
            }
            // The index entries go last (see the module docs). A retry after the session was already gone no longer
            // knows its tenant: that index keeps an entry listing skips.
            pipe.cmd("ZREM")
                .arg(keys::index(&self.prefix))
                .arg(id)
                .ignore();
            if let Some(tenant) = &tenant {
                pipe.cmd("ZREM")
                    .arg(keys::tenant_sessions(&self.prefix, tenant))
                    .arg(id)
                    .ignore();
            }
            let _: () = pipe.query_async(&mut conn).await?;
            Ok(existed > 0)
        })
        .await
    }

    // ----- messages and parts -----

    /// Creates or replaces a message and lists it in the session. Parts carried in `m.parts` are upserted in the
    /// same atomic step (so a user message lands with its content at once); parts not carried are left alone. A
    /// user message's model becomes the session's prompt model ([`Store::prompt_model`]) in the same step.
    pub async fn put_message(
        &self,
        m: &pb::Message,
        fence: Option<&Fence>,
    ) -> Result<(), StoreError> {
        self.put_message_listed(m, fence, false).await
    }

    /// [`Store::put_message`] for a message the caller already wrote successfully (`listed`): the session lists it
    /// from then on (only `delete_session` unlists it, and it removes `:session` first, which every write checks),
    /// so the script does not add it to the list again. With `listed` false this is exactly `put_message`.
    pub async fn put_message_listed(
        &self,
        m: &pb::Message,
        fence: Option<&Fence>,
        listed: bool,
    ) -> Result<(), StoreError> {
        self.write_session(&m.session_id, async {
            check_id("message id", &m.id)?;
            let keys = self.keys(&m.session_id)?;
            let mut head = m.clone();
            let parts = std::mem::take(&mut head.parts);
            let mut script = self.scripts.put_message.prepare_invoke();
            script
                .key(keys.session())
                .key(keys.lease())
                .key(keys.messages())
                .key(keys.message(&m.id))
                .key(keys.parts(&m.id))
                .key(keys.prompt_model())
                .arg(fence_arg(fence))
                .arg(&m.id)
                .arg(head.encode_to_vec())
                .arg(if listed { "1" } else { "0" })
                .arg(if head.role() == pb::Role::User {
                    head.model.as_str()
                } else {
                    ""
                });
            for mut part in parts {
                check_id("part id", &part.id)?;
                // Parts inside a message may leave their back-references empty; they must not point elsewhere.
                if part.message_id.is_empty() {
                    part.message_id = m.id.clone();
                }
                if part.session_id.is_empty() {
                    part.session_id = m.session_id.clone();
                }
                if part.message_id != m.id || part.session_id != m.session_id {
                    return Err(StoreError::InvalidArgument(format!(
                        "part {} belongs to {}/{}, not to message {}/{}",
                        part.id, part.session_id, part.message_id, m.session_id, m.id
                    )));
                }
                script.arg(&part.id).arg(part.encode_to_vec());
            }
            let code: i64 = script.invoke_async(&mut self.conn.clone()).await?;
            Self::status(code, &m.session_id, fence, String::new)
        })
        .await
    }

    /// The model the session's latest user message runs with (see [`Store::put_message`]); `None` before any
    /// prompt that recorded one.
    pub async fn prompt_model(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let keys = self.keys(session_id)?;
        let model: Option<String> = redis::cmd("GET")
            .arg(keys.prompt_model())
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(model.filter(|m| !m.is_empty()))
    }

    /// Creates or replaces one part. Its message must already be listed in the session ([`StoreError::NotFound`]
    /// otherwise): a part under an unlisted message would escape `delete_session`.
    pub async fn put_part(&self, p: &pb::Part, fence: Option<&Fence>) -> Result<(), StoreError> {
        self.put_parts(std::slice::from_ref(p), fence).await
    }

    /// Creates or replaces several parts of one session (possibly of several messages) in one round trip and one
    /// atomic step: either all are written or none.
    pub async fn put_parts(
        &self,
        parts: &[pb::Part],
        fence: Option<&Fence>,
    ) -> Result<(), StoreError> {
        let Some((first, _)) = parts.split_first() else {
            return Ok(());
        };
        self.write_session(&first.session_id, async {
            let session_id = &first.session_id;
            let keys = self.keys(session_id)?;
            let mut messages: Vec<&str> = Vec::new();
            let mut slot: HashMap<&str, usize> = HashMap::new();
            for p in parts {
                check_id("part id", &p.id)?;
                check_id("message id", &p.message_id)?;
                if &p.session_id != session_id {
                    // One script runs in one slot: parts of two sessions cannot be written together.
                    return Err(StoreError::InvalidArgument(format!(
                        "put_parts mixes sessions {session_id} and {}",
                        p.session_id
                    )));
                }
                if !slot.contains_key(p.message_id.as_str()) {
                    messages.push(&p.message_id);
                    slot.insert(&p.message_id, messages.len());
                }
            }
            let mut script = self.scripts.put_parts.prepare_invoke();
            script
                .key(keys.session())
                .key(keys.lease())
                .key(keys.messages());
            for m in &messages {
                script.key(keys.parts(m));
            }
            script.arg(fence_arg(fence)).arg(messages.len());
            for m in &messages {
                script.arg(*m);
            }
            for p in parts {
                let index = slot.get(p.message_id.as_str()).copied().unwrap_or_default();
                script.arg(index).arg(&p.id).arg(p.encode_to_vec());
            }
            let code: i64 = script.invoke_async(&mut self.conn.clone()).await?;
            Self::status(code, session_id, fence, || {
                format!("message {} of session {session_id}", messages.join(" or "))
            })
        })
        .await
    }

    /// One message with its parts sorted by id; `None` when missing.
    pub async fn get_message(
        &self,
        session_id: &str,
        message_id: &str,
    ) -> Result<Option<pb::Message>, StoreError> {
        check_id("message id", message_id)?;
        let keys = self.keys(session_id)?;
        let (head, parts): (Option<Vec<u8>>, StoredParts) = redis::pipe()
            .cmd("GET")
            .arg(keys.message(message_id))
            .cmd("HGETALL")
            .arg(keys.parts(message_id))
            .query_async(&mut self.conn.clone())
            .await?;
        head.map(|head| assemble(&keys, message_id, &head, parts))
            .transpose()
    }

    /// One page of messages, oldest first, each with its parts sorted by id, and the cursor of the next page (the
    /// last message id; `None` on the last page). `after` is exclusive. A `limit` of 0 is taken as 1; `usize::MAX`
    /// reads the whole history in one round trip of commands.
    pub async fn list_messages(
        &self,
        session_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<pb::Message>, Option<String>), StoreError> {
        let keys = self.keys(session_id)?;
        // Redis counts are signed 64-bit; callers may pass usize::MAX for "everything".
        let limit = limit.clamp(1, MAX_LIMIT);
        let mut conn = self.conn.clone();
        let min = after.map_or_else(|| "-".to_string(), |a| format!("({a}"));
        // One extra id tells whether another page follows without a second query.
        let mut ids: Vec<String> = redis::cmd("ZRANGEBYLEX")
            .arg(keys.messages())
            .arg(min)
            .arg("+")
            .arg("LIMIT")
            .arg(0)
            .arg(limit + 1)
            .query_async(&mut conn)
            .await?;
        let more = ids.len() > limit;
        ids.truncate(limit);
        let messages = self.messages_by_id(&keys, &ids).await?;
        let next = if more { ids.last().cloned() } else { None };
        Ok((messages, next))
    }

    /// The messages with these ids (in this order), with their parts, in one round trip; ids whose message is
    /// gone are skipped.
    async fn messages_by_id(
        &self,
        keys: &SessionKeys,
        ids: &[String],
    ) -> Result<Vec<pb::Message>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn.clone();
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("GET")
                .arg(keys.message(id))
                .cmd("HGETALL")
                .arg(keys.parts(id));
        }
        let values: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        let mut values = values.into_iter();
        let mut messages = Vec::with_capacity(ids.len());
        for id in ids {
            let (Some(head), Some(parts)) = (values.next(), values.next()) else {
                return Err(StoreError::Unexpected("short pipeline reply".into()));
            };
            let head: Option<Vec<u8>> =
                redis::from_redis_value(head).map_err(|e| StoreError::Unexpected(e.to_string()))?;
            let parts: StoredParts = redis::from_redis_value(parts)
                .map_err(|e| StoreError::Unexpected(e.to_string()))?;
            if let Some(head) = head {
                messages.push(assemble(keys, id, &head, parts)?);
            }
        }
        Ok(messages)
    }

    // ----- events -----

    /// Redis commands the store issued for session event logs since start (appends and flushes, reads, last-id
    /// look-ups, watched marks), so tests and benchmarks can check what coalescing saves.
    pub fn event_log_commands(&self) -> u64 {
        self.event_commands.load(Ordering::Relaxed)
    }

    fn count_event_command(&self) {
        self.event_commands.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends one event to the session's stream as its own entry, with an id Redis assigns, and returns that id.
    /// The stream is capped at about `event_cap` entries. This is the path for sessions whose loop does not run on
    /// this replica; a running loop writes batches through [`crate::events::Hub`]. Unfenced by design (see the
    /// module docs); [`StoreError::NotFound`] when the session does not exist.
    pub async fn publish(
        &self,
        session_id: &str,
        event: pb::session_event::Event,
    ) -> Result<String, StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            // Both ids are implied by where the event is stored, so they are filled in on read instead.
            let stored = pb::SessionEvent {
                event_id: String::new(),
                session_id: String::new(),
                event: Some(event),
            };
            self.count_event_command();
            let id: Option<String> = self
                .scripts
                .publish
                .key(keys.session())
                .key(keys.events())
                .arg(self.event_cap)
                .arg(stored.encode_to_vec())
                .invoke_async(&mut self.conn.clone())
                .await?;
            id.ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))
        })
        .await
    }

    /// Appends a batch of events (encoded by [`crate::events`]) as one entry with the id `last`, its last event's
    /// id, and returns the id it got: `last`, or the next id after the stream's newest entry when the stream is
    /// already past `last` (a foreign write; never an error). A retry of a batch that already landed (its id is the
    /// newest) is not written twice. [`StoreError::NotFound`] when the session does not exist.
    pub async fn append_events(
        &self,
        session_id: &str,
        last: EventId,
        batch: Vec<u8>,
    ) -> Result<EventId, StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            self.count_event_command();
            let id: Option<String> = self
                .scripts
                .append_events
                .key(keys.session())
                .key(keys.events())
                .arg(self.event_cap)
                .arg(last.to_string())
                .arg(batch)
                .invoke_async(&mut self.conn.clone())
                .await?;
            let id = id.ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
            id.parse()
                .map_err(|_| StoreError::Unexpected(format!("entry id {id:?}")))
        })
        .await
    }

    /// Writes one window of a running loop's event channel in one round trip (one script): `batch` (its last
    /// event's id and the encoded batch, as for [`Store::append_events`]; `None` writes no entry) and `parts`, the
    /// loop's parts to persist, which need `fence`. Parts are written only while `fence` holds the lease, all or
    /// none; the batch is appended either way (the log is unfenced). The script checks that each part's message is
    /// listed in the session unless it is in `listed` (messages a previous write already checked: a message stays
    /// listed until the session is deleted, which also ends the lease). With `renew`, a lease that holds `fence` is
    /// extended to that ttl as [`Store::renew_lease`] would ([`Flushed::renewed`]). Also reports whether a stream
    /// on another replica follows the session ([`Store::mark_watched`]), so the channel picks its flush window.
    ///
    /// [`StoreError::NotFound`] when the session does not exist; a refused part write (fenced, or an unlisted
    /// message) is [`Flushed::parts`], the batch having been appended.
    pub async fn flush_events(
        &self,
        session_id: &str,
        batch: Option<(EventId, Vec<u8>)>,
        fence: Option<&Fence>,
        renew: Option<Duration>,
        writes: FlushWrites<'_>,
    ) -> Result<Flushed, StoreError> {
        let FlushWrites {
            parts,
            heads,
            listed,
        } = writes;
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            if (!parts.is_empty() || !heads.is_empty()) && fence.is_none() {
                return Err(StoreError::InvalidArgument(
                    "parts and messages are written only under a fence".into(),
                ));
            }
            let messages = group_by_message(session_id, parts, heads)?;
            let (last, bytes) = match batch {
                Some((last, bytes)) => (last.to_string(), bytes),
                None => (String::new(), Vec::new()),
            };
            let mut script = self.scripts.flush.prepare_invoke();
            script
                .key(keys.session())
                .key(keys.lease())
                .key(keys.watched())
                .key(keys.events())
                .key(keys.messages());
            for m in &messages {
                script.key(keys.message(m.id)).key(keys.parts(m.id));
            }
            script
                .arg(self.event_cap)
                .arg(last)
                .arg(bytes)
                .arg(fence_arg(fence))
                .arg(
                    renew
                        .map(|ttl| ceil_millis(ttl).to_string())
                        .unwrap_or_default(),
                )
                .arg(messages.len());
            for m in &messages {
                script
                    .arg(m.id)
                    .arg(if listed.contains(m.id) { "0" } else { "1" })
                    .arg(m.head.map(|h| h.encode_to_vec()).unwrap_or_default())
                    .arg(m.parts.len());
                for p in &m.parts {
                    script.arg(&p.id).arg(p.encode_to_vec());
                }
            }
            self.count_event_command();
            let reply: Option<(String, i64, i64, i64)> =
                script.invoke_async(&mut self.conn.clone()).await?;
            let Some((entry, watched, code, renewed)) = reply else {
                return Err(StoreError::NotFound(format!("session {session_id}")));
            };
            let entry = if entry.is_empty() {
                None
            } else {
                Some(
                    entry
                        .parse()
                        .map_err(|_| StoreError::Unexpected(format!("entry id {entry:?}")))?,
                )
            };
            let parts = Self::status(code, session_id, fence, || {
                let ids: Vec<&str> = messages.iter().map(|m| m.id).collect();
                format!("message {} of session {session_id}", ids.join(" or "))
            });
            Ok(Flushed {
                entry,
                watched: watched == 1,
                parts,
                renewed: renewed == 1,
            })
        })
        .await
    }

    /// Marks the session as followed from a replica that does not run its loop, for `ttl`: while the mark exists,
    /// the loop's event channel writes with the short flush window (`events.flush_interval_ms`), so such streams
    /// stay fresh. One command; followers refresh it about once a second.
    pub async fn mark_watched(&self, session_id: &str, ttl: Duration) -> Result<(), StoreError> {
        let keys = self.keys(session_id)?;
        self.count_event_command();
        let _: () = redis::cmd("SET")
            .arg(keys.watched())
            .arg(1)
            .arg("PX")
            .arg(ceil_millis(ttl))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// Whether the session's watched mark ([`Store::mark_watched`]) exists.
    pub async fn is_watched(&self, session_id: &str) -> Result<bool, StoreError> {
        let keys = self.keys(session_id)?;
        let n: i64 = redis::cmd("EXISTS")
            .arg(keys.watched())
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(n > 0)
    }

    /// What a replica starting to write a session's events needs, in one command: the stream's newest entry id
    /// (`0-0` when empty) and Redis's clock in milliseconds.
    pub async fn open_events(&self, session_id: &str) -> Result<(EventId, i64), StoreError> {
        let keys = self.keys(session_id)?;
        self.count_event_command();
        let (secs, micros, id): (i64, i64, String) = self
            .scripts
            .open_events
            .key(keys.events())
            .invoke_async(&mut self.conn.clone())
            .await?;
        let last = id
            .parse()
            .map_err(|_| StoreError::Unexpected(format!("entry id {id:?}")))?;
        Ok((
            last,
            secs.saturating_mul(1000).saturating_add(micros / 1000),
        ))
    }

    /// Up to `count` entries' events after the event id `after` (`"0"` = from the start), with `event_id` and
    /// `session_id` filled in; only events after `after`, each id once. With `block` (non-zero), waits up to that
    /// long for the first entry and returns empty on timeout; the wait runs on a dedicated connection. `"$"` is
    /// refused: callers pass the last id they saw (or `last_event_id`), so nothing published between two calls is
    /// ever missed.
    pub async fn read_events(
        &self,
        session_id: &str,
        after: &str,
        block: Option<Duration>,
        count: usize,
    ) -> Result<Vec<pb::SessionEvent>, StoreError> {
        let after: EventId = after
            .parse()
            .map_err(|e: crate::events::BadEventId| StoreError::InvalidArgument(e.to_string()))?;
        let page = self
            .read_event_page(session_id, after, block, count)
            .await?;
        let mut seen = after;
        Ok(page
            .events
            .into_iter()
            .filter(|e| match e.event_id.parse::<EventId>() {
                Ok(id) if id > seen => {
                    seen = id;
                    true
                }
                _ => false,
            })
            .collect())
    }

    /// Up to `count` entries after the entry id `cursor`, decoded into their events (every event of each entry,
    /// including any not after `cursor`: callers filter by the last id they delivered), and the id of the last
    /// entry read (`None` when none was). Blocking as in [`Store::read_events`].
    pub async fn read_event_page(
        &self,
        session_id: &str,
        cursor: EventId,
        block: Option<Duration>,
        count: usize,
    ) -> Result<EventPage, StoreError> {
        let keys = self.keys(session_id)?;
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(count.max(1));
        self.count_event_command();
        // BLOCK 0 means "forever" to Redis; a zero wait here means "don't wait".
        let reply: Option<StreamReadReply> = match block.filter(|d| !d.is_zero()) {
            Some(wait) => {
                cmd.arg("BLOCK")
                    .arg(ceil_millis(wait))
                    .arg("STREAMS")
                    .arg(keys.events())
                    .arg(cursor.to_string());
                self.blocking
                    .query(&cmd, wait.saturating_add(BLOCKING_GRACE))
                    .await?
            }
            None => {
                cmd.arg("STREAMS")
                    .arg(keys.events())
                    .arg(cursor.to_string());
                cmd.query_async(&mut self.conn.clone()).await?
            }
        };
        let mut page = EventPage::default();
        for stream in reply.map(|r| r.keys).unwrap_or_default() {
            for entry in stream.ids {
                let what = || format!("event entry {} of {}", entry.id, keys.events());
                if let Some(batch) = entry.get::<Vec<u8>>("b") {
                    crate::events::decode_batch(&batch, session_id, &mut page.events).map_err(
                        |e| match e {
                            crate::events::BatchError::Decode(e) => StoreError::decode(what(), e),
                            other => StoreError::Unexpected(format!("{}: {other}", what())),
                        },
                    )?;
                } else if let Some(bytes) = entry.get::<Vec<u8>>("e") {
                    // One event per entry, its id the entry's (written by `publish`).
                    let mut event = pb::SessionEvent::decode(bytes.as_slice())
                        .map_err(|e| StoreError::decode(what(), e))?;
                    event.event_id.clone_from(&entry.id);
                    event.session_id = session_id.to_string();
                    page.events.push(event);
                } else {
                    return Err(StoreError::Unexpected(format!(
                        "{} has neither field `b` nor `e`",
                        what()
                    )));
                }
                let id: EventId = entry
                    .id
                    .parse()
                    .map_err(|_| StoreError::Unexpected(what()))?;
                page.cursor = Some(page.cursor.map_or(id, |c: EventId| c.max(id)));
            }
        }
        Ok(page)
    }

    /// The id of the session's newest logged event, `"0-0"` when it has none: where a subscriber that wants only
    /// new events starts reading. (An entry's id is its last event's id.) A replica running the session's loop
    /// knows newer ones: see [`crate::events::Hub::last_event_id`].
    pub async fn last_event_id(&self, session_id: &str) -> Result<String, StoreError> {
        let keys = self.keys(session_id)?;
        self.count_event_command();
        let reply: StreamRangeReply = redis::cmd("XREVRANGE")
            .arg(keys.events())
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(reply
            .ids
            .into_iter()
            .next()
            .map_or_else(|| "0-0".to_string(), |e| e.id))
    }

    // ----- lease with fencing -----

    /// Takes the session's lease for `ttl` with a fresh fencing token (lease and token in one atomic step). `None`
    /// while anyone holds it, the same owner included: a second loop of the same replica must queue, not take over;
    /// [`StoreError::NotFound`] when the session does not exist.
    pub async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Fence>, StoreError> {
        self.write_session(session_id, async {
            if owner.is_empty() {
                return Err(StoreError::InvalidArgument(
                    "lease owner must not be empty".into(),
                ));
            }
            let keys = self.keys(session_id)?;
            let code: i64 = self
                .scripts
                .acquire
                .key(keys.session())
                .key(keys.lease())
                .key(keys.fence())
                .arg(owner)
                .arg(ceil_millis(ttl))
                .invoke_async(&mut self.conn.clone())
                .await?;
            match code {
                scripts::FENCED => Ok(None),
                scripts::NO_SESSION => Err(StoreError::NotFound(format!("session {session_id}"))),
                token if token > 0 => Ok(Some(Fence {
                    owner: owner.to_string(),
                    token: token.unsigned_abs(),
                })),
                other => Err(StoreError::Unexpected(format!("acquire status {other}"))),
            }
        })
        .await
    }

    /// Extends the lease to `ttl` from now if `fence` still holds it; false when it was lost (expired, taken over,
    /// or the session deleted), and the caller must stop writing.
    pub async fn renew_lease(
        &self,
        session_id: &str,
        fence: &Fence,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let renewed: i64 = self
                .scripts
                .renew
                .key(keys.lease())
                .arg(fence.lease_value())
                .arg(ceil_millis(ttl))
                .invoke_async(&mut self.conn.clone())
                .await?;
            Ok(renewed == 1)
        })
        .await
    }

    /// Gives the lease up if `fence` still holds it; a lease that already moved on is left to its new owner.
    pub async fn release_lease(&self, session_id: &str, fence: &Fence) -> Result<(), StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let _: i64 = self
                .scripts
                .release
                .key(keys.lease())
                .arg(fence.lease_value())
                .invoke_async(&mut self.conn.clone())
                .await?;
            Ok(())
        })
        .await
    }

    /// Who holds the lease and with which token; `None` when nobody does (the session is idle or its runner died).
    pub async fn lease_holder(
        &self,
        session_id: &str,
    ) -> Result<Option<(String, u64)>, StoreError> {
        let keys = self.keys(session_id)?;
        let value: Option<String> = redis::cmd("GET")
            .arg(keys.lease())
            .query_async(&mut self.conn.clone())
            .await?;
        let Some(value) = value else { return Ok(None) };
        // The owner may itself contain `:`; the token is after the last one.
        value
            .rsplit_once(':')
            .and_then(|(owner, token)| Some((owner.to_string(), token.parse().ok()?)))
            .map(Some)
            .ok_or_else(|| StoreError::Unexpected(format!("lease value {value:?}")))
    }

    // ----- prompt queue -----

    /// Queues a prompt that arrived while the session was busy; [`StoreError::NotFound`] when the session does not
    /// exist.
    pub async fn enqueue_prompt(
        &self,
        session_id: &str,
        prompt: &pb::PromptRequest,
    ) -> Result<(), StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let code: i64 = self
                .scripts
                .enqueue
                .key(keys.session())
                .key(keys.queue())
                .arg(prompt.encode_to_vec())
                .invoke_async(&mut self.conn.clone())
                .await?;
            Self::status(code, session_id, None, String::new)
        })
        .await
    }

    /// Records that a loop runs for this session (until [`Store::clear_active`]), so a replica that finds it here
    /// without a lease knows the owner died mid-loop.
    pub async fn mark_active(&self, session_id: &str) -> Result<(), StoreError> {
        keys::check_id("session id", session_id)?;
        let _: i64 = redis::cmd("SADD")
            .arg(keys::active(&self.prefix))
            .arg(session_id)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// The loop for this session finished normally.
    pub async fn clear_active(&self, session_id: &str) -> Result<(), StoreError> {
        let _: i64 = redis::cmd("SREM")
            .arg(keys::active(&self.prefix))
            .arg(session_id)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// Sessions marked active (a loop was running, or its owner died before clearing the mark).
    pub async fn active_sessions(&self) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys::active(&self.prefix))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(ids)
    }

    /// Whether prompts are waiting in the queue (a loop about to go idle checks this after releasing its lease, so
    /// a prompt queued in between is not stranded).
    pub async fn has_queued_prompts(&self, session_id: &str) -> Result<bool, StoreError> {
        let keys = self.keys(session_id)?;
        let len: u64 = redis::cmd("LLEN")
            .arg(keys.queue())
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(len > 0)
    }

    /// Takes every queued prompt, oldest first, and empties the queue in the same atomic step, so two takers never
    /// both receive a prompt and a prompt queued concurrently is either taken now or left for the next call.
    pub async fn take_queued_prompts(
        &self,
        session_id: &str,
    ) -> Result<Vec<pb::PromptRequest>, StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let items: Vec<Vec<u8>> = self
                .scripts
                .drain
                .key(keys.queue())
                .invoke_async(&mut self.conn.clone())
                .await?;
            items
                .iter()
                .map(|b| {
                    pb::PromptRequest::decode(b.as_slice())
                        .map_err(|e| StoreError::decode(keys.queue(), e))
                })
                .collect()
        })
        .await
    }

    // ----- client tool results and permission replies -----

    /// Records the caller's result of a client tool call and wakes the loop waiting for it. The record is durable:
    /// a loop that starts waiting later (or a successor replica after a crash) still gets it. The first answer to a
    /// call wins; later ones are accepted and ignored, so a caller's retry is harmless.
    pub async fn submit_tool_result(
        &self,
        session_id: &str,
        call_id: &str,
        output: &str,
        is_error: bool,
    ) -> Result<(), StoreError> {
        check_id("call id", call_id)?;
        let keys = self.keys(session_id)?;
        let answer = pb::SubmitToolResultRequest {
            session_id: session_id.to_string(),
            call_id: call_id.to_string(),
            output: output.to_string(),
            is_error,
        };
        self.answer(
            &keys,
            session_id,
            keys.tool_results(),
            call_id,
            keys.tool_mailbox(call_id),
            answer.encode_to_vec(),
        )
        .await
    }

    /// Waits up to `timeout` for the result of a client tool call: `Some((output, is_error))`, or `None` on timeout.
    /// Returns at once when the result was submitted before the wait began. A zero timeout only checks.
    pub async fn wait_tool_result(
        &self,
        session_id: &str,
        call_id: &str,
        timeout: Duration,
    ) -> Result<Option<(String, bool)>, StoreError> {
        check_id("call id", call_id)?;
        let keys = self.keys(session_id)?;
        let bytes = self
            .await_answer(
                keys.tool_results(),
                call_id,
                keys.tool_mailbox(call_id),
                timeout,
            )
            .await?;
        bytes
            .map(|b| {
                pb::SubmitToolResultRequest::decode(b.as_slice())
                    .map(|r| (r.output, r.is_error))
                    .map_err(|e| {
                        StoreError::decode(
                            format!("tool result {call_id} of {}", keys.tool_results()),
                            e,
                        )
                    })
            })
            .transpose()
    }

    /// Records the caller's reply to a permission request and wakes the loop waiting for it; durable and
    /// first-answer-wins like [`Store::submit_tool_result`].
    pub async fn reply_permission(
        &self,
        session_id: &str,
        permission_id: &str,
        allow: bool,
    ) -> Result<(), StoreError> {
        check_id("permission id", permission_id)?;
        let keys = self.keys(session_id)?;
        let answer = pb::ReplyPermissionRequest {
            session_id: session_id.to_string(),
            permission_id: permission_id.to_string(),
            allow,
        };
        self.answer(
            &keys,
            session_id,
            keys.permissions(),
            permission_id,
            keys.permission_mailbox(permission_id),
            answer.encode_to_vec(),
        )
        .await
    }

    /// Waits up to `timeout` for the reply to a permission request: `Some(allow)`, or `None` on timeout (the caller
    /// then denies). A zero timeout only checks.
    pub async fn wait_permission(
        &self,
        session_id: &str,
        permission_id: &str,
        timeout: Duration,
    ) -> Result<Option<bool>, StoreError> {
        check_id("permission id", permission_id)?;
        let keys = self.keys(session_id)?;
        let bytes = self
            .await_answer(
                keys.permissions(),
                permission_id,
                keys.permission_mailbox(permission_id),
                timeout,
            )
            .await?;
        bytes
            .map(|b| {
                pb::ReplyPermissionRequest::decode(b.as_slice())
                    .map(|r| r.allow)
                    .map_err(|e| {
                        StoreError::decode(
                            format!("permission {permission_id} of {}", keys.permissions()),
                            e,
                        )
                    })
            })
            .transpose()
    }

    /// Stores an answer in its record hash and rings the doorbell, atomically.
    async fn answer(
        &self,
        keys: &SessionKeys,
        session_id: &str,
        records: String,
        id: &str,
        mailbox: String,
        bytes: Vec<u8>,
    ) -> Result<(), StoreError> {
        self.write_session(session_id, async {
            let code: i64 = self
                .scripts
                .submit
                .key(keys.session())
                .key(records)
                .key(mailbox)
                .key(keys.aux())
                .arg(id)
                .arg(bytes)
                .invoke_async(&mut self.conn.clone())
                .await?;
            match code {
                // 0: already answered; the first answer stands.
                0 | scripts::OK => Ok(()),
                other => Self::status(other, session_id, None, String::new),
            }
        })
        .await
    }

    /// Waits for an answer. The record hash is the truth and the list only a doorbell: the record is checked
    /// first (an answer given before the wait, or already consumed by a waiter that then crashed, is still
    /// delivered), then BLPOP waits for the doorbell. The record and the doorbell are written in one script, so
    /// an answer cannot slip between the check and the wait. The record is checked once more on timeout in case
    /// another waiter took the doorbell.
    async fn await_answer(
        &self,
        records: String,
        id: &str,
        mailbox: String,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let mut conn = self.conn.clone();
        let record: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(&records)
            .arg(id)
            .query_async(&mut conn)
            .await?;
        if record.is_some() {
            self.clear_doorbell(&mailbox).await;
            return Ok(record);
        }
        if timeout.is_zero() {
            return Ok(None);
        }
        let mut blpop = redis::cmd("BLPOP");
        // BLPOP takes seconds; fractional seconds keep millisecond timeouts (Redis >= 6).
        blpop
            .arg(&mailbox)
            .arg(format!("{:.3}", ceil_millis(timeout) as f64 / 1000.0));
        let rung: Option<(String, Vec<u8>)> = self
            .blocking
            .query(&blpop, timeout.saturating_add(BLOCKING_GRACE))
            .await?;
        if let Some((_, bytes)) = rung {
            return Ok(Some(bytes));
        }
        let record: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(&records)
            .arg(id)
            .query_async(&mut conn)
            .await?;
        if record.is_some() {
            self.clear_doorbell(&mailbox).await;
        }
        Ok(record)
    }

    /// Drops a doorbell nobody will pop, so answered calls leave no list behind. Best effort: a leftover doorbell
    /// is harmless (the record decides) and is removed with the session anyway.
    async fn clear_doorbell(&self, mailbox: &str) {
        let result: Result<i64, _> = redis::cmd("DEL")
            .arg(mailbox)
            .query_async(&mut self.conn.clone())
            .await;
        if let Err(e) = result {
            tracing::debug!(key = mailbox, error = %e, "could not clear answered doorbell");
        }
    }

    // ----- idempotency -----

    /// Claims a prompt's idempotency key for `ttl`: `None` when claimed now for `message_id` (run the prompt),
    /// `Some(earlier message id)` when a previous call claimed it (stream that call's events instead).
    pub async fn claim_idempotency_key(
        &self,
        session_id: &str,
        key: &str,
        message_id: &str,
        ttl: Duration,
    ) -> Result<Option<String>, StoreError> {
        self.write_session(session_id, async {
            if key.is_empty() {
                return Err(StoreError::InvalidArgument(
                    "idempotency key must not be empty".into(),
                ));
            }
            check_id("message id", message_id)?;
            let keys = self.keys(session_id)?;
            let (code, existing): (i64, String) = self
                .scripts
                .claim
                .key(keys.session())
                .key(keys.idempotency(key))
                .key(keys.aux())
                .arg(message_id)
                .arg(ceil_millis(ttl))
                .invoke_async(&mut self.conn.clone())
                .await?;
            match code {
                scripts::OK => Ok(None),
                0 => Ok(Some(existing)),
                other => Self::status(other, session_id, None, String::new).map(|()| None),
            }
        })
        .await
    }
}

/// Events read from a session's log: see [`Store::read_event_page`].
#[derive(Debug, Default)]
pub struct EventPage {
    /// The entries' events, in log order, ids filled in.
    pub events: Vec<pb::SessionEvent>,
    /// The id of the last entry read; `None` when there was none.
    pub cursor: Option<EventId>,
}

/// What [`Store::flush_events`] did.
#[derive(Debug)]
pub struct Flushed {
    /// The id the batch's entry got (see [`Store::append_events`]); `None` when no batch was given.
    pub entry: Option<EventId>,
    /// Whether a stream on another replica follows the session (its watched mark exists).
    pub watched: bool,
    /// The parts' outcome: written, or refused ([`StoreError::Fenced`], [`StoreError::NotFound`] for a message the
    /// session does not list) while the batch was still appended.
    pub parts: Result<(), StoreError>,
    /// The lease was renewed (a ttl was given and the lease holds the fence).
    pub renewed: bool,
}

/// The parts and message heads a flush persists under its fence, and the messages the caller knows the session
/// lists already.
#[derive(Debug, Clone, Copy)]
pub struct FlushWrites<'a> {
    /// Parts in their latest state.
    pub parts: &'a [pb::Part],
    /// Message heads (no parts) in their latest state.
    pub heads: &'a [pb::Message],
    /// Messages already listed in the session.
    pub listed: &'a HashSet<String>,
}

/// What a flush writes of one message: its head (when it changed) and its parts.
struct MessageWrite<'a> {
    id: &'a str,
    head: Option<&'a pb::Message>,
    parts: Vec<&'a pb::Part>,
}

/// Parts and heads grouped by message, in order of first appearance (the script writes one HSET per message).
fn group_by_message<'a>(
    session_id: &str,
    parts: &'a [pb::Part],
    heads: &'a [pb::Message],
) -> Result<Vec<MessageWrite<'a>>, StoreError> {
    let mut messages: Vec<MessageWrite<'a>> = Vec::new();
    for h in heads {
        check_id("message id", &h.id)?;
        if h.session_id != session_id || !h.parts.is_empty() {
            return Err(StoreError::InvalidArgument(format!(
                "message {} of session {} is not a head of session {session_id}",
                h.id, h.session_id
            )));
        }
        messages.push(MessageWrite {
            id: &h.id,
            head: Some(h),
            parts: Vec::new(),
        });
    }
    for p in parts {
        check_id("part id", &p.id)?;
        check_id("message id", &p.message_id)?;
        if p.session_id != session_id {
            return Err(StoreError::InvalidArgument(format!(
                "part {} belongs to session {}, not {session_id}",
                p.id, p.session_id
            )));
        }
        match messages.iter_mut().find(|m| m.id == p.message_id) {
            Some(m) => m.parts.push(p),
            None => messages.push(MessageWrite {
                id: &p.message_id,
                head: None,
                parts: vec![p],
            }),
        }
    }
    Ok(messages)
}

/// A message's parts hash as read: (part id, encoded part).
type StoredParts = Vec<(String, Vec<u8>)>;

/// Rebuilds a message from its stored head and its parts hash, parts sorted by id (ids are sortable, so this is
/// their creation order).
fn assemble(
    keys: &SessionKeys,
    message_id: &str,
    head: &[u8],
    mut parts: StoredParts,
) -> Result<pb::Message, StoreError> {
    let mut message =
        pb::Message::decode(head).map_err(|e| StoreError::decode(keys.message(message_id), e))?;
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    message.parts = parts
        .into_iter()
        .map(|(id, bytes)| {
            pb::Part::decode(bytes.as_slice()).map_err(|e| {
                StoreError::decode(format!("part {id} of {}", keys.parts(message_id)), e)
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(message)
}

/// Parses a `list_sessions` cursor, `<score>:<session id>`.
fn parse_session_cursor(cursor: &str) -> Result<(i64, String), StoreError> {
    cursor
        .split_once(':')
        .and_then(|(score, id)| Some((score.parse().ok()?, id)))
        .filter(|(_, id)| !id.is_empty())
        .map(|(score, id)| (score, id.to_string()))
        .ok_or_else(|| StoreError::InvalidArgument(format!("page token {cursor:?}")))
}

/// A stream entry id as XREAD accepts it after STREAMS: `<ms>` or `<ms>-<seq>`.
#[cfg(test)]
fn is_stream_id(s: &str) -> bool {
    s.parse::<EventId>().is_ok()
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
