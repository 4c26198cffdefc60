//! What the Diagnose API and the live status need from Redis beyond messages and parts: the retry status of a loop
//! waiting to retry a step, the active-set membership, and each session's storage write failures.
//!
//! # Retry status
//!
//! While a loop waits before retrying a failed step it stores the status (`attempt`, `next_attempt_at`, the error's
//! message) in `…{sess:<id>}:retrystatus`, tagged with its lease value (`<owner>:<token>`). The status counts only
//! while that exact lease is still held: a loop that died mid-wait leaves a status that no reader believes (and that
//! expires with the wait), so a successor's loop is never reported as retrying. The loop clears it when the attempt
//! starts and when it ends.
//!
//! # Per-session write failures
//!
//! [`super::Store::write_failures`] counts failed writes of the whole replica. Each failed write of a session is also
//! tallied in memory by session (count, time, message with credentials removed). A write that fails usually means
//! Redis is unreachable, so the tally cannot be stored at that moment: it is flushed to `…{sess:<id>}:writefailures`
//! by the next write of that session that succeeds (the loop writes at every step boundary and at its end, so that
//! is soon after Redis is back). Readers add the tally not yet flushed on their own replica. What a replica had not
//! flushed when it died is lost; the replica-wide counter and the logs still have it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use llm_proto::sessions as pb;
use prost::Message as _;
use redis::Script;

use super::db::Db;
use super::script_call::ScriptCall;
use super::{Fence, StoreError};

/// Sessions whose unflushed tallies a replica keeps at most; failures of further sessions still count in the
/// replica-wide counter. Bounds memory when Redis stays down while many sessions run.
const MAX_TALLIES: usize = 10_000;
/// Longest stored failure message.
const MAX_MESSAGE: usize = 500;

/// KEYS: session, lease, retry status. ARGV: fence value, status bytes, ttl ms.
static SET_RETRY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[3], 'lease', ARGV[1], 's', ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
",
    )
});

/// KEYS: retry status. ARGV: fence value. Deletes the status only when that lease wrote it.
static CLEAR_RETRY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
",
    )
});

/// KEYS: session, write failures. ARGV: count, at ms, message. The newest failure's time and message win.
static FLUSH_FAILURES: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
redis.call('HINCRBY', KEYS[2], 'count', ARGV[1])
local at = tonumber(redis.call('HGET', KEYS[2], 'at_ms') or '0')
if tonumber(ARGV[2]) >= at then
  redis.call('HSET', KEYS[2], 'at_ms', ARGV[2], 'message', ARGV[3])
end
return 1
",
    )
});

/// A session's lease value and its stored retry status (`lease` and `s` fields), as read together.
type LeaseAndStatus = (Option<String>, (Option<String>, Option<Vec<u8>>));

/// A session's storage write failures: how many, when the last one happened and what it said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteFailures {
    /// Failed writes.
    pub count: u64,
    /// When the last one happened, in milliseconds since the Unix epoch (0 when none).
    pub last_at_ms: i64,
    /// The last one's error, credentials removed.
    pub last_message: String,
}

impl WriteFailures {
    /// Adds `other`, keeping the newer of the two last failures.
    fn merge(&mut self, other: &WriteFailures) {
        self.count += other.count;
        if other.count > 0 && other.last_at_ms >= self.last_at_ms {
            self.last_at_ms = other.last_at_ms;
            self.last_message.clone_from(&other.last_message);
        }
    }
}

/// Per-session tallies of write failures not yet flushed to Redis.
#[derive(Debug, Default)]
pub(super) struct Tallies {
    /// Number of sessions with a tally, so the write path can skip the lock when there is nothing to flush.
    pending: AtomicUsize,
    by_session: Mutex<HashMap<String, WriteFailures>>,
}

impl Tallies {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, WriteFailures>> {
        self.by_session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one failure of `session_id`.
    pub(super) fn record(&self, session_id: &str, at_ms: i64, message: &str) {
        self.add(
            session_id,
            &WriteFailures {
                count: 1,
                last_at_ms: at_ms,
                last_message: message.to_string(),
            },
        );
    }

    fn add(&self, session_id: &str, failures: &WriteFailures) {
        let mut map = self.lock();
        if let Some(t) = map.get_mut(session_id) {
            t.merge(failures);
        } else if map.len() < MAX_TALLIES {
            map.insert(session_id.to_string(), failures.clone());
            self.pending.store(map.len(), Ordering::Relaxed);
        }
    }

    /// Whether anything is waiting to be flushed for `session_id` (lock-free when nothing is waiting at all).
    fn has(&self, session_id: &str) -> bool {
        self.pending.load(Ordering::Relaxed) > 0 && self.lock().contains_key(session_id)
    }

    /// Takes the tally of `session_id` out for flushing.
    fn take(&self, session_id: &str) -> Option<WriteFailures> {
        let mut map = self.lock();
        let taken = map.remove(session_id);
        self.pending.store(map.len(), Ordering::Relaxed);
        taken
    }

    /// The unflushed tally of `session_id`.
    fn peek(&self, session_id: &str) -> WriteFailures {
        self.lock().get(session_id).cloned().unwrap_or_default()
    }
}

/// An error message fit to store and show: URL credentials (`//user:password@`) removed, bounded length.
pub(super) fn redact(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find("//") {
        let (head, tail) = rest.split_at(i + 2);
        out.push_str(head);
        // The authority ends at the first `/`, whitespace or quote; credentials are what precedes an `@` in it.
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => {
                out.push_str("***@");
                rest = &tail[at + 1..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    match out.char_indices().nth(MAX_MESSAGE) {
        Some((i, _)) => {
            out.truncate(i);
            out.push('…');
            out
        }
        None => out,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The live status of a session from its lease and its stored retry status: RETRY while the loop that stored the
/// status still holds the lease, BUSY while anyone holds it, IDLE otherwise.
fn live(
    lease: Option<&str>,
    lease_field: Option<&str>,
    status: Option<&[u8]>,
) -> pb::SessionStatus {
    let Some(lease) = lease else {
        return pb::SessionStatus {
            kind: pb::session_status::Kind::Idle as i32,
            ..Default::default()
        };
    };
    if lease_field == Some(lease)
        && let Some(s) = status.and_then(|b| pb::SessionStatus::decode(b).ok())
        && s.kind() == pb::session_status::Kind::Retry
    {
        return s;
    }
    pb::SessionStatus {
        kind: pb::session_status::Kind::Busy as i32,
        ..Default::default()
    }
}

impl Db {
    /// Runs a write of `session_id`: counts a Redis failure in [`super::Store::write_failures`] and in the session's
    /// tally, and after a success flushes the session's unflushed tally (see the module docs).
    pub(super) async fn write_session<T>(
        &self,
        session_id: &str,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let result = self.write(op).await;
        match &result {
            Err(e) if e.is_transport() => {
                self.tallies
                    .record(session_id, now_ms(), &redact(&e.to_string()));
            }
            Ok(_) if self.tallies.has(session_id) => {
                Box::pin(self.flush_write_failures(session_id)).await
            }
            _ => {}
        }
        result
    }

    /// Stores a session's unflushed tally; on failure it is put back for the next success. A deleted session's
    /// tally is dropped.
    async fn flush_write_failures(&self, session_id: &str) {
        let Some(tally) = self.tallies.take(session_id) else {
            return;
        };
        let Ok(keys) = self.keys(session_id) else {
            return;
        };
        let result: Result<i64, redis::RedisError> =
            ScriptCall::new(&FLUSH_FAILURES, [keys.session(), keys.write_failures()])
                .arg(tally.count)
                .arg(tally.last_at_ms)
                .arg(&tally.last_message)
                .invoke(&mut self.conn.clone())
                .await;
        match result {
            // Stored, or the session is gone (deleted) and its tally with it.
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(session_id = %session_id, error = %e, "write failures not flushed yet");
                self.tallies.add(session_id, &tally);
            }
        }
    }
}

/// The live status of sessions and their storage write failures (see the module docs).
#[derive(Clone)]
pub struct Statuses {
    pub(super) db: Arc<Db>,
}

impl Statuses {
    /// A session's storage write failures: what was flushed to Redis plus what this replica has not flushed yet.
    pub async fn session_write_failures(
        &self,
        session_id: &str,
    ) -> Result<WriteFailures, StoreError> {
        let keys = self.db.keys(session_id)?;
        let (count, at_ms, message): (Option<u64>, Option<i64>, Option<String>) =
            redis::cmd("HMGET")
                .arg(keys.write_failures())
                .arg("count")
                .arg("at_ms")
                .arg("message")
                .query_async(&mut self.db.conn.clone())
                .await?;
        let mut failures = WriteFailures {
            count: count.unwrap_or(0),
            last_at_ms: at_ms.unwrap_or(0),
            last_message: message.unwrap_or_default(),
        };
        failures.merge(&self.db.tallies.peek(session_id));
        Ok(failures)
    }

    /// Stores the retry status of the loop holding `fence` while it waits `wait` before the next attempt. Expires a
    /// little after the wait, so a loop that dies mid-wait leaves nothing behind for long.
    pub async fn set_retry_status(
        &self,
        session_id: &str,
        status: &pb::SessionStatus,
        fence: &Fence,
        wait: Duration,
    ) -> Result<(), StoreError> {
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                let ttl = super::ceil_millis(wait.saturating_add(Duration::from_secs(60)));
                let code: i64 = ScriptCall::new(
                    &SET_RETRY,
                    [keys.session(), keys.lease(), keys.retry_status()],
                )
                .arg(fence.lease_value())
                .arg(status.encode_to_vec())
                .arg(ttl)
                .invoke(&mut self.db.conn.clone())
                .await?;
                Db::status(code, session_id, Some(fence), String::new)
            })
            .await
    }

    /// Clears the retry status `fence` stored (the attempt starts, or the loop ends); a status stored under another
    /// lease is left alone.
    pub async fn clear_retry_status(
        &self,
        session_id: &str,
        fence: &Fence,
    ) -> Result<(), StoreError> {
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                let _: i64 = ScriptCall::new(&CLEAR_RETRY, [keys.retry_status()])
                    .arg(fence.lease_value())
                    .invoke(&mut self.db.conn.clone())
                    .await?;
                Ok(())
            })
            .await
    }

    /// What the session is doing: RETRY (with attempt, next attempt time and error) while its loop waits to retry a
    /// step, BUSY while a loop holds the lease, IDLE otherwise. Lease and status are read in one atomic step.
    pub async fn live_status(&self, session_id: &str) -> Result<pb::SessionStatus, StoreError> {
        let keys = self.db.keys(session_id)?;
        let (lease, (lease_field, status)): LeaseAndStatus = redis::pipe()
            .atomic()
            .cmd("GET")
            .arg(keys.lease())
            .cmd("HMGET")
            .arg(keys.retry_status())
            .arg("lease")
            .arg("s")
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(live(
            lease.as_deref(),
            lease_field.as_deref(),
            status.as_deref(),
        ))
    }

    /// [`Statuses::live_status`] of several sessions in one round trip (not atomic across sessions: they live in
    /// different slots).
    pub async fn live_statuses(
        &self,
        session_ids: &[&str],
    ) -> Result<Vec<pb::SessionStatus>, StoreError> {
        if session_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in session_ids {
            let keys = self.db.keys(id)?;
            pipe.cmd("GET")
                .arg(keys.lease())
                .cmd("HMGET")
                .arg(keys.retry_status())
                .arg("lease")
                .arg("s");
        }
        let replies: Vec<LeaseAndStatus> = {
            let values: Vec<redis::Value> = pipe.query_async(&mut self.db.conn.clone()).await?;
            let mut out = Vec::with_capacity(session_ids.len());
            let mut values = values.into_iter();
            while let (Some(lease), Some(status)) = (values.next(), values.next()) {
                out.push((
                    redis::from_redis_value(lease)
                        .map_err(|e| StoreError::Unexpected(e.to_string()))?,
                    redis::from_redis_value(status)
                        .map_err(|e| StoreError::Unexpected(e.to_string()))?,
                ));
            }
            out
        };
        if replies.len() != session_ids.len() {
            return Err(StoreError::Unexpected("short pipeline reply".into()));
        }
        Ok(replies
            .iter()
            .map(|(lease, (field, status))| {
                live(lease.as_deref(), field.as_deref(), status.as_deref())
            })
            .collect())
    }
}

#[cfg(test)]
#[path = "diag_tests.rs"]
mod tests;
