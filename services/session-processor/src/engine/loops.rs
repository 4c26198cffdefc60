//! The loops running on this replica, by session: what `Abort` cancels and what the recovery sweep leaves alone.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio_util::sync::CancellationToken;

use crate::maps::IdMap;

/// The loops running on this replica: per session, the loop's id and the token an abort cancels.
#[derive(Default)]
pub(super) struct Loops {
    running: Mutex<IdMap<String, (u64, CancellationToken)>>,
    /// Ids handed to loops so far: each loop knows its own entry, so a loop ending just as the next one for the
    /// session starts (a prompt that took the released lease) removes only itself.
    started: AtomicU64,
}

impl Loops {
    fn lock(&self) -> std::sync::MutexGuard<'_, IdMap<String, (u64, CancellationToken)>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a loop starting for the session: its id, and the token an abort cancels.
    pub(super) fn start(&self, session_id: &str) -> (u64, CancellationToken) {
        let loop_id = self.started.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        self.lock()
            .insert(session_id.to_string(), (loop_id, token.clone()));
        (loop_id, token)
    }

    /// The loop `loop_id` of the session ended: its entry goes, unless a later loop of the session replaced it.
    pub(super) fn ended(&self, session_id: &str, loop_id: u64) {
        let mut running = self.lock();
        if running
            .get(session_id)
            .is_some_and(|(id, _)| *id == loop_id)
        {
            running.remove(session_id);
        }
    }

    /// Stops the loop running for the session. Returns whether one was running.
    pub(super) fn abort(&self, session_id: &str) -> bool {
        match self.lock().get(session_id) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// A new token for [`Loops::abort`] to cancel the next run of the loop `loop_id` of the session.
    pub(super) fn fresh_abort_token(&self, session_id: &str, loop_id: u64) -> CancellationToken {
        let token = CancellationToken::new();
        if let Some((id, current)) = self.lock().get_mut(session_id)
            && *id == loop_id
        {
            *current = token.clone();
        }
        token
    }

    /// Whether a loop for the session runs here.
    pub(super) fn is_running(&self, session_id: &str) -> bool {
        self.lock().contains_key(session_id)
    }
}
