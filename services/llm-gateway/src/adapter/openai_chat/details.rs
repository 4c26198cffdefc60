//! OpenRouter's `reasoning_details`: the structured reasoning of a turn, which must go back unchanged for the model
//! behind OpenRouter to accept the conversation (Claude's thinking signature rides on it).
//!
//! A stream sends the list in pieces: `reasoning.text` deltas for one `index`, then usually a detail of the same
//! index that carries only the `signature`; `reasoning.encrypted` details carry `data`. [`Details`] merges the pieces
//! per `(index, type)` (texts appended, other fields kept from the last piece that has them) and renders them as the
//! reasoning block's replay metadata, `{"reasoning_details":[…]}`; the request builder sends that list back as the
//! assistant message's `reasoning_details`.

use serde_json::{Map, Value};

/// The merged details of one reasoning block, in order of first appearance.
#[derive(Debug, Default)]
pub(super) struct Details {
    items: Vec<Map<String, Value>>,
}

impl Details {
    /// Merges one streamed detail (any JSON; a non-object or one without `type` is ignored).
    pub(super) fn push(&mut self, detail: &Value) {
        let Some(obj) = detail.as_object() else {
            return;
        };
        let Some(kind) = obj.get("type").and_then(Value::as_str) else {
            return;
        };
        let index = obj.get("index").and_then(Value::as_u64);
        let same = |m: &Map<String, Value>| {
            m.get("type").and_then(Value::as_str) == Some(kind)
                && m.get("index").and_then(Value::as_u64) == index
        };
        // Only the last item can still be growing: a detail of another index closed the one before.
        let Some(last) = self.items.last_mut().filter(|m| same(m)) else {
            self.items.push(obj.clone());
            return;
        };
        for (key, value) in obj {
            match (key.as_str(), last.get_mut(key)) {
                ("text" | "summary", Some(Value::String(have))) => {
                    if let Some(more) = value.as_str() {
                        have.push_str(more);
                    }
                }
                (_, _) if value.is_null() => {}
                (_, Some(Value::String(s))) if s.is_empty() && value.as_str() == Some("") => {}
                _ => {
                    last.insert(key.clone(), value.clone());
                }
            }
        }
    }

    /// True when no detail was seen.
    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The replay metadata, `{"reasoning_details":[…]}`, and resets for the next block.
    pub(super) fn take_metadata(&mut self) -> String {
        let items = std::mem::take(&mut self.items);
        let list = Value::Array(items.into_iter().map(Value::Object).collect());
        let mut meta = Map::new();
        meta.insert("reasoning_details".into(), list);
        Value::Object(meta).to_string()
    }
}

/// The `reasoning_details` list recorded in a reasoning part's metadata, if any.
pub(super) fn from_metadata(json: &str) -> Option<Vec<Value>> {
    match serde_json::from_str::<Value>(json).ok()? {
        Value::Object(mut m) => match m.remove("reasoning_details")? {
            Value::Array(list) => Some(list),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "details_tests.rs"]
mod tests;
