//! The caller's provider options (`generation.provider_options_json`): one JSON object keyed by protocol, each
//! protocol's entry an object of body fields its builder merges into the request (docs/gateway.md). Parsing and
//! the rules every builder shares live here; how the fields are merged is each builder's.

use serde_json::{Map, Value};

use crate::adapter::{BuildError, Protocol};

/// The field every provider-options error names.
const FIELD: &str = "generation.provider_options_json";

/// The options for `protocol` in `json`: `None` when there are none. Refused when `json` is not an object keyed by
/// protocol, when the protocol's entry is not an object, or when it sets one of the `reserved` fields the gateway
/// builds itself (refused rather than ignored, so a caller learns at once that the option has no effect).
pub(crate) fn for_protocol(
    json: &str,
    protocol: Protocol,
    reserved: &[&str],
) -> Result<Option<Map<String, Value>>, BuildError> {
    if json.trim().is_empty() {
        return Ok(None);
    }
    let root: Value = serde_json::from_str(json)
        .map_err(|e| BuildError::new(FIELD, format!("not valid JSON: {e}")))?;
    let Value::Object(mut root) = root else {
        return Err(BuildError::new(
            FIELD,
            "must be a JSON object keyed by protocol",
        ));
    };
    let name = protocol.as_str();
    let Some(options) = root.remove(name) else {
        return Ok(None);
    };
    let Value::Object(options) = options else {
        return Err(BuildError::new(
            FIELD,
            format!("`{name}` must be a JSON object"),
        ));
    };
    if let Some(key) = options.keys().find(|k| reserved.contains(&k.as_str())) {
        return Err(BuildError::new(
            FIELD,
            format!("`{name}.{key}` is set by the gateway and cannot be overridden"),
        ));
    }
    Ok(Some(options))
}

/// Merges `options` into `body`: a top-level key replaces the gateway's value, except that the objects under the
/// `nested` keys are merged key by key (the caller's keys winning), so an option inside one of them adds to what
/// the gateway wrote there instead of erasing it.
pub(crate) fn merge(body: &mut Map<String, Value>, options: Map<String, Value>, nested: &[&str]) {
    for (key, value) in options {
        match (body.get_mut(&key), value) {
            (Some(Value::Object(have)), Value::Object(add)) if nested.contains(&key.as_str()) => {
                have.extend(add);
            }
            (_, value) => {
                body.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;
