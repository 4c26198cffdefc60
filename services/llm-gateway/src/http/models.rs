//! `GET /v1/models` and `GET /v1/models/{id}` from the catalog, in a shape both SDKs read: OpenAI's (`object`,
//! `owned_by`, `created`) and Anthropic's (`type`, `display_name`, `created_at`, `has_more`) fields side by side.

use serde_json::{Value, json};

use crate::catalog::ModelInfo;
use crate::config::Config;
use crate::generate::Gateway;
use crate::http::errors::ApiError;
use crate::keys::Caller;

/// Every served chat name: the catalog's chat models and the configured aliases of chat models. Embedding models are
/// left out: clients fill their chat model pickers from this list (they are served by `POST /v1/embeddings`, found
/// by `GET /v1/models/{id}` and listed by gRPC `ListModels` with their kind). A key limited to some models sees only
/// those.
pub fn list(config: &Config, caller: &Caller) -> Value {
    let data: Vec<Value> = config
        .names
        .listed(&config.catalog)
        .iter()
        .filter(|l| config.catalog.kind(&l.model.id) == crate::catalog::ModelKind::Chat)
        .filter(|l| caller.may_use(l.id, l.alias_of.unwrap_or(&l.model.id)))
        .map(|l| model(l.id, l.model, l.alias_of))
        .collect();
    let id = |v: Option<&Value>| v.map_or(Value::Null, |m| m["id"].clone());
    json!({
        "object": "list",
        "first_id": id(data.first()),
        "last_id": id(data.last()),
        "has_more": false,
        "data": data,
    })
}

/// One model by any name a generation accepts (`provider/model`, the `/` maybe percent-encoded; an alias; a bare
/// name), when the caller's key may use it (else 404, as for a model not served).
pub fn get(gateway: &Gateway, caller: &Caller, id: &str) -> Result<Value, ApiError> {
    let id = id.replace("%2F", "/").replace("%2f", "/");
    crate::access::check(gateway, caller, &id).map_err(|e| ApiError::from_start(&e))?;
    let r = gateway
        .resolve(&id)
        .map_err(|e| ApiError::from_start(&crate::access::scrub(caller, e)))?;
    Ok(model(&r.model.id, &r.model, r.alias_of.as_deref()))
}

fn model(id: &str, m: &ModelInfo, alias_of: Option<&str>) -> Value {
    let mut v = json!({
        "id": id,
        "object": "model",
        "type": "model",
        "created": 0,
        "created_at": "1970-01-01T00:00:00Z",
        "owned_by": m.provider,
        "display_name": m.display_name,
        "context_window": m.context_window,
        "max_output_tokens": m.max_output_tokens,
    });
    if let Some(target) = alias_of {
        v["alias_of"] = Value::from(target);
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "models_tests.rs"]
mod tests;
