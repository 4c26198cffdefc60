//! The loop's driver: a task per running session that holds the lease (renewed in the background), asks the
//! policy ([`super::policy`]) what to do, performs it, and reports back what happened. Every decision is the
//! policy's; this file only does I/O and turns its outcomes (including storage errors) into observations.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_proto::sessions as pb;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::compact::Compacted;
use super::inputs::RunInputs;
use super::lease::LeaseClock;
use super::orphans::open_client_calls;
use super::persist::done;
use super::policy::{
    Action, Answer, CompactionEnd, HistoryFacts, LoopState, Observation, Rules, StopReason, WaitFor,
};
use super::step::StepInput;
use super::totals::history_totals;
use super::{Carried, Engine, LoopError};
use crate::config::Agent;
use crate::history;
use crate::ids;
use crate::snapshot::StepSnapshots;
use crate::store::{ActiveMark, Fence, StoreError};
use crate::tools::Workspace;

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

/// One run of a session's loop on this replica: what the actions need between them.
struct Run {
    session: pb::Session,
    agent: Arc<Agent>,
    fence: Fence,
    inputs: RunInputs,
    inputs_saved: bool,
    /// The caller's abort.
    abort: CancellationToken,
    /// Cancelled by an abort or when the lease is lost.
    lost: CancellationToken,
    lease: LeaseClock,
    started: Instant,
    /// The history from the last completed compaction on, as last read.
    history: Vec<pb::Message>,
    /// The answer in progress (or last produced), as last written.
    current: Option<pb::Message>,
    /// The model of the next step, as the policy last got it.
    model: String,
    workspace: Option<Workspace>,
    snapshots: Option<StepSnapshots>,
    titled: bool,
    /// What the prompt's fast path read, for the first iteration.
    prefetched: Option<Prefetched>,
    /// Model steps started in this run, for the steps' spans.
    steps: u32,
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

impl Engine {
    /// Runs the session's loop under `fence` on a task of its own; `session` is the record the caller just read
    /// (the first run uses it instead of reading it again), `None` to have the loop read it.
    pub(super) fn spawn_loop(
        self: &Arc<Self>,
        session_id: String,
        session: Option<Carried>,
        fence: Fence,
        inputs: RunInputs,
        prefetched: Option<Prefetched>,
        marked: Option<String>,
    ) {
        static LOOPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        // Each loop knows its own entry, so a loop ending just as the next one for the session starts (a prompt
        // that took the released lease) removes only itself.
        let loop_id = LOOPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session_id.clone(), (loop_id, token.clone()));
        let engine = Arc::clone(self);
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
                engine.metrics.loop_started();
                engine
                    .run_until_idle(&session_id, start, fence, (loop_id, token))
                    .await;
                {
                    let mut running = engine.running.lock().unwrap_or_else(|p| p.into_inner());
                    if running
                        .get(&session_id)
                        .is_some_and(|(id, _)| *id == loop_id)
                    {
                        running.remove(&session_id);
                    }
                }
                engine.metrics.loop_ended();
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
                    if let Err(e) =
                        Box::pin(self.store.active().mark_active(session_id, &run)).await
                    {
                        tracing::warn!(message = "cannot mark the session active", session_id = %session_id, error = %e);
                    }
                    ActiveMark::of(session_id, &run)
                }
            };
            let ending = self.run(session_id, this, &fence, &token).await;
            // Only its flag is kept: the cache itself (half a kilobyte) is dropped here, not held by the loop's future
            // across the awaits below for the session's whole life.
            let retry_status = self.forget_cache(session_id).retry_status;
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
                token = self.fresh_abort_token(session_id, loop_id);
            }
            match Box::pin(self.store.leases().acquire_lease(
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
            let statuses = self.store.statuses();
            if retry_status {
                let _ = statuses.clear_retry_status(session_id, fence).await;
            }
            // A prompt queued between the loop's last check and the release would otherwise wait for ever.
            self.store
                .leases()
                .release_lease_and_peek(session_id, fence)
                .await
                .unwrap_or(false)
        };
        // The run's own mark, after the release: a prompt that took the lease meanwhile marked its own run. A
        // replica dying in between leaves a mark without a lease, which the recovery sweep resumes: the run finds
        // nothing to do and ends again.
        let _ = self.store.active().clear_active(mark).await;
        // `done` was written to the log when published (before the release, so a successor's ids follow it); this
        // replica's streams get it now that the session is idle.
        self.close_events(session_id).await;
        queued
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
        let renew = tokio::spawn(self.renew_lease_forever(
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
        let _ = renew.await;
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
        let _ = self.publish_error(session_id, error).await;
        match self
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
            None => match self.store.sessions().get_session_record(session_id).await? {
                Some((s, b)) => (s, Some(b)),
                None => return Ok(None),
            },
        };
        self.with_cache(session_id, |s| {
            s.session = Some(session.clone());
            s.session_bytes = bytes;
        });
        let agent = self
            .agent(&session.agent)
            .cloned()
            .ok_or_else(|| LoopError::NotFound(format!("agent {}", session.agent)))?;
        // On the loop's `invoke_agent` span, the current one here.
        llm_telemetry::record_present(&tracing::Span::current(), "gen_ai.agent.name", &agent.name);
        self.status(session_id, pb::session_status::Kind::Busy)
            .await?;
        let workspace = self.workspace(&session);
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
                        let message = self.answer_message(finished, answer.as_ref());
                        let error = message
                            .as_ref()
                            .and_then(|m| m.error.clone())
                            .filter(|_| report_error);
                        let (session_id, fence) = (&finished.session.id, &finished.fence);
                        if let Some(e) = error {
                            self.publish_error(session_id, e).await?;
                        }
                        self.finish(session_id, message.as_ref(), reason, fence)
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
                    None => match self.perform(run, action).await {
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

    /// Performs one action.
    async fn perform(&self, run: &mut Run, action: Action) -> Result<Observation, LoopError> {
        match action {
            // Every action is boxed, each at its own size: unboxed, the loop's future would keep room for the largest
            // of them for its whole life.
            Action::DeliverQueue => Box::pin(self.deliver(run)).await,
            Action::ReadHistory => Box::pin(self.read_history(run)).await,
            Action::AwaitClientCalls => {
                Box::pin(self.settle_client_calls(
                    &run.history,
                    run.agent.client_tool_timeout,
                    &run.fence,
                    &run.lost,
                ))
                .await?;
                Ok(Observation::ClientCallsSettled)
            }
            Action::CheckBudget => Ok(Observation::Budget(
                Box::pin(self.budget_spent(&run.session.id)).await?,
            )),
            Action::Compact { cause, model } => {
                Box::pin(self.perform_compaction(run, cause, &model)).await
            }
            Action::Step { model, final_step } => {
                Box::pin(self.perform_step(run, &model, final_step)).await
            }
            Action::Wait { delay, why } => Box::pin(self.wait(run, delay, why)).await,
            Action::ProveLease => {
                let sent = Instant::now();
                if !Box::pin(self.store.leases().renew_lease(
                    &run.session.id,
                    &run.fence,
                    self.config.lease_ttl,
                ))
                .await?
                {
                    return Ok(Observation::LeaseLost);
                }
                run.lease.proven(sent);
                // What the channel could not write while storage failed goes now, before the history is read.
                Box::pin(self.publisher.flush(&run.session.id)).await?;
                tracing::info!(message = "storage is back; the loop goes on", session_id = %run.session.id);
                Ok(Observation::LeaseProven)
            }
            Action::Fail {
                error,
                store,
                reason: _,
            } => {
                if !store {
                    Box::pin(self.publish_error(&run.session.id, error)).await?;
                    return Ok(Observation::Failed(None));
                }
                let m = Box::pin(self.stop_with(
                    &run.session.id,
                    &run.history,
                    &run.model,
                    &run.agent.name,
                    error,
                    &run.fence,
                ))
                .await?;
                let answer = answer_of(&m);
                run.current = Some(m);
                Ok(Observation::Failed(Some(answer)))
            }
            Action::Finish { .. } | Action::HandOff { .. } | Action::Abandon => {
                unreachable_action()
            }
        }
    }

    /// Delivers the queued prompts and stores the run's inputs when they changed (so a loop that resumes this run
    /// elsewhere offers exactly its client tools and system text). Each prompt leaves the queue in the write that
    /// stores it, so a failure part-way leaves the rest queued for the next delivery.
    async fn deliver(&self, run: &mut Run) -> Result<Observation, LoopError> {
        let prompts = if run.prefetched.is_some() {
            // The prompt's first write took the lease without reading the queue: a prompt queued just before it
            // is delivered at the first step boundary.
            Vec::new()
        } else {
            self.store.queue().waiting(&run.session.id).await?
        };
        let mut changed = false;
        let mut delivered = 0;
        for prompt in &prompts {
            if !self
                .deliver_prompt(&run.session, prompt, &run.fence)
                .await?
            {
                // Taken by another delivery (which needs the lease we hold, so this does not happen).
                tracing::warn!(message = "a queued prompt left the queue before its delivery", session_id = %run.session.id);
                break;
            }
            delivered += 1;
            changed |= run.inputs.absorb(&prompt.request);
        }
        if changed || !run.inputs_saved {
            self.save_inputs(&run.session.id, &run.inputs).await;
            run.inputs_saved = true;
        }
        Ok(Observation::Delivered(delivered))
    }

    /// Reads the history, closes what a stopped loop left open, and tells the policy what it found.
    async fn read_history(&self, run: &mut Run) -> Result<Observation, LoopError> {
        let history = match run.prefetched.take() {
            Some(p) => p.history,
            None => self.stored_messages(&run.session.id).await?,
        };
        // Every message's share of the totals, as stored: `settle_session` adds this iteration's steps to it.
        let shares = history_totals(&history);
        self.with_cache(&run.session.id, |s| s.totals = Some(shares));
        let history = self.close_orphans(history, &run.fence).await?;
        let latest_user_model = history
            .iter()
            .rev()
            .find(|m| m.role() == pb::Role::User)
            .map_or("", |m| m.model.as_str());
        let model = super::policy::pick_model([
            run.inputs.model.as_deref().unwrap_or_default(),
            latest_user_model,
            &run.session.default_model,
            &run.agent.model,
            &self.config.default_model,
        ])
        .map(String::from);
        if let Some(model) = &model
            && !std::mem::replace(&mut run.titled, true)
        {
            self.spawn_title(&run.session, &run.agent, &history, model, &run.inputs.trace);
        }
        let view = history::since_compaction(history);
        let needs_work = history::needs_work(&view);
        let facts = HistoryFacts {
            needs_work,
            overflowed: view
                .last()
                .is_some_and(|m| m.finish == crate::processor::FINISH_OVERFLOW),
            open_client_calls: open_client_calls(&view),
            model: model.clone(),
        };
        run.model = model.unwrap_or_default();
        run.history = view;
        Ok(Observation::History(facts))
    }

    /// The usable context of `model` (the catalog's limits, cached, less the agent's reserve).
    async fn usable(&self, run: &Run, model: &str) -> Option<u64> {
        // Boxed: a catalog call (a gRPC unary future of two kilobytes) would otherwise widen the future of every step
        // that awaits this, for as long as the step streams; it is cached, so the box is made once per step.
        Box::pin(self.model_limits(model, &run.inputs.trace))
            .await
            .map(|l| l.usable(run.agent.compaction_reserve))
    }

    async fn perform_compaction(
        &self,
        run: &mut Run,
        cause: super::policy::Compaction,
        model: &str,
    ) -> Result<Observation, LoopError> {
        let usable = self.usable(run, model).await;
        let ended = self
            .compact(&super::compact::CompactRun {
                session: &run.session,
                agent: &run.agent,
                view: &run.history,
                cause,
                model,
                usable,
                inputs: &run.inputs,
                fence: &run.fence,
                cancel: &run.lost,
            })
            .await?;
        let end = match ended {
            Compacted::Done(m) => {
                self.metrics.compaction(cause.auto);
                CompactionEnd::Done(answer_of(&m))
            }
            Compacted::Failed(m) => {
                let kind = m.error.as_ref().map(|e| e.kind());
                CompactionEnd::Failed(answer_of(&m), kind)
            }
            Compacted::Aborted(m) => CompactionEnd::Aborted(answer_of(&m)),
        };
        Ok(Observation::Compacted(end))
    }

    async fn perform_step(
        &self,
        run: &mut Run,
        model: &str,
        final_step: bool,
    ) -> Result<Observation, LoopError> {
        let usable = self.usable(run, model).await;
        run.steps += 1;
        let number = run.steps;
        let input = StepInput {
            session: &run.session,
            agent: &run.agent,
            history: &run.history,
            workspace: run.workspace.as_ref(),
            snapshots: run.snapshots.as_ref(),
            inputs: &run.inputs,
            fence: &run.fence,
            cancel: &run.lost,
            model,
            final_step,
            usable,
            number,
        };
        let (observation, message) = self.run_step(&input).await?;
        if run.lost.is_cancelled() && !run.abort.is_cancelled() {
            return Ok(Observation::LeaseLost);
        }
        if message.is_some() {
            run.current = message;
        }
        Ok(observation)
    }

    async fn wait(
        &self,
        run: &mut Run,
        delay: Duration,
        why: WaitFor,
    ) -> Result<Observation, LoopError> {
        match why {
            WaitFor::StepRetry { attempt } => {
                let Some(failed) = run.current.clone() else {
                    return Ok(Observation::Waited);
                };
                self.record_retry(&failed, attempt, delay, &run.fence)
                    .await?;
                tokio::select! {
                    _ = run.lost.cancelled() => return Ok(self.stopped(run)),
                    _ = tokio::time::sleep(delay) => {}
                }
                self.end_retry_wait(&failed, &run.fence).await?;
            }
            WaitFor::Storage { attempt } => {
                tracing::info!(message = "storage failed; waiting before trying again", session_id = %run.session.id, attempt, delay_ms = delay.as_millis() as u64);
                tokio::select! {
                    _ = run.lost.cancelled() => return Ok(self.stopped(run)),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
        Ok(Observation::Waited)
    }

    /// The observation of a wait cut short.
    fn stopped(&self, run: &Run) -> Observation {
        if run.abort.is_cancelled() {
            Observation::Cancelled
        } else {
            Observation::LeaseLost
        }
    }

    /// The message an answer names, as last written (the run's current answer when it is that one).
    fn answer_message(&self, run: &Run, answer: Option<&Answer>) -> Option<pb::Message> {
        let answer = answer?;
        run.current
            .as_ref()
            .filter(|m| m.id == answer.message_id)
            .cloned()
            .or_else(|| {
                run.history
                    .iter()
                    .find(|m| m.id == answer.message_id)
                    .cloned()
            })
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

    /// Stores the run's inputs for a loop that resumes it elsewhere. Best effort: a failure only means a resumed
    /// loop would not offer this run's client tools, so it is logged, not fatal.
    async fn save_inputs(&self, session_id: &str, inputs: &RunInputs) {
        if let Err(e) = self
            .store
            .sessions()
            .put_run_inputs(session_id, &inputs.stored())
            .await
        {
            tracing::warn!(message = "cannot store the run's inputs", session_id = %session_id, error = %e);
        }
    }
}

/// The answer a message is.
fn answer_of(m: &pb::Message) -> Answer {
    Answer {
        message_id: m.id.clone(),
        finish: m.finish.clone(),
    }
}

/// Terminal actions are handled by [`Engine::drive`] itself.
fn unreachable_action() -> Result<Observation, LoopError> {
    Err(LoopError::Precondition(
        "a terminal action reached perform".into(),
    ))
}
