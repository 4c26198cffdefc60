//! Anthropic Messages request rules (docs/providers.md §3, §6).

use serde_json::Value;

use super::{Check, Fail, array, filled, object, string, word_chars};

/// Most `cache_control` breakpoints one request may carry.
const MAX_CACHE_MARKERS: usize = 4;
/// Smallest thinking budget.
const MIN_THINKING_BUDGET: u64 = 1024;
/// What a custom tool definition may hold.
const CUSTOM_TOOL_KEYS: [&str; 6] = [
    "type",
    "name",
    "description",
    "input_schema",
    "cache_control",
    "strict",
];
/// Models that refuse `temperature` and `top_p` together.
const EXCLUSIVE_SAMPLING: [&str; 4] = [
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "claude-opus-4-1",
    "claude-opus-4-5",
];

pub(super) fn check(body: &Value) -> Check {
    if !body.is_object() {
        return Err(Fail::new("Input should be a valid dictionary"));
    }
    match body.get("max_tokens") {
        None => return Err(Fail::new("max_tokens: Field required")),
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {}
        Some(_) => {
            return Err(Fail::new(
                "max_tokens: Input should be greater than or equal to 1",
            ));
        }
    }
    let messages = match body.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => {
            return Err(Fail::new("messages: at least one message is required"));
        }
        _ => return Err(Fail::new("messages: Field required")),
    };
    tools(body)?;
    tool_choice(body)?;
    output_config(body)?;
    sampling(body)?;
    cache_markers(body, messages)?;
    for (i, m) in messages.iter().enumerate() {
        message(i, m, i + 1 == messages.len())?;
    }
    roles(messages)?;
    pairing(messages)?;
    tool_blocks_need_tools(body, messages)?;
    thinking(body, messages)
}

/// A conversation that carries `tool_use` or `tool_result` blocks must define tools (a request that replays earlier
/// tool calls with no tool definitions is refused, whatever its `tool_choice`).
fn tool_blocks_need_tools(body: &Value, messages: &[Value]) -> Check {
    let uses_tools = messages.iter().any(|m| {
        blocks(m)
            .iter()
            .any(|b| matches!(block_type(b), "tool_use" | "tool_result"))
    });
    if uses_tools && array(body, "tools").is_empty() {
        return Err(Fail::new(
            "Requests which include `tool_use` or `tool_result` blocks must define tools.",
        ));
    }
    Ok(())
}

fn role(m: &Value) -> &str {
    string(m, "role").unwrap_or("")
}

fn block_type(b: &Value) -> &str {
    string(b, "type").unwrap_or("")
}

/// A message's blocks; string content counts as one text block.
fn blocks(m: &Value) -> Vec<Value> {
    match m.get("content") {
        Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
        Some(Value::Array(b)) => b.clone(),
        _ => Vec::new(),
    }
}

fn tools(body: &Value) -> Check {
    for (i, t) in array(body, "tools").iter().enumerate() {
        // Server tools (`web_search_…`) carry a `type`; only custom tools have these rules.
        if t.get("type").is_some_and(|ty| ty != "custom") {
            continue;
        }
        if let Some(extra) = t
            .as_object()
            .and_then(|o| o.keys().find(|k| !CUSTOM_TOOL_KEYS.contains(&k.as_str())))
        {
            return Err(Fail::new(format!(
                "tools.{i}.custom.{extra}: Extra inputs are not permitted"
            )));
        }
        match t.get("strict") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => closed_objects(
                t.get("input_schema").unwrap_or(&Value::Null),
                &format!("tools.{i}.custom.input_schema"),
                0,
            )?,
            Some(_) => {
                return Err(Fail::new(format!(
                    "tools.{i}.custom.strict: Input should be a valid boolean"
                )));
            }
        }
        if !string(t, "name").is_some_and(|n| word_chars(n, 64)) {
            return Err(Fail::new(format!(
                "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            )));
        }
        match t.get("input_schema") {
            Some(s) if string(s, "type") == Some("object") => {}
            Some(_) => {
                return Err(Fail::new(format!(
                    "tools.{i}.custom.input_schema.type: Input should be 'object'"
                )));
            }
            None => {
                return Err(Fail::new(format!(
                    "tools.{i}.custom.input_schema: Field required"
                )));
            }
        }
    }
    Ok(())
}

/// `tool_choice`: one of the four types, `name` only on `tool`, and `disable_parallel_tool_use` (a boolean) on
/// every type but `none`.
fn tool_choice(body: &Value) -> Check {
    let Some(choice) = object(body, "tool_choice") else {
        return Ok(());
    };
    let ty = choice.get("type").and_then(Value::as_str).unwrap_or("");
    if !matches!(ty, "auto" | "any" | "tool" | "none") {
        return Err(Fail::new(format!(
            "tool_choice: Input tag '{ty}' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"
        )));
    }
    for key in choice.keys() {
        let allowed = match key.as_str() {
            "type" => true,
            "name" => ty == "tool",
            "disable_parallel_tool_use" => ty != "none",
            _ => false,
        };
        if !allowed {
            return Err(Fail::new(format!(
                "tool_choice.{ty}.{key}: Extra inputs are not permitted"
            )));
        }
    }
    if choice
        .get("disable_parallel_tool_use")
        .is_some_and(|d| !d.is_boolean())
    {
        return Err(Fail::new(format!(
            "tool_choice.{ty}.disable_parallel_tool_use: Input should be a valid boolean"
        )));
    }
    Ok(())
}

/// `output_config`: `effort` and a `format` of type `json_schema` whose objects are all closed (structured outputs,
/// generally available: no beta header).
fn output_config(body: &Value) -> Check {
    let Some(config) = object(body, "output_config") else {
        return Ok(());
    };
    if let Some(extra) = config
        .keys()
        .find(|k| !matches!(k.as_str(), "format" | "effort"))
    {
        return Err(Fail::new(format!(
            "output_config.{extra}: Extra inputs are not permitted"
        )));
    }
    let Some(format) = config.get("format") else {
        return Ok(());
    };
    if string(format, "type") != Some("json_schema") {
        return Err(Fail::new(
            "output_config.format.type: Input should be 'json_schema'",
        ));
    }
    match format.get("schema") {
        Some(schema) if schema.is_object() => {
            closed_objects(schema, "output_config.format.schema", 0)
        }
        _ => Err(Fail::new("output_config.format.schema: Field required")),
    }
}

/// Structured outputs' rule: every object schema says `additionalProperties: false`.
fn closed_objects(schema: &Value, at: &str, depth: usize) -> Check {
    let Some(s) = schema.as_object() else {
        return Ok(());
    };
    if depth > 64 {
        return Ok(());
    }
    let typed_object = match s.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => s.contains_key("properties"),
    };
    if typed_object && s.get("additionalProperties") != Some(&Value::Bool(false)) {
        return Err(Fail::new(format!(
            "{at}: For 'object' type, 'additionalProperties' must be explicitly set to false"
        )));
    }
    let mut children: Vec<&Value> = Vec::new();
    for key in ["items", "additionalItems"] {
        children.extend(s.get(key));
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        children.extend(array(schema, key));
    }
    for key in ["properties", "$defs", "definitions"] {
        children.extend(object(schema, key).into_iter().flat_map(|m| m.values()));
    }
    for child in children {
        closed_objects(child, at, depth + 1)?;
    }
    Ok(())
}

fn sampling(body: &Value) -> Check {
    let temperature = body.get("temperature").and_then(Value::as_f64);
    if temperature.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        return Err(Fail::new(
            "temperature: Input should be less than or equal to 1",
        ));
    }
    let model = string(body, "model").unwrap_or("");
    if temperature.is_some()
        && body.get("top_p").is_some()
        && EXCLUSIVE_SAMPLING.iter().any(|m| model.starts_with(m))
    {
        return Err(Fail::new(
            "`temperature` and `top_p` cannot both be specified for this model. Please use only one.",
        ));
    }
    Ok(())
}

/// At most four breakpoints in tools, system and messages together, and
/// never one on a thinking block.
fn cache_markers(body: &Value, messages: &[Value]) -> Check {
    let marked = |b: &Value| b.get("cache_control").is_some();
    let mut count = array(body, "tools").iter().filter(|t| marked(t)).count();
    count += array(body, "system").iter().filter(|b| marked(b)).count();
    for (i, m) in messages.iter().enumerate() {
        for (j, b) in array(m, "content").iter().enumerate() {
            if !marked(b) {
                continue;
            }
            let ty = block_type(b);
            if matches!(ty, "thinking" | "redacted_thinking") {
                return Err(Fail::new(format!(
                    "messages.{i}.content.{j}.{ty}.cache_control: Extra inputs are not permitted"
                )));
            }
            count += 1;
        }
    }
    if count > MAX_CACHE_MARKERS {
        return Err(Fail::new(format!(
            "A maximum of {MAX_CACHE_MARKERS} blocks with cache_control may be provided. Found {count}."
        )));
    }
    Ok(())
}

fn message(i: usize, m: &Value, last: bool) -> Check {
    let role = role(m);
    if !matches!(role, "user" | "assistant") {
        return Err(Fail::new(format!(
            "messages.{i}.role: Input should be 'user' or 'assistant'"
        )));
    }
    let empty = match m.get("content") {
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(b)) => b.is_empty(),
        _ => {
            return Err(Fail::new(format!("messages.{i}.content: Field required")));
        }
    };
    if empty && !(last && role == "assistant") {
        return Err(Fail::new(format!(
            "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
        )));
    }
    let blocks = blocks(m);
    let mut seen_other = false;
    for (j, b) in blocks.iter().enumerate() {
        let ty = block_type(b);
        block(i, j, b, ty, role, seen_other)?;
        if ty != "tool_result" {
            seen_other = true;
        }
    }
    // A final assistant message is a prefill, which may not end in whitespace.
    if last
        && role == "assistant"
        && let Some(text) = blocks
            .last()
            .filter(|b| block_type(b) == "text")
            .and_then(|b| string(b, "text"))
        && text.ends_with(char::is_whitespace)
    {
        return Err(Fail::new(
            "messages: final assistant content cannot end with trailing whitespace",
        ));
    }
    Ok(())
}

/// Block `j` of message `i`: allowed in its role, with the fields the API requires; tool results before all else.
fn block(i: usize, j: usize, b: &Value, ty: &str, role: &str, seen_other: bool) -> Check {
    let at = format!("messages.{i}.content.{j}");
    match (ty, role) {
        ("text", _) => {
            let text = string(b, "text").unwrap_or("");
            if text.is_empty() {
                return Err(Fail::new("messages: text content blocks must be non-empty"));
            }
            if text.trim().is_empty() {
                return Err(Fail::new(
                    "messages: text content blocks must contain non-whitespace text",
                ));
            }
        }
        ("image" | "document", "user") => {}
        ("tool_use", "assistant") => {
            if !string(b, "id").is_some_and(|id| word_chars(id, usize::MAX)) {
                return Err(Fail::new(format!(
                    "{at}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                )));
            }
            if !string(b, "name").is_some_and(|n| word_chars(n, 200)) {
                return Err(Fail::new(format!(
                    "{at}.tool_use.name: String should match pattern '^[a-zA-Z0-9_-]{{1,200}}$'"
                )));
            }
            if !b.get("input").is_some_and(Value::is_object) {
                return Err(Fail::new(format!(
                    "{at}.tool_use.input: Input should be a valid dictionary"
                )));
            }
        }
        ("tool_result", "user") => {
            if !string(b, "tool_use_id").is_some_and(|id| word_chars(id, usize::MAX)) {
                return Err(Fail::new(format!(
                    "{at}.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                )));
            }
            if seen_other {
                return Err(Fail::new(format!(
                    "messages.{i}: `tool_result` blocks must come before any other content in the message"
                )));
            }
        }
        ("thinking", "assistant") => {
            if !filled(b, "signature") {
                return Err(Fail::new(format!(
                    "{at}.thinking.signature: Field required"
                )));
            }
            if string(b, "thinking").is_none() {
                return Err(Fail::new(format!("{at}.thinking.thinking: Field required")));
            }
        }
        ("redacted_thinking", "assistant") => {
            if !filled(b, "data") {
                return Err(Fail::new(format!(
                    "{at}.redacted_thinking.data: Field required"
                )));
            }
        }
        (ty, role) => {
            return Err(Fail::new(format!(
                "{at}.type: `{ty}` blocks are not allowed in `{role}` messages"
            )));
        }
    }
    Ok(())
}

/// The first message is the user's, and roles alternate. (The live API now
/// merges consecutive same-role messages instead of refusing them; the
/// stricter historical rule is kept because the gateway promises alternating
/// turns, which is what keeps tool results right after their calls.)
fn roles(messages: &[Value]) -> Check {
    if messages.first().map(role) != Some("user") {
        return Err(Fail::new(
            "messages: first message must use the \"user\" role",
        ));
    }
    for pair in messages.windows(2) {
        let r = role(&pair[1]);
        if role(&pair[0]) == r {
            return Err(Fail::new(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{r}\" roles in a row"
            )));
        }
    }
    Ok(())
}

/// The `tool_use` ids of an assistant message, in order.
fn tool_use_ids(m: &Value) -> Vec<String> {
    blocks(m)
        .iter()
        .filter(|b| block_type(b) == "tool_use")
        .filter_map(|b| string(b, "id").map(String::from))
        .collect()
}

/// Every `tool_use` is answered in the very next (user) message, and every
/// `tool_result` answers a `tool_use` of the message right before it.
fn pairing(messages: &[Value]) -> Check {
    let mut all_ids: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let ids = tool_use_ids(m);
        for (k, id) in ids.iter().enumerate() {
            if all_ids.contains(id) || ids[..k].contains(id) {
                return Err(Fail::new(format!(
                    "messages.{i}: `tool_use` ids must be unique: {id}"
                )));
            }
        }
        all_ids.extend(ids.iter().cloned());
        if !ids.is_empty() {
            let answered: Vec<String> = messages
                .get(i + 1)
                .map(|next| {
                    blocks(next)
                        .iter()
                        .filter(|b| block_type(b) == "tool_result")
                        .filter_map(|b| string(b, "tool_use_id").map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let missing: Vec<&str> = ids
                .iter()
                .filter(|id| !answered.contains(id))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(Fail::new(format!(
                    "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    i + 1,
                    missing.join(", ")
                )));
            }
        }
        let previous = i
            .checked_sub(1)
            .map(|p| tool_use_ids(&messages[p]))
            .unwrap_or_default();
        for (j, b) in blocks(m).iter().enumerate() {
            if block_type(b) != "tool_result" {
                continue;
            }
            let id = string(b, "tool_use_id").unwrap_or("");
            if !previous.iter().any(|p| p == id) {
                return Err(Fail::new(format!(
                    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )));
            }
        }
    }
    Ok(())
}

/// The sampling parameters thinking allows: temperature 1, no top_k, top_p at least 0.95.
fn thinking_sampling(body: &Value) -> Check {
    if body
        .get("temperature")
        .and_then(Value::as_f64)
        .is_some_and(|t| t != 1.0)
    {
        return Err(Fail::new(
            "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
        ));
    }
    if body.get("top_k").is_some() {
        return Err(Fail::new(
            "`top_k` is not supported when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
        ));
    }
    if body
        .get("top_p")
        .and_then(Value::as_f64)
        .is_some_and(|p| p < 0.95)
    {
        return Err(Fail::new(
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
        ));
    }
    Ok(())
}

/// Extended thinking: the budget, the sampling it excludes, and the thinking
/// block that must open the assistant turn of the current tool loop (or
/// must not be there when thinking is off).
fn thinking(body: &Value, messages: &[Value]) -> Check {
    let config = object(body, "thinking");
    let enabled = config.and_then(|c| c.get("type")).and_then(Value::as_str) == Some("enabled");
    // The tool loop starts after the last user message that is more than tool results.
    let loop_start = messages
        .iter()
        .rposition(|m| {
            role(m) == "user" && !blocks(m).iter().all(|b| block_type(b) == "tool_result")
        })
        .map_or(0, |i| i + 1);
    let loop_turns = || {
        messages
            .iter()
            .enumerate()
            .skip(loop_start)
            .filter(|(_, m)| role(m) == "assistant")
    };
    if !enabled {
        for (i, m) in loop_turns() {
            if let Some(j) = blocks(m)
                .iter()
                .position(|b| matches!(block_type(b), "thinking" | "redacted_thinking"))
            {
                return Err(Fail::new(format!(
                    "messages.{i}.content.{j}: thinking blocks cannot be sent in the current tool loop when `thinking` is disabled"
                )));
            }
        }
        return Ok(());
    }
    let budget = config
        .and_then(|c| c.get("budget_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if budget < MIN_THINKING_BUDGET {
        return Err(Fail::new(format!(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}"
        )));
    }
    let max_tokens = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    if max_tokens <= budget {
        return Err(Fail::new(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
        ));
    }
    thinking_sampling(body)?;
    if object(body, "tool_choice")
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| matches!(t, "any" | "tool"))
    {
        return Err(Fail::new(
            "Thinking may not be enabled when tool_choice forces tool use.",
        ));
    }
    if let Some((i, m)) = loop_turns().next() {
        let first = blocks(m).first().map(|b| block_type(b).to_string());
        if !matches!(first.as_deref(), Some("thinking" | "redacted_thinking")) {
            return Err(Fail::new(format!(
                "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
                first.unwrap_or_default()
            )));
        }
    }
    Ok(())
}
