//! Messages API SSE stream → unified events (docs/providers.md §3 "Events").
//!
//! Each frame is parsed once into small borrowed structs (no `serde_json::Value` walk): a stream carries hundreds of
//! deltas and this runs for every one of them. The event is identified by `data.type`; the `event:` line only
//! stands in when `data` has no `type`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::adapter::Decoder;
use crate::adapter::classify::classify;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, Finish, FinishReason, Usage};

/// Decoder state for one Anthropic Messages stream.
///
/// Block ids are the API's content-block `index` as a string (reasoning and text alike); tool calls keep the API's
/// `toolu_…` id. Tool arguments are emitted as they stream and finalised only at their block's stop (or at
/// `message_stop`), never because the buffer happens to parse as JSON.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    /// Open content blocks by index; ordered so a flush at `message_stop` closes them in stream order.
    blocks: BTreeMap<u64, Block>,
    response_id: String,
    response_model: String,
    usage: WireTotals,
    stop_reason: Option<String>,
    saw_tool_call: bool,
    /// Ids of the `tool_use` blocks so far: one used twice is refused, never passed on.
    call_ids: Vec<String>,
    /// Every block index started so far: a second start of one would reuse its block id.
    started: BTreeSet<u64>,
    done: bool,
}

/// An open content block.
#[derive(Debug)]
enum Block {
    Text,
    Thinking {
        signature: String,
    },
    Tool {
        id: String,
        name: String,
        input: String,
    },
    /// A block type this adapter does not translate (server tools, future types): its deltas are ignored.
    Other,
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

/// Only `type`, to tell an unknown event (ignored) from a malformed known one.
#[derive(Deserialize)]
struct WireHead<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
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

    /// Closes block `index`: the end event, plus the complete call for a tool block.
    fn close(&mut self, index: u64, out: &mut Vec<Event>) {
        let Some(block) = self.blocks.remove(&index) else {
            return;
        };
        let id = index.to_string();
        match block {
            Block::Text => out.push(Event::TextEnd { id }),
            Block::Thinking { signature } => out.push(Event::ReasoningEnd {
                id,
                // Without a signature the block cannot be replayed, so there is nothing to hand back.
                metadata: (!signature.is_empty())
                    .then(|| serde_json::json!({ "signature": signature }).to_string()),
            }),
            Block::Tool { id, name, input } => {
                self.saw_tool_call = true;
                Event::end_tool_call(id, name, input, out);
            }
            Block::Other => {}
        }
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
                Block::Thinking {
                    signature: String::new(),
                }
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
        let Some(block) = self.blocks.get_mut(&index) else {
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
            (Block::Thinking { .. }, "thinking_delta") => {
                if let Some(delta) = d.thinking.filter(|t| !t.is_empty()) {
                    out.push(Event::ReasoningDelta {
                        id: index.to_string(),
                        delta,
                    });
                }
            }
            (Block::Thinking { signature }, "signature_delta") => {
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
        let open: Vec<u64> = self.blocks.keys().copied().collect();
        for index in open {
            self.close(index, out);
        }
        let raw_reason = self.stop_reason.take().unwrap_or_default();
        let mut reason = finish_reason(&raw_reason);
        if reason == FinishReason::Stop && self.saw_tool_call {
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
                let head: Option<WireHead<'_>> = serde_json::from_str(data).ok();
                let kind = head
                    .as_ref()
                    .map(|h| h.kind.as_ref())
                    .filter(|k| !k.is_empty())
                    .unwrap_or(event);
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
                Some(index) => self.close(index, out),
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
            "error" => self.fail(classify(None, None, data), out),
            "" => self.malformed("event without a type".into(), data, out),
            // `ping` and event types newer than this adapter.
            _ => {}
        }
    }

    fn end(&mut self, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        self.fail(
            ProviderError::new(ErrorKind::Network, "stream ended before message_stop"),
            out,
        );
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
mod tests {
    use super::*;

    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!(
                "../../../../../shared/fake-provider/fixtures/anthropic/",
                $name
            ))
        };
    }

    const MODEL: &str = "claude-sonnet-4-5-20250929";

    /// Minimal SSE splitter for the tests (the real parser lives in `adapter::sse`): frames are separated by a blank
    /// line; `event:` names the frame and `data:` lines are joined with `\n`.
    fn frames(sse: &str) -> Vec<(&str, String)> {
        sse.split("\n\n")
            .filter_map(|frame| {
                let mut event = "";
                let mut data = Vec::new();
                for line in frame.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim_start();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                (!data.is_empty()).then(|| (event, data.join("\n")))
            })
            .collect()
    }

    /// Feeds every frame of `sse`, then the end of the body.
    fn decode(sse: &str) -> Vec<Event> {
        let mut decoder = AnthropicDecoder::new();
        let mut out = Vec::new();
        for (event, data) in frames(sse) {
            decoder.frame(event, &data, &mut out);
        }
        decoder.end(&mut out);
        assert!(decoder.is_done());
        out
    }

    /// The `data` of the first frame named `event`.
    fn data_of(sse: &str, event: &str) -> String {
        frames(sse)
            .into_iter()
            .find(|(e, _)| *e == event)
            .map(|(_, d)| d)
            .unwrap()
    }

    fn text_start(id: &str) -> Event {
        Event::TextStart { id: id.into() }
    }
    fn text_delta(id: &str, d: &str) -> Event {
        Event::TextDelta {
            id: id.into(),
            delta: d.into(),
        }
    }
    fn text_end(id: &str) -> Event {
        Event::TextEnd { id: id.into() }
    }
    fn tool_start(call_id: &str, tool: &str) -> Event {
        Event::ToolInputStart {
            call_id: call_id.into(),
            tool: tool.into(),
        }
    }
    fn tool_delta(call_id: &str, d: &str) -> Event {
        Event::ToolInputDelta {
            call_id: call_id.into(),
            delta: d.into(),
        }
    }
    fn tool_end(call_id: &str) -> Event {
        Event::ToolInputEnd {
            call_id: call_id.into(),
        }
    }
    fn tool_call(call_id: &str, tool: &str, input: &str) -> Event {
        Event::ToolCall {
            call_id: call_id.into(),
            tool: tool.into(),
            input_json: input.into(),
            metadata: None,
        }
    }
    fn finish(reason: FinishReason, raw: &str, usage: Usage, id: &str) -> Event {
        Event::Finish(Finish {
            reason,
            raw_reason: raw.into(),
            usage,
            response_id: id.into(),
            response_model: MODEL.into(),
        })
    }
    fn usage(input: u64, cache_read: u64, cache_write: u64, output: u64) -> Usage {
        Usage {
            input,
            cache_read,
            cache_write,
            output,
            reasoning: 0,
        }
    }

    #[test]
    fn text_stream() {
        assert_eq!(
            decode(fixture!("text.sse")),
            vec![
                text_start("0"),
                text_delta("0", "Hello"),
                text_delta("0", "! The file says \"done\".\nAnything else?"),
                text_end("0"),
                finish(
                    FinishReason::Stop,
                    "end_turn",
                    usage(25, 3840, 1210, 15),
                    "msg_01XFDUDYJgAACzvnptvVoYEL"
                ),
            ]
        );
    }

    #[test]
    fn parallel_tool_calls() {
        let (a, b) = (
            "toolu_01A09q90qw90lq917835lq9",
            "toolu_01B7dXq3fJt8mYh2KcLzWp4V",
        );
        let events = decode(fixture!("parallel_tools.sse"));
        assert_eq!(
            events,
            vec![
                text_start("0"),
                text_delta("0", "I'll check the weather in both cities."),
                text_end("0"),
                tool_start(a, "get_weather"),
                tool_delta(a, "{\"city\""),
                tool_delta(a, ": \"Par"),
                tool_delta(a, "is\"}"),
                tool_end(a),
                tool_call(a, "get_weather", r#"{"city": "Paris"}"#),
                tool_start(b, "get_weather"),
                tool_delta(b, "{\"ci"),
                tool_delta(b, "ty\": \"Tokyo\", "),
                tool_delta(b, "\"unit\": \"celsius\"}"),
                tool_end(b),
                tool_call(b, "get_weather", r#"{"city": "Tokyo", "unit": "celsius"}"#),
                finish(
                    FinishReason::ToolCalls,
                    "tool_use",
                    usage(612, 2048, 0, 131),
                    "msg_01Rk8tSbDcQ5vGnEJmWpHa2N"
                ),
            ]
        );
    }

    #[test]
    fn reasoning_with_signature() {
        let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/1Nq8+8UtbwCk1TkAvNg8ZYnOkIoV0NvZc/0RoLjGTYQ4X3bnKxVXUlkQu3Cj4OLmjTy2DmAtFm2ZGxz+OWVrvG3nLkYqKsrB4o2CJqxCfrnhj1tY=";
        assert_eq!(
            decode(fixture!("reasoning.sse")),
            vec![
                Event::ReasoningStart { id: "0".into() },
                Event::ReasoningDelta {
                    id: "0".into(),
                    delta: "The user asks for 27 * 453.".into()
                },
                Event::ReasoningDelta {
                    id: "0".into(),
                    delta: "\n27 * 453 = 27 * 400 + 27 * 53 = 10800 + 1431".into()
                },
                Event::ReasoningDelta {
                    id: "0".into(),
                    delta: " = 12231.".into()
                },
                Event::ReasoningEnd {
                    id: "0".into(),
                    metadata: Some(format!(r#"{{"signature":"{signature}"}}"#)),
                },
                text_start("1"),
                text_delta("1", "27 × 453 = **12,231**."),
                text_end("1"),
                // Thinking tokens are inside output_tokens and the API does not split them out here.
                finish(
                    FinishReason::Stop,
                    "end_turn",
                    usage(48, 0, 0, 187),
                    "msg_01Jm5Lq2sPzW8vYbT3nKcR7e"
                ),
            ]
        );
    }

    /// The fixture the cross-model end-to-end test starts from: signed thinking, text, then a tool call.
    #[test]
    fn thinking_then_text_then_a_tool_call() {
        let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6";
        let events = decode(fixture!("thinking_tool_use.sse"));
        let Some(Event::ReasoningEnd {
            metadata: Some(meta),
            ..
        }) = events.get(3)
        else {
            panic!("{events:#?}");
        };
        assert!(meta.starts_with(r#"{"signature":"EpYCCkYIBxgC"#), "{meta}");
        assert_eq!(
            events[4..],
            [
                text_start("1"),
                text_delta("1", "Let me check the weather in Paris."),
                text_end("1"),
                tool_start(id, "get_weather"),
                tool_delta(id, "{\"city\": "),
                tool_delta(id, "\"Paris\"}"),
                tool_end(id),
                tool_call(id, "get_weather", r#"{"city": "Paris"}"#),
                finish(
                    FinishReason::ToolCalls,
                    "tool_use",
                    usage(412, 0, 0, 96),
                    "msg_01HJ7vRzq2W4dKp9sN3xTbQe"
                ),
            ]
        );
    }

    #[test]
    fn redacted_thinking_opens_and_closes_at_once() {
        let data = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8URj2pLmN3kT7TwUqP4Ab9Ci5VxY1JhM0oLcE7wK8dGfR2sNt6Zp";
        assert_eq!(
            decode(fixture!("redacted_thinking.sse")),
            vec![
                Event::ReasoningStart { id: "0".into() },
                Event::ReasoningEnd {
                    id: "0".into(),
                    metadata: Some(format!(r#"{{"redacted_data":"{data}"}}"#)),
                },
                text_start("1"),
                text_delta(
                    "1",
                    "I can't share my full reasoning, but the answer is 42."
                ),
                text_end("1"),
                finish(
                    FinishReason::Stop,
                    "end_turn",
                    usage(92, 0, 0, 254),
                    "msg_01Qw3Ze6Hn9Tb2XcVfKj5Ls8"
                ),
            ]
        );
    }

    #[test]
    fn error_after_output_ends_the_stream() {
        let sse = fixture!("error_after_200.sse");
        let events = decode(sse);
        assert_eq!(
            events,
            vec![
                text_start("0"),
                text_delta("0", "Here is the first part"),
                text_delta("0", " of the answer"),
                Event::Error(classify(None, None, &data_of(sse, "error"))),
            ]
        );
        let Some(Event::Error(e)) = events.last() else {
            panic!("{events:?}")
        };
        assert_eq!(e.http_status, None);
    }

    #[test]
    fn error_before_any_block() {
        let sse = fixture!("error_first.sse");
        assert_eq!(
            decode(sse),
            vec![Event::Error(classify(None, None, &data_of(sse, "error")))]
        );
    }

    #[test]
    fn truncated_stream_is_a_retryable_network_error() {
        let call = "toolu_01Dk2Pw7Ys4Nh9Bq3Vt6Fm8J";
        let events = decode(fixture!("truncated.sse"));
        assert_eq!(
            events,
            vec![
                text_start("0"),
                text_delta("0", "Let me look that up"),
                text_end("0"),
                tool_start(call, "search"),
                tool_delta(call, "{\"query\": \"rust"),
                Event::Error(ProviderError::new(
                    ErrorKind::Network,
                    "stream ended before message_stop"
                )),
            ]
        );
        let Some(Event::Error(e)) = events.last() else {
            panic!("{events:?}")
        };
        assert!(e.retryable);
    }

    #[test]
    fn malformed_json_is_a_provider_error_and_nothing_follows() {
        let sse = fixture!("malformed.sse");
        let bad = frames(sse)
            .into_iter()
            .map(|(_, d)| d)
            .find(|d| serde_json::from_str::<serde_json::Value>(d).is_err())
            .unwrap();
        let parse_error = serde_json::from_str::<WireEvent<'_>>(&bad).err().unwrap();
        let mut expected = ProviderError::malformed(format!(
            "malformed Anthropic stream: `content_block_delta` event: {parse_error}"
        ));
        expected.provider_body = bad.clone();
        let events = decode(sse);
        assert_eq!(
            events,
            vec![
                text_start("0"),
                text_delta("0", "Hi"),
                Event::Error(expected)
            ]
        );
        let Some(Event::Error(e)) = events.last() else {
            panic!("{events:?}")
        };
        assert_eq!(e.kind, ErrorKind::ProviderError);
        assert!(!e.retryable);
    }

    /// Feeds inline `(event, data)` frames without ending the body.
    fn feed(decoder: &mut AnthropicDecoder, frames: &[(&str, &str)]) -> Vec<Event> {
        let mut out = Vec::new();
        for (event, data) in frames {
            decoder.frame(event, data, &mut out);
        }
        out
    }

    const START: &str = r#"{"type":"message_start","message":{"id":"msg_01X","model":"claude-sonnet-4-5-20250929","usage":{"input_tokens":100,"cache_creation_input_tokens":10,"cache_read_input_tokens":20,"output_tokens":1}}}"#;

    #[test]
    fn usage_from_message_delta_overrides_message_start_and_splits_thinking() {
        let mut d = AnthropicDecoder::new();
        let out = feed(
            &mut d,
            &[
                ("message_start", START),
                (
                    "message_delta",
                    r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":120,"cache_read_input_tokens":null,"output_tokens":500,"output_tokens_details":{"thinking_tokens":300}}}"#,
                ),
                ("message_stop", r#"{"type":"message_stop"}"#),
            ],
        );
        assert_eq!(
            out,
            vec![Event::Finish(Finish {
                reason: FinishReason::Length,
                raw_reason: "max_tokens".into(),
                usage: Usage {
                    input: 120,
                    cache_read: 20,
                    cache_write: 10,
                    output: 200,
                    reasoning: 300,
                },
                response_id: "msg_01X".into(),
                response_model: MODEL.into(),
            })]
        );
        // Nothing after the finish, not even at the end of the body.
        let mut rest = Vec::new();
        d.frame("message_stop", r#"{"type":"message_stop"}"#, &mut rest);
        d.end(&mut rest);
        assert!(rest.is_empty());
    }

    #[test]
    fn stop_reasons_map_to_unified_reasons() {
        for (raw, reason) in [
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("pause_turn", FinishReason::Stop),
            ("tool_use", FinishReason::ToolCalls),
            ("max_tokens", FinishReason::Length),
            ("model_context_window_exceeded", FinishReason::Length),
            ("refusal", FinishReason::ContentFilter),
            ("something_new", FinishReason::Other),
            ("", FinishReason::Other),
        ] {
            assert_eq!(finish_reason(raw), reason, "{raw}");
        }
    }

    #[test]
    fn unknown_events_blocks_and_deltas_are_ignored_and_the_event_name_is_optional() {
        let mut d = AnthropicDecoder::new();
        let out = feed(
            &mut d,
            &[
                ("", START),
                ("ping", r#"{"type": "ping"}"#),
                (
                    "future_event",
                    r#"{"type":"future_event","delta":"a string","index":"x"}"#,
                ),
                (
                    "",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
                ),
                (
                    "",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"q\":1}"}}"#,
                ),
                ("", r#"{"type":"content_block_stop","index":0}"#),
                (
                    "",
                    r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
                ),
                (
                    "",
                    r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"char_location"}}}"#,
                ),
                (
                    "",
                    r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}"#,
                ),
                (
                    "",
                    r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}}"#,
                ),
                ("", r#"{"type":"content_block_stop","index":1}"#),
                (
                    "",
                    r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#,
                ),
                ("", r#"{"type":"message_stop"}"#),
            ],
        );
        assert_eq!(
            out,
            vec![
                text_start("1"),
                text_delta("1", "ok"),
                text_end("1"),
                Event::Finish(Finish {
                    reason: FinishReason::Stop,
                    raw_reason: "end_turn".into(),
                    usage: usage(100, 20, 10, 9),
                    response_id: "msg_01X".into(),
                    response_model: MODEL.into(),
                }),
            ]
        );
    }

    #[test]
    fn tool_without_arguments_and_open_blocks_are_closed_at_message_stop() {
        let mut d = AnthropicDecoder::new();
        let out = feed(
            &mut d,
            &[
                ("message_start", START),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
                ),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01N","name":"now","input":{}}}"#,
                ),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
                ),
                (
                    "message_delta",
                    r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#,
                ),
                ("message_stop", r#"{"type":"message_stop"}"#),
            ],
        );
        assert_eq!(
            out,
            vec![
                Event::ReasoningStart { id: "0".into() },
                tool_start("toolu_01N", "now"),
                Event::ReasoningEnd {
                    id: "0".into(),
                    metadata: None
                },
                tool_end("toolu_01N"),
                tool_call("toolu_01N", "now", "{}"),
                // `end_turn` with a tool call is reported as tool calls.
                Event::Finish(Finish {
                    reason: FinishReason::ToolCalls,
                    raw_reason: "end_turn".into(),
                    usage: usage(100, 20, 10, 7),
                    response_id: "msg_01X".into(),
                    response_model: MODEL.into(),
                }),
            ]
        );
    }

    #[test]
    fn delta_for_a_block_that_never_started_is_malformed() {
        let mut d = AnthropicDecoder::new();
        let data = r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"lost"}}"#;
        let out = feed(
            &mut d,
            &[("message_start", START), ("content_block_delta", data)],
        );
        let mut expected = ProviderError::malformed(
            "malformed Anthropic stream: delta for content block 3, which is not open",
        );
        expected.provider_body = data.into();
        assert_eq!(out, vec![Event::Error(expected)]);
        assert!(d.is_done());
    }

    #[test]
    fn error_event_of_any_shape_is_classified() {
        for data in ["Overloaded", r#"{"type":"error","message":"flat"}"#] {
            let mut d = AnthropicDecoder::new();
            let out = feed(&mut d, &[("error", data)]);
            assert_eq!(out, vec![Event::Error(classify(None, None, data))]);
        }
    }

    #[test]
    fn error_body_fixtures_classify_as_their_status_says() {
        for (status, body, kind) in [
            (
                400,
                fixture!("errors/prompt_too_long.json"),
                ErrorKind::ContextOverflow,
            ),
            (401, fixture!("errors/authentication.json"), ErrorKind::Auth),
            (
                429,
                fixture!("errors/rate_limit.json"),
                ErrorKind::RateLimited,
            ),
            (
                529,
                fixture!("errors/overloaded.json"),
                ErrorKind::Overloaded,
            ),
        ] {
            let e = classify(Some(status), None, body);
            assert_eq!(e.kind, kind, "{status}: {e}");
            assert_eq!(e.http_status, Some(status));
        }
    }

    #[test]
    fn adapter_hands_out_fresh_decoders() {
        use crate::adapter::anthropic::Anthropic;
        use crate::adapter::{Adapter, Target};
        use crate::catalog::{Capabilities, ModelInfo};
        let model = ModelInfo {
            id: "anthropic/claude-sonnet-4-5".into(),
            provider: "anthropic".into(),
            name: "claude-sonnet-4-5".into(),
            display_name: String::new(),
            protocol: crate::adapter::Protocol::Anthropic,
            context_window: 200_000,
            max_input_tokens: 0,
            max_output_tokens: 64_000,
            capabilities: Capabilities::default(),
            pricing: None,
        };
        let mut decoder = Anthropic.decoder(&Target { model: &model });
        let mut out = Vec::new();
        for (event, data) in frames(fixture!("text.sse")) {
            decoder.frame(event, &data, &mut out);
        }
        assert!(decoder.is_done());
        assert_eq!(out.len(), 5);
    }
}
