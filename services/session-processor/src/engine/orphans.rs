//! What a stopped loop left behind (its replica died, or storage failed under it mid-step), closed the way cleanup
//! would have closed it, and the client tool calls it was waiting on, which stay the caller's to answer.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use llm_proto::sessions as pb;

use super::{LoopError, now};
use crate::events::Publisher;
use crate::store::{Asked, EventLog, Fence, Mailboxes, Messages};

/// A client tool call still waiting for the caller's answer: a running tool part the caller was asked to run.
pub(super) fn open_client_call(part: &pb::Part) -> bool {
    matches!(&part.kind, Some(pb::part::Kind::Tool(t))
        if t.state.as_ref().is_some_and(|s| s.client && s.status() == pb::tool_state::Status::Running))
}

/// The open client calls of the assistant messages no loop completed.
pub(super) fn open_client_calls(history: &[pb::Message]) -> usize {
    history
        .iter()
        .filter(|m| m.role() == pb::Role::Assistant && m.completed_at.is_none())
        .flat_map(|m| &m.parts)
        .filter(|p| open_client_call(p))
        .count()
}

/// Closes what a stopped loop left open and awaits the client calls it waited on.
pub(super) struct Orphans {
    pub(super) publisher: Publisher,
    pub(super) messages: Messages,
    pub(super) mailboxes: Mailboxes,
    /// The text a part streamed, read back from the session's event log.
    pub(super) log: EventLog,
}

impl Orphans {
    /// Closes the assistant messages no loop completed the way cleanup would have (open parts ended, unfinished
    /// tools `error: aborted`, marked interrupted), then returns the history without the interrupted answers that
    /// produced nothing (their step simply runs again). A client tool call the caller was asked to run stays open,
    /// and so does its message: the loop waits for the answer ([`Orphans::settle_client_calls`]).
    pub(super) async fn close_orphans(
        &self,
        mut history: Vec<pb::Message>,
        fence: &Fence,
    ) -> Result<Vec<pb::Message>, LoopError> {
        let orphaned = history
            .iter()
            .any(|m| m.role() == pb::Role::Assistant && m.completed_at.is_none());
        if !orphaned {
            return Ok(history);
        }
        let streamed = self.streamed_text(&history).await?;
        let ts = now();
        for m in history
            .iter_mut()
            .filter(|m| m.role() == pb::Role::Assistant && m.completed_at.is_none())
        {
            let changed = close_parts(m, &streamed, ts);
            let waiting = m.parts.iter().any(open_client_call);
            if !waiting {
                m.completed_at = Some(ts);
                let has_tools = m
                    .parts
                    .iter()
                    .any(|p| matches!(p.kind, Some(pb::part::Kind::Tool(_))));
                if m.finish.is_empty() {
                    // The step never finished: with tool calls, their (aborted) results go back to the model;
                    // without, the user message still needs its answer, so the message is marked interrupted.
                    m.finish = if has_tools {
                        "tool_calls"
                    } else {
                        "interrupted"
                    }
                    .into();
                }
            }
            self.messages.put_parts(&changed, Some(fence)).await?;
            let mut stored = m.clone();
            stored.parts.clear();
            self.messages.put_message(&stored, Some(fence)).await?;
            self.publisher
                .publish(
                    &m.session_id,
                    pb::session_event::Event::MessageUpdated(stored),
                )
                .await?;
        }
        Ok(history
            .into_iter()
            .filter(|m| m.finish != "interrupted")
            .collect())
    }

    /// Waits for the open client calls in `history` (each until its deadline: its start plus the agent's client
    /// tool timeout; an answer already submitted, even late, is taken at once), records each result, and completes
    /// their messages with finish `tool_calls`.
    pub(super) async fn settle_client_calls(
        &self,
        history: &[pb::Message],
        timeout: Duration,
        fence: &Fence,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<(), LoopError> {
        for m in history
            .iter()
            .filter(|m| m.role() == pb::Role::Assistant && m.completed_at.is_none())
        {
            let mut m = m.clone();
            for part in m.parts.iter_mut().filter(|p| open_client_call(p)) {
                let Some(pb::part::Kind::Tool(tool)) = part.kind.as_mut() else {
                    continue;
                };
                let state = tool.state.get_or_insert_with(Default::default);
                let started = state
                    .started_at
                    .and_then(|t| SystemTime::try_from(t).ok())
                    .unwrap_or_else(SystemTime::now);
                let left = (started + timeout)
                    .duration_since(SystemTime::now())
                    .unwrap_or_default();
                // Asked again: a call asked before answers were checked against the questions (an older replica)
                // can still be answered.
                self.mailboxes
                    .expect_answer(&m.session_id, Asked::ToolResult(&tool.call_id))
                    .await?;
                let answer = tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    a = self.mailboxes.wait_tool_result(&m.session_id, &tool.call_id, left) => a?,
                };
                match answer {
                    Some((output, false)) => {
                        state.status = pb::tool_state::Status::Completed as i32;
                        state.output = output;
                    }
                    Some((output, true)) => {
                        state.status = pb::tool_state::Status::Error as i32;
                        state.error = output;
                    }
                    None => {
                        state.status = pb::tool_state::Status::Error as i32;
                        state.error = format!("the client did not answer within {timeout:?}");
                    }
                }
                state.ended_at = Some(now());
                self.publisher
                    .put_part(Box::new(part.clone()), fence)
                    .await?;
            }
            m.parts.clear();
            m.completed_at = Some(now());
            if m.finish.is_empty() {
                m.finish = "tool_calls".into();
            }
            self.messages.put_message(&m, Some(fence)).await?;
            let session_id = m.session_id.clone();
            self.publisher
                .publish(&session_id, pb::session_event::Event::MessageUpdated(m))
                .await?;
        }
        Ok(())
    }

    /// The text each part received through `part_delta` events still in the session's event log.
    async fn streamed_text(
        &self,
        history: &[pb::Message],
    ) -> Result<HashMap<String, String>, LoopError> {
        let Some(session_id) = history.first().map(|m| m.session_id.clone()) else {
            return Ok(HashMap::new());
        };
        let mut text: HashMap<String, String> = HashMap::new();
        // Paged by entry; each event counted once even if a retried write logged it twice.
        let mut cursor = crate::events::EventId::ZERO;
        let mut seen = crate::events::EventId::ZERO;
        loop {
            let page = self
                .log
                .read_event_page(&session_id, cursor, None, 1000)
                .await?;
            let Some(next) = page.cursor else { break };
            cursor = next;
            for ev in page.events {
                match ev.event_id.parse::<crate::events::EventId>() {
                    Ok(id) if id > seen => seen = id,
                    _ => continue,
                }
                if let Some(pb::session_event::Event::PartDelta(d)) = ev.event {
                    text.entry(d.part_id).or_default().push_str(&d.delta);
                }
            }
        }
        Ok(text)
    }
}

/// Closes an orphaned message's parts: text a caller saw live but storage did not get yet is recovered from the
/// event log (`streamed`), open text and reasoning get their end time, and unfinished tools become `error: aborted`
/// (interrupted), except open client calls. Returns the parts that changed.
fn close_parts(
    m: &mut pb::Message,
    streamed: &HashMap<String, String>,
    ts: prost_types::Timestamp,
) -> Vec<pb::Part> {
    let mut changed: Vec<pb::Part> = Vec::new();
    for p in m.parts.iter_mut() {
        let recovered = match (streamed.get(&p.id), p.kind.as_mut()) {
            (Some(full), Some(pb::part::Kind::Text(pb::TextPart { text, .. })))
            | (Some(full), Some(pb::part::Kind::Reasoning(pb::ReasoningPart { text, .. })))
                if full.len() > text.len() && full.starts_with(text.as_str()) =>
            {
                text.clone_from(full);
                true
            }
            _ => false,
        };
        let open = open_client_call(p);
        let closed = match p.kind.as_mut() {
            Some(pb::part::Kind::Text(t)) if t.ended_at.is_none() => {
                t.ended_at = Some(ts);
                true
            }
            Some(pb::part::Kind::Reasoning(r)) if r.ended_at.is_none() => {
                r.ended_at = Some(ts);
                true
            }
            Some(pb::part::Kind::Tool(t)) if !open => {
                let s = t.state.get_or_insert_with(Default::default);
                if matches!(
                    s.status(),
                    pb::tool_state::Status::Completed | pb::tool_state::Status::Error
                ) {
                    false
                } else {
                    s.status = pb::tool_state::Status::Error as i32;
                    s.error = "aborted".into();
                    s.interrupted = true;
                    s.ended_at = Some(ts);
                    true
                }
            }
            _ => false,
        };
        if recovered || closed {
            changed.push(p.clone());
        }
    }
    changed
}
