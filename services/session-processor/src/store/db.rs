//! What every handle of the store shares: the connection (and the pool of blocking ones), the scripts, the key
//! prefix, the counters, and the steps every write takes (the session's keys, the failure count, the scripts'
//! status codes). The write-failure tallies are in `diag`, the replica waits in `replicas`.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::conn::Counted;
use super::keys::SessionKeys;
use super::replicas::{Traffic, Waiter};
use super::{Fence, StoreError, blocking, diag, records, scripts};

/// The shared state behind every handle. Cloned only to change a setting ([`super::Store::with_event_cap`] and
/// the like): a clone shares the connection, the pools, the counters and the records, as the handles do.
#[derive(Clone)]
pub(super) struct Db {
    /// The shared connection, counting requests in `traffic`.
    pub(super) conn: Counted,
    pub(super) prefix: Arc<str>,
    pub(super) scripts: Arc<scripts::Scripts>,
    pub(super) blocking: Arc<blocking::Pool>,
    /// Blocking reads of event logs that may wait at once (see [`super::Store::with_log_waits`]).
    pub(super) log_waits: Arc<tokio::sync::Semaphore>,
    pub(super) event_cap: usize,
    /// Redis commands issued for event logs (see [`super::EventLog::commands`]).
    pub(super) event_commands: Arc<AtomicU64>,
    pub(super) write_failures: Arc<AtomicU64>,
    /// Per-session write failures not yet flushed to Redis (see `diag`).
    pub(super) tallies: Arc<diag::Tallies>,
    /// `[redis] wait_replicas`: `WAIT` after acknowledged writes (see `replicas`).
    pub(super) waiter: Option<Arc<Waiter>>,
    /// Requests sent and waits' outcomes, for the metrics.
    pub(super) traffic: Arc<Traffic>,
    /// What this replica last knew of each session's record (see `records`).
    pub(super) records: Arc<records::Records>,
}

impl Db {
    pub(super) fn keys(&self, session_id: &str) -> Result<SessionKeys, StoreError> {
        SessionKeys::new(&self.prefix, session_id)
    }

    /// Runs a write and counts it in `write_failures` when Redis fails it.
    pub(super) async fn write<T>(
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
    pub(super) fn status(
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
}
