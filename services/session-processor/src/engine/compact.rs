//! Compaction (docs/architecture.md "Compaction"): when the context no longer fits, the history is replaced by a model-written
//! continuation summary.
//!
//! A compaction is a new assistant message with a [`pb::CompactionPart`] and the summary step's parts (step-start,
//! the summary text, step-finish with its tokens and cost). Once it completes, the loop's history starts at it
//! ([`history::since_compaction`]): the summary is sent as the first user turn and nothing before it is sent again.
//! Then, depending on why it ran:
//! - an overflow cut off a user message that had no answer yet → that message is replayed (a synthetic copy after
//!   the summary), and the summary covers only what came before it;
//! - automatic, with the task unfinished (the last step called tools) → a synthetic "continue" user message;
//! - the answer was complete, or the caller asked (`Compact` RPC) → nothing: the loop ends, the next prompt
//!   continues from the summary.
//!
//! The replayed or "continue" message is written before the compaction message is completed, so a crash in between
//! leaves an unfinished compaction (closed as interrupted and ignored) and a history that simply compacts again.

use std::sync::Arc;

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use tokio_util::sync::CancellationToken;

use super::effects::Effects;
use super::inputs::RunInputs;
use super::persist::LoopWrites;
use super::policy::{Compaction, overflow_error};
use super::step::Steps;
use super::totals::Totals;
use super::{LoopError, now};
use crate::config::Agent;
use crate::context;
use crate::history;
use crate::ids;
use crate::processor::{Effect, Processor};
use crate::store::Fence;

/// How a compaction ended.
pub(super) enum Compacted {
    /// The summary is written; the loop goes on from it.
    Done(pb::Message),
    /// It failed; the error is on the returned message and was published. The loop stops.
    Failed(pb::Message),
    /// The caller aborted it.
    Aborted(pb::Message),
}

/// What one compaction runs with.
pub(super) struct CompactRun<'a> {
    /// The session.
    pub session: &'a pb::Session,
    /// Its agent.
    pub agent: &'a Agent,
    /// The history since the last compaction.
    pub view: &'a [pb::Message],
    /// Why it runs.
    pub cause: Compaction,
    /// The model that writes the summary.
    pub model: &'a str,
    /// The model's usable context, when known.
    pub usable: Option<u64>,
    /// The run's inputs (trace context).
    pub inputs: &'a RunInputs,
    /// The loop's lease.
    pub fence: &'a Fence,
    /// The caller's abort.
    pub cancel: &'a CancellationToken,
}

/// What a compaction summarises and what it replays.
struct Plan<'a> {
    /// The latest user message.
    last_user: Option<usize>,
    /// The user message an overflow cut off: it has no answer yet (only overflowed, retried or interrupted
    /// attempts), so it is replayed after the summary instead of being summarised.
    cut: Option<usize>,
    /// What the summary covers.
    input: &'a [pb::Message],
    /// Automatic, with the task unfinished (the last step called tools): a "continue" message follows.
    unfinished: bool,
}

impl<'a> Plan<'a> {
    fn of(view: &'a [pb::Message], cause: Compaction) -> Plan<'a> {
        let last_user = view.iter().rposition(|m| m.role() == pb::Role::User);
        let cut = last_user.filter(|&i| {
            cause.overflow
                && !view[i + 1..].iter().any(|m| {
                    m.role() == pb::Role::Assistant
                        && !history::is_compaction(m)
                        && !matches!(
                            m.finish.as_str(),
                            crate::processor::FINISH_OVERFLOW | "retried" | "interrupted"
                        )
                })
        });
        Plan {
            last_user,
            cut,
            input: cut.map_or(view, |i| &view[..i]),
            unfinished: cut.is_none() && cause.auto && history::needs_work(view),
        }
    }
}

/// The summary request: `input` rendered with tools as text, then the request for the summary; no tools.
fn summary_generation(c: &CompactRun<'_>, input: &[pb::Message]) -> gw::Generation {
    let render = super::request::render(input, c.agent, c.usable, true);
    let mut messages = history::to_gateway_with(input, &render);
    messages.push(gw::Message {
        role: gw::Role::User as i32,
        parts: vec![gw::Part {
            kind: Some(gw::part::Kind::Text(gw::TextPart {
                text: context::SUMMARY_REQUEST.into(),
            })),
        }],
    });
    gw::Generation {
        model: c.model.into(),
        system: vec![context::SUMMARY_SYSTEM.into()],
        messages,
        context: Some(gw::RequestContext {
            session_id: c.session.id.clone(),
            request_id: ids::new("req"),
            agent: c.agent.name.clone(),
        }),
        ..Default::default()
    }
}

/// Why a summary step that ended without a gateway error still failed: the summary itself overflowed, or it did not
/// finish with text.
fn summary_failure(processor: &Processor, model: &str) -> Option<pb::MessageError> {
    if processor.overflowed() {
        return Some(overflow_error(format!(
            "the conversation is too long for {model} to summarise: start a new session, or compact with a model \
             that has a larger context window"
        )));
    }
    if processor.message().error.is_some() {
        return None;
    }
    let summary = history::summary_text(&pb::Message {
        parts: processor.parts().to_vec(),
        ..Default::default()
    });
    (processor.message().finish != "stop" || summary.trim().is_empty()).then(|| {
        overflow_error(format!(
            "the summary did not complete (finish `{}`), so the history could not be compacted",
            processor.message().finish
        ))
    })
}

/// Runs compactions: the summary step and what follows it.
pub(super) struct Compactor {
    /// The summary step streams like a model step.
    pub(super) steps: Arc<Steps>,
    pub(super) effects: Arc<Effects>,
    pub(super) writes: Arc<LoopWrites>,
    pub(super) totals: Arc<Totals>,
}

impl Compactor {
    /// Closes what the summary step left open (as interrupted when `interrupted`), persists it with `out`, and
    /// settles the session's totals.
    /// The tenant is charged the summary's cost unless it was `interrupted`.
    async fn close_summary(
        &self,
        processor: &mut Processor,
        interrupted: bool,
        mut out: Vec<Effect>,
        c: &CompactRun<'_>,
    ) -> Result<(), LoopError> {
        processor.cleanup(now(), interrupted, &mut out);
        self.effects.apply(&mut out, c.fence, processor).await?;
        let charge = if interrupted {
            0
        } else {
            processor.message().cost_nano_usd
        };
        self.totals
            .settle_session(
                c.session,
                processor.message(),
                processor.parts(),
                c.fence,
                charge,
            )
            .await?;
        Ok(())
    }

    /// Runs one compaction of `c.view` (the history since the last compaction) with `c.model`.
    pub(super) async fn compact(&self, c: &CompactRun<'_>) -> Result<Compacted, LoopError> {
        let plan = Plan::of(c.view, c.cause);
        if plan.input.iter().all(history::is_compaction) {
            // Nothing new to summarise: with a cut message, only it (and an earlier summary) would be left, so
            // summarising cannot make it fit.
            let model = c.model;
            let error = overflow_error(if plan.cut.is_some() {
                format!(
                    "the message does not fit the context window of {model}, even after compacting the history \
                     before it: shorten it or start a new session"
                )
            } else {
                format!("the context does not fit {model} and there is nothing new to compact")
            });
            let m = self
                .writes
                .stop_with(&c.session.id, c.view, model, &c.agent.name, error, c.fence)
                .await?;
            return Ok(Compacted::Failed(m));
        }
        let mut processor = self.open_compaction(c, &plan).await?;
        let generation = summary_generation(c, plan.input);
        let aborted = self
            .steps
            .stream_step(
                &mut processor,
                generation,
                (&c.inputs.trace, &c.session.tenant),
                c.fence,
                c.cancel,
            )
            .await?
            .aborted;
        let mut out = Vec::new();
        if aborted || c.cancel.is_cancelled() {
            self.close_summary(&mut processor, true, out, c).await?;
            return Ok(Compacted::Aborted(processor.message().clone()));
        }
        if let Some(error) = summary_failure(&processor, c.model) {
            processor.fail(error, &mut out);
        }
        let ok = processor.message().error.is_none();
        if ok {
            // Written before the compaction completes (see the module docs).
            if let Some(i) = plan.cut {
                self.persist_synthetic_user(&c.view[i], None, c.fence)
                    .await?;
            } else if let (true, Some(i)) = (plan.unfinished, plan.last_user) {
                self.persist_synthetic_user(&c.view[i], Some(context::CONTINUE_TEXT), c.fence)
                    .await?;
            }
        }
        self.close_summary(&mut processor, false, out, c).await?;
        let m = processor.message().clone();
        if ok {
            tracing::info!(message = "history compacted", session_id = %c.session.id, auto = c.cause.auto, overflow = c.cause.overflow, replayed = plan.cut.is_some());
            return Ok(Compacted::Done(m));
        }
        if let Some(e) = m.error.clone() {
            self.writes.publish_error(&c.session.id, e).await?;
        }
        Ok(Compacted::Failed(m))
    }

    /// The compaction's assistant message (with its compaction part), written, and a Processor for its summary step.
    async fn open_compaction(
        &self,
        c: &CompactRun<'_>,
        plan: &Plan<'_>,
    ) -> Result<Processor, LoopError> {
        let parent = plan
            .last_user
            .map(|i| c.view[i].id.clone())
            .unwrap_or_default();
        let message = pb::Message {
            id: ids::new("msg"),
            session_id: c.session.id.clone(),
            role: pb::Role::Assistant as i32,
            parent_id: parent,
            model: c.model.into(),
            agent: c.agent.name.clone(),
            created_at: Some(now()),
            ..Default::default()
        };
        // No usable limit for the summary step itself: a summary that nears the limit is still a summary, and one
        // that does not fit fails with the provider's overflow error.
        let mut processor = Processor::new(message, None);
        let mut out = vec![Effect::Message(Box::new(processor.message().clone()))];
        processor.add_part(
            pb::part::Kind::Compaction(pb::CompactionPart {
                auto: c.cause.auto,
                overflow: c.cause.overflow,
            }),
            &mut out,
        );
        self.effects.apply(&mut out, c.fence, &processor).await?;
        Ok(processor)
    }

    /// Writes a synthetic user message after a compaction: a replay of `original` (its parts, model, agent and
    /// format; text marked synthetic) or, with `text`, a short instruction carrying `original`'s model, agent and
    /// format so the model priority and a requested structured output survive the compaction.
    async fn persist_synthetic_user(
        &self,
        original: &pb::Message,
        text: Option<&str>,
        fence: &Fence,
    ) -> Result<(), LoopError> {
        let created = now();
        let message = pb::Message {
            id: ids::new("msg"),
            session_id: original.session_id.clone(),
            role: pb::Role::User as i32,
            model: original.model.clone(),
            agent: original.agent.clone(),
            format: original.format.clone(),
            created_at: Some(created),
            ..Default::default()
        };
        let kinds: Vec<pb::part::Kind> = match text {
            Some(t) => vec![pb::part::Kind::Text(pb::TextPart {
                text: t.into(),
                started_at: Some(created),
                ended_at: Some(created),
                synthetic: true,
            })],
            None => original
                .parts
                .iter()
                .filter_map(|p| match p.kind.clone()? {
                    pb::part::Kind::Text(mut t) => {
                        t.synthetic = true;
                        Some(pb::part::Kind::Text(t))
                    }
                    k @ pb::part::Kind::File(_) => Some(k),
                    _ => None,
                })
                .collect(),
        };
        let parts: Vec<pb::Part> = kinds
            .into_iter()
            .map(|kind| pb::Part {
                id: ids::new("prt"),
                message_id: message.id.clone(),
                session_id: message.session_id.clone(),
                kind: Some(kind),
            })
            .collect();
        self.writes
            .put_and_publish_message(message, parts, Some(fence))
            .await?;
        Ok(())
    }
}
