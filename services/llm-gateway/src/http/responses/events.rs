//! Unified events → the Responses API's streamed events, each with its `sequence_number`:
//! `response.created` and `response.in_progress`; per output item `response.output_item.added` … `.done` with, in
//! between, the content part and `response.output_text.delta`s (text), the summary part and
//! `response.reasoning_summary_text.delta`s (reasoning), or `response.function_call_arguments.delta`s and `.done`
//! (a function call); then exactly one of `response.completed`, `response.incomplete` (cut short by the output
//! limit or a content filter) or `error` followed by `response.failed`.
//!
//! The deltas, one per token, are written from borrowed structs straight into the frame buffer.

use std::collections::HashMap;

use bytes::BytesMut;
use llm_proto::gateway as pb;
use serde::Serialize;
use serde_json::{Value, json};

use crate::http::errors::{ApiError, Dialect};
use crate::http::responses::object::{self, Head, Item, Status};
use crate::http::responses::replay;
use crate::http::sse;
use crate::protocol::Protocol;

/// `response.output_text.delta`, `response.reasoning_summary_text.delta` and
/// `response.function_call_arguments.delta`: the per-token events.
#[derive(Serialize)]
struct Delta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    sequence_number: u64,
    item_id: &'a str,
    output_index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary_index: Option<u32>,
    delta: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    logprobs: Option<[u8; 0]>,
}

/// Turns one generation's events into Responses events.
pub struct EventEncoder {
    head: Head,
    protocol: Option<Protocol>,
    seq: u64,
    items: Vec<Item>,
    /// Output index of each open text or reasoning block (by block id) and function call (by call id).
    open: HashMap<String, usize>,
    /// Reasoning blocks whose summary part has been opened (it opens with the first text).
    summarised: Vec<usize>,
}

impl EventEncoder {
    /// An encoder for response `head`, whose provider speaks `protocol`.
    pub fn new(head: Head, protocol: Option<Protocol>) -> EventEncoder {
        EventEncoder {
            head,
            protocol,
            seq: 0,
            items: Vec::new(),
            open: HashMap::new(),
            summarised: Vec::new(),
        }
    }

    /// Appends the events of `ev` to `out`.
    pub fn push(&mut self, ev: pb::StreamResponse, out: &mut BytesMut) {
        use pb::stream_response::Event as E;
        let Some(ev) = ev.event else { return };
        match ev {
            E::StepStart(_) => {
                let r = object::response(&self.head, Status::InProgress, &[], None, None);
                self.emit(out, "response.created", json!({"response": r.clone()}));
                self.emit(out, "response.in_progress", json!({"response": r}));
            }
            E::TextStart(t) => self.text_start(t.id, out),
            E::TextDelta(d) => self.text_delta(&d.id, &d.delta, out),
            E::TextEnd(t) => self.text_end(&t.id, out),
            E::ReasoningStart(r) => {
                let id = crate::http::response_id("rs_");
                let item = Item::Reasoning {
                    id,
                    text: String::new(),
                    encrypted: None,
                };
                self.add(r.id, item, out);
            }
            E::ReasoningDelta(d) => self.reasoning_delta(&d.id, &d.delta, out),
            E::ReasoningEnd(r) => self.reasoning_end(r, out),
            E::ToolInputStart(t) => self.call_start(t.call_id, t.tool_name, out),
            E::ToolInputDelta(d) => self.call_delta(&d.call_id, &d.delta, out),
            E::ToolCall(c) => self.call_done(c, out),
            E::StepFinish(f) => {
                let status = object::status_of(&f);
                let kind = match status {
                    Status::Incomplete(_) => "response.incomplete",
                    _ => "response.completed",
                };
                let r = object::response(&self.head, status, &self.items, f.usage.as_ref(), None);
                self.emit(out, kind, json!({"response": r}));
            }
            E::Error(e) => self.error(&e, out),
            E::KeepAlive(_) => out.extend_from_slice(sse::COMMENT_KEEP_ALIVE),
            E::StreamStart(_) | E::ToolInputEnd(_) => {}
        }
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        seq
    }

    /// An event of `kind` with the fields of `body` (an object) after its type and sequence number.
    fn emit(&mut self, out: &mut BytesMut, kind: &str, body: Value) {
        let mut event = serde_json::Map::new();
        event.insert("type".into(), Value::from(kind));
        event.insert("sequence_number".into(), Value::from(self.next_seq()));
        if let Value::Object(fields) = body {
            event.extend(fields);
        }
        sse::event(out, kind, &Value::Object(event));
    }

    fn delta(&mut self, out: &mut BytesMut, kind: &'static str, index: usize, delta: &str) {
        let sequence_number = self.next_seq();
        let (content_index, summary_index, logprobs) = match kind {
            "response.output_text.delta" => (Some(0), None, Some([])),
            "response.reasoning_summary_text.delta" => (None, Some(0), None),
            _ => (None, None, None),
        };
        let d = Delta {
            kind,
            sequence_number,
            item_id: self.items[index].id(),
            output_index: index,
            content_index,
            summary_index,
            delta,
            logprobs,
        };
        sse::event(out, kind, &d);
    }

    /// Adds an output item for `key` (a block or call id) and announces it.
    fn add(&mut self, key: String, item: Item, out: &mut BytesMut) -> usize {
        let index = self.items.len();
        let json = item.to_json(false);
        self.items.push(item);
        self.open.insert(key, index);
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": json}),
        );
        index
    }

    fn item_done(&mut self, index: usize, out: &mut BytesMut) {
        let json = self.items[index].to_json(true);
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": json}),
        );
    }

    fn text_start(&mut self, block: String, out: &mut BytesMut) {
        let item = Item::Message {
            id: crate::http::response_id("msg_"),
            text: String::new(),
        };
        let index = self.add(block, item, out);
        let item_id = self.items[index].id().to_string();
        self.emit(
            out,
            "response.content_part.added",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": object::output_text("")}),
        );
    }

    fn text_delta(&mut self, block: &str, delta: &str, out: &mut BytesMut) {
        let Some(&index) = self.open.get(block) else {
            return;
        };
        if let Item::Message { text, .. } = &mut self.items[index] {
            text.push_str(delta);
        }
        self.delta(out, "response.output_text.delta", index, delta);
    }

    fn text_end(&mut self, block: &str, out: &mut BytesMut) {
        let Some(index) = self.open.remove(block) else {
            return;
        };
        let Item::Message { id, text } = self.items[index].clone() else {
            return;
        };
        let at = json!({"item_id": id, "output_index": index, "content_index": 0});
        let mut done = at.clone();
        done["text"] = Value::from(text.as_str());
        done["logprobs"] = json!([]);
        self.emit(out, "response.output_text.done", done);
        let mut part = at;
        part["part"] = object::output_text(&text);
        self.emit(out, "response.content_part.done", part);
        self.item_done(index, out);
    }

    fn reasoning_delta(&mut self, block: &str, delta: &str, out: &mut BytesMut) {
        let Some(&index) = self.open.get(block) else {
            return;
        };
        if !self.summarised.contains(&index) {
            self.summarised.push(index);
            let item_id = self.items[index].id().to_string();
            self.emit(
                out,
                "response.reasoning_summary_part.added",
                json!({"item_id": item_id, "output_index": index, "summary_index": 0,
                       "part": {"type": "summary_text", "text": ""}}),
            );
        }
        if let Item::Reasoning { text, .. } = &mut self.items[index] {
            text.push_str(delta);
        }
        self.delta(out, "response.reasoning_summary_text.delta", index, delta);
    }

    fn reasoning_end(&mut self, r: pb::ReasoningEnd, out: &mut BytesMut) {
        let Some(index) = self.open.remove(&r.id) else {
            return;
        };
        if let Item::Reasoning { encrypted, .. } = &mut self.items[index] {
            *encrypted = r.provider_metadata.as_ref().map(replay::seal);
        }
        if let Some(at) = self.summarised.iter().position(|i| *i == index) {
            self.summarised.swap_remove(at);
            if let Item::Reasoning { id, text, .. } = self.items[index].clone() {
                let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
                let mut done = at.clone();
                done["text"] = Value::from(text.as_str());
                self.emit(out, "response.reasoning_summary_text.done", done);
                let mut part = at;
                part["part"] = json!({"type": "summary_text", "text": text});
                self.emit(out, "response.reasoning_summary_part.done", part);
            }
        }
        self.item_done(index, out);
    }

    fn call_start(&mut self, call_id: String, name: String, out: &mut BytesMut) {
        let item = Item::FunctionCall {
            id: crate::http::response_id("fc_"),
            call_id: call_id.clone(),
            name,
            arguments: String::new(),
        };
        self.add(call_id, item, out);
    }

    fn call_delta(&mut self, call_id: &str, delta: &str, out: &mut BytesMut) {
        let Some(&index) = self.open.get(call_id) else {
            return;
        };
        if let Item::FunctionCall { arguments, .. } = &mut self.items[index] {
            arguments.push_str(delta);
        }
        self.delta(out, "response.function_call_arguments.delta", index, delta);
    }

    /// A complete call: announced first when its input was not streamed; its final arguments replace the
    /// streamed ones (the decoder may have completed or cleaned them).
    fn call_done(&mut self, c: pb::ToolCall, out: &mut BytesMut) {
        let index = match self.open.get(&c.call_id) {
            Some(&index) => index,
            None => {
                self.call_start(c.call_id.clone(), c.tool_name.clone(), out);
                let index = self.items.len() - 1;
                self.call_delta(&c.call_id, &c.input_json, out);
                index
            }
        };
        self.open.remove(&c.call_id);
        if let Item::FunctionCall { arguments, .. } = &mut self.items[index] {
            *arguments = c.input_json;
        }
        let (id, arguments) = match &self.items[index] {
            Item::FunctionCall { id, arguments, .. } => (id.clone(), arguments.clone()),
            _ => return,
        };
        self.emit(
            out,
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "arguments": arguments}),
        );
        self.item_done(index, out);
    }

    /// An error after the response started: the `error` event with the provider's (or the mapped) error object,
    /// then `response.failed`.
    fn error(&mut self, e: &pb::Error, out: &mut BytesMut) {
        let e = crate::convert::error_from_pb(e);
        let body = ApiError::from_provider(&e, self.protocol).body(Dialect::OpenAi);
        let error = body.get("error").cloned().unwrap_or(Value::Null);
        let code = error
            .get("code")
            .filter(|c| !c.is_null())
            .or_else(|| error.get("type"))
            .cloned()
            .unwrap_or(Value::Null);
        let message = error.get("message").cloned().unwrap_or(Value::Null);
        let param = error.get("param").cloned().unwrap_or(Value::Null);
        self.emit(
            out,
            "error",
            json!({"code": code, "message": message, "param": param}),
        );
        let failure = json!({"code": code, "message": message});
        let r = object::response(&self.head, Status::Failed, &self.items, None, Some(failure));
        self.emit(out, "response.failed", json!({"response": r}));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "events_tests.rs"]
mod tests;
