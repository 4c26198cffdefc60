//! The engine's entry points: prompts accepted (the loop starts at once, or the prompt waits in the queue for the
//! loop that holds the session), manual compactions, sessions resumed after their replica stopped, and the recovery
//! sweep that finds them.

use std::sync::Arc;
use std::time::Duration;

use llm_proto::sessions as pb;
use tokio_util::sync::CancellationToken;

use super::driver::Prefetched;
use super::inputs::RunInputs;
use super::{Engine, LoopError, PromptSession};
use crate::history;
use crate::ids;
use crate::metrics::PromptPhase;
use crate::store::{ActiveMark, Begin, BeginArgs};

/// A prompt accepted: where its caller's stream starts, and its queue tag when it was queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The event id after which the caller's stream starts.
    pub start: String,
    /// The prompt's tag when it waits in the queue for the running loop ([`crate::store::PromptQueue::prompt_delivery`]
    /// tells when it was delivered, and as which message); `None` when this call started the loop.
    pub queued: Option<String>,
}

impl Engine {
    /// Accepts a prompt: stores the user message and starts the loop, or queues the prompt when another loop
    /// holds the session. `read` is what the caller read of the session just before (one round trip).
    ///
    /// The fast path (docs/architecture.md, "A prompt's critical path"): one script takes the lease, stores the
    /// message and reads the history, beside the active mark; the loop starts from all that without reading again.
    pub async fn prompt(
        self: &Arc<Self>,
        req: &pb::PromptRequest,
        trace: Vec<(String, String)>,
        read: PromptSession,
    ) -> Result<Accepted, LoopError> {
        let arrived = std::time::Instant::now();
        let PromptSession {
            session,
            bytes,
            model,
        } = read;
        let message = self
            .writes
            .user_message(&session, req, Some(model.clone()))
            .await?;
        let mut inputs = RunInputs::from_prompt(req, trace);
        inputs.arrived = Some(arrived);
        let stored_inputs = inputs.stored();
        let run = ids::new("run");
        let args = BeginArgs {
            owner: &self.owner,
            ttl: self.config.lease_ttl,
            inputs: Some(&stored_inputs),
            run: &run,
            time: !self.events.clock_fresh(),
            validated: Some((&bytes, model.as_deref())),
        };
        let session_id = session.id.clone();
        let b = match self.store.prompts().begin_prompt(message, args).await? {
            Begin::Begun(b) => b,
            Begin::Stale => return Err(LoopError::Stale),
            Begin::Busy => {
                return self
                    .queue_prompt(&session, Some(bytes), req, inputs.trace)
                    .await;
            }
        };
        self.metrics
            .prompt_phase(PromptPhase::Begun, arrived.elapsed());
        self.events
            .open_at(&session.id, &b.fence, b.last_event, b.redis_ms, b.watched);
        // The caller's stream starts after what the log held: the user message's events come first.
        let start = b.last_event.to_string();
        let mut history = b.history;
        if let Some(message) = history.last_mut()
            && let Err(e) = self.writes.publish_message(message).await
        {
            // Stored, and the loop owns the lease now: it goes on (and rides out the storage failure).
            tracing::warn!(message = "cannot publish the user message", session_id = %session.id, error = %e);
        }
        let prefetched = Prefetched { history };
        self.driver.spawn(
            session_id,
            Some((session, Some(bytes))),
            b.fence,
            inputs,
            Some(prefetched),
            Some(run),
        );
        Ok(Accepted {
            start,
            queued: None,
        })
    }

    /// A prompt for a busy session: queued for the running loop, which delivers it at its next step boundary.
    async fn queue_prompt(
        self: &Arc<Self>,
        session: &pb::Session,
        bytes: Option<Vec<u8>>,
        req: &pb::PromptRequest,
        trace: Vec<(String, String)>,
    ) -> Result<Accepted, LoopError> {
        let start = self.events.last_event_id(&session.id).await?;
        let tag = self.store.queue().enqueue_prompt(&session.id, req).await?;
        // The loop may have made its last queue check and released the lease between our failed acquire and the
        // enqueue; then nobody would deliver the prompt. Trying again closes that window: whoever holds the lease
        // next (that loop re-checking after its release, or us) delivers the queue.
        if let Some(fence) = self
            .store
            .leases()
            .acquire_lease(&session.id, &self.owner, self.config.lease_ttl)
            .await?
        {
            self.driver.open_events(&session.id, &fence).await;
            // The queued prompt is delivered by the loop, which takes its inputs then.
            let inputs = RunInputs {
                trace,
                ..RunInputs::default()
            };
            self.driver.spawn(
                session.id.clone(),
                Some((session.clone(), bytes)),
                fence,
                inputs,
                None,
                None,
            );
        }
        Ok(Accepted {
            start,
            queued: Some(tag),
        })
    }

    /// Starts a manual compaction of an idle session (the `Compact` RPC). Returns the event id after which the
    /// caller's stream starts.
    pub async fn compact_now(
        self: &Arc<Self>,
        session_id: &str,
        model: &str,
    ) -> Result<String, LoopError> {
        let session = self
            .store
            .sessions()
            .get_session(session_id)
            .await?
            .ok_or_else(|| LoopError::NotFound(session_id.to_string()))?;
        let (messages, _) = self
            .store
            .messages()
            .list_messages(session_id, None, usize::MAX)
            .await?;
        let view = history::since_compaction(messages);
        if view.iter().all(history::is_compaction) {
            return Err(LoopError::Precondition(
                "nothing to compact: no messages since the last compaction".into(),
            ));
        }
        let start = self.events.last_event_id(&session.id).await?;
        let Some(fence) = self
            .store
            .leases()
            .acquire_lease(&session.id, &self.owner, self.config.lease_ttl)
            .await?
        else {
            return Err(LoopError::Precondition(
                "the session is busy: compact it when its loop is idle".into(),
            ));
        };
        let inputs = RunInputs {
            model: Some(model.to_string()).filter(|m| !m.is_empty()),
            compact: true,
            ..Default::default()
        };
        self.driver.spawn(
            session.id.clone(),
            Some((session.clone(), None)),
            fence,
            inputs,
            None,
            None,
        );
        Ok(start)
    }

    /// Resumes a session whose lease is free but whose loop never finished (its replica died mid-step): the new
    /// loop closes the orphaned parts and carries on. `marks` are the session's marks the sweep found (see
    /// [`ActiveMark`]); the new run's mark replaces them. Returns whether this replica took it.
    pub async fn resume(self: &Arc<Self>, marks: &[ActiveMark]) -> Result<bool, LoopError> {
        let Some(session_id) = marks.first().map(|m| m.session_id.as_str()) else {
            return Ok(false);
        };
        let Some(fence) = self
            .store
            .leases()
            .acquire_lease(session_id, &self.owner, self.config.lease_ttl)
            .await?
        else {
            return Ok(false);
        };
        // A run that just ended released its lease before removing its mark: if every mark found is gone now, that
        // is all this was.
        let mut still_marked = false;
        for mark in marks {
            still_marked |= self.store.active().is_marked(mark).await?;
        }
        if !still_marked {
            self.store
                .leases()
                .release_lease(session_id, &fence)
                .await?;
            return Ok(false);
        }
        let Some((session, bytes)) = self.store.sessions().get_session_record(session_id).await?
        else {
            for mark in marks {
                self.store.active().clear_active(mark).await?;
            }
            return Ok(false);
        };
        tracing::info!(message = "resuming a session whose replica stopped mid-loop", session_id = %session_id);
        // The run's client tools, system text and model survive the replica: a pending client tool call is still
        // the caller's to answer, and the next step offers the same tools.
        let mut inputs = RunInputs::default();
        match self.store.sessions().run_inputs(session_id).await {
            Ok(Some(stored)) => {
                inputs.absorb(&stored);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(message = "cannot read the run's inputs; resuming without them", session_id = %session_id, error = %e);
            }
        }
        // The new run's mark first, so the session is never unmarked while its loop runs.
        let run = ids::new("run");
        self.store.active().mark_active(session_id, &run).await?;
        for mark in marks {
            self.store.active().clear_active(mark).await?;
        }
        self.driver.spawn(
            session_id.to_string(),
            Some((session, Some(bytes))),
            fence,
            inputs,
            None,
            Some(run),
        );
        Ok(true)
    }

    /// Every `interval`, looks for sessions marked active with no lease holder and resumes them. Runs until
    /// `stop` is cancelled. Sessions whose lease is still held are left alone, so a live owner never loses them.
    pub async fn recover(self: Arc<Self>, interval: Duration, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let marks = match self.store.active().active_sessions().await {
                Ok(marks) => marks,
                Err(e) => {
                    tracing::warn!(message = "recovery scan failed", error = %e);
                    continue;
                }
            };
            for marks in by_session(marks) {
                let id = &marks[0].session_id;
                if self.loops.is_running(id) {
                    continue;
                }
                if matches!(self.store.leases().lease_holder(id).await, Ok(None))
                    && let Err(e) = self.resume(&marks).await
                {
                    tracing::warn!(message = "resume failed", session_id = %id, error = %e);
                }
            }
        }
    }
}

/// The marks of the active set grouped by session (a session has more than one while a run that ended has not yet
/// removed its mark, or when its replica died before it could).
fn by_session(mut marks: Vec<ActiveMark>) -> Vec<Vec<ActiveMark>> {
    marks.sort_by(|a, b| a.session_id.cmp(&b.session_id));
    let mut groups: Vec<Vec<ActiveMark>> = Vec::new();
    for mark in marks {
        match groups.last_mut() {
            Some(group) if group[0].session_id == mark.session_id => group.push(mark),
            _ => groups.push(vec![mark]),
        }
    }
    groups
}
