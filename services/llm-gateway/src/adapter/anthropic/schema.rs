//! JSON Schemas for Anthropic's structured outputs (JSON output in `output_config.format` and strict tools): the
//! API refuses any object schema that does not close itself with `additionalProperties: false` ("For 'object'
//! type, 'additionalProperties' must be explicitly set to false"; docs/gateway.md "Request features by provider").
//! Callers' schemas rarely say it, and saying it changes nothing the model needs (it never has to invent a key the
//! schema does not list), so [`closed`] adds it where it is missing. An object that explicitly allows other keys
//! (`true`, or a schema for them: a map) cannot be expressed and is refused, naming the field.

use serde_json::{Map, Value};

use crate::adapter::BuildError;

/// Deepest nesting walked: far beyond real schemas, it bounds the recursion on hostile input.
const MAX_DEPTH: usize = 32;

/// Keywords whose value is one subschema.
const ONE: [&str; 4] = ["items", "additionalItems", "contains", "not"];
/// Keywords whose value is an array of subschemas.
const MANY: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value is an object of named subschemas.
const NAMED: [&str; 3] = ["properties", "$defs", "definitions"];

/// `schema` with `additionalProperties: false` on every object schema that does not set it; errors name `field`.
pub(super) fn closed(mut schema: Value, field: &str) -> Result<Value, BuildError> {
    close(&mut schema, 0).map_err(|why| BuildError::new(field, why))?;
    Ok(schema)
}

fn close(schema: &mut Value, depth: usize) -> Result<(), String> {
    let Value::Object(s) = schema else {
        return Ok(());
    };
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    if is_object(s) {
        match s.get("additionalProperties") {
            None => {
                s.insert("additionalProperties".into(), Value::Bool(false));
            }
            Some(Value::Bool(false)) => {}
            Some(_) => {
                return Err("Anthropic structured outputs take only closed objects \
                            (`additionalProperties: false`); an object open to other keys, or a map, cannot be \
                            expressed"
                    .into());
            }
        }
    }
    for key in ONE {
        if let Some(sub) = s.get_mut(key) {
            close(sub, depth + 1)?;
        }
    }
    for key in MANY {
        if let Some(Value::Array(subs)) = s.get_mut(key) {
            for sub in subs {
                close(sub, depth + 1)?;
            }
        }
    }
    for key in NAMED {
        if let Some(Value::Object(subs)) = s.get_mut(key) {
            for sub in subs.values_mut() {
                close(sub, depth + 1)?;
            }
        }
    }
    Ok(())
}

/// Whether `s` describes objects: `type` is (or includes) `object`, or it lists `properties` without a type.
fn is_object(s: &Map<String, Value>) -> bool {
    match s.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => s.contains_key("properties"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "schema_tests.rs"]
mod tests;
