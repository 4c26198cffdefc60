//! The actions the loop's policy asks for, performed: the queue delivered, the history read, client calls awaited,
//! the budget checked, a compaction or a model step run, a wait, the lease proven, a failure stored. Each returns
//! what the policy observes next.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_proto::sessions as pb;
use tokio_util::sync::CancellationToken;

use super::LoopError;
use super::budget::Budget;
use super::compact::{CompactRun, Compacted, Compactor};
use super::driver::Prefetched;
use super::gateway::CatalogLimits;
use super::inputs::RunInputs;
use super::lease::LeaseClock;
use super::orphans::{Orphans, open_client_calls};
use super::persist::LoopWrites;
use super::policy::{
    Action, Answer, Compaction, CompactionEnd, HistoryFacts, Observation, WaitFor,
};
use super::step::{StepInput, Steps};
use super::titling::Titles;
use super::totals::{RunCaches, history_totals};
use crate::config::{Agent, Config};
use crate::events::Publisher;
use crate::history;
use crate::metrics::Metrics;
use crate::snapshot::StepSnapshots;
use crate::store::{Fence, Leases, Messages, PromptQueue, Sessions};
use crate::tools::Workspace;

/// One run of a session's loop on this replica: what the actions need between them.
pub(super) struct Run {
    pub(super) session: pb::Session,
    pub(super) agent: Arc<Agent>,
    pub(super) fence: Fence,
    pub(super) inputs: RunInputs,
    pub(super) inputs_saved: bool,
    /// The caller's abort.
    pub(super) abort: CancellationToken,
    /// Cancelled by an abort or when the lease is lost.
    pub(super) lost: CancellationToken,
    pub(super) lease: LeaseClock,
    pub(super) started: Instant,
    /// The history from the last completed compaction on, as last read.
    pub(super) history: Vec<pb::Message>,
    /// The answer in progress (or last produced), as last written.
    pub(super) current: Option<pb::Message>,
    /// The model of the next step, as the policy last got it.
    pub(super) model: String,
    pub(super) workspace: Option<Workspace>,
    pub(super) snapshots: Option<StepSnapshots>,
    pub(super) titled: bool,
    /// What the prompt's fast path read, for the first iteration.
    pub(super) prefetched: Option<Prefetched>,
    /// Model steps started in this run, for the steps' spans.
    pub(super) steps: u32,
}

/// Performs the policy's actions for the driver.
pub(super) struct Actions {
    pub(super) config: Arc<Config>,
    pub(super) publisher: Publisher,
    pub(super) metrics: Arc<Metrics>,
    pub(super) sessions: Sessions,
    pub(super) messages: Messages,
    pub(super) leases: Leases,
    pub(super) queue: PromptQueue,
    pub(super) caches: Arc<RunCaches>,
    pub(super) writes: Arc<LoopWrites>,
    pub(super) budget: Budget,
    pub(super) orphans: Orphans,
    pub(super) compactor: Compactor,
    pub(super) steps: Arc<Steps>,
    pub(super) limits: CatalogLimits,
    pub(super) titles: Titles,
}

impl Actions {
    /// Performs one action.
    pub(super) async fn perform(
        &self,
        run: &mut Run,
        action: Action,
    ) -> Result<Observation, LoopError> {
        match action {
            // Every action is boxed, each at its own size: unboxed, the loop's future would keep room for the largest
            // of them for its whole life.
            Action::DeliverQueue => Box::pin(self.deliver(run)).await,
            Action::ReadHistory => Box::pin(self.read_history(run)).await,
            Action::AwaitClientCalls => {
                Box::pin(self.orphans.settle_client_calls(
                    &run.history,
                    run.agent.client_tool_timeout,
                    &run.fence,
                    &run.lost,
                ))
                .await?;
                Ok(Observation::ClientCallsSettled)
            }
            Action::CheckBudget => Ok(Observation::Budget(
                Box::pin(self.budget.budget_spent(&run.session.id)).await?,
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
                if !Box::pin(self.leases.renew_lease(
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
                    Box::pin(self.writes.publish_error(&run.session.id, error)).await?;
                    return Ok(Observation::Failed(None));
                }
                let m = Box::pin(self.writes.stop_with(
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
            self.queue.waiting(&run.session.id).await?
        };
        let mut changed = false;
        let mut delivered = 0;
        for prompt in &prompts {
            if !self
                .writes
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
            None => {
                super::stored_messages(&self.publisher, &self.messages, &run.session.id).await?
            }
        };
        // Every message's share of the totals, as stored: `settle_session` adds this iteration's steps to it.
        let shares = history_totals(&history);
        self.caches
            .with(&run.session.id, |s| s.totals = Some(shares));
        let history = self.orphans.close_orphans(history, &run.fence).await?;
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
            self.titles
                .spawn_title(&run.session, &run.agent, &history, model, &run.inputs.trace);
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
        Box::pin(self.limits.model_limits(model, &run.inputs.trace))
            .await
            .map(|l| l.usable(run.agent.compaction_reserve))
    }

    async fn perform_compaction(
        &self,
        run: &mut Run,
        cause: Compaction,
        model: &str,
    ) -> Result<Observation, LoopError> {
        let usable = self.usable(run, model).await;
        let ended = self
            .compactor
            .compact(&CompactRun {
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
        let (observation, message) = self.steps.run_step(&input).await?;
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
                self.writes
                    .record_retry(&failed, attempt, delay, &run.fence)
                    .await?;
                tokio::select! {
                    _ = run.lost.cancelled() => return Ok(stopped(run)),
                    _ = tokio::time::sleep(delay) => {}
                }
                self.writes.end_retry_wait(&failed, &run.fence).await?;
            }
            WaitFor::Storage { attempt } => {
                tracing::info!(message = "storage failed; waiting before trying again", session_id = %run.session.id, attempt, delay_ms = delay.as_millis() as u64);
                tokio::select! {
                    _ = run.lost.cancelled() => return Ok(stopped(run)),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
        Ok(Observation::Waited)
    }

    /// Stores the run's inputs for a loop that resumes it elsewhere. Best effort: a failure only means a resumed
    /// loop would not offer this run's client tools, so it is logged, not fatal.
    async fn save_inputs(&self, session_id: &str, inputs: &RunInputs) {
        if let Err(e) = self
            .sessions
            .put_run_inputs(session_id, &inputs.stored())
            .await
        {
            tracing::warn!(message = "cannot store the run's inputs", session_id = %session_id, error = %e);
        }
    }
}

/// The observation of a wait cut short.
fn stopped(run: &Run) -> Observation {
    if run.abort.is_cancelled() {
        Observation::Cancelled
    } else {
        Observation::LeaseLost
    }
}

/// The message an answer names, as last written (the run's current answer when it is that one).
pub(super) fn answer_message(run: &Run, answer: Option<&Answer>) -> Option<pb::Message> {
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

/// The answer a message is.
fn answer_of(m: &pb::Message) -> Answer {
    Answer {
        message_id: m.id.clone(),
        finish: m.finish.clone(),
    }
}

/// Terminal actions are handled by the driver itself.
fn unreachable_action() -> Result<Observation, LoopError> {
    Err(LoopError::Precondition(
        "a terminal action reached perform".into(),
    ))
}
