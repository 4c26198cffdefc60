//! The demo provider's conversation: deterministic, clearly fake, and enough to exercise the whole loop.
//!
//! Each turn reads the request and calls the next tool of its plan that the conversation has not called yet, one
//! per step; when none is left it answers in text. The plan, from the tools the request offers:
//!
//! 1. `write` (a workspace tool): writes [`DEMO_FILE`], so the session's diff and the step's patch show a change
//!    (and an agent whose rules ask before writing shows a permission request);
//! 2. [`DEMO_TOOL`] (`get_time`) with `{"timezone":"UTC"}`;
//! 3. every other offered tool that is not a built-in workspace tool (a client tool), with the smallest input its
//!    schema accepts.
//!
//! After a tool result with nothing left to call, it says `The tool says: <result>. That's all from the demo
//! provider.`; offered nothing it can call, it says what it read and was offered.

use serde_json::{Map, Value, json};

use crate::openai_sse::{ChatStream, split_words, text_stream};

/// The text the demo streams before its `get_time` call.
pub const DEMO_PREAMBLE: &str = "Let me check the time for you.";

/// The client tool the demo calls, with arguments `{"timezone":"UTC"}`.
pub const DEMO_TOOL: &str = "get_time";

/// The file the demo writes when offered `write`.
pub const DEMO_FILE: &str = "demo-notes.txt";

/// Built-in workspace tools the demo never calls (only `write`, first).
const WORKSPACE_TOOLS: &[&str] = &["read", "write", "edit", "list", "grep", "glob", "bash"];

/// One turn's SSE body for request `body` (`n` numbers the response ids).
pub(crate) fn turn(body: &Value, model: &str, id: &str, n: u64, prompt: u64) -> String {
    let messages = body.get("messages").and_then(Value::as_array);
    let last = messages.and_then(|m| m.last());
    let offered = offered_tools(body);
    let called = called_tools(messages.map(Vec::as_slice).unwrap_or_default());
    let next = plan(&offered, body)
        .into_iter()
        .find(|(name, _)| !called.iter().any(|c| c == name));
    let tool_result = last
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|m| content_text(m.get("content")));
    match (next, tool_result) {
        (Some((name, args)), _) => {
            let preamble = match name.as_str() {
                DEMO_TOOL => DEMO_PREAMBLE.to_string(),
                "write" => format!("Let me write {DEMO_FILE} first."),
                other => format!("Next, a call to `{other}`."),
            };
            let words = split_words(&preamble);
            let args = args.to_string();
            let fragments = split_args(&args);
            let fragments: Vec<&str> = fragments.iter().map(String::as_str).collect();
            ChatStream::new(model, id)
                .text(&words)
                .tool_call(&format!("call_demo_{n}"), &name, &fragments)
                .finish(
                    "tool_calls",
                    Some((prompt, (words.len() + fragments.len() + 2) as u64)),
                )
        }
        (None, Some(result)) => {
            let answer = format!(
                "The tool says: {}. That's all from the demo provider.",
                result.trim()
            );
            let words = split_words(&answer);
            text_stream(model, id, &words, (prompt, words.len() as u64))
        }
        (None, None) => {
            let answer = plain_answer(last, &offered);
            let words = split_words(&answer);
            text_stream(model, id, &words, (prompt, words.len() as u64))
        }
    }
}

/// The calls the demo makes, in order, with their arguments (see the module docs).
fn plan(offered: &[String], body: &Value) -> Vec<(String, Value)> {
    let mut plan = Vec::new();
    if offered.iter().any(|t| t == "write") {
        let content =
            "Written by the demo provider, so the session's diff has something to show.\n";
        plan.push((
            "write".to_string(),
            json!({"path": DEMO_FILE, "content": content}),
        ));
    }
    if offered.iter().any(|t| t == DEMO_TOOL) {
        plan.push((DEMO_TOOL.to_string(), json!({"timezone": "UTC"})));
    }
    for name in offered {
        if name != DEMO_TOOL && !WORKSPACE_TOOLS.contains(&name.as_str()) {
            plan.push((name.clone(), smallest_input(schema_of(body, name))));
        }
    }
    plan
}

/// Arguments in three fragments (or fewer for a short text), as providers stream them.
fn split_args(args: &str) -> Vec<String> {
    let chars: Vec<char> = args.chars().collect();
    let third = chars.len().div_ceil(3).max(1);
    chars.chunks(third).map(|c| c.iter().collect()).collect()
}

/// The names of the function tools the request offers.
fn offered_tools(body: &Value) -> Vec<String> {
    body.get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The tools the conversation's assistant messages called.
fn called_tools(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.pointer("/function/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// The parameters schema of the offered tool `name`.
fn schema_of<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body.get("tools")?
        .as_array()?
        .iter()
        .find(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(name))?
        .pointer("/function/parameters")
}

/// The smallest object a schema accepts: each required property with a plain value of its type.
fn smallest_input(schema: Option<&Value>) -> Value {
    let mut input = Map::new();
    let Some(schema) = schema else {
        return Value::Object(input);
    };
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let kind = schema
            .pointer(&format!("/properties/{name}/type"))
            .and_then(Value::as_str);
        let value = match kind {
            Some("integer" | "number") => json!(1),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("demo"),
        };
        input.insert(name.to_string(), value);
    }
    Value::Object(input)
}

/// The demo's answer when it calls nothing: what it read and what it was offered.
fn plain_answer(last: Option<&Value>, offered: &[String]) -> String {
    let said = last
        .map(|m| content_text(m.get("content")))
        .unwrap_or_default();
    let words = said.split_whitespace().count();
    let tools = if offered.is_empty() {
        "no tools".to_string()
    } else {
        format!("the tools {}", offered.join(", "))
    };
    format!(
        "This is the demo provider: I read your {words}-word message and was offered {tools}. \
         I call `write`, `{DEMO_TOOL}` and client tools when offered, so this is all I can say."
    )
}

/// A message's content as text: a string, the joined `text` of content parts, or the raw JSON for anything else.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}
