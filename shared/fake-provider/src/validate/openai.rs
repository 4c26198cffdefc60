//! OpenAI Chat Completions (and the Mistral and DeepSeek variants) and
//! OpenAI Responses request rules (docs/providers.md §1, §2, §6).

use serde_json::Value;

use super::{Check, Fail, array, filled, object, string, word_chars};

/// Longest tool-call id OpenAI Chat accepts.
const MAX_CALL_ID: usize = 40;
/// Keys an OpenAI assistant message may have; anything else is refused.
const ASSISTANT_KEYS: [&str; 7] = [
    "role",
    "content",
    "name",
    "tool_calls",
    "refusal",
    "audio",
    "function_call",
];
/// Parameters OpenAI reasoning models refuse.
const REASONING_REFUSES: [&str; 7] = [
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
];

/// Which OpenAI-compatible server's Chat Completions rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Server {
    OpenAi,
    Mistral,
    DeepSeek,
}

/// OpenAI's reasoning models, by name.
fn reasoning_model(model: &str) -> bool {
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|p| model.starts_with(p))
}

pub(super) fn check_chat(server: Server, body: &Value) -> Check {
    if !filled(body, "model") {
        return Err(Fail::new("you must provide a model parameter").param("model"));
    }
    let messages = match body.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => {
            return Err(Fail::new("[] is too short - 'messages'")
                .param("messages")
                .code("empty_array"));
        }
        _ => return Err(Fail::new("Missing required parameter: 'messages'.").param("messages")),
    };
    if body.get("stream") == Some(&Value::Bool(true))
        && object(body, "stream_options").and_then(|o| o.get("include_usage"))
            != Some(&Value::Bool(true))
    {
        // Not a provider rule but the gateway's promise: without it the stream carries no usage.
        return Err(Fail::new(
            "fake-provider: a streamed request must set stream_options.include_usage=true (the gateway promises usage on every step)",
        )
        .param("stream_options"));
    }
    for key in ["tool_choice", "parallel_tool_calls"] {
        if body.get(key).is_some() && array(body, "tools").is_empty() {
            return Err(Fail::new(format!(
                "Invalid value for '{key}': '{key}' is only allowed when 'tools' are specified."
            ))
            .param(key));
        }
    }
    parallel_tool_calls(body)?;
    if let Some(format) = object(body, "response_format") {
        output_type(
            format.get("type"),
            "response_format.type",
            "response_format",
            || text_of(messages.iter().filter_map(|m| m.get("content"))),
            "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
        )?;
    }
    for (i, t) in array(body, "tools").iter().enumerate() {
        let function = t.get("function").unwrap_or(&Value::Null);
        let name = string(function, "name").unwrap_or("");
        if !word_chars(name, 64) {
            return Err(Fail::new(format!(
                "Invalid 'tools[{i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            ))
            .param(format!("tools[{i}].function.name"))
            .code("invalid_value"));
        }
        if function.get("strict") == Some(&Value::Bool(true)) {
            strict_schema(
                function.get("parameters").unwrap_or(&Value::Null),
                &format!("function '{name}'"),
            )
            .map_err(|f| {
                f.param(format!("tools[{i}].function.parameters"))
                    .code("invalid_function_parameters")
            })?;
        }
    }
    if let Some(format) = object(body, "response_format").and_then(|f| f.get("json_schema"))
        && format.get("strict") == Some(&Value::Bool(true))
    {
        let name = string(format, "name").unwrap_or("");
        strict_schema(
            format.get("schema").unwrap_or(&Value::Null),
            &format!("response_format '{name}'"),
        )
        .map_err(|f| f.param("response_format"))?;
    }
    if server == Server::OpenAi && reasoning_model(string(body, "model").unwrap_or("")) {
        reasoning_parameters(body)?;
    }
    for (i, m) in messages.iter().enumerate() {
        chat_message(server, i, m)?;
    }
    chat_pairing(server, messages)
}

/// Reasoning models take `max_completion_tokens` and no sampling parameters.
fn reasoning_parameters(body: &Value) -> Check {
    if body.get("max_tokens").is_some() {
        return Err(Fail::new(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        )
        .param("max_tokens")
        .code("unsupported_parameter"));
    }
    if let Some(key) = REASONING_REFUSES.iter().find(|k| body.get(**k).is_some()) {
        return Err(Fail::new(format!(
            "Unsupported parameter: '{key}' is not supported with this model."
        ))
        .param(*key)
        .code("unsupported_parameter"));
    }
    Ok(())
}

fn chat_message(server: Server, i: usize, m: &Value) -> Check {
    let role = string(m, "role").unwrap_or("");
    let role_param = format!("messages.[{i}].role");
    let content = m.get("content").filter(|c| !c.is_null());
    match role {
        "system" | "developer" | "user" | "tool" => {
            if content.is_none() {
                return Err(
                    Fail::new("Invalid value for 'content': expected a string, got null.")
                        .param(format!("messages.[{i}].content"))
                        .code("invalid_type"),
                );
            }
            if role == "tool" && string(m, "tool_call_id").is_none() {
                return Err(Fail::new(format!(
                    "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'. (messages.[{i}])"
                ))
                .param(format!("messages.[{i}].tool_call_id")));
            }
        }
        "assistant" => {
            let calls = array(m, "tool_calls");
            let empty_content = match content {
                None => true,
                Some(Value::String(s)) => s.is_empty(),
                Some(Value::Array(parts)) => parts.is_empty(),
                Some(_) => false,
            };
            if server == Server::Mistral && empty_content && calls.is_empty() {
                return Err(Fail::new(
                    "Assistant message must have either content or tool_calls, but not none.",
                ));
            }
            if content.is_none() && calls.is_empty() && m.get("refusal").is_none() {
                return Err(
                    Fail::new("Invalid value for 'content': expected a string, got null.")
                        .param(format!("messages.[{i}].content"))
                        .code("invalid_type"),
                );
            }
            if server == Server::OpenAi
                && let Some(extra) = m
                    .as_object()
                    .and_then(|o| o.keys().find(|k| !ASSISTANT_KEYS.contains(&k.as_str())))
            {
                return Err(Fail::new(format!(
                    "Additional properties are not allowed ('{extra}' was unexpected) - 'messages.{i}'"
                ))
                .param(format!("messages.[{i}]")));
            }
            if server == Server::DeepSeek
                && !m.get("reasoning_content").is_some_and(Value::is_string)
            {
                return Err(Fail::new(format!(
                    "Missing `reasoning_content` field in the assistant message at message index {i}. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
                )));
            }
            for (j, call) in calls.iter().enumerate() {
                tool_call(server, i, j, call)?;
            }
        }
        other => {
            return Err(Fail::new(format!(
                "Invalid value: '{other}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
            ))
            .param(role_param)
            .code("invalid_value"));
        }
    }
    Ok(())
}

fn tool_call(server: Server, i: usize, j: usize, call: &Value) -> Check {
    let id = string(call, "id").unwrap_or("");
    let at = format!("messages[{i}].tool_calls[{j}]");
    match server {
        Server::Mistral => {
            if id.len() != 9 || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(Fail::new(format!(
                    "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."
                )));
            }
        }
        Server::OpenAi | Server::DeepSeek => {
            if id.is_empty() {
                return Err(Fail::new(format!("Missing required parameter: '{at}.id'."))
                    .param(format!("{at}.id"))
                    .code("missing_required_parameter"));
            }
            let len = id.chars().count();
            if len > MAX_CALL_ID {
                return Err(Fail::new(format!(
                    "Invalid '{at}.id': string too long. Expected a string with maximum length {MAX_CALL_ID}, but got a string with length {len} instead."
                ))
                .param(format!("{at}.id"))
                .code("string_above_max_length"));
            }
        }
    }
    let function = call.get("function").unwrap_or(&Value::Null);
    if !filled(function, "name") {
        return Err(
            Fail::new(format!("Missing required parameter: '{at}.function.name'."))
                .param(format!("{at}.function.name")),
        );
    }
    if !function.get("arguments").is_some_and(Value::is_string) {
        return Err(Fail::new(format!(
            "Invalid type for '{at}.function.arguments': expected a string."
        ))
        .param(format!("{at}.function.arguments"))
        .code("invalid_type"));
    }
    Ok(())
}

/// Every assistant tool call is answered by a `tool` message before the next
/// user or assistant message, and every `tool` message answers one.
fn chat_pairing(server: Server, messages: &[Value]) -> Check {
    // The open assistant turn's call ids, and those answered so far.
    let mut open: Option<(Vec<String>, Vec<String>)> = None;
    let unanswered = |open: &Option<(Vec<String>, Vec<String>)>, at: usize| -> Check {
        let Some((calls, answered)) = open else {
            return Ok(());
        };
        let missing: Vec<&str> = calls
            .iter()
            .filter(|c| !answered.contains(c))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if server == Server::Mistral {
            return Err(Fail::new(
                "Not the same number of function calls and responses",
            ));
        }
        Err(Fail::new(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            missing.join(", ")
        ))
        .param(format!("messages.[{at}].role")))
    };
    for (i, m) in messages.iter().enumerate() {
        let role = string(m, "role").unwrap_or("");
        if role == "tool" {
            let id = string(m, "tool_call_id").unwrap_or("");
            match open.as_mut() {
                Some((calls, answered)) if calls.iter().any(|c| c == id) => {
                    answered.push(id.to_string());
                }
                _ if server == Server::Mistral => {
                    return Err(Fail::new(
                        "Not the same number of function calls and responses",
                    ));
                }
                _ => {
                    return Err(Fail::new(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                    )
                    .param(format!("messages.[{i}].role")));
                }
            }
            continue;
        }
        unanswered(&open, i)?;
        open = None;
        let calls: Vec<String> = array(m, "tool_calls")
            .iter()
            .filter_map(|c| string(c, "id").map(String::from))
            .collect();
        if role == "assistant" && !calls.is_empty() {
            open = Some((calls, Vec::new()));
        }
    }
    unanswered(&open, messages.len())
}

pub(super) fn check_responses(body: &Value) -> Check {
    if !filled(body, "model") {
        return Err(Fail::new("Missing required parameter: 'model'.").param("model"));
    }
    let model = string(body, "model").unwrap_or("");
    if reasoning_model(model)
        && let Some(key) = ["temperature", "top_p"]
            .iter()
            .find(|k| body.get(**k).is_some())
    {
        return Err(Fail::new(format!(
            "Unsupported parameter: '{key}' is not supported with this model."
        ))
        .param(*key)
        .code("unsupported_parameter"));
    }
    responses_tools(body)?;
    parallel_tool_calls(body)?;
    if let Some(format) = object(body, "text").and_then(|t| t.get("format")) {
        let words = || {
            let input = body.get("input").into_iter();
            text_of(input.chain(body.get("instructions")))
        };
        output_type(
            format.get("type"),
            "text.format.type",
            "input",
            words,
            "Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.",
        )?;
    }
    let input = match body.get("input") {
        Some(Value::Array(items)) => items,
        Some(Value::String(_)) => return Ok(()),
        _ => return Err(Fail::new("Missing required parameter: 'input'.").param("input")),
    };
    responses_input(body, input)
}

/// Responses' function tools (strict unless told otherwise) and its strict `text.format` schema.
fn responses_tools(body: &Value) -> Check {
    for (i, t) in array(body, "tools").iter().enumerate() {
        if string(t, "type") != Some("function") {
            continue;
        }
        let name = string(t, "name").unwrap_or("");
        if !word_chars(name, 64) {
            return Err(Fail::new(format!(
                "Invalid 'tools[{i}].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            ))
            .param(format!("tools[{i}].name"))
            .code("invalid_value"));
        }
        // Responses makes function tools strict unless told otherwise.
        if t.get("strict") != Some(&Value::Bool(false)) {
            strict_schema(
                t.get("parameters").unwrap_or(&Value::Null),
                &format!("function '{name}'"),
            )
            .map_err(|f| {
                f.param(format!("tools[{i}].parameters"))
                    .code("invalid_function_parameters")
            })?;
        }
    }
    if let Some(format) = object(body, "text").and_then(|t| t.get("format"))
        && string(format, "type") == Some("json_schema")
        && format.get("strict") == Some(&Value::Bool(true))
    {
        let name = string(format, "name").unwrap_or("");
        strict_schema(
            format.get("schema").unwrap_or(&Value::Null),
            &format!("response_format '{name}'"),
        )
        .map_err(|f| f.param("text.format.schema"))?;
    }
    Ok(())
}

/// Responses' `input` items: calls and outputs paired by `call_id`, reasoning replayable, no empty messages.
fn responses_input(body: &Value, input: &[Value]) -> Check {
    let stored = body.get("store") != Some(&Value::Bool(false));
    let mut calls: Vec<&str> = Vec::new();
    let mut outputs: Vec<&str> = Vec::new();
    for (i, item) in input.iter().enumerate() {
        match string(item, "type") {
            Some("function_call") => {
                let id = string(item, "call_id").unwrap_or("");
                if id.is_empty() {
                    return Err(Fail::new(format!(
                        "Missing required parameter: 'input[{i}].call_id'."
                    ))
                    .param(format!("input[{i}].call_id")));
                }
                item_id_check(i, id)?;
                calls.push(id);
            }
            Some("function_call_output") => {
                let id = string(item, "call_id").unwrap_or("");
                item_id_check(i, id)?;
                if !calls.contains(&id) {
                    return Err(Fail::new(format!(
                        "No tool call found for function call output with call_id {id}."
                    ))
                    .param("input"));
                }
                outputs.push(id);
            }
            Some("reasoning") => {
                let id = string(item, "id").unwrap_or("");
                if !stored && !filled(item, "encrypted_content") {
                    return Err(Fail::new(format!(
                        "Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
                    ))
                    .param("input"));
                }
            }
            _ => {
                let content = item.get("content");
                let empty = match content {
                    Some(Value::String(s)) => s.is_empty(),
                    Some(Value::Array(parts)) => parts.is_empty(),
                    _ => true,
                };
                if empty && item.get("role").is_some() {
                    return Err(Fail::new(format!(
                        "Invalid 'input[{i}].content': empty content is not allowed."
                    ))
                    .param(format!("input[{i}].content")));
                }
            }
        }
    }
    if let Some(missing) = calls.iter().find(|c| !outputs.contains(c)) {
        return Err(
            Fail::new(format!("No tool output found for function call {missing}.")).param("input"),
        );
    }
    Ok(())
}

/// `parallel_tool_calls`, when sent, is a boolean.
fn parallel_tool_calls(body: &Value) -> Check {
    match body.get("parallel_tool_calls") {
        None | Some(Value::Bool(_)) => Ok(()),
        Some(v) => Err(Fail::new(format!(
            "Invalid type for 'parallel_tool_calls': expected a boolean, but got {v} instead."
        ))
        .param("parallel_tool_calls")
        .code("invalid_type")),
    }
}

/// An output format's `type` (`text`, `json_object`, `json_schema`); JSON-object output needs the word "json"
/// somewhere in what the model reads (`words`), or OpenAI refuses it with `refusal` naming `words_param`.
fn output_type(
    ty: Option<&Value>,
    param: &str,
    words_param: &str,
    words: impl FnOnce() -> String,
    refusal: &str,
) -> Check {
    match ty.and_then(Value::as_str) {
        Some("text" | "json_schema") => Ok(()),
        Some("json_object") if words().to_lowercase().contains("json") => Ok(()),
        Some("json_object") => Err(Fail::new(refusal).param(words_param)),
        other => Err(Fail::new(format!(
            "Invalid value: '{}'. Supported values are: 'text', 'json_object', and 'json_schema'.",
            other.unwrap_or_default()
        ))
        .param(param)
        .code("invalid_value")),
    }
}

/// Every string inside `values` (message contents, input items), joined: what the model reads.
fn text_of<'a>(values: impl Iterator<Item = &'a Value>) -> String {
    fn collect(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
            Value::Object(fields) => fields.values().for_each(|f| collect(f, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    values.for_each(|v| collect(v, &mut out));
    out
}

/// A `call_id` that is an item id (`fc_…`) is the classic pairing bug: the
/// output then quotes an id the provider never issued as a call id.
fn item_id_check(i: usize, id: &str) -> Check {
    if id.starts_with("fc_") {
        return Err(Fail::new(format!(
            "fake-provider: input[{i}].call_id `{id}` is a function_call item id (fc_…), not its call_id (call_…)"
        ))
        .param(format!("input[{i}].call_id")));
    }
    Ok(())
}

/// Strict mode's schema rules: every object closes `additionalProperties`
/// and lists every property in `required`, at every level.
fn strict_schema(schema: &Value, what: &str) -> Check {
    walk_strict(schema, what, &mut Vec::new(), 0)
}

fn walk_strict(s: &Value, what: &str, context: &mut Vec<String>, depth: usize) -> Check {
    if depth > 64 {
        return Ok(());
    }
    let Some(fields) = s.as_object() else {
        return Ok(());
    };
    let context_text = || {
        context
            .iter()
            .map(|c| format!("'{c}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let typed_object = match fields.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => fields.contains_key("properties"),
    };
    if typed_object {
        if fields.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Err(Fail::new(format!(
                "Invalid schema for {what}: In context=({}), 'additionalProperties' is required to be supplied and to be false.",
                context_text()
            )));
        }
        let required: Vec<&str> = array(s, "required")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if let Some(Value::Object(properties)) = fields.get("properties")
            && let Some(missing) = properties.keys().find(|k| !required.contains(&k.as_str()))
        {
            return Err(Fail::new(format!(
                "Invalid schema for {what}: In context=({}), 'required' is required to be supplied and to be an array including every key in properties. Missing '{missing}'.",
                context_text()
            )));
        }
    }
    if let Some(Value::Object(properties)) = fields.get("properties") {
        for (k, v) in properties {
            context.extend(["properties".to_string(), k.clone()]);
            walk_strict(v, what, context, depth + 1)?;
            context.truncate(context.len() - 2);
        }
    }
    if let Some(items) = fields.get("items") {
        context.push("items".into());
        walk_strict(items, what, context, depth + 1)?;
        context.pop();
    }
    for key in ["anyOf", "$defs", "definitions"] {
        let children: Vec<(String, &Value)> = match fields.get(key) {
            Some(Value::Array(bs)) => bs
                .iter()
                .enumerate()
                .map(|(n, b)| (n.to_string(), b))
                .collect(),
            Some(Value::Object(ds)) => ds.iter().map(|(n, d)| (n.clone(), d)).collect(),
            _ => continue,
        };
        for (name, child) in children {
            context.extend([key.to_string(), name]);
            walk_strict(child, what, context, depth + 1)?;
            context.truncate(context.len() - 2);
        }
    }
    Ok(())
}
