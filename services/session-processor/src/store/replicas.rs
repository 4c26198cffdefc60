//! Waiting for replicas (`[redis] wait_replicas`, docs/operations.md "Redis Cluster"): the writes whose success a
//! caller is told about are followed by `WAIT <replicas> <timeout>` in the same pipeline, so Redis answers them only
//! once that many replicas have the write (or the timeout passed).
//!
//! Which writes: a prompt's first write (its user message and the lease: the `Prompt` is accepted), a queued
//! prompt, a client tool's result or a permission answer (the RPC returns OK), and each flush of a running loop's
//! event window (its events, parts and messages). Session creation, deletion and record updates are not waited.
//!
//! `WAIT` counts the replicas that acknowledged every write made *on its connection* so far, so it must follow the
//! script on the same connection: the pipeline carries both, and on a cluster it goes whole to the primary owning
//! the script's slot (`WAIT` has no key; `redis_kit::conn::command_slot` says so, and the `redis` crate routes a
//! pipeline by its first keyed command). The shared connection is multiplexed, so the wait also covers other sessions' writes sent
//! before it on that connection, and Redis serves nothing else of that connection while `WAIT` blocks: that
//! head-of-line wait is the option's main cost (docs/benchmarks.md, "Redis Cluster").
//!
//! A short answer (fewer replicas within the timeout) is not a failure: Redis has already applied the write, and
//! refusing it would only make the caller retry a write that is there. It is logged, counted, and `WAIT` is skipped
//! for [`SUSPEND`] so that a replica that is down does not make every acknowledged write pay the full timeout while
//! it holds the shared connection. Then one write waits again, alone (the others keep skipping until it is
//! answered): acknowledged, waiting resumes; short, it is suspended again.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::FromRedisValue;

use super::script_call::{ScriptCall, query_loading};

use super::db::Db;
use super::{StoreError, ceil_millis};

/// How long `WAIT` is skipped after a short answer.
pub const SUSPEND: Duration = Duration::from_secs(1);

/// `[redis] wait_replicas` and `wait_timeout_ms`: how many replicas must acknowledge a write, and for how long Redis
/// waits for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaWait {
    /// Replicas that must have the write (at least 1).
    pub replicas: u32,
    /// How long Redis waits for them (at least 1 ms).
    pub timeout: Duration,
}

/// What the store sent Redis and how its waits went, for the metrics (read with [`Traffic::counts`]).
#[derive(Debug, Default)]
pub struct Traffic {
    requests: AtomicU64,
    acknowledged: AtomicU64,
    short: AtomicU64,
    skipped: AtomicU64,
    log_polls: AtomicU64,
}

/// A reading of [`Traffic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrafficCounts {
    /// Requests on the shared connection: a command or a pipeline (one round trip) each.
    pub requests: u64,
    /// `WAIT`s answered with every replica asked for.
    pub acknowledged: u64,
    /// `WAIT`s answered with fewer (the timeout passed).
    pub short: u64,
    /// Writes sent without `WAIT` because a short answer suspended it ([`SUSPEND`]).
    pub skipped: u64,
    /// Event-log waits that polled because every blocking read was taken ([`super::Store::with_log_waits`]).
    pub log_polls: u64,
}

impl Traffic {
    /// The counts so far.
    pub fn counts(&self) -> TrafficCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TrafficCounts {
            requests: get(&self.requests),
            acknowledged: get(&self.acknowledged),
            short: get(&self.short),
            skipped: get(&self.skipped),
            log_polls: get(&self.log_polls),
        }
    }

    /// One event-log wait polled.
    pub(super) fn log_poll(&self) {
        self.log_polls.fetch_add(1, Ordering::Relaxed);
    }

    /// One request sent.
    pub(super) fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

/// The configured wait and its suspension.
#[derive(Debug)]
pub(super) struct Waiter {
    wait: ReplicaWait,
    /// Until when `WAIT` is skipped (after a short answer).
    suspended_until: Mutex<Option<Instant>>,
}

impl Waiter {
    /// Appends the `WAIT` that follows an acknowledged write.
    fn add_wait(&self, pipe: &mut redis::Pipeline) {
        pipe.cmd("WAIT")
            .arg(self.wait.replicas)
            .arg(ceil_millis(self.wait.timeout));
    }

    pub(super) fn new(wait: ReplicaWait) -> Self {
        Self {
            wait,
            suspended_until: Mutex::new(None),
        }
    }

    /// Whether this write waits (else it counts as skipped). When a suspension has run out, this write probes: the
    /// suspension is extended until its answer, so the writes behind it do not all queue a `WAIT` on the connection.
    fn due(&self, traffic: &Traffic) -> bool {
        let mut until = self
            .suspended_until
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match *until {
            Some(t) if Instant::now() < t => {
                traffic.skipped.fetch_add(1, Ordering::Relaxed);
                false
            }
            Some(_) => {
                *until = Some(Instant::now() + SUSPEND);
                true
            }
            None => true,
        }
    }

    /// Counts `WAIT`'s answer: an acknowledged one ends any suspension; a short one (re)starts it, and the first of
    /// an outage is logged.
    fn record(&self, acked: u64, traffic: &Traffic) {
        let mut until = self
            .suspended_until
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if acked >= u64::from(self.wait.replicas) {
            traffic.acknowledged.fetch_add(1, Ordering::Relaxed);
            *until = None;
            return;
        }
        traffic.short.fetch_add(1, Ordering::Relaxed);
        if until.replace(Instant::now() + SUSPEND).is_none() {
            tracing::warn!(
                message = "Redis replicas did not acknowledge a write in time; the write stands, waiting is suspended",
                acknowledged = acked,
                wanted = self.wait.replicas,
                timeout_ms = self.wait.timeout.as_millis() as u64,
                suspended_ms = SUSPEND.as_millis() as u64,
            );
        }
    }
}

impl Db {
    /// [`Db::invoke_acked`] with `beside` in the same pipeline, after the script (and its `WAIT`): one round trip
    /// for both. On one node only: a cluster client would send a command of another slot to another node.
    pub(super) async fn invoke_acked_beside<T: FromRedisValue, U: FromRedisValue>(
        &self,
        script: ScriptCall<'_>,
        beside: redis::Cmd,
    ) -> Result<(T, U), StoreError> {
        let mut conn = self.conn.clone();
        let waiter = self.waiter.as_deref().filter(|w| w.due(&self.traffic));
        let (body, cmd) = script.into_parts();
        let mut pipe = redis::pipe();
        pipe.add_command(cmd);
        if let Some(waiter) = waiter {
            waiter.add_wait(&mut pipe);
        }
        pipe.add_command(beside);
        let replies: Vec<redis::Value> = query_loading(body, &pipe, &mut conn).await?;
        let mut replies = replies.into_iter();
        let mut next = || {
            replies.next().ok_or_else(|| {
                StoreError::Unexpected("a short reply to the script's pipeline".into())
            })
        };
        let parse = |e: redis::ParsingError| StoreError::Unexpected(e.to_string());
        let value = redis::from_redis_value::<T>(next()?).map_err(parse)?;
        if let Some(waiter) = waiter {
            let acked = redis::from_redis_value::<u64>(next()?).map_err(parse)?;
            waiter.record(acked, &self.traffic);
        }
        let beside = redis::from_redis_value::<U>(next()?).map_err(parse)?;
        Ok((value, beside))
    }

    /// Runs a write script whose success a caller is told about: with a replica wait configured (and not
    /// suspended), `WAIT` follows it in one pipeline on the same connection (see the module docs). A script the node
    /// does not know (`NOSCRIPT`: a restart, a failover) is loaded and the pipeline sent again, as
    /// [`ScriptCall::invoke`] does for a lone script.
    pub(super) async fn invoke_acked<T: FromRedisValue>(
        &self,
        script: &ScriptCall<'_>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.clone();
        let Some(waiter) = self.waiter.as_deref().filter(|w| w.due(&self.traffic)) else {
            return Ok(script.invoke(&mut conn).await?);
        };
        let mut pipe = redis::pipe();
        pipe.add_command(script.cmd().clone());
        waiter.add_wait(&mut pipe);
        let (value, acked): (T, u64) = query_loading(script.script(), &pipe, &mut conn).await?;
        waiter.record(acked, &self.traffic);
        Ok(value)
    }
}

#[cfg(test)]
#[path = "replicas_tests.rs"]
mod tests;
