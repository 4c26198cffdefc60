//! The loop's own writes beside the Processor's effects: user messages (with their model resolved), the retry
//! bookkeeping, status events, a stop's error on the answer, and the loop's end.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use llm_proto::sessions as pb;
use prost_types::Timestamp;

use super::policy::{Answer, StopReason};
use super::totals::RunCaches;
use super::{LoopError, now};
use crate::config::Config;
use crate::event_wire::Stored;
use crate::events::{LoopLease, Publisher};
use crate::history;
use crate::ids;
use crate::store::{Fence, Messages, Queued, Statuses, StoreError};

/// The loop's writes beside the Processor's effects (see the module docs).
pub(super) struct LoopWrites {
    /// The agents and the default model, for a prompt's model.
    pub(super) config: Arc<Config>,
    pub(super) publisher: Publisher,
    /// The run's end releases the lease.
    pub(super) loop_lease: LoopLease,
    pub(super) messages: Messages,
    pub(super) statuses: Statuses,
    /// Whether the run stored a retry status.
    pub(super) caches: Arc<RunCaches>,
}

impl LoopWrites {
    /// The model a prompt runs with, by the priority rule: its own `model`, else the one the session's previous
    /// prompt ran with, else the session's default, else the agent's, else the processor's default ("" when no
    /// level names one: the loop then stops with an error saying so).
    ///
    /// `previous` is the stored prompt model when the caller already read it (`Some(None)`: there is none); `None`
    /// reads it.
    async fn resolve_prompt_model(
        &self,
        session: &pb::Session,
        asked: &str,
        agent: &str,
        previous: Option<Option<String>>,
    ) -> Result<String, StoreError> {
        if !asked.is_empty() {
            return Ok(asked.to_string());
        }
        let previous = match previous {
            Some(read) => read,
            None => self.messages.prompt_model(&session.id).await?,
        }
        .unwrap_or_default();
        let agent_model = super::agent(&self.config, agent).map_or("", |a| a.model.as_str());
        let levels = [
            previous.as_str(),
            session.default_model.as_str(),
            agent_model,
            self.config.default_model.as_str(),
            "",
        ];
        Ok(super::policy::pick_model(levels)
            .unwrap_or_default()
            .to_string())
    }

    /// Delivers a queued prompt: stores it as a user message (its model resolved, its format and reasoning kept
    /// with it) in the same atomic step that takes it off the queue's head, then publishes it with its parts.
    /// `false` when the prompt was no longer at the queue's head (nothing written).
    pub(super) async fn deliver_prompt(
        &self,
        session: &pb::Session,
        prompt: &Queued,
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        let mut message = self.user_message(session, &prompt.request, None).await?;
        if !self
            .messages
            .deliver_prompt_message(&message, Some(fence), prompt)
            .await?
        {
            return Ok(false);
        }
        self.publish_message(&mut message).await?;
        Ok(true)
    }

    /// A prompt as the user message it becomes (with its parts), its model resolved by the priority rule (the
    /// stored prompt model as `previous`, when the caller read it: see `resolve_prompt_model`).
    pub(super) async fn user_message(
        &self,
        session: &pb::Session,
        req: &pb::PromptRequest,
        previous: Option<Option<String>>,
    ) -> Result<pb::Message, StoreError> {
        let agent = if req.agent.is_empty() {
            session.agent.clone()
        } else {
            req.agent.clone()
        };
        let model = self
            .resolve_prompt_model(session, &req.model, &agent, previous)
            .await?;
        let created_at = Some(now());
        let id = ids::new("msg");
        // Sized to the request: collected through the filter, the vector would start with room for four parts, which
        // the run's history then keeps for the whole run.
        let mut parts: Vec<pb::Part> = Vec::with_capacity(req.parts.len());
        parts.extend(req.parts.iter().filter_map(|p| {
            let kind = match p.kind.as_ref()? {
                pb::prompt_part::Kind::Text(t) => pb::part::Kind::Text(pb::TextPart {
                    text: t.clone(),
                    started_at: created_at,
                    ended_at: created_at,
                    synthetic: false,
                }),
                pb::prompt_part::Kind::File(f) => pb::part::Kind::File(f.clone()),
            };
            Some(pb::Part {
                id: ids::new("prt"),
                message_id: id.clone(),
                session_id: session.id.clone(),
                kind: Some(kind),
            })
        }));
        Ok(pb::Message {
            id,
            session_id: session.id.clone(),
            role: pb::Role::User as i32,
            model,
            agent,
            // Kept with the message, so the format survives queuing, crash recovery and compaction replays.
            format: req
                .format
                .clone()
                .filter(|f| f.r#type() == pb::output_format::Type::JsonSchema),
            reasoning: req.reasoning,
            created_at,
            parts,
            ..Default::default()
        })
    }

    /// Publishes a message stored with its parts: `message_updated` (without the parts), then each part.
    /// The parts are taken out while the head is published and put back, so nothing is copied.
    pub(super) async fn publish_message(
        &self,
        message: &mut pb::Message,
    ) -> Result<(), StoreError> {
        let parts = std::mem::take(&mut message.parts);
        let head = Stored::message_updated(message);
        message.parts = parts;
        let session_id = &message.session_id;
        self.publisher.publish_kept(session_id, head).await?;
        for p in &message.parts {
            self.publisher
                .publish_kept(session_id, Stored::part_updated(p))
                .await?;
        }
        Ok(())
    }

    /// Writes a message with its parts in one script, then publishes the message and each part.
    pub(super) async fn put_and_publish_message(
        &self,
        message: pb::Message,
        parts: Vec<pb::Part>,
        fence: Option<&Fence>,
    ) -> Result<pb::Message, StoreError> {
        let mut stored = pb::Message {
            parts,
            ..message.clone()
        };
        self.messages.put_message(&stored, fence).await?;
        self.publish_message(&mut stored).await?;
        Ok(message)
    }

    /// Shows a step retry: a retry part on the failed message, the retry status stored (for GetSession) and
    /// published.
    pub(super) async fn record_retry(
        &self,
        message: &pb::Message,
        attempt: u32,
        delay: Duration,
        fence: &Fence,
    ) -> Result<(), LoopError> {
        let next = Timestamp::from(SystemTime::now() + delay);
        let part = pb::Part {
            id: ids::new("prt"),
            message_id: message.id.clone(),
            session_id: message.session_id.clone(),
            kind: Some(pb::part::Kind::Retry(pb::RetryPart {
                attempt,
                error: message.error.clone(),
                next_attempt_at: Some(next),
            })),
        };
        self.publisher.put_part(Box::new(part), fence).await?;
        let msg = message
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default();
        // Stored for GetSession / ListSessions (believed only under this lease; advisory, so a failure is logged).
        let status = pb::SessionStatus {
            kind: pb::session_status::Kind::Retry as i32,
            attempt,
            next_attempt_at: Some(next),
            message: msg.clone(),
        };
        self.caches
            .with(&message.session_id, |s| s.retry_status = true);
        if let Err(e) = self
            .statuses
            .set_retry_status(&message.session_id, &status, fence, delay)
            .await
        {
            tracing::warn!(message = "cannot store the retry status", session_id = %message.session_id, error = %e);
        }
        self.publish_status(&message.session_id, status).await
    }

    /// After a step retry's wait: the retry status cleared, the session busy again, and the failed attempt marked
    /// `retried` (it stays in the history with its parts and its retry part, and the exit rule looks past it).
    pub(super) async fn end_retry_wait(
        &self,
        failed: &pb::Message,
        fence: &Fence,
    ) -> Result<(), LoopError> {
        let session_id = &failed.session_id;
        self.statuses.clear_retry_status(session_id, fence).await?;
        self.caches.with(session_id, |s| s.retry_status = false);
        self.status(session_id, pb::session_status::Kind::Busy)
            .await?;
        let mut m = failed.clone();
        m.parts.clear();
        m.finish = "retried".into();
        m.error = None;
        // The channel's older state of this message must not land after this write.
        self.publisher.flush(session_id).await?;
        self.messages.put_message(&m, Some(fence)).await?;
        Ok(())
    }

    /// Publishes a plain status (idle, busy).
    pub(super) async fn status(
        &self,
        session_id: &str,
        kind: pb::session_status::Kind,
    ) -> Result<(), LoopError> {
        self.publish_status(
            session_id,
            pb::SessionStatus {
                kind: kind as i32,
                ..Default::default()
            },
        )
        .await
    }

    async fn publish_status(
        &self,
        session_id: &str,
        status: pb::SessionStatus,
    ) -> Result<(), LoopError> {
        self.publisher
            .publish(session_id, pb::session_event::Event::Status(status))
            .await?;
        Ok(())
    }

    /// Stops the loop with `error` at a step boundary: the error goes on the current answer (the last assistant
    /// message after the latest user message, already closed) or, when there is none yet, on a new empty assistant
    /// message, so the user message has an answer that says why. Publishes the `error` event.
    pub(super) async fn stop_with(
        &self,
        session_id: &str,
        view: &[pb::Message],
        model: &str,
        agent: &str,
        error: pb::MessageError,
        fence: &Fence,
    ) -> Result<pb::Message, LoopError> {
        let current = view
            .last()
            .filter(|m| m.role() == pb::Role::Assistant && !history::is_compaction(m));
        let message = match current {
            Some(m) => {
                let mut m = m.clone();
                m.parts.clear();
                m.error = Some(error.clone());
                m
            }
            None => {
                let parent = view
                    .iter()
                    .rev()
                    .find(|m| m.role() == pb::Role::User)
                    .map(|m| m.id.clone())
                    .unwrap_or_default();
                let ts = now();
                pb::Message {
                    id: ids::new("msg"),
                    session_id: session_id.into(),
                    role: pb::Role::Assistant as i32,
                    parent_id: parent,
                    model: model.into(),
                    agent: agent.into(),
                    finish: "error".into(),
                    error: Some(error.clone()),
                    created_at: Some(ts),
                    completed_at: Some(ts),
                    ..Default::default()
                }
            }
        };
        // The channel's older state of this message must not land after this write.
        self.publisher.flush(session_id).await?;
        self.messages.put_message(&message, Some(fence)).await?;
        self.publisher
            .publish(
                &message.session_id,
                pb::session_event::Event::MessageUpdated(message.clone()),
            )
            .await?;
        self.publish_error(&message.session_id, error).await?;
        Ok(message)
    }

    /// Publishes an `error` event.
    pub(super) async fn publish_error(
        &self,
        session_id: &str,
        error: pb::MessageError,
    ) -> Result<(), LoopError> {
        self.publisher
            .publish(session_id, pb::session_event::Event::Error(error))
            .await?;
        Ok(())
    }

    /// Ends the loop: the stop reason stored on the answer (`message`, as last written), the session idle, and
    /// `done` naming the answer.
    pub(super) async fn finish(
        &self,
        session_id: &str,
        message: Option<&pb::Message>,
        reason: StopReason,
        fence: &Fence,
    ) -> Result<(), LoopError> {
        let answer = message.map(|m| Answer {
            message_id: m.id.clone(),
            finish: m.finish.clone(),
        });
        // A retry status is the lease's: cleared while it is held (the run's end may release it).
        if self
            .caches
            .with(session_id, |s| std::mem::take(&mut s.retry_status))
            && let Err(e) = self.statuses.clear_retry_status(session_id, fence).await
        {
            tracing::warn!(message = "cannot clear the retry status", session_id = %session_id, error = %e);
        }
        // Shown to this replica's streams only once the run's end is written and the lease released (by the same
        // write, when no prompt waits).
        self.loop_lease.hold_from_here(session_id);
        if let Some(m) = message
            && m.stopped_by != reason as i32
        {
            let mut m = m.clone();
            m.parts.clear();
            m.stopped_by = reason as i32;
            // Written with `done`, in the same write.
            self.publisher.put_message(Box::new(m), fence).await?;
        }
        self.status(session_id, pb::session_status::Kind::Idle)
            .await?;
        self.publisher
            .publish(
                session_id,
                pb::session_event::Event::Done(done(answer.as_ref(), reason)),
            )
            .await?;
        Ok(())
    }
}

/// The `done` event for an answer and a stop reason.
pub(super) fn done(answer: Option<&Answer>, reason: StopReason) -> pb::Done {
    let answer = answer.cloned().unwrap_or_default();
    pb::Done {
        message_id: answer.message_id,
        finish: answer.finish,
        stopped_by: reason as i32,
    }
}
