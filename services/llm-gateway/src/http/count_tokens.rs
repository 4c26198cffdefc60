//! `POST /v1/messages/count_tokens`: Anthropic's token-counting API over the gateway's token count (docs/gateway.md
//! "Embeddings and token counting"), for any chat model of the catalog.
//!
//! The body is a Messages body without what a count does not take, as Anthropic defines it: `model`, `messages`,
//! `system`, `tools`, `tool_choice` and `thinking`, translated as `POST /v1/messages` translates them. Any other
//! field (`max_tokens`, `stream`, sampling) is refused naming it, as Anthropic refuses it. The answer is
//! `{"input_tokens": N}`.

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use llm_proto::gateway as pb;
use serde_json::{Value, json};

use crate::calls::count::count_tokens;
use crate::generate::Gateway;
use crate::http::errors::ApiError;
use crate::http::sse::Body;

/// The fields Anthropic's count takes that the gateway serves.
const FIELDS: [&str; 6] = [
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
];

/// The unified request of a count body.
fn translate(body: Value) -> Result<pb::Generation, ApiError> {
    let Value::Object(fields) = &body else {
        return Err(ApiError::invalid("body", "must be a JSON object"));
    };
    if let Some(extra) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid(extra, "Extra inputs are not permitted"));
    }
    // Fields left for an Anthropic provider (`thinking` of type `adaptive`) do not change what the input counts.
    let (generation, _, _) = crate::http::anthropic::request::translate(body)?;
    Ok(generation)
}

/// Answers one count request.
pub async fn run(
    gateway: &Gateway,
    caller: &crate::keys::Caller,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, ApiError> {
    let generation = crate::http::translate_body(body, translate).await?;
    let config = gateway.config();
    let generation = crate::offload::validated(Some(generation), &config.limits)
        .await
        .map_err(|s| ApiError::from_status(&s))?;
    let metadata = tonic::metadata::MetadataMap::from_headers(headers.clone());
    let counted = count_tokens(gateway, caller, generation, &metadata)
        .await
        .map_err(|e| super::calls::api_error(&e))?;
    let answer = crate::http::json(
        StatusCode::OK,
        &json!({"input_tokens": counted.input_tokens}),
    );
    Ok(crate::http::relaying(answer, &counted.headers))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "count_tokens_tests.rs"]
mod tests;
