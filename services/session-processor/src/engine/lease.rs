//! Keeping a loop's lease: the task that renews it beside the run, and when it was last proven.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::events::LoopLease;
use crate::store::Fence;

/// When the loop's lease was last proven (a renewal that succeeded, timed from when it was sent).
#[derive(Clone)]
pub(super) struct LeaseClock(Arc<Mutex<Instant>>);

impl LeaseClock {
    pub(super) fn new() -> LeaseClock {
        LeaseClock(Arc::new(Mutex::new(Instant::now())))
    }

    pub(super) fn proven(&self, sent: Instant) {
        let mut at = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *at = (*at).max(sent);
    }

    pub(super) fn age(&self) -> Duration {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).elapsed()
    }
}

/// How the renewal task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RenewalEnd {
    /// The run ended and stopped it.
    Stopped,
    /// A renewal found the lease no longer held with this run's token: taken over, or released by the run's own
    /// last write a moment before (which only the run's ending tells apart: [`lease_lost`]).
    Refused,
    /// Storage failed for a whole ttl: the lease cannot be proven.
    Unproven,
}

/// Whether a run lost its lease: a renewal was refused and the run did not end by its own fenced `done` write (that
/// write releases the lease, so a renewal on its way at that moment is refused without anything being lost).
pub(super) fn lease_lost(renewal: RenewalEnd, finished_by_own_write: bool) -> bool {
    renewal == RenewalEnd::Refused && !finished_by_own_write
}

/// Renews the lease half its ttl after its last renewal (the event channel's writes renew it too while a step
/// streams: `events::renew_after`). A renewal that fails because storage does is retried; the loop is stopped
/// (`lost`) when the lease is not held with its token any more, or when it has gone unproven for a whole ttl.
pub(super) async fn renew_lease_forever(
    channels: LoopLease,
    ttl: Duration,
    session_id: String,
    fence: Fence,
    lease: LeaseClock,
    lost: CancellationToken,
) -> RenewalEnd {
    let mut failing = false;
    loop {
        let due = if failing {
            (ttl / 10).min(Duration::from_millis(200))
        } else {
            channels.lease_renewal_due(&session_id, ttl)
        };
        tokio::select! {
            _ = lost.cancelled() => return RenewalEnd::Stopped,
            _ = tokio::time::sleep(due) => {}
        }
        let sent = Instant::now();
        // Boxed: the renewal's Redis call is kilobytes of future, and this task sleeps far more than it
        // renews; unboxed, every open session's renewal task would keep room for it.
        match Box::pin(channels.renew_lease(&session_id, &fence, ttl)).await {
            Ok(true) => {
                lease.proven(sent);
                failing = false;
            }
            Ok(false) => {
                // Warned about by the run once it knows how it ended (`lease_lost`).
                lost.cancel();
                return RenewalEnd::Refused;
            }
            Err(e) => {
                failing = true;
                if lease.age() >= ttl {
                    tracing::warn!(message = "lease unproven for its whole ttl; stopping the loop", session_id = %session_id, error = %e);
                    lost.cancel();
                    return RenewalEnd::Unproven;
                }
                tracing::debug!(message = "lease renewal failed; retrying", session_id = %session_id, error = %e);
            }
        }
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
