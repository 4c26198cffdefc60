//! The loop's driver: a task per running session that holds the lease (renewed in the background), opens the run,
//! asks the policy ([`super::policy`]) what to do and has [`Actions`] perform it, until the policy ends the run; then
//! the run's end (the lease released, the active mark removed, the session's channel closed), and the next run while
//! prompts wait. Every decision is the policy's; this file only does I/O and turns its outcomes (including storage
//! errors) into observations.

use std::sync::Arc;
use std::time::Instant;

use llm_proto::sessions as pb;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::actions::{Actions, Run, answer_message};
use super::inputs::RunInputs;
use super::lease::{LeaseClock, RenewalEnd, lease_lost, renew_lease_forever};
use super::loops::Loops;
use super::persist::{LoopWrites, done};
use super::policy::{Action, Answer, LoopState, Observation, Rules, StopReason};
use super::totals::RunCaches;
use super::{Carried, LoopError};
use crate::config::Config;
use crate::events::{Hub, LoopLease};
use crate::ids;
use crate::metrics::Metrics;
use crate::snapshot::StepSnapshots;
use crate::store::{ActiveMark, ActiveSet, Fence, Leases, Sessions, Statuses, StoreError};

/// What a prompt's fast path already read for the loop's first iteration (see `Prompts::begin_prompt`).
#[derive(Debug)]
pub(super) struct Prefetched {
    /// The whole history when the lease was taken.
    pub history: Vec<pb::Message>,
}

/// How a run ended.
enum Ending {
    /// `done` was published; the lease can be released.
    Finished,
    /// The lease cannot be proven: the session stays active for recovery.
    HandedOff,
    /// The session is gone.
    Abandoned,
}

/// What a loop's first run starts from: the session record the caller read, the prompt's inputs, what the prompt's
/// fast path read ahead. A run started for a prompt queued meanwhile starts from nothing (the default).
#[derive(Default)]
pub(super) struct LoopStart {
    session: Option<Carried>,
    inputs: RunInputs,
    prefetched: Option<Prefetched>,
    /// The id of the run whose active mark the caller set already (the fast path, a resume).
    marked: Option<String>,
}

impl LoopStart {
    /// Moved out of its box, which is freed now (moved out in place, a parameter's box stays until the run ends).
    fn unboxed(self: Box<Self>) -> LoopStart {
        *self
    }
}

/// Runs the loops of this replica, one task per running session.
pub(super) struct Driver {
    pub(super) config: Arc<Config>,
    /// This replica's lease owner id.
    pub(super) owner: Arc<str>,
    pub(super) metrics: Arc<Metrics>,
    /// The session's channel, opened for a run and closed after it.
    pub(super) events: Hub,
    pub(super) loop_lease: LoopLease,
    pub(super) sessions: Sessions,
    pub(super) leases: Leases,
    pub(super) active: ActiveSet,
    pub(super) statuses: Statuses,
    pub(super) loops: Arc<Loops>,
    pub(super) caches: Arc<RunCaches>,
    pub(super) writes: Arc<LoopWrites>,
    pub(super) actions: Actions,
}

impl Driver {
    /// Runs the session's loop under `fence` on a task of its own; `session` is the record the caller just read
    /// (the first run uses it instead of reading it again), `None` to have the loop read it.
    pub(super) fn spawn(
        self: &Arc<Self>,
        session_id: String,
        session: Option<Carried>,
        fence: Fence,
        inputs: RunInputs,
        prefetched: Option<Prefetched>,
        marked: Option<String>,
    ) {
        let (loop_id, token) = self.loops.start(&session_id);
        let driver = Arc::clone(self);
        // One box for what only the run's start reads: unboxed, the loop's future (alive as long as the session
        // streams) would keep a copy of each at every level it passes through.
        let start = Box::new(LoopStart {
            session,
            inputs,
            prefetched,
            marked,
        });
        // The loop's span: a child of the current span, the gRPC server span of the call that starts the loop
        // (`Prompt`, `Compact`), which took the caller's trace context. A loop the recovery sweep resumed starts a
        // trace of its own (the caller's context is not kept with the run).
        let span = tracing::info_span!(
            target: llm_telemetry::TRACE_SPAN_TARGET,
            "session.prompt",
            "otel.name" = "invoke_agent",
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.agent.name" = tracing::field::Empty,
            "gen_ai.conversation.id" = %session_id,
            "session.id" = %session_id,
        );
        tokio::spawn(
            async move {
                driver.metrics.loop_started();
                driver
                    .run_until_idle(&session_id, start, fence, (loop_id, token))
                    .await;
                driver.loops.ended(&session_id, loop_id);
                driver.metrics.loop_ended();
            }
            .instrument(span),
        );
    }

    /// Runs loops for the session until no prompt is queued: a prompt queued between a loop's last check and its
    /// release would otherwise wait for ever.
    async fn run_until_idle(
        &self,
        session_id: &str,
        start: Box<LoopStart>,
        mut fence: Fence,
        (loop_id, mut token): (u64, CancellationToken),
    ) {
        // The first run starts from what the caller had; the next ones (prompts queued meanwhile) from nothing.
        let mut start = Some(start);
        loop {
            Box::pin(self.open_events(session_id, &fence)).await;
            let mut this = start.take().unwrap_or_default();
            // A prompt's fast path, or a resume, marked the run already.
            let mark = match this.marked.take() {
                Some(run) => ActiveMark::of(session_id, &run),
                None => {
                    let run = ids::new("run");
                    if let Err(e) = Box::pin(self.active.mark_active(session_id, &run)).await {
                        tracing::warn!(message = "cannot mark the session active", session_id = %session_id, error = %e);
                    }
                    ActiveMark::of(session_id, &run)
                }
            };
            let ending = self.run(session_id, this, &fence, &token).await;
            // Only its flag is kept: the cache itself (half a kilobyte) is dropped here, not held by the loop's future
            // across the awaits below for the session's whole life.
            let retry_status = self.caches.forget(session_id).retry_status;
            if !matches!(ending, Ending::Finished | Ending::Abandoned) {
                // Handed off: the session stays active (so a recovery sweep finds it once its lease expires) and
                // the lease is left to expire.
                return;
            }
            let queued = Box::pin(self.end_run(session_id, &fence, retry_status, &mark)).await;
            if matches!(ending, Ending::Abandoned) || !queued {
                return;
            }
            if token.is_cancelled() {
                // An abort stops the run it reached. The prompts queued behind it are still answered, by the run
                // that follows (their callers' streams wait for those answers); an abort reaches that run too.
                token = self.loops.fresh_abort_token(session_id, loop_id);
            }
            match Box::pin(self.leases.acquire_lease(
                session_id,
                &self.owner,
                self.config.lease_ttl,
            ))
            .await
            {
                Ok(Some(f)) => fence = f,
                _ => return,
            }
        }
    }

    /// After a loop ended (`done` published): the lease released (usually by the write that logged `done`, when no
    /// prompt was queued; else here), the run's mark removed, this replica's streams get `done`. Whether prompts wait.
    async fn end_run(
        &self,
        session_id: &str,
        fence: &Fence,
        retry_status: bool,
        mark: &ActiveMark,
    ) -> bool {
        let queued = if self.loop_lease.lease_released(session_id) {
            false
        } else {
            let statuses = &self.statuses;
            if retry_status {
                let _ = statuses.clear_retry_status(session_id, fence).await;
            }
            // A prompt queued between the loop's last check and the release would otherwise wait for ever.
            self.leases
                .release_lease_and_peek(session_id, fence)
                .await
                .unwrap_or(false)
        };
        // The run's own mark, after the release: a prompt that took the lease meanwhile marked its own run. A
        // replica dying in between leaves a mark without a lease, which the recovery sweep resumes: the run finds
        // nothing to do and ends again.
        let _ = self.active.clear_active(mark).await;
        // `done` was written to the log when published (before the release, so a successor's ids follow it); this
        // replica's streams get it now that the session is idle.
        self.close_events(session_id).await;
        queued
    }

    /// Opens the session's event channel on this replica for the loop holding `fence` (its loop runs here from now
    /// on). On failure the loop's events go straight to Redis, one command each, and its parts are written by
    /// `put_part` (streamed text at the part's end), which is slower but loses nothing.
    pub(super) async fn open_events(&self, session_id: &str, fence: &Fence) {
        if let Err(e) = self.events.open_fenced(session_id, fence).await {
            tracing::warn!(message = "cannot open the session's event channel; publishing directly", session_id = %session_id, error = %e);
        }
    }

    /// Writes the session's remaining events and closes its channel (the loop is over and its lease released).
    pub(super) async fn close_events(&self, session_id: &str) {
        if let Err(e) = self.events.close(session_id).await {
            tracing::warn!(message = "cannot write the session's last events", session_id = %session_id, error = %e);
        }
    }

    /// One loop under the lease: sets the run up, renews the lease beside it, and drives the policy.
    async fn run(
        &self,
        session_id: &str,
        start: Box<LoopStart>,
        fence: &Fence,
        abort: &CancellationToken,
    ) -> Ending {
        let LoopStart {
            session,
            inputs,
            prefetched,
            ..
        } = start.unboxed();
        let lost = abort.child_token();
        let lease = LeaseClock::new();
        let renew = tokio::spawn(renew_lease_forever(
            self.loop_lease.clone(),
            self.config.lease_ttl,
            session_id.to_string(),
            fence.clone(),
            lease.clone(),
            lost.clone(),
        ));
        // Boxed (as the loop's end below), in a block of its own: the open's result and the run it holds would
        // otherwise stay in this future, twice, for as long as the run lasts.
        let opened = {
            Box::pin(self.open_run(session_id, session, fence, inputs, abort, &lost, &lease))
                .await
                .map(|run| run.map(Box::new))
        };
        let ending = match opened {
            Ok(Some(mut run)) => {
                run.inputs_saved = prefetched.is_some();
                run.prefetched = prefetched;
                self.drive(&mut run).await
            }
            Ok(None) => self.abandon(session_id, None, StopReason::Error),
            Err(e) => Box::pin(self.cannot_start(session_id, e, fence)).await,
        };
        lost.cancel();
        let renewal = renew.await.unwrap_or(RenewalEnd::Stopped);
        if lease_lost(
            renewal,
            matches!(ending, Ending::Finished | Ending::Abandoned),
        ) {
            tracing::warn!(message = "lease lost; the loop stopped", session_id = %session_id);
        }
        ending
    }

    /// A loop that could not start (its agent is gone): the error published, and the loop ended.
    async fn cannot_start(&self, session_id: &str, e: LoopError, fence: &Fence) -> Ending {
        tracing::error!(message = "session loop cannot start", session_id = %session_id, error = %e);
        let error = pb::MessageError {
            kind: pb::message_error::Kind::Api as i32,
            message: format!("session loop cannot start: {e}"),
            http_status: 0,
            retryable: !matches!(e, LoopError::NotFound(_)),
        };
        let _ = self.writes.publish_error(session_id, error).await;
        match self
            .writes
            .finish(session_id, None, StopReason::Error, fence)
            .await
        {
            Ok(()) => Ending::Finished,
            Err(_) => self.hand_off(session_id, None),
        }
    }

    /// Everything a run needs before its first action; `None` when the session no longer exists.
    #[allow(clippy::too_many_arguments)]
    async fn open_run(
        &self,
        session_id: &str,
        session: Option<Carried>,
        fence: &Fence,
        inputs: RunInputs,
        abort: &CancellationToken,
        lost: &CancellationToken,
        lease: &LeaseClock,
    ) -> Result<Option<Run>, LoopError> {
        // The record the prompt (or resume) just read, else read now; carried from here on (see `RunCache`).
        let (session, bytes) = match session {
            Some(carried) => carried,
            None => match self.sessions.get_session_record(session_id).await? {
                Some((s, b)) => (s, Some(b)),
                None => return Ok(None),
            },
        };
        self.caches.with(session_id, |s| {
            s.session = Some(session.clone());
            s.session_bytes = bytes;
        });
        let agent = super::agent(&self.config, &session.agent)
            .cloned()
            .ok_or_else(|| LoopError::NotFound(format!("agent {}", session.agent)))?;
        // On the loop's `invoke_agent` span, the current one here.
        llm_telemetry::record_present(&tracing::Span::current(), "gen_ai.agent.name", &agent.name);
        self.writes
            .status(session_id, pb::session_status::Kind::Busy)
            .await?;
        let workspace = super::workspace(&self.config, &session);
        let snapshots = StepSnapshots::new(
            &self.config.snapshots,
            self.metrics.clone(),
            &session,
            workspace.as_ref(),
        );
        Ok(Some(Run {
            session,
            agent,
            fence: fence.clone(),
            inputs,
            inputs_saved: false,
            abort: abort.clone(),
            lost: lost.clone(),
            lease: lease.clone(),
            started: Instant::now(),
            history: Vec::new(),
            current: None,
            model: String::new(),
            workspace,
            snapshots,
            titled: false,
            steps: 0,
            prefetched: None,
        }))
    }

    /// Asks the policy what to do until the loop ends.
    async fn drive(&self, run: &mut Run) -> Ending {
        let rules = Rules {
            max_steps: run.agent.max_steps,
            auto_compact: run.agent.auto_compact,
            retry: run.agent.retry,
            step_deadline: self.config.step_timeout,
            lease_ttl: self.config.lease_ttl,
        };
        let mut state = LoopState::new(rules, run.inputs.compact);
        let mut observation = Observation::Started;
        loop {
            let action = state.next(observation, run.started.elapsed());
            tracing::trace!(message = "loop action", session_id = %run.session.id, action = ?action);
            observation = match action {
                Action::Finish {
                    answer,
                    reason,
                    report_error,
                } => {
                    // Ending again after a failure, and a retried write already logged the end and released the
                    // lease: the run is over.
                    if self.loop_lease.lease_released(&run.session.id) {
                        return Ending::Finished;
                    }
                    // The answer's message is made inside the boxed future: held by this one, it would widen the
                    // loop's future by its size for the session's whole life.
                    let finished: &Run = run;
                    let ended = async move {
                        let message = answer_message(finished, answer.as_ref());
                        let error = message
                            .as_ref()
                            .and_then(|m| m.error.clone())
                            .filter(|_| report_error);
                        let (session_id, fence) = (&finished.session.id, &finished.fence);
                        if let Some(e) = error {
                            self.writes.publish_error(session_id, e).await?;
                        }
                        self.writes
                            .finish(session_id, message.as_ref(), reason, fence)
                            .await
                    };
                    match Box::pin(ended).await {
                        Ok(()) => return Ending::Finished,
                        Err(e) => self.failure(run, e),
                    }
                }
                Action::HandOff { answer } => {
                    return self.hand_off(&run.session.id, answer.as_ref());
                }
                Action::Abandon => {
                    return self.abandon(&run.session.id, None, StopReason::Error);
                }
                action => match self.interrupted(run, &action) {
                    Some(o) => o,
                    // Not boxed as a whole: `perform` boxes each action at that action's own size, so its future
                    // stays small, and a budget check does not allocate and copy room for a streaming step.
                    None => match self.actions.perform(run, action).await {
                        Ok(o) => o,
                        Err(e) => self.failure(run, e),
                    },
                },
            };
        }
    }

    /// The observation when the loop was stopped before an action that needs it running: the caller's abort, or
    /// the lease's loss. Ending the loop (`Fail`, `Finish`) goes on after an abort.
    fn interrupted(&self, run: &Run, action: &Action) -> Option<Observation> {
        if !run.lost.is_cancelled() {
            return None;
        }
        if !run.abort.is_cancelled() {
            return Some(Observation::LeaseLost);
        }
        (!matches!(action, Action::Fail { .. })).then_some(Observation::Cancelled)
    }

    /// What a failed action means to the policy.
    fn failure(&self, run: &Run, e: LoopError) -> Observation {
        let lease_age = self
            .loop_lease
            .lease_age(&run.session.id)
            .map_or(run.lease.age(), |a| a.min(run.lease.age()));
        match e {
            LoopError::Store(StoreError::Fenced { .. }) => Observation::LeaseLost,
            LoopError::Store(StoreError::NotFound(_)) | LoopError::NotFound(_) => Observation::Gone,
            LoopError::Store(e) => {
                tracing::warn!(message = "storage failed under the loop", session_id = %run.session.id, error = %e, lease_age_ms = lease_age.as_millis() as u64);
                Observation::StorageFailed { lease_age }
            }
            LoopError::Precondition(_) | LoopError::Stale => {
                tracing::error!(message = "unexpected loop failure", session_id = %run.session.id, error = %e);
                Observation::Gone
            }
        }
    }

    /// Leaves the session to recovery: this replica's streams end with a `done` that says so; nothing more is
    /// written (storage cannot prove the lease, or someone else holds it). Unless the run's end is written already:
    /// a retried write of it released the lease after the loop took the first attempt for failed, so the lease is
    /// gone because the run finished.
    fn hand_off(&self, session_id: &str, answer: Option<&Answer>) -> Ending {
        if self.loop_lease.lease_released(session_id) {
            return Ending::Finished;
        }
        tracing::warn!(message = "the loop cannot prove its lease; the session is left to recovery", session_id = %session_id);
        self.events.abandon(
            session_id,
            pb::session_event::Event::Done(done(answer, StopReason::HandedOff)),
        );
        Ending::HandedOff
    }

    /// Ends the streams of a session that no longer exists.
    fn abandon(&self, session_id: &str, answer: Option<&Answer>, reason: StopReason) -> Ending {
        self.events.abandon(
            session_id,
            pb::session_event::Event::Done(done(answer, reason)),
        );
        Ending::Abandoned
    }
}
