//! Gemini's whole answers: `:generateContent`'s one response, the stream's chunks merged, and
//! `:streamGenerateContent` without `alt=sse`, the chunks as a JSON array. Google pretty-prints both.

use serde_json::{Map, Value};

use super::{Answer, Broken, Item, json_events};

/// The chunks as one response (or, for `array`, as they are); an error after them is that error, with its status.
pub(super) fn answer(items: &[Item], array: bool) -> Result<Answer, Broken> {
    if let Some(error) = trailing_error(items) {
        return Ok(error);
    }
    let chunks: Vec<Value> = json_events(items).into_iter().map(|(_, v)| v).collect();
    let finished = chunks
        .iter()
        .any(|c| c.pointer("/candidates/0/finishReason").is_some());
    if !finished {
        return Err("the stream ends before a finishReason".into());
    }
    let whole = if array {
        Value::Array(chunks)
    } else {
        merge(&chunks)
    };
    Ok(Answer {
        status: 200,
        body: pretty(&whole),
        error_type: None,
    })
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Gemini's error JSON, sent after the events (or as one), with the status it names.
fn trailing_error(items: &[Item]) -> Option<Answer> {
    items.iter().find_map(|item| {
        let text = match item {
            Item::Bare(text) => text.as_str(),
            Item::Event { data, .. } => data.as_str(),
        };
        let v: Value = serde_json::from_str(text).ok()?;
        let status = v.pointer("/error/code").and_then(Value::as_u64)?;
        Some(Answer::error(
            u16::try_from(status).unwrap_or(500),
            pretty(&v),
        ))
    })
}

/// One response from the chunks: each candidate's parts joined (adjacent text of the same kind, thought or not, is
/// one part, and a signature sent after a text joins it), its other fields as last sent; usage and the response's
/// other fields as the last chunk has them.
fn merge(chunks: &[Value]) -> Value {
    let mut candidates: Vec<Map<String, Value>> = Vec::new();
    let mut parts: Vec<Vec<Value>> = Vec::new();
    let mut roles: Vec<Value> = Vec::new();
    let mut top = Map::new();
    for chunk in chunks {
        for c in chunk
            .get("candidates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let i = c
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| usize::try_from(i).ok())
                .unwrap_or(0);
            if candidates.len() <= i {
                candidates.resize(i + 1, Map::new());
                parts.resize(i + 1, Vec::new());
                roles.resize(i + 1, Value::String("model".into()));
            }
            for (key, value) in c.as_object().into_iter().flatten() {
                if key != "content" {
                    candidates[i].insert(key.clone(), value.clone());
                } else {
                    // Keeps the content's place among the candidate's fields; filled in below.
                    candidates[i].insert("content".into(), Value::Null);
                    if let Some(role) = value.get("role") {
                        roles[i] = role.clone();
                    }
                }
            }
            for part in c
                .pointer("/content/parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                join(&mut parts[i], part);
            }
        }
        for (key, value) in chunk.as_object().into_iter().flatten() {
            if key != "candidates" {
                top.insert(key.clone(), value.clone());
            }
        }
    }
    let candidates: Vec<Value> = candidates
        .into_iter()
        .zip(parts.into_iter().zip(roles))
        .map(|(mut c, (parts, role))| {
            let mut content = Map::new();
            content.insert("parts".into(), Value::Array(parts));
            content.insert("role".into(), role);
            c.insert("content".into(), Value::Object(content));
            Value::Object(c)
        })
        .collect();
    let mut out = Map::new();
    out.insert("candidates".into(), Value::Array(candidates));
    out.extend(top);
    Value::Object(out)
}

/// Adds `part` to `parts`, joining it to the last part when both are text of the same kind.
fn join(parts: &mut Vec<Value>, part: &Value) {
    let text = |p: &Value| p.get("text").and_then(Value::as_str).map(str::to_owned);
    let thought = |p: &Value| p.get("thought").and_then(Value::as_bool).unwrap_or(false);
    if let (Some(more), Some(last)) = (text(part), parts.last_mut())
        && let Some(now) = text(last)
        && thought(last) == thought(part)
        && last.get("thoughtSignature").is_none()
        && let Some(obj) = last.as_object_mut()
    {
        obj.insert("text".into(), Value::String(now + &more));
        if let Some(signature) = part.get("thoughtSignature") {
            obj.insert("thoughtSignature".into(), signature.clone());
        }
        return;
    }
    parts.push(part.clone());
}
