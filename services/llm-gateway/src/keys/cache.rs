//! Each replica's copy of the keys in Redis. A lookup reads the copy (an atomic pointer load, no Redis round trip);
//! a task polls the epoch counter every [`POLL`] and reloads the table when the epoch moved, so a key created,
//! rotated or revoked on any replica holds on every replica within a poll and a load (well under a second). A
//! change made through this replica's admin API wakes the task at once.
//!
//! While Redis is unreachable the copy stays as it was last loaded (the configuration's keys never depend on
//! Redis); with `[redis] keys_max_staleness_ms` set, run-time keys stop being accepted once the copy is older than
//! that, for deployments that prefer refusing a revoked key's calls to serving them.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio_util::sync::CancellationToken;

use super::KeyTable;
use super::file::RedisSettings;
use super::store::KeyStore;

/// How often the epoch is read.
pub const POLL: Duration = Duration::from_millis(250);
/// How long to wait before connecting again after a failed connection.
const RECONNECT: Duration = Duration::from_secs(1);
/// Bounds of the connection: a slow Redis must not hold the poll up for long.
const TIMEOUTS: redis_kit::Timeouts = redis_kit::Timeouts {
    connect: Duration::from_secs(2),
    response: Duration::from_secs(1),
};

/// What a poll does after reading the epoch (pure, so it is tested without Redis).
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// The copy is of this epoch already.
    Keep,
    /// The epoch moved (or nothing was loaded yet): load the table.
    Reload,
}

/// The decision for a copy loaded at `loaded` (`None`: never) when Redis says `seen`.
pub fn decide(loaded: Option<u64>, seen: u64) -> Next {
    if loaded == Some(seen) {
        Next::Keep
    } else {
        Next::Reload
    }
}

/// Whether a copy last confirmed at `confirmed` may still be used at `now` with `max_staleness` (`None`: always).
pub fn usable(confirmed: Option<Instant>, now: Instant, max_staleness: Option<Duration>) -> bool {
    match (max_staleness, confirmed) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(max), Some(at)) => now.saturating_duration_since(at) <= max,
    }
}

/// The replica's run-time keys.
#[derive(Default)]
pub struct RuntimeKeys {
    table: ArcSwap<KeyTable>,
    store: ArcSwapOption<KeyStore>,
    state: Mutex<Loaded>,
    changed: tokio::sync::Notify,
    max_staleness: Option<Duration>,
}

#[derive(Default)]
struct Loaded {
    /// The epoch the copy is of.
    epoch: Option<u64>,
    /// When Redis last confirmed the copy.
    confirmed: Option<Instant>,
    /// Whether the last poll failed (so a failure is logged once, not every poll).
    failing: bool,
}

impl RuntimeKeys {
    /// An empty copy; `max_staleness` as `[redis] keys_max_staleness_ms`.
    pub fn new(max_staleness: Option<Duration>) -> RuntimeKeys {
        RuntimeKeys {
            max_staleness,
            ..RuntimeKeys::default()
        }
    }

    /// The copy to look keys up in (empty when it is too old to use).
    pub fn table(&self) -> Arc<KeyTable> {
        if self.max_staleness.is_none() {
            return self.table.load_full();
        }
        let confirmed = self.lock().confirmed;
        if usable(confirmed, Instant::now(), self.max_staleness) {
            self.table.load_full()
        } else {
            Arc::default()
        }
    }

    /// The store, once connected.
    pub fn store(&self) -> Option<Arc<KeyStore>> {
        self.store.load_full()
    }

    /// The epoch of the copy (`None` before the first load).
    pub fn epoch(&self) -> Option<u64> {
        self.lock().epoch
    }

    /// Wakes the poller: this replica just changed a key.
    pub fn changed(&self) {
        self.changed.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connects and keeps the copy current until `stop`.
    pub async fn run(self: Arc<Self>, settings: RedisSettings, stop: CancellationToken) {
        loop {
            let wait = match self.store() {
                Some(store) => {
                    self.poll(&store).await;
                    POLL
                }
                None => {
                    match redis_kit::connect(&settings.target, &settings.access, TIMEOUTS).await {
                        Ok((conn, _)) => {
                            self.store
                                .store(Some(Arc::new(KeyStore::new(conn, &settings.prefix))));
                            tracing::info!(
                                message = "keys: connected to redis",
                                mode = settings.target.mode()
                            );
                            continue;
                        }
                        Err(e) => {
                            self.failed("keys: cannot connect to redis; run-time keys wait", &e);
                            RECONNECT
                        }
                    }
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
                () = self.changed.notified() => {}
            }
        }
    }

    /// One poll: the epoch read, and the table loaded when it moved.
    async fn poll(&self, store: &KeyStore) {
        let seen = match store.epoch().await {
            Ok(e) => e,
            Err(e) => {
                return self.failed("keys: cannot read the epoch; keeping the keys loaded", &e);
            }
        };
        if decide(self.epoch(), seen) == Next::Keep {
            self.confirm(seen);
            return;
        }
        match store.load().await {
            Ok(records) => {
                let table = KeyTable::build_lenient(records.iter().filter_map(|r| r.key()));
                let count = table.len();
                self.table.store(Arc::new(table));
                self.confirm(seen);
                tracing::debug!(message = "keys: loaded", epoch = seen, keys = count);
            }
            Err(e) => self.failed("keys: cannot load the keys; keeping the keys loaded", &e),
        }
    }

    fn confirm(&self, epoch: u64) {
        let mut state = self.lock();
        if state.failing {
            tracing::info!(message = "keys: redis answers again");
        }
        *state = Loaded {
            epoch: Some(epoch),
            confirmed: Some(Instant::now()),
            failing: false,
        };
    }

    fn failed(&self, message: &'static str, e: &redis::RedisError) {
        let mut state = self.lock();
        if !state.failing {
            tracing::warn!(message = message, error = %e);
        }
        state.failing = true;
    }
}
