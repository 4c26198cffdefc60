//! The parts of a step's assistant message as the Processor builds them: created in order, the streamed blocks (text
//! and reasoning) open from their start event to their end, and the tool calls by call id, from their input's start
//! to their result. Every change is emitted as an [`Effect`].

use std::collections::HashMap;
use std::sync::Arc;

use compact_str::CompactString;
use llm_proto::gateway as gw;
use llm_proto::sessions as pb;
use prost_types::Timestamp;

use super::{Blocked, Effect, metadata_json};
use crate::event_wire::PartIds;
use crate::ids;

/// Open blocks by gateway block id: looked up for every delta, so hashed with a fast seeded hasher rather than
/// SipHash (the ids come from the gateway, and the hasher is still seeded per map).
type Blocks = HashMap<String, usize, foldhash::fast::RandomState>;

/// The step's parts (in creation order, ascending ids), with what is still open among them. Reads as the slice of
/// its parts.
#[derive(Debug, Clone)]
pub struct StepParts {
    parts: Vec<pb::Part>,
    /// Gateway block id → index in `parts`, for open text blocks.
    text_blocks: Blocks,
    /// Gateway block id → index in `parts`, for open reasoning blocks.
    reasoning_blocks: Blocks,
    /// By index in `parts`: the ids its deltas carry, made at its first delta.
    delta_ids: Vec<Option<Arc<PartIds>>>,
    /// Call id → index in `parts`.
    tools: HashMap<String, usize>,
    /// A tool was denied or a doom loop refused: the loop stops after this step.
    blocked: Option<Blocked>,
}

impl std::ops::Deref for StepParts {
    type Target = [pb::Part];

    fn deref(&self) -> &[pb::Part] {
        &self.parts
    }
}

/// The two kinds of streamed block, text and reasoning: both are opened, appended to and closed alike, and differ
/// only in the part they fill (reasoning also keeps the provider's metadata from its end event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Block {
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

impl StepParts {
    pub(super) fn new() -> StepParts {
        StepParts {
            // A step's usual parts: its start, one text, its finish (a part is a quarter of a kilobyte, and a
            // vector's first growth would make room for four).
            parts: Vec::with_capacity(3),
            text_blocks: Blocks::default(),
            reasoning_blocks: Blocks::default(),
            delta_ids: Vec::new(),
            tools: HashMap::new(),
            blocked: None,
        }
    }

    /// A new part of `message`, added last; a copy of it.
    pub(super) fn add(&mut self, message: &pb::Message, kind: pb::part::Kind) -> pb::Part {
        let part = pb::Part {
            id: ids::new("prt"),
            message_id: message.id.clone(),
            session_id: message.session_id.clone(),
            kind: Some(kind),
        };
        self.parts.push(part.clone());
        part
    }

    /// The part at `index` (as [`StepParts::add`] placed it), to change.
    pub(super) fn get_mut(&mut self, index: usize) -> Option<&mut pb::Part> {
        self.parts.get_mut(index)
    }

    /// A text or reasoning block starts: its part is created open (started now, empty) and emitted.
    pub(super) fn open_block(
        &mut self,
        message: &pb::Message,
        block: Block,
        id: String,
        now: Timestamp,
        out: &mut Vec<Effect>,
    ) {
        let part = self.add(message, block.open(now));
        let index = self.parts.len() - 1;
        self.blocks(block).insert(id, index);
        out.push(Effect::Part(Box::new(part)));
    }

    /// Text for an open block: appended to its part and emitted as a delta. A block id that is not open (or not
    /// of this kind) is ignored.
    pub(super) fn append_to_block(
        &mut self,
        message: &pb::Message,
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
            out.push(self.delta(message, i, delta));
        }
    }

    /// A block ends: its part gets the end time (and, for reasoning, the provider metadata) and is emitted.
    pub(super) fn close_block(
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

    fn delta(&mut self, message: &pb::Message, i: usize, delta: CompactString) -> Effect {
        if self.delta_ids.len() <= i {
            self.delta_ids.resize(i + 1, None);
        }
        let ids = self.delta_ids[i].get_or_insert_with(|| {
            Arc::new(PartIds {
                part_id: self.parts[i].id.clone(),
                message_id: message.id.clone(),
            })
        });
        Effect::Delta {
            ids: Arc::clone(ids),
            delta,
        }
    }

    /// A tool call's input starts streaming: its part appears, pending.
    pub(super) fn tool_input_start(
        &mut self,
        message: &pb::Message,
        t: gw::ToolInputStart,
        out: &mut Vec<Effect>,
    ) {
        if self.tools.contains_key(&t.call_id) {
            return;
        }
        let part = self.add(
            message,
            pb::part::Kind::Tool(pb::ToolPart {
                call_id: t.call_id.clone(),
                tool: t.tool_name,
                state: Some(pb::ToolState {
                    status: pb::tool_state::Status::Pending as i32,
                    ..Default::default()
                }),
                provider_metadata_json: String::new(),
            }),
        );
        self.tools.insert(t.call_id, self.parts.len() - 1);
        out.push(Effect::Part(Box::new(part)));
    }

    /// More of a tool call's input: kept in memory so a crash mid-call still shows how far the input got; not
    /// published per delta.
    pub(super) fn tool_input_delta(&mut self, call_id: &str, delta: &str) {
        if let Some(state) = self.tool_state_mut(call_id) {
            state.input_json.push_str(delta);
        }
    }

    /// A complete tool call: its part runs, and the loop is asked to run the tool.
    pub(super) fn tool_call(
        &mut self,
        message: &pb::Message,
        c: gw::ToolCall,
        now: Timestamp,
        out: &mut Vec<Effect>,
    ) {
        let i = match self.tools.get(&c.call_id) {
            Some(&i) => i,
            None => {
                self.add(
                    message,
                    pb::part::Kind::Tool(pb::ToolPart {
                        call_id: c.call_id.clone(),
                        tool: c.tool_name.clone(),
                        state: Some(pb::ToolState::default()),
                        provider_metadata_json: String::new(),
                    }),
                );
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

    /// Calls that were made in this step, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &pb::ToolPart> {
        self.parts.iter().filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Tool(t)) => Some(t),
            _ => None,
        })
    }

    fn tool_state_mut(&mut self, call_id: &str) -> Option<&mut pb::ToolState> {
        let &i = self.tools.get(call_id)?;
        match self.parts[i].kind.as_mut() {
            Some(pb::part::Kind::Tool(t)) => Some(t.state.get_or_insert_with(Default::default)),
            _ => None,
        }
    }

    /// The step's end, whatever happened: open text and reasoning get their end time, unfinished tools become
    /// `error: aborted` (interrupted); each part changed is emitted.
    pub(super) fn close_all(&mut self, now: Timestamp, out: &mut Vec<Effect>) {
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
        for part in &mut self.parts {
            if let Some(pb::part::Kind::Tool(tool)) = part.kind.as_mut() {
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
                    out.push(Effect::Part(Box::new(part.clone())));
                }
            }
        }
    }
}
