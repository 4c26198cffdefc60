//! Anthropic's whole answer: the `message` a Messages stream builds, block by block.

use serde_json::{Map, Value};

use super::{Answer, Broken, Item, json_events};

/// The HTTP status Anthropic answers an error `type` with.
fn status_of(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 500,
    }
}

/// The `message` of `message_start`, with each block's deltas applied, `message_delta`'s stop reason and usage; an
/// `error` event is that error, with its status.
pub(super) fn message(items: &[Item]) -> Result<Answer, Broken> {
    let mut message: Option<Map<String, Value>> = None;
    let mut blocks: Vec<(Value, String)> = Vec::new();
    for (_, event) in json_events(items) {
        let index = event
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok());
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                message = event.get("message").and_then(Value::as_object).cloned();
            }
            Some("content_block_start") => {
                let block = event.get("content_block").cloned().unwrap_or(Value::Null);
                let i = index.unwrap_or(blocks.len());
                if blocks.len() <= i {
                    blocks.resize(i + 1, (Value::Null, String::new()));
                }
                blocks[i] = (block, String::new());
            }
            Some("content_block_delta") => {
                let Some((block, json)) = index.and_then(|i| blocks.get_mut(i)) else {
                    return Err("a delta for a block that did not start".into());
                };
                apply(block, json, event.get("delta").unwrap_or(&Value::Null));
            }
            Some("message_delta") => {
                let Some(m) = message.as_mut() else {
                    return Err("message_delta before message_start".into());
                };
                for (key, value) in event
                    .get("delta")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    m.insert(key.clone(), value.clone());
                }
                if let Some(Value::Object(usage)) = event.get("usage")
                    && let Some(Value::Object(total)) = m.get_mut("usage")
                {
                    for (key, value) in usage {
                        total.insert(key.clone(), value.clone());
                    }
                }
            }
            Some("message_stop") => {
                let mut m = message.ok_or("message_stop before message_start")?;
                let content = blocks.into_iter().map(finish).collect::<Result<_, _>>()?;
                m.insert("content".into(), Value::Array(content));
                return Ok(Answer::ok(&Value::Object(m)));
            }
            Some("error") => {
                let kind = event
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("api_error");
                return Ok(Answer::error(status_of(kind), event.to_string()));
            }
            _ => {}
        }
    }
    Err("the stream ends before message_stop".into())
}

/// Applies one delta to its block; tool input arrives as JSON text, kept in `json` until the block ends.
fn apply(block: &mut Value, json: &mut String, delta: &Value) {
    let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or("");
    let extend = |block: &mut Value, key: &str, more: &str| {
        if let Some(obj) = block.as_object_mut() {
            let mut now = obj
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            now.push_str(more);
            obj.insert(key.into(), Value::String(now));
        }
    };
    match delta.get("type").and_then(Value::as_str) {
        Some("text_delta") => extend(block, "text", text("text")),
        Some("thinking_delta") => extend(block, "thinking", text("thinking")),
        Some("signature_delta") => extend(block, "signature", text("signature")),
        Some("input_json_delta") => json.push_str(text("partial_json")),
        Some("citations_delta") => {
            if let Some(obj) = block.as_object_mut() {
                let citation = delta.get("citation").cloned().unwrap_or(Value::Null);
                match obj.get_mut("citations") {
                    Some(Value::Array(list)) => list.push(citation),
                    _ => {
                        obj.insert("citations".into(), Value::Array(vec![citation]));
                    }
                }
            }
        }
        _ => {}
    }
}

/// A block as the whole message has it: tool input parsed from the JSON its deltas carried.
fn finish((mut block, json): (Value, String)) -> Result<Value, Broken> {
    if !json.is_empty() {
        let input: Value = serde_json::from_str(&json)
            .map_err(|e| format!("a tool input that is not JSON ({e}): {json}"))?;
        if let Some(obj) = block.as_object_mut() {
            obj.insert("input".into(), input);
        }
    }
    Ok(block)
}
