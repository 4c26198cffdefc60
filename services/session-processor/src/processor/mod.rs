//! The Processor: one assistant message, built from one gateway step's unified events. No I/O: events in, effects
//! out; the run loop persists and publishes the effects and executes the tool calls.
//!
//! Rules (docs/architecture.md "The Processor"): text and reasoning parts are created on start, appended on delta, closed on end; a tool part
//! is `pending` on tool-input-start and `running` on tool-call; step-start writes the step-start part; step-finish
//! settles tokens and cost into the message and decides whether compaction is needed; a context-overflow error is a
//! compaction need, not a failure. Cleanup always runs: open text and reasoning get their end time, unfinished tools
//! become `error: aborted` (interrupted), and the message gets its completion time.
//!
//! The message-level state (finish, accounting, failure, compaction need, snapshots) is here; the parts, with the
//! blocks still open and the tool calls by call id, are [`StepParts`] (`parts.rs`), which the loop also records tool
//! results on; `wire.rs` holds the gateway's shapes as stored (finish names, errors, provider metadata).

use std::sync::Arc;
use std::time::Duration;

use compact_str::CompactString;
use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use prost_types::Timestamp;

use crate::event_wire::PartIds;
use crate::step_event::StepEvent;

mod parts;
mod wire;

use parts::Block;
pub use parts::StepParts;
pub use wire::{finish_name, message_error, metadata_from_json, metadata_json};

/// Finish of an assistant message whose step hit the context limit (a provider overflow error, also mid-stream):
/// not an answer, never replayed, and the reason a compaction is pending.
pub const FINISH_OVERFLOW: &str = "overflow";

/// What the run loop must do with a change.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// The message changed: persist it and publish `message_updated`. Boxed, as are the parts: an effect is
    /// otherwise the size of a whole message, and the per-delta path holds effects in its buffer and futures.
    Message(Box<pb::Message>),
    /// A part was created or changed: persist it and publish `part_updated`.
    Part(Box<pb::Part>),
    /// A part's state to persist without publishing it: its final state follows as a [`Effect::Part`] (a
    /// step-finish part waiting for its end snapshot), and each part's final state is published once.
    Persist(Box<pb::Part>),
    /// Text was appended to a part: publish `part_delta`; persistence is coalesced (the part's full text is in
    /// [`Processor::parts`]).
    Delta {
        /// The part and its message, shared by all the part's deltas.
        ids: Arc<PartIds>,
        /// The appended text (inline up to 24 bytes, as the gateway stream's reader decoded it).
        delta: CompactString,
    },
    /// A complete tool call to execute once the step's stream has ended.
    ToolCall {
        /// The tool part.
        part_id: String,
        /// The model's call id.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The complete input (JSON).
        input_json: String,
    },
}

/// What the loop does after this step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Go on with the next step (tool results to send, or nothing wrong).
    Continue,
    /// Stop the loop (an error, or a blocked tool).
    Stop,
    /// The context is too large: compact before anything else.
    Compact,
}

/// The Processor of one assistant message.
#[derive(Debug, Clone)]
pub struct Processor {
    message: pb::Message,
    /// Its parts, with its open blocks and tool calls.
    parts: StepParts,
    /// Usable context (input limit − reserve); a step whose context reaches it needs compaction.
    usable_context: Option<u64>,
    needs_compaction: bool,
    /// Index of the step-finish part while its publication waits for the end snapshot: with snapshots on, the
    /// part's final state (with the snapshot) is known only after the step's tools ran, and each part's final
    /// state is published once.
    held_finish: Option<usize>,
    /// The provider overflowed mid-stream: a compaction need that also marks the message.
    overflowed: bool,
    /// The workspace snapshot taken before the step (empty without one), written on the step-start part.
    start_snapshot: String,
    /// The gateway error that failed the step, kept beside the message error because the loop's retry decision
    /// needs what the stored error does not carry: the unified kind and the provider's `retry_after`.
    failure: Option<Failure>,
    /// The model the step asked for (the message's model before `stream-start` names the serving one), recorded on
    /// step-finish so a gateway fallback stays visible.
    requested_model: String,
}

/// Why a tool call was refused, which stops the loop after the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// The same tool calls kept repeating.
    DoomLoop,
    /// A permission rule (or the caller) denied the call.
    PermissionDenied,
}

/// What the loop needs to know about a failed step to decide on a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The gateway's unified error kind.
    pub kind: gw::ErrorKind,
    /// Whether the gateway said a retry may succeed.
    pub retryable: bool,
    /// How long the provider asked to wait, when it said.
    pub retry_after: Option<Duration>,
    /// The gateway did not wait out `retry_after` because it exceeds the gateway's own cap.
    pub retry_after_beyond_cap: bool,
}

impl Processor {
    /// A processor for a new assistant message (already created by the run loop).
    pub fn new(message: pb::Message, usable_context: Option<u64>) -> Processor {
        let requested_model = message.model.clone();
        Processor {
            requested_model,
            message,
            parts: StepParts::new(),
            usable_context,
            needs_compaction: false,
            held_finish: None,
            overflowed: false,
            failure: None,
            start_snapshot: String::new(),
        }
    }

    /// The gateway error that failed this step, if one did.
    pub fn failure(&self) -> Option<Failure> {
        self.failure
    }

    /// True when the provider said the context does not fit (before or during the output).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Records a failure the loop decided on (structured output, budget, context overflow): the message gets the
    /// error and the loop stops after this step.
    pub fn fail(&mut self, error: pb::MessageError, out: &mut Vec<Effect>) {
        self.message.error = Some(error);
        out.push(Effect::Message(Box::new(self.message.clone())));
    }

    /// Stores the validated structured output on the message. The answer is complete, so the message finishes
    /// with `stop` whatever the step's own finish reason (`tool_calls`) was, and the loop ends.
    pub fn set_structured_output(&mut self, json: String, out: &mut Vec<Effect>) {
        self.message.structured_output_json = json;
        self.message.finish = "stop".into();
        out.push(Effect::Message(Box::new(self.message.clone())));
    }

    /// The assistant message as it stands.
    pub fn message(&self) -> &pb::Message {
        &self.message
    }

    /// Every part so far, in creation order (ascending ids), and the step's tool calls.
    pub fn parts(&self) -> &StepParts {
        &self.parts
    }

    /// The step's parts, for the loop to record its tool calls' results on.
    pub fn parts_mut(&mut self) -> &mut StepParts {
        &mut self.parts
    }

    /// True when the step asked for compaction (context near or over the limit).
    pub fn needs_compaction(&self) -> bool {
        self.needs_compaction
    }

    /// Handles one gateway event.
    pub fn handle(&mut self, ev: gw::StreamResponse, now: Timestamp, out: &mut Vec<Effect>) {
        self.handle_at(ev, || now, out);
    }

    /// [`Processor::handle_at`] for an event as the loop reads the gateway stream: a delta as decoded, without the
    /// generated message.
    pub fn handle_event(
        &mut self,
        ev: StepEvent,
        clock: impl FnOnce() -> Timestamp,
        out: &mut Vec<Effect>,
    ) {
        match ev {
            StepEvent::Delta {
                reasoning,
                id,
                text,
            } => {
                let block = if reasoning {
                    Block::Reasoning
                } else {
                    Block::Text
                };
                self.parts
                    .append_to_block(&self.message, block, &id, text, out);
            }
            StepEvent::Other(ev) => self.handle_at(*ev, clock, out),
        }
    }

    /// [`Processor::handle`] with the time read from `clock` only by the events that stamp it (a part's start or
    /// end, a tool call's start): deltas, most of a stream, do not read the clock.
    pub fn handle_at(
        &mut self,
        ev: gw::StreamResponse,
        clock: impl FnOnce() -> Timestamp,
        out: &mut Vec<Effect>,
    ) {
        use gw::stream_response::Event as E;
        let Some(ev) = ev.event else { return };
        match ev {
            E::StreamStart(s) => {
                if self.message.model != s.model {
                    self.message.model = s.model;
                    out.push(Effect::Message(Box::new(self.message.clone())));
                }
            }
            E::StepStart(_) => {
                let snapshot = self.start_snapshot.clone();
                let kind = pb::part::Kind::StepStart(pb::StepStartPart { snapshot });
                self.add_part(kind, out);
            }
            E::TextStart(t) => self.open_block(Block::Text, t.id, clock(), out),
            E::TextDelta(d) => self.append(Block::Text, &d.id, d.delta.into(), out),
            E::TextEnd(t) => self
                .parts
                .close_block(Block::Text, &t.id, None, clock(), out),
            E::ReasoningStart(r) => self.open_block(Block::Reasoning, r.id, clock(), out),
            E::ReasoningDelta(d) => self.append(Block::Reasoning, &d.id, d.delta.into(), out),
            E::ReasoningEnd(r) => {
                let metadata = r.provider_metadata.as_ref();
                self.parts
                    .close_block(Block::Reasoning, &r.id, metadata, clock(), out);
            }
            E::ToolInputStart(t) => self.parts.tool_input_start(&self.message, t, out),
            E::ToolInputDelta(d) => self.parts.tool_input_delta(&d.call_id, &d.delta),
            // A keep-alive carries nothing; its arrival alone keeps the step's stream from looking idle.
            E::ToolInputEnd(_) | E::KeepAlive(_) => {}
            E::ToolCall(c) => self.parts.tool_call(&self.message, c, clock(), out),
            E::StepFinish(f) => self.step_finish(f, out),
            E::Error(e) => self.error(e, out),
        }
    }

    /// The step's end: its step-finish part and the message's accounting.
    fn step_finish(&mut self, f: gw::StepFinish, out: &mut Vec<Effect>) {
        let usage = f.usage.unwrap_or_default();
        let tokens = pb::Tokens {
            input: usage.input_tokens,
            output: usage.output_tokens,
            reasoning: usage.reasoning_tokens,
            cache_read: usage.cache_read_tokens,
            cache_write: usage.cache_write_tokens,
        };
        let cost = f.cost.map(|c| c.total_nano_usd).unwrap_or(0);
        let reason = finish_name(f.finish_reason()).to_string();
        let part = self.parts.add(
            &self.message,
            pb::part::Kind::StepFinish(pb::StepFinishPart {
                reason: reason.clone(),
                tokens: Some(tokens),
                cost_nano_usd: cost,
                snapshot: String::new(),
                model: self.message.model.clone(),
                requested_model: self.requested_model.clone(),
            }),
        );
        if self.start_snapshot.is_empty() {
            out.push(Effect::Part(Box::new(part)));
        } else {
            // Stored now (a crash during the tools must not lose the step's accounting), published with the end
            // snapshot.
            self.held_finish = Some(self.parts.len() - 1);
            out.push(Effect::Persist(Box::new(part)));
        }
        self.message.cost_nano_usd += cost;
        self.message.tokens = Some(tokens);
        self.message.finish = reason;
        if f.finish_reason() == gw::FinishReason::Length && self.message.error.is_none() {
            self.message.error = Some(pb::MessageError {
                kind: pb::message_error::Kind::OutputLength as i32,
                message: "the output token limit cut the answer".into(),
                http_status: 0,
                retryable: false,
            });
        }
        if let Some(usable) = self.usable_context {
            let context = usage.input_tokens
                + usage.cache_read_tokens
                + usage.cache_write_tokens
                + usage.output_tokens
                + usage.reasoning_tokens;
            if context >= usable {
                self.needs_compaction = true;
            }
        }
        out.push(Effect::Message(Box::new(self.message.clone())));
    }

    /// The step failed: an overflow asks for compaction, anything else is the step's failure.
    fn error(&mut self, e: gw::Error, out: &mut Vec<Effect>) {
        if e.kind() == gw::ErrorKind::ContextOverflow {
            self.needs_compaction = true;
            self.overflowed = true;
            return;
        }
        self.failure = Some(Failure {
            kind: e.kind(),
            retryable: e.retryable,
            retry_after: e.retry_after.and_then(|d| Duration::try_from(d).ok()),
            retry_after_beyond_cap: e.retry_after_beyond_cap,
        });
        self.message.error = Some(message_error(&e));
        out.push(Effect::Message(Box::new(self.message.clone())));
    }

    /// An answer with no output and no finish (the stream ended without a step-finish) finishes `other`: empty, and
    /// not an error.
    pub fn finish_empty_answer(&mut self) {
        if self.message.finish.is_empty()
            && self.message.error.is_none()
            && !self.overflowed
            && self.is_empty_answer()
        {
            self.message.finish = "other".into();
        }
    }

    /// True when the model produced nothing: no text, no reasoning, no tool call.
    pub fn is_empty_answer(&self) -> bool {
        self.parts.iter().all(|p| match &p.kind {
            Some(pb::part::Kind::Text(t)) => t.text.is_empty(),
            Some(pb::part::Kind::Reasoning(r)) => {
                r.text.is_empty() && r.provider_metadata_json.is_empty()
            }
            Some(pb::part::Kind::Tool(_)) => false,
            _ => true,
        })
    }

    /// Always runs at the end of a step, whatever happened: closes open text and reasoning, turns unfinished tools
    /// into `error: aborted` (interrupted), and sets the completion time. `aborted` records an abort as the
    /// message's error when it has none.
    pub fn cleanup(&mut self, now: Timestamp, aborted: bool, out: &mut Vec<Effect>) {
        self.parts.close_all(now, out);
        if aborted && self.message.error.is_none() {
            self.message.error = Some(pb::MessageError {
                kind: pb::message_error::Kind::Aborted as i32,
                message: "aborted".into(),
                http_status: 0,
                retryable: false,
            });
        }
        if self.overflowed && self.message.finish.is_empty() {
            // The step never finished: what it produced is superseded by the compaction that follows, so the
            // message is marked and not replayed. Whether the overflow is a failure is the loop's call (it is not
            // when the history can be compacted).
            self.message.finish = FINISH_OVERFLOW.into();
        }
        if let Some(part) = self.held_finish.take().and_then(|i| self.parts.get(i)) {
            // No end snapshot came: the step-finish part is final as it is.
            out.push(Effect::Part(Box::new(part.clone())));
        }
        self.message.completed_at = Some(now);
        out.push(Effect::Message(Box::new(self.message.clone())));
    }

    /// Closeout: compaction first, then stop on error or block, else continue.
    pub fn outcome(&self) -> Outcome {
        if self.needs_compaction {
            Outcome::Compact
        } else if self.parts.blocked().is_some() || self.message.error.is_some() {
            Outcome::Stop
        } else {
            Outcome::Continue
        }
    }

    /// Sets the workspace snapshot taken before the step; the step-start part carries it.
    pub fn set_start_snapshot(&mut self, snapshot: String) {
        self.start_snapshot = snapshot;
    }

    /// The workspace snapshot taken before the step (empty without one).
    pub fn start_snapshot(&self) -> &str {
        &self.start_snapshot
    }

    /// Records the snapshot taken after the step and its tools: the step-finish part gets it, and when files changed
    /// a patch part (relative to the start snapshot, files sorted) follows the step's other parts.
    pub fn finish_snapshot(
        &mut self,
        after: String,
        mut changes: Vec<pb::FileChange>,
        out: &mut Vec<Effect>,
    ) {
        if let Some(part) = self.held_finish.take().and_then(|i| self.parts.get_mut(i))
            && let Some(pb::part::Kind::StepFinish(finish)) = part.kind.as_mut()
        {
            finish.snapshot.clone_from(&after);
            out.push(Effect::Part(Box::new(part.clone())));
        }
        if changes.is_empty() {
            return;
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        let patch = pb::part::Kind::Patch(pb::PatchPart {
            hash: self.start_snapshot.clone(),
            files: changes.iter().map(|c| c.path.clone()).collect(),
            after,
            changes,
        });
        self.add_part(patch, out);
    }

    /// Adds a part (one the loop creates itself, such as a compaction marker, or the step's own) and emits it.
    pub fn add_part(&mut self, kind: pb::part::Kind, out: &mut Vec<Effect>) {
        let part = self.parts.add(&self.message, kind);
        out.push(Effect::Part(Box::new(part)));
    }

    /// A text or reasoning block starts (see [`StepParts`]).
    fn open_block(&mut self, block: Block, id: String, now: Timestamp, out: &mut Vec<Effect>) {
        self.parts.open_block(&self.message, block, id, now, out);
    }

    /// Text for an open block (see [`StepParts`]).
    fn append(&mut self, block: Block, id: &str, delta: CompactString, out: &mut Vec<Effect>) {
        self.parts
            .append_to_block(&self.message, block, id, delta, out);
    }
}

#[cfg(test)]
mod tests;
