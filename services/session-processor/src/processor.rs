//! The Processor: one assistant message, built from one gateway step's unified events. No I/O: events in, effects
//! out; the run loop persists and publishes the effects and executes the tool calls.
//!
//! Rules (docs/architecture.md "The Processor"): text and reasoning parts are created on start, appended on delta, closed on end; a tool part
//! is `pending` on tool-input-start and `running` on tool-call; step-start writes the step-start part; step-finish
//! settles tokens and cost into the message and decides whether compaction is needed; a context-overflow error is a
//! compaction need, not a failure. Cleanup always runs: open text and reasoning get their end time, unfinished tools
//! become `error: aborted` (interrupted), and the message gets its completion time.

use std::collections::HashMap;
use std::time::Duration;

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use prost_types::Timestamp;

use crate::ids;

/// What the run loop must do with a change.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// The message changed: persist it and publish `message_updated`.
    Message(pb::Message),
    /// A part was created or changed: persist it and publish `part_updated`.
    Part(pb::Part),
    /// A part's state to persist without publishing it: its final state follows as a [`Effect::Part`] (a
    /// step-finish part waiting for its end snapshot), and each part's final state is published once.
    Persist(pb::Part),
    /// Text was appended to a part: publish `part_delta`; persistence is coalesced (the part's full text is in
    /// [`Processor::part`]).
    Delta {
        /// The part.
        part_id: String,
        /// Its message.
        message_id: String,
        /// The appended text.
        delta: String,
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
    parts: Vec<pb::Part>,
    /// Gateway block id → index in `parts`, for open text blocks.
    text_blocks: HashMap<String, usize>,
    /// Gateway block id → index in `parts`, for open reasoning blocks.
    reasoning_blocks: HashMap<String, usize>,
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
            parts: Vec::new(),
            text_blocks: HashMap::new(),
            reasoning_blocks: HashMap::new(),
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
        out.push(Effect::Message(self.message.clone()));
    }

    /// Stores the validated structured output on the message. The answer is complete, so the message finishes
    /// with `stop` whatever the step's own finish reason (`tool_calls`) was, and the loop ends.
    pub fn set_structured_output(&mut self, json: String, out: &mut Vec<Effect>) {
        self.message.structured_output_json = json;
        self.message.finish = "stop".into();
        out.push(Effect::Message(self.message.clone()));
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
        use gw::stream_response::Event as E;
        let Some(ev) = ev.event else { return };
        match ev {
            E::StreamStart(s) => {
                if self.message.model != s.model {
                    self.message.model = s.model;
                    out.push(Effect::Message(self.message.clone()));
                }
            }
            E::StepStart(_) => {
                let part = self.new_part(pb::part::Kind::StepStart(pb::StepStartPart {
                    snapshot: self.start_snapshot.clone(),
                }));
                out.push(Effect::Part(part));
            }
            E::TextStart(t) => self.open_block(Block::Text, t.id, now, out),
            E::TextDelta(d) => self.append_to_block(Block::Text, &d.id, d.delta, out),
            E::TextEnd(t) => self.close_block(Block::Text, &t.id, None, now, out),
            E::ReasoningStart(r) => self.open_block(Block::Reasoning, r.id, now, out),
            E::ReasoningDelta(d) => self.append_to_block(Block::Reasoning, &d.id, d.delta, out),
            E::ReasoningEnd(r) => {
                let metadata = r.provider_metadata.as_ref();
                self.close_block(Block::Reasoning, &r.id, metadata, now, out);
            }
            E::ToolInputStart(t) => {
                if !self.tools.contains_key(&t.call_id) {
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
                    out.push(Effect::Part(part));
                }
            }
            E::ToolInputDelta(d) => {
                // Kept in memory so a crash mid-call still shows how far the input got; not published per delta.
                if let Some(state) = self.tool_state_mut(&d.call_id) {
                    state.input_json.push_str(&d.delta);
                }
            }
            E::ToolInputEnd(_) => {}
            E::ToolCall(c) => {
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
                out.push(Effect::Part(part.clone()));
                out.push(Effect::ToolCall {
                    part_id: part.id.clone(),
                    call_id: c.call_id,
                    tool: c.tool_name,
                    input_json: c.input_json,
                });
            }
            E::StepFinish(f) => {
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
                    out.push(Effect::Part(part));
                } else {
                    // Stored now (a crash during the tools must not lose the step's accounting), published with
                    // the end snapshot.
                    self.held_finish = Some(self.parts.len() - 1);
                    out.push(Effect::Persist(part));
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
                out.push(Effect::Message(self.message.clone()));
            }
            E::Error(e) => {
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
                out.push(Effect::Message(self.message.clone()));
            }
        }
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
            out.push(Effect::Part(self.parts[i].clone()));
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
                    out.push(Effect::Part(self.parts[i].clone()));
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
                    out.push(Effect::Part(self.parts[i].clone()));
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
            self.message.finish = crate::history::FINISH_OVERFLOW.into();
        }
        if let Some(i) = self.held_finish.take() {
            // No end snapshot came: the step-finish part is final as it is.
            out.push(Effect::Part(self.parts[i].clone()));
        }
        self.message.completed_at = Some(now);
        out.push(Effect::Message(self.message.clone()));
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
            out.push(Effect::Part(self.parts[i].clone()));
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
        out.push(Effect::Part(patch));
    }

    /// Adds a part the loop creates itself (a compaction marker) and emits it.
    pub fn add_part(&mut self, kind: pb::part::Kind, out: &mut Vec<Effect>) {
        let part = self.new_part(kind);
        out.push(Effect::Part(part));
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
        out.push(Effect::Part(part));
    }

    /// Text for an open block: appended to its part and emitted as a delta. A block id that is not open (or not
    /// of this kind) is ignored.
    fn append_to_block(&mut self, block: Block, id: &str, delta: String, out: &mut Vec<Effect>) {
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
            out.push(Effect::Part(self.parts[i].clone()));
        }
    }

    /// The open blocks of one kind: gateway block id → index in `parts`.
    fn blocks(&mut self, block: Block) -> &mut HashMap<String, usize> {
        match block {
            Block::Text => &mut self.text_blocks,
            Block::Reasoning => &mut self.reasoning_blocks,
        }
    }

    fn delta(&self, i: usize, delta: String) -> Effect {
        Effect::Delta {
            part_id: self.parts[i].id.clone(),
            message_id: self.message.id.clone(),
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
mod tests {
    use super::*;
    use gw::stream_response::Event as E;

    fn ts(s: i64) -> Timestamp {
        Timestamp {
            seconds: s,
            nanos: 0,
        }
    }

    fn ev(e: E) -> gw::StreamResponse {
        gw::StreamResponse { event: Some(e) }
    }

    fn processor() -> Processor {
        Processor::new(
            pb::Message {
                id: "msg_1".into(),
                session_id: "ses_1".into(),
                role: pb::Role::Assistant as i32,
                model: "openai/gpt-4o".into(),
                ..Default::default()
            },
            Some(1000),
        )
    }

    fn feed(p: &mut Processor, events: Vec<E>) -> Vec<Effect> {
        let mut out = Vec::new();
        for (i, e) in events.into_iter().enumerate() {
            p.handle(ev(e), ts(i as i64), &mut out);
        }
        out
    }

    fn text_start(id: &str) -> E {
        E::TextStart(gw::TextStart { id: id.into() })
    }

    fn text_delta(id: &str, delta: &str) -> E {
        E::TextDelta(gw::TextDelta {
            id: id.into(),
            delta: delta.into(),
        })
    }

    fn text_end(id: &str) -> E {
        E::TextEnd(gw::TextEnd { id: id.into() })
    }

    fn reasoning_start(id: &str) -> E {
        E::ReasoningStart(gw::ReasoningStart { id: id.into() })
    }

    fn reasoning_delta(id: &str, delta: &str) -> E {
        E::ReasoningDelta(gw::ReasoningDelta {
            id: id.into(),
            delta: delta.into(),
        })
    }

    fn tool_input_start(call_id: &str, tool: &str) -> E {
        E::ToolInputStart(gw::ToolInputStart {
            call_id: call_id.into(),
            tool_name: tool.into(),
        })
    }

    fn tool_call(call_id: &str, tool: &str, input_json: &str) -> E {
        E::ToolCall(gw::ToolCall {
            call_id: call_id.into(),
            tool_name: tool.into(),
            input_json: input_json.into(),
            provider_metadata: None,
        })
    }

    /// The provider said the context does not fit.
    fn overflow(message: &str) -> E {
        E::Error(gw::Error {
            kind: gw::ErrorKind::ContextOverflow as i32,
            message: message.into(),
            ..Default::default()
        })
    }

    /// A retryable provider error with its HTTP status.
    fn retryable(kind: gw::ErrorKind, message: &str, http_status: u32) -> gw::Error {
        gw::Error {
            kind: kind as i32,
            message: message.into(),
            retryable: true,
            http_status,
            ..Default::default()
        }
    }

    fn finish(reason: gw::FinishReason, input: u64, cost: i64) -> E {
        E::StepFinish(gw::StepFinish {
            finish_reason: reason as i32,
            raw_finish_reason: String::new(),
            usage: Some(gw::Usage {
                input_tokens: input,
                output_tokens: 10,
                ..Default::default()
            }),
            cost: Some(gw::Cost {
                total_nano_usd: cost,
                priced: true,
            }),
            response_id: "r".into(),
            response_model: "m".into(),
        })
    }

    #[test]
    fn text_is_created_on_start_appended_on_delta_and_closed_on_end() {
        let mut p = processor();
        let out = feed(
            &mut p,
            vec![
                E::StepStart(gw::StepStart {}),
                text_start("t"),
                text_delta("t", "Hel"),
                text_delta("t", "lo"),
                text_end("t"),
            ],
        );
        assert!(
            matches!(&out[0], Effect::Part(p) if matches!(p.kind, Some(pb::part::Kind::StepStart(_))))
        );
        let deltas: Vec<_> = out
            .iter()
            .filter_map(|e| {
                if let Effect::Delta { delta, .. } = e {
                    Some(delta.as_str())
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(deltas, ["Hel", "lo"]);
        let Some(pb::part::Kind::Text(t)) = &p.parts()[1].kind else {
            panic!()
        };
        assert_eq!(t.text, "Hello");
        assert_eq!(t.started_at, Some(ts(1)));
        assert_eq!(t.ended_at, Some(ts(4)));
        assert!(matches!(out.last(), Some(Effect::Part(_))));
    }

    #[test]
    fn text_and_reasoning_blocks_emit_their_part_on_start_and_end_and_every_delta_between() {
        let mut p = processor();
        let metadata = gw::ProviderMetadata {
            protocol: "anthropic".into(),
            model: "anthropic/x".into(),
            json: "{\"signature\":\"s\"}".into(),
        };
        let out = feed(
            &mut p,
            vec![
                text_start("t"),
                reasoning_start("r"),
                text_delta("t", "a"),
                reasoning_delta("r", "b"),
                // Ids of the other kind, or of no open block, change nothing.
                text_delta("r", "x"),
                reasoning_delta("t", "y"),
                text_end("nope"),
                E::ReasoningEnd(gw::ReasoningEnd {
                    id: "t".into(),
                    provider_metadata: None,
                }),
                text_end("t"),
                E::ReasoningEnd(gw::ReasoningEnd {
                    id: "r".into(),
                    provider_metadata: Some(metadata.clone()),
                }),
                // A closed block takes no more text.
                text_delta("t", "late"),
            ],
        );
        let (text_id, reasoning_id) = (p.parts()[0].id.clone(), p.parts()[1].id.clone());
        let part = |id: &str, kind| pb::Part {
            id: id.into(),
            message_id: "msg_1".into(),
            session_id: "ses_1".into(),
            kind: Some(kind),
        };
        let text = |text: &str, ended_at| {
            pb::part::Kind::Text(pb::TextPart {
                text: text.into(),
                started_at: Some(ts(0)),
                ended_at,
                synthetic: false,
            })
        };
        let reasoning = |text: &str, provider_metadata_json: String, ended_at| {
            pb::part::Kind::Reasoning(pb::ReasoningPart {
                text: text.into(),
                provider_metadata_json,
                started_at: Some(ts(1)),
                ended_at,
            })
        };
        let delta = |part_id: &str, delta: &str| Effect::Delta {
            part_id: part_id.into(),
            message_id: "msg_1".into(),
            delta: delta.into(),
        };
        assert_eq!(
            out,
            vec![
                Effect::Part(part(&text_id, text("", None))),
                Effect::Part(part(&reasoning_id, reasoning("", String::new(), None))),
                delta(&text_id, "a"),
                delta(&reasoning_id, "b"),
                Effect::Part(part(&text_id, text("a", Some(ts(8))))),
                Effect::Part(part(
                    &reasoning_id,
                    reasoning("b", metadata_json(Some(&metadata)), Some(ts(9)))
                )),
            ]
        );
        let mut out = Vec::new();
        p.cleanup(ts(20), false, &mut out);
        assert!(
            matches!(out.as_slice(), [Effect::Message(_)]),
            "closed blocks are not closed again: {out:?}"
        );
    }

    #[test]
    fn reasoning_keeps_its_provider_metadata() {
        let mut p = processor();
        feed(
            &mut p,
            vec![
                reasoning_start("r"),
                reasoning_delta("r", "think"),
                E::ReasoningEnd(gw::ReasoningEnd {
                    id: "r".into(),
                    provider_metadata: Some(gw::ProviderMetadata {
                        protocol: "anthropic".into(),
                        model: "anthropic/x".into(),
                        json: "{\"signature\":\"s\"}".into(),
                    }),
                }),
            ],
        );
        let Some(pb::part::Kind::Reasoning(r)) = &p.parts()[0].kind else {
            panic!()
        };
        assert_eq!(r.text, "think");
        let m = metadata_from_json(&r.provider_metadata_json).unwrap();
        assert_eq!(m.json, "{\"signature\":\"s\"}");
        assert_eq!(m.protocol, "anthropic");
    }

    #[test]
    fn tools_go_pending_then_running_and_are_handed_to_the_loop() {
        let mut p = processor();
        let out = feed(
            &mut p,
            vec![
                tool_input_start("c1", "read"),
                E::ToolInputDelta(gw::ToolInputDelta {
                    call_id: "c1".into(),
                    delta: "{\"path\":".into(),
                }),
                E::ToolInputEnd(gw::ToolInputEnd {
                    call_id: "c1".into(),
                }),
                tool_call("c1", "read", "{\"path\":\"a\"}"),
            ],
        );
        let Effect::Part(first) = &out[0] else {
            panic!()
        };
        let Some(pb::part::Kind::Tool(t)) = &first.kind else {
            panic!()
        };
        assert_eq!(
            t.state.as_ref().unwrap().status(),
            pb::tool_state::Status::Pending
        );
        let Some(Effect::ToolCall {
            call_id,
            input_json,
            ..
        }) = out.last()
        else {
            panic!("{out:?}")
        };
        assert_eq!(
            (call_id.as_str(), input_json.as_str()),
            ("c1", "{\"path\":\"a\"}")
        );
        let running = p.tool_calls().next().unwrap();
        assert_eq!(
            running.state.as_ref().unwrap().status(),
            pb::tool_state::Status::Running
        );
        let mut out = Vec::new();
        p.tool_finished("c1", Ok("contents".into()), ts(9), &mut out);
        let done = p.tool_calls().next().unwrap().state.clone().unwrap();
        assert_eq!(done.status(), pb::tool_state::Status::Completed);
        assert_eq!(done.output, "contents");
        assert_eq!(p.outcome(), Outcome::Continue);
    }

    #[test]
    fn step_finish_settles_tokens_and_cost_and_checks_overflow() {
        let mut p = processor();
        feed(
            &mut p,
            vec![
                E::StepStart(gw::StepStart {}),
                finish(gw::FinishReason::Stop, 100, 42),
            ],
        );
        assert_eq!(p.message().cost_nano_usd, 42);
        assert_eq!(p.message().tokens.unwrap().input, 100);
        assert_eq!(p.message().finish, "stop");
        assert_eq!(p.outcome(), Outcome::Continue);
        let mut big = processor();
        feed(&mut big, vec![finish(gw::FinishReason::Stop, 995, 1)]);
        assert!(big.needs_compaction(), "995 + 10 output ≥ 1000 usable");
        assert_eq!(big.outcome(), Outcome::Compact);
    }

    #[test]
    fn length_finish_is_an_output_length_error() {
        let mut p = processor();
        feed(&mut p, vec![finish(gw::FinishReason::Length, 10, 1)]);
        assert_eq!(
            p.message().error.as_ref().unwrap().kind(),
            pb::message_error::Kind::OutputLength
        );
        assert_eq!(p.outcome(), Outcome::Stop);
    }

    #[test]
    fn context_overflow_error_is_a_compaction_need_not_a_failure() {
        let mut p = processor();
        feed(&mut p, vec![overflow("too long")]);
        assert_eq!(p.outcome(), Outcome::Compact);
        assert!(p.message().error.is_none());
        let mut out = Vec::new();
        p.cleanup(ts(9), false, &mut out);
        assert!(p.message().error.is_none(), "the loop decides, not cleanup");
        assert_eq!(p.message().finish, crate::history::FINISH_OVERFLOW);
        assert!(p.overflowed());
    }

    #[test]
    fn a_mid_stream_overflow_keeps_the_partial_output_but_marks_the_message() {
        let mut p = processor();
        feed(
            &mut p,
            vec![
                text_start("t"),
                text_delta("t", "partial"),
                overflow("maximum context length"),
            ],
        );
        let mut out = Vec::new();
        p.cleanup(ts(9), false, &mut out);
        assert_eq!(p.outcome(), Outcome::Compact);
        assert_eq!(p.message().finish, crate::history::FINISH_OVERFLOW);
        let Some(pb::part::Kind::Text(t)) = &p.parts()[0].kind else {
            panic!()
        };
        assert_eq!((t.text.as_str(), t.ended_at), ("partial", Some(ts(9))));
    }

    #[test]
    fn a_failure_keeps_the_kind_and_the_providers_retry_after() {
        let mut p = processor();
        feed(
            &mut p,
            vec![E::Error(gw::Error {
                retry_after: Some(prost_types::Duration {
                    seconds: 1,
                    nanos: 500_000_000,
                }),
                ..retryable(gw::ErrorKind::RateLimited, "slow down", 429)
            })],
        );
        assert_eq!(
            p.failure(),
            Some(Failure {
                kind: gw::ErrorKind::RateLimited,
                retryable: true,
                retry_after: Some(Duration::from_millis(1500)),
                retry_after_beyond_cap: false,
            })
        );
        let mut out = Vec::new();
        p.fail(
            pb::MessageError {
                kind: pb::message_error::Kind::BudgetExceeded as i32,
                ..Default::default()
            },
            &mut out,
        );
        assert_eq!(p.outcome(), Outcome::Stop);
        assert!(matches!(out.last(), Some(Effect::Message(_))));
    }

    #[test]
    fn a_structured_output_completes_the_answer() {
        let mut p = processor();
        feed(&mut p, vec![finish(gw::FinishReason::ToolCalls, 10, 1)]);
        let mut out = Vec::new();
        p.set_structured_output("{\"a\":1}".into(), &mut out);
        assert_eq!(
            (
                p.message().finish.as_str(),
                p.message().structured_output_json.as_str()
            ),
            ("stop", "{\"a\":1}")
        );
    }

    #[test]
    fn other_errors_stop_with_a_typed_message_error() {
        let mut p = processor();
        feed(
            &mut p,
            vec![E::Error(retryable(gw::ErrorKind::Overloaded, "busy", 529))],
        );
        let e = p.message().error.clone().unwrap();
        assert_eq!(
            (e.kind(), e.http_status, e.retryable),
            (pb::message_error::Kind::Api, 529, true)
        );
        assert_eq!(p.outcome(), Outcome::Stop);
    }

    #[test]
    fn cleanup_closes_parts_aborts_tools_and_completes_the_message() {
        let mut p = processor();
        feed(
            &mut p,
            vec![
                text_start("t"),
                text_delta("t", "partial"),
                reasoning_start("r"),
                tool_input_start("c", "bash"),
            ],
        );
        let mut out = Vec::new();
        p.cleanup(ts(50), true, &mut out);
        for part in p.parts() {
            match &part.kind {
                Some(pb::part::Kind::Text(t)) => assert_eq!(t.ended_at, Some(ts(50))),
                Some(pb::part::Kind::Reasoning(r)) => assert_eq!(r.ended_at, Some(ts(50))),
                Some(pb::part::Kind::Tool(t)) => {
                    let s = t.state.as_ref().unwrap();
                    assert_eq!(
                        (s.status(), s.error.as_str(), s.interrupted),
                        (pb::tool_state::Status::Error, "aborted", true)
                    );
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(p.message().completed_at, Some(ts(50)));
        assert_eq!(
            p.message().error.as_ref().unwrap().kind(),
            pb::message_error::Kind::Aborted
        );
        assert!(matches!(out.last(), Some(Effect::Message(_))));
    }

    #[test]
    fn a_blocked_tool_stops_the_loop_and_the_model_sees_why() {
        let mut p = processor();
        feed(&mut p, vec![tool_call("c", "bash", "{}")]);
        let mut out = Vec::new();
        p.block(
            "c",
            Blocked::PermissionDenied,
            "permission denied",
            ts(3),
            &mut out,
        );
        let s = p.tool_calls().next().unwrap().state.clone().unwrap();
        assert_eq!(
            (s.status(), s.error.as_str()),
            (pb::tool_state::Status::Error, "permission denied")
        );
        assert_eq!(p.outcome(), Outcome::Stop);
        assert_eq!(p.blocked(), Some(Blocked::PermissionDenied));
    }

    #[test]
    fn snapshots_go_on_the_step_parts_and_changes_become_a_sorted_patch() {
        let mut p = processor();
        p.set_start_snapshot("a".repeat(40));
        let out = feed(
            &mut p,
            vec![
                E::StepStart(gw::StepStart {}),
                finish(gw::FinishReason::ToolCalls, 10, 1),
            ],
        );
        let Effect::Part(start) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(
            start.kind,
            Some(pb::part::Kind::StepStart(pb::StepStartPart {
                snapshot: "a".repeat(40)
            }))
        );
        assert!(
            out.iter().any(|e| matches!(e, Effect::Persist(p)
                if matches!(p.kind, Some(pb::part::Kind::StepFinish(_))))),
            "with snapshots the step-finish part is stored at once but not yet published: {out:?}"
        );
        assert!(
            !out.iter().any(|e| matches!(e, Effect::Part(p)
                if matches!(p.kind, Some(pb::part::Kind::StepFinish(_))))),
            "{out:?}"
        );
        let change = |path: &str| pb::FileChange {
            path: path.into(),
            status: pb::file_change::Status::Added as i32,
            additions: 1,
            ..Default::default()
        };
        let mut out = Vec::new();
        p.finish_snapshot(
            "b".repeat(40),
            vec![change("z.txt"), change("a/b.txt")],
            &mut out,
        );
        let kinds: Vec<_> = out
            .iter()
            .map(|e| match e {
                Effect::Part(p) => p.kind.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        let Some(pb::part::Kind::StepFinish(f)) = &kinds[0] else {
            panic!("{kinds:?}")
        };
        assert_eq!(f.snapshot, "b".repeat(40));
        let Some(pb::part::Kind::Patch(patch)) = &kinds[1] else {
            panic!("{kinds:?}")
        };
        assert_eq!(
            (
                patch.hash.as_str(),
                patch.after.as_str(),
                patch.files.clone()
            ),
            (
                "a".repeat(40).as_str(),
                "b".repeat(40).as_str(),
                vec!["a/b.txt".to_string(), "z.txt".to_string()]
            )
        );
        assert_eq!(patch.changes[0].path, "a/b.txt");
        assert!(
            p.parts()
                .last()
                .is_some_and(|l| matches!(l.kind, Some(pb::part::Kind::Patch(_)))),
            "the patch follows the step-finish part"
        );
        let mut unchanged = processor();
        let mut out = Vec::new();
        unchanged.finish_snapshot("b".repeat(40), Vec::new(), &mut out);
        assert!(
            out.is_empty(),
            "no step-finish and no changes: nothing to write"
        );
    }

    /// Each part's final state is published once: without snapshots at step-finish, with snapshots once the end
    /// snapshot is known, or at cleanup when none came.
    #[test]
    fn the_step_finish_part_is_published_once() {
        let published = |out: &[Effect]| {
            out.iter()
                .filter(|e| {
                    matches!(e, Effect::Part(p)
                    if matches!(p.kind, Some(pb::part::Kind::StepFinish(_))))
                })
                .count()
        };
        let mut plain = processor();
        let mut out = feed(&mut plain, vec![finish(gw::FinishReason::Stop, 1, 1)]);
        plain.cleanup(ts(9), false, &mut out);
        assert_eq!(published(&out), 1, "{out:?}");

        let mut snapped = processor();
        snapped.set_start_snapshot("a".repeat(40));
        let mut out = feed(&mut snapped, vec![finish(gw::FinishReason::Stop, 1, 1)]);
        snapped.finish_snapshot("b".repeat(40), Vec::new(), &mut out);
        snapped.cleanup(ts(9), false, &mut out);
        assert_eq!(published(&out), 1, "{out:?}");

        let mut no_end = processor();
        no_end.set_start_snapshot("a".repeat(40));
        let mut out = feed(&mut no_end, vec![finish(gw::FinishReason::Stop, 1, 1)]);
        no_end.cleanup(ts(9), false, &mut out);
        assert_eq!(published(&out), 1, "{out:?}");
    }

    #[test]
    fn an_answer_without_text_reasoning_or_tools_is_empty() {
        let mut p = processor();
        feed(
            &mut p,
            vec![
                E::StepStart(gw::StepStart {}),
                finish(gw::FinishReason::Other, 1, 0),
            ],
        );
        assert!(p.is_empty_answer());
        let mut t = processor();
        feed(&mut t, vec![tool_call("c", "read", "{}")]);
        assert!(!t.is_empty_answer());
    }

    #[test]
    fn the_served_model_is_recorded_after_a_fallback() {
        let mut p = processor();
        let out = feed(
            &mut p,
            vec![E::StreamStart(gw::StreamStart {
                provider: "anthropic".into(),
                model: "anthropic/x".into(),
                attempt: 1,
            })],
        );
        assert_eq!(p.message().model, "anthropic/x");
        assert!(matches!(&out[0], Effect::Message(_)));
    }
}
