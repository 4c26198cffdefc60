//! The front door's policy for request fields it does not map to the unified request (docs/gateway.md "Fields"):
//! nothing a caller sends is ignored.
//!
//! - A **hint** (`user`, `metadata`, `service_tier`, …) tells a provider how to serve or account for the request
//!   without changing the answer: sent to a provider that speaks the door's protocol, left out for any other.
//! - A **same-protocol** field (penalties, `logit_bias`, `text.verbosity`, and any field this version does not know,
//!   such as a compatible server's own sampling parameters) changes the answer and only the door's own protocol has
//!   it: sent as is to a provider of that protocol, refused naming it for any other.
//!
//! Both travel in the unified request's `provider_options_json` under the protocol's name, which only that
//! protocol's adapter reads.

use llm_proto::gateway as pb;
use serde_json::{Map, Value};

use crate::http::errors::ApiError;
use crate::protocol::Protocol;

/// The fields a door leaves for the provider.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    /// Body fields for a provider of the door's protocol.
    fields: Map<String, Value>,
    /// The request path of the first field only that protocol can take.
    only_ours: Option<String>,
    /// Request headers for a provider of the door's protocol (`anthropic-beta`): hints, like the body's.
    headers: Vec<(String, String)>,
}

impl Extras {
    /// A hint: body field `key` with `value`.
    pub fn hint(&mut self, key: &str, value: Value) {
        merge(&mut self.fields, key, value);
    }

    /// A hint header: `name` with `value`, for a provider of the door's protocol.
    pub fn hint_header(&mut self, name: &str, value: &str) {
        self.headers.push((name.to_string(), value.to_string()));
    }

    /// A field only the door's protocol takes, at request path `path`: body field `key` with `value` (merged into an
    /// object already there), or nothing to send when `key` is empty (a field the door's adapter writes itself).
    pub fn same_protocol(&mut self, path: &str, key: &str, value: Value) {
        if self.only_ours.is_none() {
            self.only_ours = Some(path.to_string());
        }
        if !key.is_empty() {
            merge(&mut self.fields, key, value);
        }
    }

    /// The body's remaining top-level fields: `hints` are hints, every other one a same-protocol field.
    pub fn absorb(&mut self, rest: Map<String, Value>, hints: &[&str]) {
        for (key, value) in rest {
            if value.is_null() {
                continue;
            }
            if hints.contains(&key.as_str()) {
                self.hint(&key, value);
            } else {
                let path = key.clone();
                self.same_protocol(&path, &key, value);
            }
        }
    }

    /// Puts the fields into `g` for a door speaking `door`, now that the model is known to be served over `served`
    /// (`None` when the model is not served, which the core then reports): kept for the same protocol, hints left
    /// out for another, and a same-protocol field refused for another.
    pub fn settle(
        self,
        g: &mut pb::Generation,
        door: Protocol,
        served: Option<Protocol>,
    ) -> Result<(), ApiError> {
        if self.fields.is_empty() && self.only_ours.is_none() && self.headers.is_empty() {
            return Ok(());
        }
        let Some(served) = served else {
            return Ok(());
        };
        if served.wire() != door {
            if let Some(path) = self.only_ours {
                return Err(ApiError::invalid(
                    &path,
                    format!(
                        "only providers speaking {} take it, and `{}` is served over {}",
                        door.as_str(),
                        g.model,
                        served.wire().as_str()
                    ),
                ));
            }
            return Ok(());
        }
        g.extra_headers.extend(self.headers);
        if !self.fields.is_empty() {
            let mut root = Map::new();
            root.insert(door.as_str().to_string(), Value::Object(self.fields));
            g.provider_options_json = Value::Object(root).to_string();
        }
        Ok(())
    }
}

/// Sets `key` to `value`, merging two objects key by key (`text.verbosity` beside a `text` already there).
fn merge(fields: &mut Map<String, Value>, key: &str, value: Value) {
    match (fields.get_mut(key), value) {
        (Some(Value::Object(ours)), Value::Object(more)) => ours.extend(more),
        (_, value) => {
            fields.insert(key.to_string(), value);
        }
    }
}

/// A reasoning effort as OpenAI names it (`reasoning_effort`, Responses `reasoning.effort`), at `field`.
pub fn effort(field: &str, name: &str) -> Result<pb::reasoning::Effort, ApiError> {
    use pb::reasoning::Effort;
    Ok(match name {
        "none" => Effort::None,
        "minimal" => Effort::Minimal,
        "low" => Effort::Low,
        "medium" => Effort::Medium,
        "high" => Effort::High,
        "xhigh" => Effort::Xhigh,
        other => {
            return Err(ApiError::invalid(
                field,
                format!("unknown value `{other}` (none, minimal, low, medium, high, xhigh)"),
            ));
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "fields_tests.rs"]
mod tests;
