//! The Responses API's `response` object and its output items, shared by the streamed events (which carry the
//! response at its start and end) and the whole reply.

use llm_proto::gateway as pb;
use serde_json::{Map, Value, json};

use crate::http::responses::replay;

/// What every `response` object of one call repeats: its id, creation time, the model as requested, and the request
/// fields a response echoes.
#[derive(Debug, Clone)]
pub struct Head {
    pub id: String,
    pub created_at: u64,
    pub model: String,
    pub echo: Map<String, Value>,
}

/// One output item.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Assistant text.
    Message { id: String, text: String },
    /// Reasoning: its text as a summary, and its sealed replay data ([`replay`]).
    Reasoning {
        id: String,
        text: String,
        encrypted: Option<String>,
    },
    /// A function call.
    FunctionCall {
        id: String,
        call_id: String,
        name: String,
        arguments: String,
    },
}

impl Item {
    /// The item's id.
    pub fn id(&self) -> &str {
        match self {
            Item::Message { id, .. }
            | Item::Reasoning { id, .. }
            | Item::FunctionCall { id, .. } => id,
        }
    }

    /// The item as the API shows it, `completed` or still `in_progress` (with nothing in it yet).
    pub fn to_json(&self, completed: bool) -> Value {
        let status = if completed {
            "completed"
        } else {
            "in_progress"
        };
        match self {
            Item::Message { id, text } => {
                let content = if completed {
                    json!([output_text(text)])
                } else {
                    json!([])
                };
                json!({"id": id, "type": "message", "status": status, "content": content, "role": "assistant"})
            }
            Item::Reasoning {
                id,
                text,
                encrypted,
            } => {
                let summary = if completed && !text.is_empty() {
                    json!([{"type": "summary_text", "text": text}])
                } else {
                    json!([])
                };
                let mut item = json!({"id": id, "type": "reasoning", "summary": summary});
                if completed && let Some(e) = encrypted {
                    item["encrypted_content"] = Value::from(e.as_str());
                }
                item
            }
            Item::FunctionCall {
                id,
                call_id,
                name,
                arguments,
            } => {
                let arguments = if completed { arguments.as_str() } else { "" };
                json!({
                    "id": id, "type": "function_call", "status": status,
                    "arguments": arguments, "call_id": call_id, "name": name,
                })
            }
        }
    }
}

/// An `output_text` content part.
pub fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
}

/// How a response ended, for its `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    InProgress,
    Completed,
    /// Cut short: `max_output_tokens` or `content_filter`.
    Incomplete(&'static str),
    Failed,
}

/// The status a finish reason gives.
pub fn status_of(finish: &pb::StepFinish) -> Status {
    use pb::FinishReason as F;
    match F::try_from(finish.finish_reason).unwrap_or(F::Unspecified) {
        F::Length => Status::Incomplete("max_output_tokens"),
        F::ContentFilter => Status::Incomplete("content_filter"),
        _ => Status::Completed,
    }
}

/// The `response` object.
pub fn response(
    head: &Head,
    status: Status,
    output: &[Item],
    usage: Option<&pb::Usage>,
    error: Option<Value>,
) -> Value {
    let (status, incomplete) = match status {
        Status::InProgress => ("in_progress", Value::Null),
        Status::Completed => ("completed", Value::Null),
        Status::Incomplete(reason) => ("incomplete", json!({"reason": reason})),
        Status::Failed => ("failed", Value::Null),
    };
    let done = status != "in_progress";
    let echo = |key: &str, default: Value| head.echo.get(key).cloned().unwrap_or(default);
    json!({
        "id": head.id,
        "object": "response",
        "created_at": head.created_at,
        "status": status,
        "background": false,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": echo("instructions", Value::Null),
        "max_output_tokens": echo("max_output_tokens", Value::Null),
        "max_tool_calls": null,
        "model": head.model,
        "output": output.iter().map(|i| i.to_json(done)).collect::<Vec<_>>(),
        "parallel_tool_calls": echo("parallel_tool_calls", Value::Bool(true)),
        "previous_response_id": null,
        "reasoning": echo("reasoning", json!({"effort": null, "summary": null})),
        "store": false,
        "temperature": echo("temperature", Value::Null),
        "text": echo("text", json!({"format": {"type": "text"}})),
        "tool_choice": echo("tool_choice", Value::from("auto")),
        "tools": echo("tools", json!([])),
        "top_logprobs": 0,
        "top_p": echo("top_p", Value::Null),
        "truncation": "disabled",
        "usage": usage.map(usage_json),
        "metadata": echo("metadata", json!({})),
    })
}

/// Responses usage: input counts every prompt token (cached among them), output the visible and reasoning ones.
pub fn usage_json(u: &pb::Usage) -> Value {
    let input = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    let output = u.output_tokens + u.reasoning_tokens;
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": input + output,
    })
}

/// The output items of a collected reply.
pub fn items(reply: &pb::GenerateResponse) -> Vec<Item> {
    use pb::output_part::Kind;
    reply
        .output
        .iter()
        .filter_map(|p| p.kind.as_ref())
        .map(|part| match part {
            Kind::Text(t) => Item::Message {
                id: crate::http::response_id("msg_"),
                text: t.text.clone(),
            },
            Kind::Reasoning(r) => Item::Reasoning {
                id: crate::http::response_id("rs_"),
                text: r.text.clone(),
                encrypted: r.provider_metadata.as_ref().map(replay::seal),
            },
            Kind::ToolCall(c) => Item::FunctionCall {
                id: crate::http::response_id("fc_"),
                call_id: c.call_id.clone(),
                name: c.tool_name.clone(),
                arguments: c.input_json.clone(),
            },
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "object_tests.rs"]
mod tests;
