//! The lease of a loop whose session's channel is open on this replica, as the channel sees it: the channel's writes
//! renew it on the way (see [`super::EventsConfig::renews`]), so the loop's own renewal is due later, and the write
//! that logs the run's end may release it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{HubInner, lock, renew_after};
use crate::store::{Fence, StoreError};

/// The renewal and release of a running loop's lease, through its session's channel. Cheap to clone.
#[derive(Clone)]
pub struct LoopLease {
    pub(super) inner: Arc<HubInner>,
}

impl LoopLease {
    /// How long until the lease of the loop holding the session here needs renewing: [`renew_after`] its last
    /// renewal, counting the ones the channel's writes did on the way (see [`LoopLease::renew_lease`]); [`renew_after`]
    /// when there is no channel or no renewal yet. Tells the channel the ttl, so its writes renew from then on.
    pub fn lease_renewal_due(&self, session_id: &str, ttl: Duration) -> Duration {
        let Some(channel) = self.inner.channel(session_id) else {
            return renew_after(ttl);
        };
        let mut s = lock(&channel.state);
        s.lease_ttl = Some(ttl);
        match s.renewed_at {
            Some(at) => renew_after(ttl).saturating_sub(at.elapsed()),
            None => renew_after(ttl),
        }
    }

    /// Renews the lease of the loop holding `fence` (see [`crate::store::Leases::renew_lease`]), unless a write of the
    /// session's channel renewed it less than [`renew_after`] ago: while a step streams, the window's script extends
    /// the lease as it checks it (one PEXPIRE instead of a renewal script). False when the lease was lost.
    pub async fn renew_lease(
        &self,
        session_id: &str,
        fence: &Fence,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let channel = self.inner.channel(session_id);
        if let Some(channel) = &channel {
            let mut s = lock(&channel.state);
            s.lease_ttl = Some(ttl);
            if s.fence.as_ref() == Some(fence)
                && s.renewed_at
                    .is_some_and(|at| at.elapsed() < renew_after(ttl))
            {
                return Ok(true);
            }
        }
        let started = Instant::now();
        let renewed = self
            .inner
            .store
            .leases()
            .renew_lease(session_id, fence, ttl)
            .await?;
        if renewed && let Some(channel) = channel {
            let mut s = lock(&channel.state);
            if s.fence.as_ref() == Some(fence) {
                s.renewed_at = Some(s.renewed_at.map_or(started, |at| at.max(started)));
            }
        }
        Ok(renewed)
    }

    /// How long ago the lease of the loop holding the session here was last renewed (by the loop or by a write of
    /// the channel); `None` without a channel or a renewal.
    pub fn lease_age(&self, session_id: &str) -> Option<std::time::Duration> {
        let channel = self.inner.channel(session_id)?;
        let s = lock(&channel.state);
        s.renewed_at.map(|at| at.elapsed())
    }

    /// The run's end begins: the events published from now on (the answer's stop reason, the idle status, `done`)
    /// reach this replica's followers only when the channel closes, after the lease is released, or never, when the
    /// write that carries them is refused (the lease moved on: see [`super::Hub::abandon`]). The write that logs them
    /// releases the lease too when no prompt waits and all of it succeeded ([`LoopLease::lease_released`]).
    pub fn hold_from_here(&self, session_id: &str) {
        if let Some(channel) = self.inner.channel(session_id) {
            let mut s = lock(&channel.state);
            if s.hold.is_none() {
                s.hold = Some(s.last.next_at(0));
            }
            s.release_at_end = true;
        }
    }

    /// Whether a write of the session's channel logged the run's end and released the lease with it (no prompt
    /// was queued); otherwise the loop releases the lease itself and looks at the queue.
    pub fn lease_released(&self, session_id: &str) -> bool {
        self.inner
            .channel(session_id)
            .is_some_and(|channel| lock(&channel.state).released)
    }
}
