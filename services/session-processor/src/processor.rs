//! The Processor: one assistant message, built from one gateway step's unified events. No I/O: events in, effects
//! out; the run loop persists and publishes the effects and executes the tool calls.
//!
//! Rules (docs/architecture.md "The Processor"): text and reasoning parts are created on start, appended on delta, closed on end; a tool part
//! is `pending` on tool-input-start and `running` on tool-call; step-start writes the step-start part; step-finish
//! settles tokens and cost into the message and decides whether compaction is needed; a context-overflow error is a
//! compaction need, not a failure. Cleanup always runs: open text and reasoning get their end time, unfinished tools
//! become `error: aborted` (interrupted), and the message gets its completion time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use compact_str::CompactString;
use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use prost_types::Timestamp;

use crate::event_wire::PartIds;
use crate::ids;
use crate::step_event::StepEvent;

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
    /// [`Processor::part`]).
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

/// Open blocks by gateway block id: looked up for every delta, so hashed with a fast seeded hasher rather than
/// SipHash (the ids come from the gateway, and the hasher is still seeded per map).
type Blocks = HashMap<String, usize, foldhash::fast::RandomState>;

/// The Processor of one assistant message.
#[derive(Debug, Clone)]
pub struct Processor {
    message: pb::Message,
    parts: Vec<pb::Part>,
    /// Gateway block id → index in `parts`, for open text blocks.
    text_blocks: Blocks,
    /// By index in `parts`: the ids its deltas carry, made at its first delta.
    delta_ids: Vec<Option<Arc<PartIds>>>,
    /// Gateway block id → index in `parts`, for open reasoning blocks.
    reasoning_blocks: Blocks,
    /// Call id → index in `parts`.
    tools: HashMap<String, usize>,
    /// Usable context (input limit − reserve); a step whose context reaches it needs compaction.
    usable_context: Option<u64>,
    needs_compaction: bool,
    /// A tool was denied or a doom loop refused: the loop stops after this step.
    blocked: Option<Blocked>,
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
            // A step's usual parts: its start, one text, its finish (a part is a quarter of a kilobyte, and a
            // vector's first growth would make room for four).
            parts: Vec::with_capacity(3),
            text_blocks: Blocks::default(),
            delta_ids: Vec::new(),
            reasoning_blocks: Blocks::default(),
            tools: HashMap::new(),
            usable_context,
            needs_compaction: false,
            blocked: None,
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

    /// Every part so far, in creation order (ascending ids).
    pub fn parts(&self) -> &[pb::Part] {
        &self.parts
    }

    /// One part by id.
    pub fn part(&self, part_id: &str) -> Option<&pb::Part> {
        self.parts.iter().find(|p| p.id == part_id)
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
                self.append_to_block(block, &id, text, out);
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
                let part = self.new_part(pb::part::Kind::StepStart(pb::StepStartPart {
                    snapshot: self.start_snapshot.clone(),
                }));
                out.push(Effect::Part(Box::new(part)));
            }
            E::TextStart(t) => self.open_block(Block::Text, t.id, clock(), out),
            E::TextDelta(d) => self.append_to_block(Block::Text, &d.id, d.delta.into(), out),
            E::TextEnd(t) => self.close_block(Block::Text, &t.id, None, clock(), out),
            E::ReasoningStart(r) => self.open_block(Block::Reasoning, r.id, clock(), out),
            E::ReasoningDelta(d) => {
                self.append_to_block(Block::Reasoning, &d.id, d.delta.into(), out);
            }
            E::ReasoningEnd(r) => {
                let metadata = r.provider_metadata.as_ref();
                self.close_block(Block::Reasoning, &r.id, metadata, clock(), out);
            }
            E::ToolInputStart(t) => self.tool_input_start(t, out),
            E::ToolInputDelta(d) => {
                // Kept in memory so a crash mid-call still shows how far the input got; not published per delta.
                if let Some(state) = self.tool_state_mut(&d.call_id) {
                    state.input_json.push_str(&d.delta);
                }
            }
            E::ToolInputEnd(_) => {}
            E::ToolCall(c) => self.tool_call(c, clock(), out),
            E::StepFinish(f) => self.step_finish(f, out),
            E::Error(e) => self.error(e, out),
        }
    }

    /// A tool call's input starts streaming: its part appears, pending.
    fn tool_input_start(&mut self, t: gw::ToolInputStart, out: &mut Vec<Effect>) {
        if self.tools.contains_key(&t.call_id) {
            return;
        }
        let part = self.new_part(pb::part::Kind::Tool(pb::ToolPart {
            call_id: t.call_id.clone(),
            tool: t.tool_name,
            state: Some(pb::ToolState {
                status: pb::tool_state::Status::Pending as i32,
                ..Default::default()
            }),
            provider_metadata_json: String::new(),
        }));
        self.tools.insert(t.call_id, self.parts.len() - 1);
        out.push(Effect::Part(Box::new(part)));
    }

    /// A complete tool call: its part runs, and the loop is asked to run the tool.
    fn tool_call(&mut self, c: gw::ToolCall, now: Timestamp, out: &mut Vec<Effect>) {
        let i = match self.tools.get(&c.call_id) {
            Some(&i) => i,
            None => {
                self.new_part(pb::part::Kind::Tool(pb::ToolPart {
                    call_id: c.call_id.clone(),
                    tool: c.tool_name.clone(),
                    state: Some(pb::ToolState::default()),
                    provider_metadata_json: String::new(),
                }));
                self.tools.insert(c.call_id.clone(), self.parts.len() - 1);
                self.parts.len() - 1
            }
        };
        let part = &mut self.parts[i];
        if let Some(pb::part::Kind::Tool(tool)) = part.kind.as_mut() {
            tool.tool.clone_from(&c.tool_name);
            tool.provider_metadata_json = metadata_json(c.provider_metadata.as_ref());
            let state = tool.state.get_or_insert_with(Default::default);
            state.status = pb::tool_state::Status::Running as i32;
            state.input_json.clone_from(&c.input_json);
            state.started_at = Some(now);
        }
        out.push(Effect::Part(Box::new(part.clone())));
        out.push(Effect::ToolCall {
            part_id: part.id.clone(),
            call_id: c.call_id,
            tool: c.tool_name,
            input_json: c.input_json,
        });
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
        let part = self.new_part(pb::part::Kind::StepFinish(pb::StepFinishPart {
            reason: reason.clone(),
            tokens: Some(tokens),
            cost_nano_usd: cost,
            snapshot: String::new(),
            model: self.message.model.clone(),
            requested_model: self.requested_model.clone(),
        }));
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

    /// A tool finished (`Ok(output)`) or failed (`Err(message the model sees)`).
    pub fn tool_finished(
        &mut self,
        call_id: &str,
        result: Result<String, String>,
        now: Timestamp,
        out: &mut Vec<Effect>,
    ) {
        let Some(&i) = self.tools.get(call_id) else {
            return;
        };
        if let Some(pb::part::Kind::Tool(tool)) = self.parts[i].kind.as_mut() {
            let state = tool.state.get_or_insert_with(Default::default);
            match result {
                Ok(output) => {
                    state.status = pb::tool_state::Status::Completed as i32;
                    state.output = output;
                }
                Err(error) => {
                    state.status = pb::tool_state::Status::Error as i32;
                    state.error = error;
                }
            }
            state.ended_at = Some(now);
            out.push(Effect::Part(Box::new(self.parts[i].clone())));
        }
    }

    /// Marks a tool as answered by the caller (client tool) before it runs.
    pub fn mark_client_tool(&mut self, call_id: &str) {
        if let Some(state) = self.tool_state_mut(call_id) {
            state.client = true;
        }
    }

    /// A tool call was refused (permission denied, doom loop): the model sees `reason` and the loop stops.
    pub fn block(
        &mut self,
        call_id: &str,
        why: Blocked,
        reason: &str,
        now: Timestamp,
        out: &mut Vec<Effect>,
    ) {
        self.blocked.get_or_insert(why);
        self.tool_finished(call_id, Err(reason.to_string()), now, out);
    }

    /// Why a tool call of this step was refused, if one was.
    pub fn blocked(&self) -> Option<Blocked> {
        self.blocked
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
        for block in [Block::Text, Block::Reasoning] {
            let open: Vec<usize> = self.blocks(block).drain().map(|(_, i)| i).collect();
            for i in open {
                if let Some(streamed) = block.streamed(&mut self.parts[i])
                    && streamed.ended_at.is_none()
                {
                    *streamed.ended_at = Some(now);
                    out.push(Effect::Part(Box::new(self.parts[i].clone())));
                }
            }
        }
        for i in 0..self.parts.len() {
            if let Some(pb::part::Kind::Tool(tool)) = self.parts[i].kind.as_mut() {
                let state = tool.state.get_or_insert_with(Default::default);
                let unfinished = matches!(
                    state.status(),
                    pb::tool_state::Status::Pending
                        | pb::tool_state::Status::Running
                        | pb::tool_state::Status::Unspecified
                );
                if unfinished {
                    state.status = pb::tool_state::Status::Error as i32;
                    state.error = "aborted".into();
                    state.interrupted = true;
                    state.ended_at = Some(now);
                    out.push(Effect::Part(Box::new(self.parts[i].clone())));
                }
            }
        }
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
        if let Some(i) = self.held_finish.take() {
            // No end snapshot came: the step-finish part is final as it is.
            out.push(Effect::Part(Box::new(self.parts[i].clone())));
        }
        self.message.completed_at = Some(now);
        out.push(Effect::Message(Box::new(self.message.clone())));
    }

    /// Closeout: compaction first, then stop on error or block, else continue.
    pub fn outcome(&self) -> Outcome {
        if self.needs_compaction {
            Outcome::Compact
        } else if self.blocked.is_some() || self.message.error.is_some() {
            Outcome::Stop
        } else {
            Outcome::Continue
        }
    }

    /// Calls that were made in this step, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &pb::ToolPart> {
        self.parts.iter().filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Tool(t)) => Some(t),
            _ => None,
        })
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
        if let Some(i) = self.held_finish.take()
            && let Some(pb::part::Kind::StepFinish(finish)) = self.parts[i].kind.as_mut()
        {
            finish.snapshot.clone_from(&after);
            out.push(Effect::Part(Box::new(self.parts[i].clone())));
        }
        if changes.is_empty() {
            return;
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        let patch = self.new_part(pb::part::Kind::Patch(pb::PatchPart {
            hash: self.start_snapshot.clone(),
            files: changes.iter().map(|c| c.path.clone()).collect(),
            after,
            changes,
        }));
        out.push(Effect::Part(Box::new(patch)));
    }

    /// Adds a part the loop creates itself (a compaction marker) and emits it.
    pub fn add_part(&mut self, kind: pb::part::Kind, out: &mut Vec<Effect>) {
        let part = self.new_part(kind);
        out.push(Effect::Part(Box::new(part)));
    }

    fn new_part(&mut self, kind: pb::part::Kind) -> pb::Part {
        let part = pb::Part {
            id: ids::new("prt"),
            message_id: self.message.id.clone(),
            session_id: self.message.session_id.clone(),
            kind: Some(kind),
        };
        self.parts.push(part.clone());
        part
    }

    /// A text or reasoning block starts: its part is created open (started now, empty) and emitted.
    fn open_block(&mut self, block: Block, id: String, now: Timestamp, out: &mut Vec<Effect>) {
        let part = self.new_part(block.open(now));
        let index = self.parts.len() - 1;
        self.blocks(block).insert(id, index);
        out.push(Effect::Part(Box::new(part)));
    }

    /// Text for an open block: appended to its part and emitted as a delta. A block id that is not open (or not
    /// of this kind) is ignored.
    fn append_to_block(
        &mut self,
        block: Block,
        id: &str,
        delta: CompactString,
        out: &mut Vec<Effect>,
    ) {
        let Some(&i) = self.blocks(block).get(id) else {
            return;
        };
        if let Some(streamed) = block.streamed(&mut self.parts[i]) {
            streamed.text.push_str(&delta);
            out.push(self.delta(i, delta));
        }
    }

    /// A block ends: its part gets the end time (and, for reasoning, the provider metadata) and is emitted.
    fn close_block(
        &mut self,
        block: Block,
        id: &str,
        metadata: Option<&gw::ProviderMetadata>,
        now: Timestamp,
        out: &mut Vec<Effect>,
    ) {
        let Some(i) = self.blocks(block).remove(id) else {
            return;
        };
        if let Some(streamed) = block.streamed(&mut self.parts[i]) {
            *streamed.ended_at = Some(now);
            if let Some(json) = streamed.provider_metadata_json {
                *json = metadata_json(metadata);
            }
            out.push(Effect::Part(Box::new(self.parts[i].clone())));
        }
    }

    /// The open blocks of one kind: gateway block id → index in `parts`.
    fn blocks(&mut self, block: Block) -> &mut Blocks {
        match block {
            Block::Text => &mut self.text_blocks,
            Block::Reasoning => &mut self.reasoning_blocks,
        }
    }

    fn delta(&mut self, i: usize, delta: CompactString) -> Effect {
        if self.delta_ids.len() <= i {
            self.delta_ids.resize(i + 1, None);
        }
        let ids = self.delta_ids[i].get_or_insert_with(|| {
            Arc::new(PartIds {
                part_id: self.parts[i].id.clone(),
                message_id: self.message.id.clone(),
            })
        });
        Effect::Delta {
            ids: Arc::clone(ids),
            delta,
        }
    }

    fn tool_state_mut(&mut self, call_id: &str) -> Option<&mut pb::ToolState> {
        let &i = self.tools.get(call_id)?;
        match self.parts[i].kind.as_mut() {
            Some(pb::part::Kind::Tool(t)) => Some(t.state.get_or_insert_with(Default::default)),
            _ => None,
        }
    }
}

/// The two kinds of streamed block, text and reasoning: both are opened, appended to and closed alike, and differ
/// only in the part they fill (reasoning also keeps the provider's metadata from its end event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Reasoning,
}

/// The fields a streamed block writes on its part.
struct Streamed<'a> {
    text: &'a mut String,
    ended_at: &'a mut Option<Timestamp>,
    /// Reasoning only.
    provider_metadata_json: Option<&'a mut String>,
}

impl Block {
    /// A new part of this kind, started at `now`, with no text yet.
    fn open(self, now: Timestamp) -> pb::part::Kind {
        match self {
            Block::Text => pb::part::Kind::Text(pb::TextPart {
                text: String::new(),
                started_at: Some(now),
                ended_at: None,
                synthetic: false,
            }),
            Block::Reasoning => pb::part::Kind::Reasoning(pb::ReasoningPart {
                text: String::new(),
                provider_metadata_json: String::new(),
                started_at: Some(now),
                ended_at: None,
            }),
        }
    }

    /// The streamed fields of `part`, when it is a part of this kind.
    fn streamed(self, part: &mut pb::Part) -> Option<Streamed<'_>> {
        match (self, part.kind.as_mut()?) {
            (Block::Text, pb::part::Kind::Text(t)) => Some(Streamed {
                text: &mut t.text,
                ended_at: &mut t.ended_at,
                provider_metadata_json: None,
            }),
            (Block::Reasoning, pb::part::Kind::Reasoning(r)) => Some(Streamed {
                text: &mut r.text,
                ended_at: &mut r.ended_at,
                provider_metadata_json: Some(&mut r.provider_metadata_json),
            }),
            _ => None,
        }
    }
}

/// The unified finish reason as stored on messages and step-finish parts.
pub fn finish_name(r: gw::FinishReason) -> &'static str {
    match r {
        gw::FinishReason::Stop => "stop",
        gw::FinishReason::Length => "length",
        gw::FinishReason::ToolCalls => "tool_calls",
        gw::FinishReason::ContentFilter => "content_filter",
        gw::FinishReason::Error => "error",
        gw::FinishReason::Other | gw::FinishReason::Unspecified => "other",
    }
}

/// A gateway error as a message error.
pub fn message_error(e: &gw::Error) -> pb::MessageError {
    let kind = match e.kind() {
        gw::ErrorKind::Auth => pb::message_error::Kind::Auth,
        gw::ErrorKind::ContextOverflow => pb::message_error::Kind::ContextOverflow,
        gw::ErrorKind::Cancelled => pb::message_error::Kind::Aborted,
        _ => pb::message_error::Kind::Api,
    };
    pb::MessageError {
        kind: kind as i32,
        message: e.message.clone(),
        http_status: e.http_status,
        retryable: e.retryable,
    }
}

/// Provider metadata stored on parts as one JSON object, so it goes back to the gateway unchanged.
pub fn metadata_json(m: Option<&gw::ProviderMetadata>) -> String {
    match m {
        Some(m) => serde_json::json!({"protocol": m.protocol, "model": m.model, "json": m.json})
            .to_string(),
        None => String::new(),
    }
}

/// The inverse of [`metadata_json`].
pub fn metadata_from_json(s: &str) -> Option<gw::ProviderMetadata> {
    if s.is_empty() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(s).ok()?;
    Some(gw::ProviderMetadata {
        protocol: v.get("protocol")?.as_str()?.to_string(),
        model: v.get("model")?.as_str()?.to_string(),
        json: v.get("json")?.as_str()?.to_string(),
    })
}

#[cfg(test)]
#[path = "processor_tests.rs"]
mod tests;
