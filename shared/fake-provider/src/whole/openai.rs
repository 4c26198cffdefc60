//! OpenAI's whole answers: a `chat.completion` from a Chat Completions stream's chunks, and a Responses stream's
//! final `response`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Answer, Broken, Item, append, json_events};

/// One choice being put together from its deltas.
#[derive(Default)]
struct Choice {
    content: Option<String>,
    reasoning: Option<String>,
    refusal: Option<String>,
    calls: BTreeMap<u64, (String, String, String)>,
    finish: Option<Value>,
}

impl Choice {
    fn add(&mut self, delta: &Value) {
        append(&mut self.content, delta, "content");
        append(&mut self.reasoning, delta, "reasoning_content");
        append(&mut self.refusal, delta, "refusal");
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let entry = self.calls.entry(index).or_default();
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                entry.0 = id.to_string();
            }
            let f = call.get("function").unwrap_or(&Value::Null);
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                entry.1.push_str(name);
            }
            if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                entry.2.push_str(args);
            }
        }
    }

    fn message(&self) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert("content".into(), json!(self.content));
        if let Some(r) = &self.reasoning {
            m.insert("reasoning_content".into(), json!(r));
        }
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .values()
                .map(|(id, name, args)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
                })
                .collect();
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        m.insert("refusal".into(), json!(self.refusal));
        m.insert("annotations".into(), json!([]));
        Value::Object(m)
    }
}

/// A `chat.completion` from the chunks of a Chat Completions stream; an error chunk is the error, with a 500.
pub(super) fn chat(items: &[Item]) -> Result<Answer, Broken> {
    let chunks = json_events(items);
    let Some((_, first)) = chunks.first() else {
        return Err("no chunk in the stream".into());
    };
    let mut choices: BTreeMap<u64, Choice> = BTreeMap::new();
    let mut usage = Value::Null;
    for (_, chunk) in &chunks {
        if let Some(error) = chunk.get("error") {
            let status = error
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| (400..600).contains(c))
                .unwrap_or(500);
            return Ok(Answer::error(status, chunk.to_string()));
        }
        for c in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(0);
            let choice = choices.entry(index).or_default();
            if let Some(delta) = c.get("delta") {
                choice.add(delta);
            }
            if let Some(f) = c.get("finish_reason").filter(|f| !f.is_null()) {
                choice.finish = Some(f.clone());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            usage = u.clone();
        }
    }
    if choices.is_empty() || choices.values().any(|c| c.finish.is_none()) {
        return Err("the stream ends before a choice's finish_reason".into());
    }
    let mut out = Map::new();
    out.insert("id".into(), first.get("id").cloned().unwrap_or(Value::Null));
    out.insert("object".into(), json!("chat.completion"));
    for key in ["created", "model"] {
        out.insert(key.into(), first.get(key).cloned().unwrap_or(Value::Null));
    }
    let choices: Vec<Value> = choices
        .iter()
        .map(|(index, c)| {
            json!({"index": index, "message": c.message(), "logprobs": null, "finish_reason": c.finish})
        })
        .collect();
    out.insert("choices".into(), Value::Array(choices));
    if !usage.is_null() {
        out.insert("usage".into(), usage);
    }
    for key in ["service_tier", "system_fingerprint"] {
        if let Some(v) = first.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    Ok(Answer::ok(&Value::Object(out)))
}

/// A Responses stream's final `response` (completed or incomplete); a failed response or an `error` event is the
/// error, with a 500.
pub(super) fn responses(items: &[Item]) -> Result<Answer, Broken> {
    for (_, event) in json_events(items) {
        match event.get("type").and_then(Value::as_str) {
            Some("response.completed" | "response.incomplete") => {
                let response = event.get("response").cloned().unwrap_or(Value::Null);
                return Ok(Answer::ok(&response));
            }
            Some("response.failed") => {
                let error = event.pointer("/response/error").unwrap_or(&Value::Null);
                return Ok(server_error(
                    error.get("message").unwrap_or(&Value::Null),
                    error.get("code").unwrap_or(&Value::Null),
                ));
            }
            Some("error") => {
                // The error's fields at the top of the event, or (as OpenAI sends it now) in its `error` object.
                let error = event.get("error").unwrap_or(&event);
                return Ok(server_error(
                    error.get("message").unwrap_or(&Value::Null),
                    error.get("code").unwrap_or(&Value::Null),
                ));
            }
            _ => {}
        }
    }
    Err("the stream ends before response.completed".into())
}

fn server_error(message: &Value, code: &Value) -> Answer {
    let body =
        json!({"error": {"message": message, "type": "server_error", "param": null, "code": code}});
    Answer::error(500, body.to_string())
}
