//! Unified events → Anthropic Messages responses: the `message_start` … `message_stop` SSE events as events arrive,
//! or one `message` object from a collected reply.
//!
//! Reasoning becomes `thinking` blocks; when an Anthropic model made it, its signature goes out as the block's
//! `signature` (a `signature_delta` when streaming) and a redacted block as `redacted_thinking`, so a caller that
//! sends the turn back replays it exactly. Reasoning from other providers has an empty signature.

use std::collections::HashMap;

use bytes::BytesMut;
use llm_proto::gateway as pb;
use serde_json::{Value, json};

use crate::http::errors::{ApiError, Dialect};
use crate::http::sse;
use crate::protocol::Protocol;

/// Turns one generation's events into Messages stream events.
pub struct EventEncoder {
    id: String,
    model: String,
    next_index: usize,
    /// Content-block index of each open text / reasoning block (by block id) and tool call (by call id), with the
    /// tool input sent so far.
    text: HashMap<String, usize>,
    /// Reasoning blocks: `None` until the block is started (deferred, since a redacted block is known only at its
    /// end).
    reasoning: HashMap<String, Option<usize>>,
    tools: HashMap<String, (usize, String)>,
    /// The wire protocol of the provider serving the generation, for its error objects.
    protocol: Option<Protocol>,
}

impl EventEncoder {
    /// An encoder for message `id` of `model`.
    pub fn new(id: String, model: String, protocol: Option<Protocol>) -> EventEncoder {
        EventEncoder {
            id,
            model,
            protocol,
            next_index: 0,
            text: HashMap::new(),
            reasoning: HashMap::new(),
            tools: HashMap::new(),
        }
    }

    /// Appends the events of `ev` to `out`.
    pub fn push(&mut self, ev: pb::StreamResponse, out: &mut BytesMut) {
        use pb::stream_response::Event as E;
        let Some(ev) = ev.event else { return };
        match ev {
            E::StepStart(_) => sse::event(out, "message_start", &self.message_start()),
            E::TextStart(t) => {
                let index = self.open(out, json!({"type": "text", "text": ""}));
                self.text.insert(t.id, index);
            }
            E::TextDelta(d) => {
                if let Some(&index) = self.text.get(&d.id) {
                    delta(out, index, json!({"type": "text_delta", "text": d.delta}));
                }
            }
            E::TextEnd(t) => {
                if let Some(index) = self.text.remove(&t.id) {
                    stop(out, index);
                }
            }
            E::ReasoningStart(r) => {
                self.reasoning.insert(r.id, None);
            }
            E::ReasoningDelta(d) => {
                let index = self.reasoning_index(&d.id, out);
                delta(
                    out,
                    index,
                    json!({"type": "thinking_delta", "thinking": d.delta}),
                );
            }
            E::ReasoningEnd(r) => self.reasoning_end(r, out),
            E::ToolInputStart(t) => {
                let index = self.open(out, tool_use_start(&t.call_id, &t.tool_name));
                self.tools.insert(t.call_id, (index, String::new()));
            }
            E::ToolInputDelta(d) => {
                if let Some((index, sent)) = self.tools.get_mut(&d.call_id) {
                    sent.push_str(&d.delta);
                    delta(
                        out,
                        *index,
                        json!({"type": "input_json_delta", "partial_json": d.delta}),
                    );
                }
            }
            E::ToolCall(c) => self.tool_call(c, out),
            E::StepFinish(f) => {
                let body = json!({
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason(&f), "stop_sequence": null},
                    "usage": usage(f.usage.as_ref()),
                });
                sse::event(out, "message_delta", &body);
                sse::event(out, "message_stop", &json!({"type": "message_stop"}));
            }
            E::Error(e) => {
                let e = crate::convert::error_from_pb(&e);
                let api = ApiError::from_provider(&e, self.protocol);
                sse::event(out, "error", &api.body(Dialect::Anthropic));
            }
            E::KeepAlive(_) => out.extend_from_slice(super::PING),
            E::StreamStart(_) | E::ToolInputEnd(_) => {}
        }
    }

    fn message_start(&self) -> Value {
        json!({
            "type": "message_start",
            "message": {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        })
    }

    /// Starts a content block and returns its index.
    fn open(&mut self, out: &mut BytesMut, block: Value) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        let body = json!({"type": "content_block_start", "index": index, "content_block": block});
        sse::event(out, "content_block_start", &body);
        index
    }

    /// The index of reasoning block `id`, starting it as a `thinking` block if it is not yet.
    fn reasoning_index(&mut self, id: &str, out: &mut BytesMut) -> usize {
        if let Some(Some(index)) = self.reasoning.get(id) {
            return *index;
        }
        let index = self.open(
            out,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        );
        self.reasoning.insert(id.to_string(), Some(index));
        index
    }

    fn reasoning_end(&mut self, r: pb::ReasoningEnd, out: &mut BytesMut) {
        let replay = anthropic_replay(r.provider_metadata.as_ref());
        let started = matches!(self.reasoning.get(&r.id), Some(Some(_)));
        if let (Some(data), false) = (replay.get("redacted_data").and_then(Value::as_str), started)
        {
            let index = self.open(out, json!({"type": "redacted_thinking", "data": data}));
            stop(out, index);
        } else {
            let index = self.reasoning_index(&r.id, out);
            if let Some(signature) = replay.get("signature").and_then(Value::as_str) {
                delta(
                    out,
                    index,
                    json!({"type": "signature_delta", "signature": signature}),
                );
            }
            stop(out, index);
        }
        self.reasoning.remove(&r.id);
    }

    /// A complete call: started, filled and stopped at once when its input was not streamed, else completed with
    /// what the fragments did not cover.
    fn tool_call(&mut self, c: pb::ToolCall, out: &mut BytesMut) {
        let (index, sent) = match self.tools.remove(&c.call_id) {
            Some(open) => open,
            None => (
                self.open(out, tool_use_start(&c.call_id, &c.tool_name)),
                String::new(),
            ),
        };
        if let Some(rest) = c
            .input_json
            .strip_prefix(sent.as_str())
            .filter(|r| !r.is_empty())
        {
            delta(
                out,
                index,
                json!({"type": "input_json_delta", "partial_json": rest}),
            );
        }
        stop(out, index);
    }
}

fn tool_use_start(id: &str, name: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": {}})
}

fn delta(out: &mut BytesMut, index: usize, delta: Value) {
    let body = json!({"type": "content_block_delta", "index": index, "delta": delta});
    sse::event(out, "content_block_delta", &body);
}

fn stop(out: &mut BytesMut, index: usize) {
    sse::event(
        out,
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    );
}

/// The replay data of reasoning an Anthropic model made (`signature` or `redacted_data`); empty otherwise.
fn anthropic_replay(meta: Option<&pb::ProviderMetadata>) -> Value {
    meta.filter(|m| m.protocol == Protocol::Anthropic.as_str())
        .and_then(|m| serde_json::from_str(&m.json).ok())
        .unwrap_or(Value::Null)
}

/// The unified finish reason as Messages names it.
fn stop_reason(f: &pb::StepFinish) -> &'static str {
    use pb::FinishReason as F;
    match F::try_from(f.finish_reason).unwrap_or(F::Unspecified) {
        F::Length => "max_tokens",
        F::ToolCalls => "tool_use",
        F::ContentFilter => "refusal",
        F::Stop if f.raw_finish_reason == "stop_sequence" => "stop_sequence",
        F::Stop | F::Error | F::Other | F::Unspecified => "end_turn",
    }
}

/// Messages usage: `input_tokens` excludes the cached prompt, `output_tokens` includes the reasoning.
fn usage(u: Option<&pb::Usage>) -> Value {
    let u = u.copied().unwrap_or_default();
    json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens + u.reasoning_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
    })
}

/// One `message` object from a collected reply.
pub fn message(id: &str, model: &str, reply: &pb::GenerateResponse) -> Value {
    use pb::output_part::Kind;
    let content: Vec<Value> = reply
        .output
        .iter()
        .filter_map(|p| p.kind.as_ref())
        .map(|part| match part {
            Kind::Text(t) => json!({"type": "text", "text": t.text}),
            Kind::Reasoning(r) => {
                let replay = anthropic_replay(r.provider_metadata.as_ref());
                match replay.get("redacted_data").and_then(Value::as_str) {
                    Some(data) => json!({"type": "redacted_thinking", "data": data}),
                    None => json!({
                        "type": "thinking",
                        "thinking": r.text,
                        "signature": replay.get("signature").and_then(Value::as_str).unwrap_or(""),
                    }),
                }
            }
            Kind::ToolCall(c) => json!({
                "type": "tool_use",
                "id": c.call_id,
                "name": c.tool_name,
                "input": serde_json::from_str::<Value>(&c.input_json).unwrap_or_else(|_| json!({})),
            }),
        })
        .collect();
    let finish = reply.finish.clone().unwrap_or_default();
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(&finish),
        "stop_sequence": null,
        "usage": usage(finish.usage.as_ref()),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "response_tests.rs"]
mod tests;
