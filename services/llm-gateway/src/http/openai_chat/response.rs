//! Unified events → OpenAI Chat Completions responses: `chat.completion.chunk` SSE frames as events arrive, or one
//! `chat.completion` object from a collected reply.
//!
//! Reasoning text goes out as `reasoning_content` (the field OpenAI-compatible servers use for it); tool calls
//! stream as OpenAI does, the call's id and name first and then argument fragments, one index per call.

use std::collections::HashMap;

use bytes::BytesMut;
use llm_proto::gateway as pb;
use serde_json::{Value, json};

use crate::http::errors::{ApiError, Dialect};
use crate::http::sse;
use crate::protocol::Protocol;

/// Turns one generation's events into `chat.completion.chunk` frames.
pub struct ChunkEncoder {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    /// The wire protocol of the provider serving the generation, for its error objects.
    protocol: Option<Protocol>,
    /// Index and the arguments sent so far, by call id.
    calls: HashMap<String, (usize, String)>,
}

impl ChunkEncoder {
    /// An encoder for a completion `id` of `model` created at `created` (Unix seconds).
    pub fn new(
        id: String,
        created: u64,
        model: String,
        include_usage: bool,
        protocol: Option<Protocol>,
    ) -> ChunkEncoder {
        ChunkEncoder {
            id,
            created,
            model,
            include_usage,
            protocol,
            calls: HashMap::new(),
        }
    }

    /// Appends the frames of `ev` to `out` (none for events with no Chat Completions counterpart).
    pub fn push(&mut self, ev: pb::StreamResponse, out: &mut BytesMut) {
        use pb::stream_response::Event as E;
        let Some(ev) = ev.event else { return };
        match ev {
            E::StepStart(_) => self.delta(out, json!({"role": "assistant", "content": ""})),
            E::TextDelta(d) => self.delta(out, json!({"content": d.delta})),
            E::ReasoningDelta(d) => self.delta(out, json!({"reasoning_content": d.delta})),
            E::ToolInputStart(t) => {
                let index = self.calls.len();
                self.calls.insert(t.call_id.clone(), (index, String::new()));
                self.delta(out, call_start(index, &t.call_id, &t.tool_name));
            }
            E::ToolInputDelta(d) => {
                if let Some((index, sent)) = self.calls.get_mut(&d.call_id) {
                    sent.push_str(&d.delta);
                    let index = *index;
                    self.delta(out, call_arguments(index, &d.delta));
                }
            }
            E::ToolCall(c) => self.tool_call(c, out),
            E::StepFinish(f) => self.finish(&f, out),
            E::Error(e) => {
                let e = crate::convert::error_from_pb(&e);
                let api = ApiError::from_provider(&e, self.protocol);
                sse::data(out, &api.body(Dialect::OpenAi));
            }
            E::KeepAlive(_) => out.extend_from_slice(sse::COMMENT_KEEP_ALIVE),
            E::StreamStart(_)
            | E::TextStart(_)
            | E::TextEnd(_)
            | E::ReasoningStart(_)
            | E::ReasoningEnd(_)
            | E::ToolInputEnd(_) => {}
        }
    }

    /// A complete call: sent whole when its input was not streamed, else only what the fragments did not cover.
    fn tool_call(&mut self, c: pb::ToolCall, out: &mut BytesMut) {
        match self.calls.get(&c.call_id) {
            None => {
                let index = self.calls.len();
                self.calls
                    .insert(c.call_id.clone(), (index, c.input_json.clone()));
                let mut start = call_start(index, &c.call_id, &c.tool_name);
                start["tool_calls"][0]["function"]["arguments"] = Value::from(c.input_json);
                self.delta(out, start);
            }
            Some((index, sent)) => {
                // `{}` for a call streamed with no arguments; the rest of a call the decoder completed.
                if let Some(rest) = c
                    .input_json
                    .strip_prefix(sent.as_str())
                    .filter(|r| !r.is_empty())
                {
                    let delta = call_arguments(*index, rest);
                    self.delta(out, delta);
                }
            }
        }
    }

    fn finish(&mut self, f: &pb::StepFinish, out: &mut BytesMut) {
        let mut chunk = self.chunk(json!({}));
        chunk["choices"][0]["finish_reason"] = Value::from(finish_reason(f.finish_reason));
        sse::data(out, &chunk);
        if self.include_usage {
            let mut chunk = self.chunk(Value::Null);
            chunk["choices"] = json!([]);
            chunk["usage"] = usage(f.usage.as_ref());
            sse::data(out, &chunk);
        }
        sse::done(out);
    }

    fn delta(&self, out: &mut BytesMut, delta: Value) {
        sse::data(out, &self.chunk(delta));
    }

    fn chunk(&self, delta: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}],
        })
    }
}

fn call_start(index: usize, id: &str, name: &str) -> Value {
    json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]})
}

fn call_arguments(index: usize, fragment: &str) -> Value {
    json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
}

/// The unified finish reason as Chat Completions names it.
pub fn finish_reason(reason: i32) -> &'static str {
    use pb::FinishReason as F;
    match F::try_from(reason).unwrap_or(F::Unspecified) {
        F::Length => "length",
        F::ToolCalls => "tool_calls",
        F::ContentFilter => "content_filter",
        F::Stop | F::Error | F::Other | F::Unspecified => "stop",
    }
}

/// Chat Completions usage: prompt tokens include the cached ones, completion tokens the reasoning ones.
pub fn usage(u: Option<&pb::Usage>) -> Value {
    let u = u.copied().unwrap_or_default();
    let prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    let completion = u.output_tokens + u.reasoning_tokens;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    })
}

/// One `chat.completion` object from a collected reply.
pub fn completion(id: &str, created: u64, model: &str, reply: &pb::GenerateResponse) -> Value {
    use pb::output_part::Kind;
    let (mut text, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
    for part in reply.output.iter().filter_map(|p| p.kind.as_ref()) {
        match part {
            Kind::Text(t) => text.push_str(&t.text),
            Kind::Reasoning(r) => reasoning.push_str(&r.text),
            Kind::ToolCall(c) => calls.push(json!({
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.tool_name, "arguments": c.input_json},
            })),
        }
    }
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::from(text) },
        "refusal": null,
    });
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::from(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let finish = reply.finish.as_ref();
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(finish.map_or(0, |f| f.finish_reason)),
        }],
        "usage": usage(finish.and_then(|f| f.usage.as_ref())),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "response_tests.rs"]
mod tests;
