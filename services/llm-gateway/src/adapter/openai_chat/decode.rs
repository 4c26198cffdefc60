//! Stream decoder: Chat Completions `data:` chunks → unified [`Event`]s.
//!
//! Chunks are parsed into small borrowed structs rather than walked as `serde_json::Value`: the decoder runs once per
//! streamed token, and most strings in a chunk can be borrowed straight from the frame.

use std::borrow::Cow;

use serde_json::Value;

use crate::adapter::Decoder;
use crate::adapter::common::strict::StrictTools;
use crate::adapter::framing::json_scan::ResponseIdentity;
use crate::adapter::transport::classify::classify;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, Finish, FinishReason, Usage};

use super::fast::*;
use super::wire::*;

/// Longest part of a malformed frame kept in the error for diagnosis.
const MAX_ERROR_BODY: usize = 2048;

/// `ReasoningEnd.metadata` of every reasoning block: nothing beyond the text is needed to replay it.
pub(super) const REPLAY_METADATA: &str = "{}";

/// Decodes one Chat Completions stream (OpenAI or any compatible server).
///
/// Text is one block (`text-0`). Reasoning is a block (`reasoning-N`) that closes as soon as text or a tool call
/// starts. Tool calls are tracked per `index` and finalized only at the end of the stream, never because their
/// arguments already parse as JSON (docs/providers.md §5).
#[derive(Debug)]
pub struct ChatDecoder {
    done: bool,
    /// The response id and model, from the first chunk that has them.
    response: ResponseIdentity,
    /// Id of the open text block.
    text: Option<String>,
    text_blocks: u32,
    /// Id of the open reasoning block.
    reasoning: Option<String>,
    reasoning_blocks: u32,
    /// Tool calls in order of appearance.
    tools: Vec<ToolState>,
    /// The raw `finish_reason`, once a chunk carried one.
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// The tools the request sent in strict mode, whose final arguments lose the nulls strict mode added.
    strict: StrictTools,
    /// Try [`TextChunk::recognise`] before the full parse (off only in tests that compare the two paths).
    fast: bool,
    /// OpenRouter `reasoning_details` of the open reasoning block, replayed with it.
    details: super::details::Details,
}

/// One tool call being streamed.
#[derive(Debug)]
struct ToolState {
    index: u64,
    /// The provider's id, or `call_<index>` when it sent none.
    id: String,
    name: String,
    /// Every argument fragment so far.
    args: String,
    /// `ToolInputStart` was pushed (it waits for the tool name).
    started: bool,
    /// `id` was made up here because the provider sent none.
    synthetic_id: bool,
}

impl Default for ChatDecoder {
    fn default() -> Self {
        ChatDecoder {
            done: false,
            response: ResponseIdentity::default(),
            text: None,
            text_blocks: 0,
            reasoning: None,
            reasoning_blocks: 0,
            tools: Vec::new(),
            finish_reason: None,
            usage: None,
            strict: StrictTools::default(),
            fast: true,
            details: super::details::Details::default(),
        }
    }
}

impl ChatDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder that always takes the full parse, for tests comparing it with the fast path.
    #[cfg(test)]
    pub(super) fn without_fast_path() -> Self {
        ChatDecoder {
            fast: false,
            ..Self::default()
        }
    }

    /// A chunk the fast path recognised: what the full parse would do with the same chunk (the id and model
    /// offered, the text appended).
    fn text_chunk(&mut self, chunk: TextChunk<'_>, out: &mut Vec<Event>) {
        self.response.offer(chunk.id, chunk.model);
        if let Some(text) = chunk.content {
            self.text_delta(text, out);
        }
    }

    /// A decoder for a request that sent `strict` tools in strict mode (see [`StrictTools::clean`]).
    pub fn with_strict(strict: StrictTools) -> Self {
        ChatDecoder {
            strict,
            ..Self::default()
        }
    }

    fn fail(&mut self, err: ProviderError, out: &mut Vec<Event>) {
        out.push(Event::Error(err));
        self.done = true;
    }

    fn close_reasoning(&mut self, out: &mut Vec<Event>) {
        if let Some(id) = self.reasoning.take() {
            // An empty object rather than none: it is what makes the core record the protocol and the model on the
            // part, and the request builder replays reasoning only to the model that produced it
            // (`reasoning_replay`). The text itself is all a compatible server takes back, except OpenRouter's
            // `reasoning_details`, which are kept whole (with their signatures).
            let metadata = if self.details.is_empty() {
                REPLAY_METADATA.to_string()
            } else {
                self.details.take_metadata()
            };
            out.push(Event::ReasoningEnd {
                id,
                metadata: Some(metadata),
            });
        }
    }

    /// Opens the next reasoning block and returns its id.
    fn open_reasoning(&mut self, out: &mut Vec<Event>) -> String {
        let id = format!("reasoning-{}", self.reasoning_blocks);
        self.reasoning_blocks += 1;
        out.push(Event::ReasoningStart { id: id.clone() });
        self.reasoning = Some(id.clone());
        id
    }

    fn reasoning_delta(&mut self, delta: Cow<'_, str>, out: &mut Vec<Event>) {
        if delta.is_empty() {
            return;
        }
        let id = match &self.reasoning {
            Some(id) => id.clone(),
            None => self.open_reasoning(out),
        };
        out.push(Event::ReasoningDelta {
            id,
            delta: delta.into_owned(),
        });
    }

    fn text_delta(&mut self, delta: Cow<'_, str>, out: &mut Vec<Event>) {
        if delta.is_empty() {
            return;
        }
        self.close_reasoning(out);
        let id = match &self.text {
            Some(id) => id.clone(),
            None => {
                let id = format!("text-{}", self.text_blocks);
                self.text_blocks += 1;
                out.push(Event::TextStart { id: id.clone() });
                self.text = Some(id.clone());
                id
            }
        };
        out.push(Event::TextDelta {
            id,
            delta: delta.into_owned(),
        });
    }

    fn delta(&mut self, d: Delta<'_>, out: &mut Vec<Event>) {
        // Reasoning first: a chunk carrying both belongs to the moment reasoning hands over to the answer.
        // OpenRouter sends the same text twice, as `reasoning` and as `reasoning_details`, so the list is only read
        // when neither string field carries text.
        let primary = [d.reasoning_content, d.reasoning]
            .into_iter()
            .flatten()
            .find(|s| !s.0.is_empty());
        let details = d.reasoning_details.unwrap_or_default();
        if let Some(text) = primary {
            self.reasoning_delta(text.0, out);
        } else {
            for detail in &details {
                let field = match detail.get("type").and_then(Value::as_str) {
                    Some("reasoning.text") => "text",
                    Some("reasoning.summary") => "summary",
                    // Encrypted reasoning has no text to show; it is replayed with the details.
                    _ => continue,
                };
                if let Some(text) = detail.get(field).and_then(Value::as_str) {
                    self.reasoning_delta(Cow::Borrowed(text), out);
                }
            }
        }
        if !details.is_empty() {
            // A detail with nothing to show (a signature, encrypted data) still belongs to a reasoning block.
            if self.reasoning.is_none() {
                self.open_reasoning(out);
            }
            for detail in &details {
                self.details.push(detail);
            }
        }

        match d.content {
            Some(Content::Text(text)) => self.text_delta(text, out),
            Some(Content::Parts(parts)) => {
                // Mistral (Magistral): `[{type:"thinking",thinking:[{type:"text",text}]}, {type:"text",text}]`.
                for part in parts {
                    match part.kind.as_ref().map(|k| k.0.as_ref()) {
                        Some("text") => {
                            if let Some(text) = part.text {
                                self.text_delta(text.0, out);
                            }
                        }
                        Some("thinking") => {
                            for inner in part.thinking.into_iter().flatten() {
                                if let Some(text) = inner.text {
                                    self.reasoning_delta(text.0, out);
                                }
                            }
                        }
                        // Images, references: nothing this stream can carry.
                        _ => {}
                    }
                }
            }
            None => {}
        }

        // A refusal (structured outputs) is shown to the caller as text: it is the model's answer.
        if let Some(refusal) = d.refusal {
            self.text_delta(refusal.0, out);
        }

        for call in d.tool_calls.into_iter().flatten() {
            self.tool_fragment(call, out);
        }
    }

    /// The next free tool index, for calls the provider sent without one.
    fn next_index(&self) -> u64 {
        self.tools.iter().map(|t| t.index + 1).max().unwrap_or(0)
    }

    /// The position in `tools` of the call a fragment belongs to, a new call's when it starts one.
    fn tool_slot(&mut self, index: Option<u64>, id: Option<&str>, named: bool) -> usize {
        let existing = match index {
            Some(index) => self
                .tools
                .iter()
                .position(|t| t.index == index)
                .filter(|&p| {
                    // Some servers (older Ollama) number every parallel call 0: a different id at a known index is a
                    // new call, not more of the old one.
                    let t = &self.tools[p];
                    match id {
                        Some(id) => t.synthetic_id || !t.started || t.id == id,
                        None => true,
                    }
                }),
            // No index (Mistral sends each call whole): a known id continues its call, a bare arguments fragment
            // continues the latest call, anything else starts a new one.
            None => match id {
                Some(id) => self.tools.iter().position(|t| t.id == id),
                None if !named => self.tools.len().checked_sub(1),
                None => None,
            },
        };
        if let Some(p) = existing {
            return p;
        }
        let index = match index {
            Some(i) if !self.tools.iter().any(|t| t.index == i) => i,
            _ => self.next_index(),
        };
        self.tools.push(ToolState {
            index,
            id: String::new(),
            name: String::new(),
            args: String::new(),
            started: false,
            synthetic_id: false,
        });
        self.tools.len() - 1
    }

    fn tool_fragment(&mut self, frag: ToolCallDelta<'_>, out: &mut Vec<Event>) {
        self.close_reasoning(out);
        let id = frag.id.map(|s| s.0).filter(|s| !s.is_empty());
        let (name, args) = match frag.function {
            Some(f) => (
                f.name.map(|s| s.0).filter(|s| !s.is_empty()),
                f.arguments.map(|a| a.0).filter(|a| !a.is_empty()),
            ),
            None => (None, None),
        };

        let pos = self.tool_slot(frag.index, id.as_deref(), name.is_some());
        let tool = &mut self.tools[pos];
        if !tool.started {
            if let Some(id) = id
                && tool.id.is_empty()
            {
                tool.id = id.into_owned();
            }
            if let Some(name) = name
                && tool.name.is_empty()
            {
                tool.name = name.into_owned();
            }
        }
        if let Some(args) = &args {
            tool.args.push_str(args);
        }
        if !tool.started && !tool.name.is_empty() && !tool.id.is_empty() {
            let id = tool.id.clone();
            if self
                .tools
                .iter()
                .enumerate()
                .any(|(i, t)| i != pos && t.started && t.id == id)
            {
                self.fail(
                    ProviderError::malformed(format!("tool call id `{id}` used twice")),
                    out,
                );
                return;
            }
        }
        let tool = &mut self.tools[pos];

        if !tool.started {
            // The start waits for the name: callers dispatch on it. Arguments that came first are replayed as one
            // delta right after.
            if !tool.name.is_empty() {
                start_tool(tool, out);
            }
        } else if let Some(args) = args {
            out.push(Event::ToolInputDelta {
                call_id: tool.id.clone(),
                delta: args.into_owned(),
            });
        }
    }

    /// Ends the stream successfully: closes every open block, emits the tool calls, then `Finish`.
    fn finish(&mut self, out: &mut Vec<Event>) {
        self.close_reasoning(out);
        if let Some(id) = self.text.take() {
            out.push(Event::TextEnd { id });
        }
        let had_tools = !self.tools.is_empty();
        // Stable: calls that share an index keep their order of appearance.
        self.tools.sort_by_key(|t| t.index);
        if let Err(message) = check_calls(&self.tools) {
            self.fail(ProviderError::malformed(message), out);
            return;
        }
        for mut tool in std::mem::take(&mut self.tools) {
            if !tool.started {
                start_tool(&mut tool, out);
            }
            out.push(Event::ToolInputEnd {
                call_id: tool.id.clone(),
            });
            let input_json = if tool.args.trim().is_empty() {
                "{}".to_string()
            } else {
                self.strict.clean(&tool.name, tool.args)
            };
            out.push(Event::ToolCall {
                call_id: tool.id,
                tool: tool.name,
                input_json,
                metadata: None,
            });
        }
        let raw_reason = self.finish_reason.take().unwrap_or_default();
        let response = self.response.take();
        out.push(Event::Finish(Finish {
            reason: map_finish_reason(&raw_reason, had_tools),
            raw_reason,
            usage: self.usage.unwrap_or_default(),
            response_id: response.id,
            response_model: response.model,
        }));
        self.done = true;
    }
}

/// The no-nameless-call rule before the calls go out: every call has a name, and no id (the provider's, or the
/// `call_<index>` synthesized for a call without one) is used twice.
fn check_calls(tools: &[ToolState]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for tool in tools {
        if tool.name.is_empty() {
            return Err(format!("tool call {} has no name", tool.index));
        }
        let id = if tool.id.is_empty() {
            format!("call_{}", tool.index)
        } else {
            tool.id.clone()
        };
        if !seen.insert(id.clone()) {
            return Err(format!("tool call id `{id}` used twice"));
        }
    }
    Ok(())
}

/// Pushes `ToolInputStart` (synthesizing `call_<index>` when the provider sent no id) and any buffered arguments.
fn start_tool(tool: &mut ToolState, out: &mut Vec<Event>) {
    if tool.id.is_empty() {
        tool.id = format!("call_{}", tool.index);
        tool.synthetic_id = true;
    }
    tool.started = true;
    out.push(Event::ToolInputStart {
        call_id: tool.id.clone(),
        tool: tool.name.clone(),
    });
    if !tool.args.is_empty() {
        out.push(Event::ToolInputDelta {
            call_id: tool.id.clone(),
            delta: tool.args.clone(),
        });
    }
}

/// docs/providers.md §5: OpenAI Chat's finish reasons. A `stop` (or no reason) with tool calls is reported as
/// `ToolCalls` (docs/architecture.md "Unified events"): compatible servers such as Ollama and vLLM say `stop` even when the model called tools.
fn map_finish_reason(raw: &str, had_tools: bool) -> FinishReason {
    match raw {
        "stop" | "" if had_tools => FinishReason::ToolCalls,
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// docs/architecture.md "Usage and cost": the five counts made disjoint ([`Usage::from_inclusive`]).
fn normalize_usage(u: &WireUsage) -> Usage {
    let details = u.prompt_tokens_details.as_ref();
    // OpenAI's `cached_tokens` and DeepSeek's `prompt_cache_hit_tokens` count the same thing; DeepSeek sends either
    // or both.
    let cache_read = details
        .and_then(|d| d.cached_tokens)
        .unwrap_or(0)
        .max(u.prompt_cache_hit_tokens.unwrap_or(0));
    let cache_write = details
        .and_then(|d| d.cache_write_tokens)
        .or(u.cache_creation_input_tokens)
        .unwrap_or(0);
    let reasoning = u
        .completion_tokens_details
        .as_ref()
        .and_then(|d| d.reasoning_tokens)
        .unwrap_or(0);
    Usage::from_inclusive(
        u.prompt_tokens.unwrap_or(0),
        cache_read,
        cache_write,
        u.completion_tokens.unwrap_or(0),
        reasoning,
    )
}

/// A malformed-stream error that keeps the start of the offending frame for diagnosis.
fn malformed(err: &serde_json::Error, data: &str) -> ProviderError {
    let mut e = ProviderError::malformed(format!("malformed stream chunk: {err}"));
    let mut end = data.len().min(MAX_ERROR_BODY);
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    e.provider_body = data[..end].to_string();
    e
}

impl Decoder for ChatDecoder {
    fn frame(&mut self, event: &str, data: &str, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        let data = data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.finish(out);
            return;
        }
        // Chat Completions names no events, but some compatible servers mark a failure with `event: error`.
        if event == "error" {
            self.fail(classify(None, None, data), out);
            return;
        }
        if self.fast
            && let Some(fast) = TextChunk::recognise(data)
        {
            self.text_chunk(fast, out);
            return;
        }
        let chunk: Chunk<'_> = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => return self.fail(malformed(&e, data), out),
        };
        if chunk.error.is_some() {
            // An error after HTTP 200: `data: {"error":{...}}` (docs/providers.md §1 "Mid-stream errors").
            self.fail(classify(None, None, data), out);
            return;
        }
        self.response
            .offer(chunk.id.map(|s| s.0), chunk.model.map(|s| s.0));
        for choice in chunk.choices.into_iter().flatten() {
            // Only the first choice: the gateway never asks for `n > 1`.
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason
                && !reason.0.is_empty()
            {
                self.finish_reason = Some(reason.0.into_owned());
            }
        }
        // On the trailing `choices:[]` chunk (OpenAI) or the finish chunk (DeepSeek, Mistral); the last one wins so
        // servers that report running totals on every chunk end with the final count.
        if let Some(usage) = &chunk.usage {
            self.usage = Some(normalize_usage(usage));
        }
    }

    fn whole(&mut self, json: &str, out: &mut Vec<Event>) {
        self.frame("", &super::whole::as_chunk(json), out);
        if !self.done {
            self.end(out);
        }
    }

    fn end(&mut self, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        if self.finish_reason.is_some() {
            // The model finished; only the `[DONE]` line was lost. Everything the caller needs is here.
            self.finish(out);
        } else {
            self.fail(
                ProviderError::new(
                    ErrorKind::Network,
                    "stream ended before the provider finished",
                ),
                out,
            );
        }
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn restart(&self) -> Box<dyn Decoder> {
        Box::new(ChatDecoder::with_strict(self.strict.clone()))
    }
}
