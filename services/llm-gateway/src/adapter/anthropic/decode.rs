//! Messages API SSE stream → unified events (docs/providers.md §3 "Events").
//!
//! Each frame is parsed once into small borrowed structs (no `serde_json::Value` walk): a stream carries hundreds of
//! deltas and this runs for every one of them. The event is identified by `data.type`; the `event:` line only
//! stands in when `data` has no `type`.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Deserialize;

use crate::adapter::common::blocks::{Block, OpenBlocks};
use crate::adapter::transport::classify::classify;
use crate::adapter::{Decoder, frame_type};
use crate::error::ProviderError;
use crate::event::{Event, Finish, FinishReason, Usage};

/// Decoder state for one Anthropic Messages stream.
///
/// Block ids are the API's content-block `index` as a string (reasoning and text alike); tool calls keep the API's
/// `toolu_…` id. Tool arguments are emitted as they stream and finalised only at their block's stop (or at
/// `message_stop`), never because the buffer happens to parse as JSON.
#[derive(Debug)]
pub struct AnthropicDecoder {
    /// Open content blocks by index; a flush at `message_stop` closes them in stream order.
    blocks: OpenBlocks,
    response_id: String,
    response_model: String,
    usage: WireTotals,
    stop_reason: Option<String>,
    /// Ids of the `tool_use` blocks so far: one used twice is refused, never passed on.
    call_ids: Vec<String>,
    /// Every block index started so far: a second start of one would reuse its block id.
    started: BTreeSet<u64>,
    done: bool,
}

/// Usage as the API reports it; later reports override earlier ones field by field.
#[derive(Debug, Default, Clone, Copy)]
struct WireTotals {
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
    thinking: Option<u64>,
}

impl WireTotals {
    fn apply(&mut self, u: &WireUsage) {
        let set = |slot: &mut u64, v: Option<u64>| {
            if let Some(v) = v {
                *slot = v;
            }
        };
        set(&mut self.input, u.input_tokens);
        set(&mut self.cache_read, u.cache_read_input_tokens);
        set(&mut self.cache_write, u.cache_creation_input_tokens);
        set(&mut self.output, u.output_tokens);
        if let Some(t) = u
            .output_tokens_details
            .as_ref()
            .and_then(|d| d.thinking_tokens)
        {
            self.thinking = Some(t);
        }
    }

    /// `input_tokens` already excludes cache reads and writes; thinking is counted inside `output_tokens`.
    fn normalised(&self) -> Usage {
        let reasoning = self.thinking.unwrap_or(0);
        Usage {
            input: self.input,
            cache_read: self.cache_read,
            cache_write: self.cache_write,
            output: self.output.saturating_sub(reasoning),
            reasoning,
        }
    }
}

/// Every event's fields in one struct, so a frame is parsed in a single pass whatever its type.
#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    message: Option<WireMessage<'a>>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    content_block: Option<WireBlock<'a>>,
    #[serde(default)]
    delta: Option<WireDelta<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(borrow, default)]
    id: Cow<'a, str>,
    #[serde(borrow, default)]
    model: Cow<'a, str>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireBlock<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Cow<'a, str>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    // Content strings are owned: events own their text anyway, and JSON escapes would defeat borrowing.
    #[serde(default)]
    text: String,
    #[serde(default)]
    thinking: String,
    #[serde(default)]
    data: String,
}

/// `content_block_delta.delta` and `message_delta.delta` share this struct.
#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    output_tokens_details: Option<WireOutputDetails>,
}

#[derive(Deserialize)]
struct WireOutputDetails {
    #[serde(default)]
    thinking_tokens: Option<u64>,
}

/// Maps `stop_reason` to the unified reason (docs/providers.md §5).
fn finish_reason(raw: &str) -> FinishReason {
    match raw {
        "end_turn" | "stop_sequence" | "pause_turn" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

impl Default for AnthropicDecoder {
    fn default() -> Self {
        AnthropicDecoder {
            // What the request builder reads back from a redacted block's metadata.
            blocks: OpenBlocks::new("redacted_data"),
            response_id: String::new(),
            response_model: String::new(),
            usage: WireTotals::default(),
            stop_reason: None,
            call_ids: Vec::new(),
            started: BTreeSet::new(),
            done: false,
        }
    }
}

impl AnthropicDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn fail(&mut self, err: ProviderError, out: &mut Vec<Event>) {
        self.done = true;
        out.push(Event::Error(err));
    }

    fn malformed(&mut self, what: String, data: &str, out: &mut Vec<Event>) {
        let mut err = ProviderError::malformed(format!("malformed Anthropic stream: {what}"));
        err.provider_body = data.to_string();
        self.fail(err, out);
    }

    /// The no-nameless-call rule: a `tool_use` block needs a name and an id not used before in this stream.
    fn new_call(&mut self, id: &str, name: &str) -> Result<(), String> {
        if id.is_empty() || name.is_empty() {
            return Err("a tool_use block without an id or a name".into());
        }
        if self.call_ids.iter().any(|used| used == id) {
            return Err(format!("tool_use id `{id}` used twice"));
        }
        self.call_ids.push(id.to_string());
        Ok(())
    }

    fn start_block(&mut self, index: u64, b: WireBlock<'_>, out: &mut Vec<Event>) {
        if !self.started.insert(index) {
            let what = format!("content block {index} started twice");
            let err = ProviderError::malformed(format!("malformed Anthropic stream: {what}"));
            self.fail(err, out);
            return;
        }
        let id = index.to_string();
        let block = match b.kind.as_ref() {
            "text" => {
                out.push(Event::TextStart { id: id.clone() });
                if !b.text.is_empty() {
                    out.push(Event::TextDelta { id, delta: b.text });
                }
                Block::Text
            }
            "thinking" => {
                out.push(Event::ReasoningStart { id: id.clone() });
                if !b.thinking.is_empty() {
                    out.push(Event::ReasoningDelta {
                        id,
                        delta: b.thinking,
                    });
                }
                Block::reasoning()
            }
            "redacted_thinking" => {
                // No deltas follow: the block is complete as it starts.
                out.push(Event::ReasoningStart { id: id.clone() });
                out.push(Event::ReasoningEnd {
                    id,
                    metadata: Some(serde_json::json!({ "redacted_data": b.data }).to_string()),
                });
                Block::Other
            }
            "tool_use" => {
                if let Err(what) = self.new_call(&b.id, &b.name) {
                    let err =
                        ProviderError::malformed(format!("malformed Anthropic stream: {what}"));
                    self.fail(err, out);
                    return;
                }
                out.push(Event::ToolInputStart {
                    call_id: b.id.to_string(),
                    tool: b.name.to_string(),
                });
                Block::Tool {
                    id: b.id.into_owned(),
                    name: b.name.into_owned(),
                    input: String::new(),
                }
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, block);
    }

    fn delta(&mut self, index: u64, d: WireDelta<'_>, data: &str, out: &mut Vec<Event>) {
        let Some(block) = self.blocks.get_mut(index) else {
            // Dropping it would silently lose content; a delta without its block start is a broken stream.
            self.malformed(
                format!("delta for content block {index}, which is not open"),
                data,
                out,
            );
            return;
        };
        match (block, d.kind.as_ref()) {
            (Block::Text, "text_delta") => {
                if let Some(delta) = d.text.filter(|t| !t.is_empty()) {
                    out.push(Event::TextDelta {
                        id: index.to_string(),
                        delta,
                    });
                }
            }
            (Block::Reasoning { .. }, "thinking_delta") => {
                if let Some(delta) = d.thinking.filter(|t| !t.is_empty()) {
                    out.push(Event::ReasoningDelta {
                        id: index.to_string(),
                        delta,
                    });
                }
            }
            (Block::Reasoning { signature, .. }, "signature_delta") => {
                if let Some(s) = d.signature {
                    signature.push_str(&s);
                }
            }
            (Block::Tool { id, input, .. }, "input_json_delta") => {
                if let Some(delta) = d.partial_json.filter(|p| !p.is_empty()) {
                    input.push_str(&delta);
                    out.push(Event::ToolInputDelta {
                        call_id: id.clone(),
                        delta,
                    });
                }
            }
            // `citations_delta`, deltas of untranslated blocks and future delta types carry nothing we forward.
            _ => {}
        }
    }

    fn finish(&mut self, out: &mut Vec<Event>) {
        // A block left open at `message_stop` is closed here, so a complete tool call is never lost.
        self.blocks.close_all(out);
        let raw_reason = self.stop_reason.take().unwrap_or_default();
        let mut reason = finish_reason(&raw_reason);
        if reason == FinishReason::Stop && self.blocks.saw_tool_call() {
            // docs/architecture.md "Unified events": a stop that carries tool calls is reported as tool calls.
            reason = FinishReason::ToolCalls;
        }
        self.done = true;
        out.push(Event::Finish(Finish {
            reason,
            raw_reason,
            usage: self.usage.normalised(),
            response_id: std::mem::take(&mut self.response_id),
            response_model: std::mem::take(&mut self.response_model),
        }));
    }
}

impl Decoder for AnthropicDecoder {
    fn frame(&mut self, event: &str, data: &str, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        let ev: WireEvent<'_> = match serde_json::from_str(data) {
            Ok(ev) => ev,
            Err(e) => {
                // A field of an unknown event type may have any shape; only known events must parse.
                let kind = frame_type(event, data);
                let kind = kind.as_ref();
                if kind == "error" {
                    // Whatever its shape, an error event is the provider's error: classify reads any body.
                    self.fail(classify(None, None, data), out);
                    return;
                }
                if !is_known(kind) && !kind.is_empty() {
                    return;
                }
                let name = if kind.is_empty() { "untyped" } else { kind };
                self.malformed(format!("`{name}` event: {e}"), data, out);
                return;
            }
        };
        let kind = if ev.kind.is_empty() {
            event
        } else {
            ev.kind.as_ref()
        };
        match kind {
            "message_start" => {
                if let Some(m) = ev.message {
                    self.response_id = m.id.into_owned();
                    self.response_model = m.model.into_owned();
                    if let Some(u) = &m.usage {
                        self.usage.apply(u);
                    }
                }
            }
            "content_block_start" => match (ev.index, ev.content_block) {
                (Some(index), Some(block)) => self.start_block(index, block, out),
                _ => self.malformed(
                    "`content_block_start` without index or content_block".into(),
                    data,
                    out,
                ),
            },
            "content_block_delta" => match (ev.index, ev.delta) {
                (Some(index), Some(delta)) => self.delta(index, delta, data, out),
                _ => self.malformed(
                    "`content_block_delta` without index or delta".into(),
                    data,
                    out,
                ),
            },
            "content_block_stop" => match ev.index {
                Some(index) => self.blocks.close(index, out),
                None => self.malformed("`content_block_stop` without index".into(), data, out),
            },
            "message_delta" => {
                if let Some(reason) = ev.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                if let Some(u) = &ev.usage {
                    self.usage.apply(u);
                }
            }
            "message_stop" => self.finish(out),
            "ping" => out.push(Event::KeepAlive),
            "error" => self.fail(classify(None, None, data), out),
            "" => self.malformed("event without a type".into(), data, out),
            // Event types newer than this adapter.
            _ => {}
        }
    }

    fn whole(&mut self, json: &str, out: &mut Vec<Event>) {
        super::whole::decode(self, json, out);
    }

    fn end(&mut self, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        self.fail(ProviderError::cut_before("message_stop"), out);
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn restart(&self) -> Box<dyn Decoder> {
        Box::new(AnthropicDecoder::new())
    }
}

fn is_known(kind: &str) -> bool {
    matches!(
        kind,
        "message_start"
            | "content_block_start"
            | "content_block_delta"
            | "content_block_stop"
            | "message_delta"
            | "message_stop"
            | "error"
            | "ping"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "decode_tests.rs"]
mod tests;
