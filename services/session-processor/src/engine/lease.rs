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

/// Renews the lease half its ttl after its last renewal (the event channel's writes renew it too while a step
/// streams: `events::renew_after`). A renewal that fails because storage does is retried; the loop is stopped
/// (`lost`) when the lease belongs to someone else, or when it has gone unproven for a whole ttl.
pub(super) async fn renew_lease_forever(
    channels: LoopLease,
    ttl: Duration,
    session_id: String,
    fence: Fence,
    lease: LeaseClock,
    lost: CancellationToken,
) {
    let mut failing = false;
    loop {
        let due = if failing {
            (ttl / 10).min(Duration::from_millis(200))
        } else {
            channels.lease_renewal_due(&session_id, ttl)
        };
        tokio::select! {
            _ = lost.cancelled() => break,
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
                tracing::warn!(message = "lease lost; stopping the loop", session_id = %session_id);
                lost.cancel();
                break;
            }
            Err(e) => {
                failing = true;
                if lease.age() >= ttl {
                    tracing::warn!(message = "lease unproven for its whole ttl; stopping the loop", session_id = %session_id, error = %e);
                    lost.cancel();
                    break;
                }
                tracing::debug!(message = "lease renewal failed; retrying", session_id = %session_id, error = %e);
            }
        }
    }
}
