//! `POST /v1/embeddings`: OpenAI's embeddings API over the gateway's embeddings call (docs/gateway.md "Embeddings
//! and token counting").
//!
//! Every field of OpenAI's request is served or refused: `input` (a string, strings, token ids or lists of token
//! ids; ids only for models whose provider takes them), `model`, `dimensions`, `encoding_format` (`float`, or
//! `base64`: each vector's little-endian `f32` bytes, as OpenAI encodes them) and `user`. Anything else is a 400
//! naming it, as OpenAI answers an unknown argument.

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::adapter::embed::Input;
use crate::calls::CallError;
use crate::calls::embed::{EmbedCall, Embeddings, embed};
use crate::generate::Gateway;
use crate::http::body::parse;
use crate::http::errors::{ApiError, Class};
use crate::http::sse::Body;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    model: String,
    input: InputField,
    #[serde(default)]
    dimensions: Option<u32>,
    #[serde(default)]
    encoding_format: Option<Format>,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum InputField {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Deserialize, Clone, Copy, Default, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Float,
    Base64,
}

/// A body translated: the call and the vectors' encoding.
struct Translated {
    call: EmbedCall,
    format: Format,
    /// The model as the caller named it, echoed in the answer.
    model: String,
}

fn translate(body: Value) -> Result<Translated, ApiError> {
    let r: Request = parse("body", body)?;
    if r.dimensions == Some(0) {
        return Err(ApiError::invalid("dimensions", "must be a positive number"));
    }
    let inputs = match r.input {
        InputField::Text(t) => vec![Input::Text(t)],
        InputField::Texts(t) => t.into_iter().map(Input::Text).collect(),
        InputField::Tokens(ids) => vec![Input::Tokens(ids)],
        InputField::TokenLists(lists) => lists.into_iter().map(Input::Tokens).collect(),
    };
    Ok(Translated {
        call: EmbedCall {
            model: r.model.clone(),
            inputs,
            dimensions: r.dimensions,
            user: r.user.filter(|u| !u.is_empty()),
            context: None,
        },
        format: r.encoding_format.unwrap_or_default(),
        model: r.model,
    })
}

#[derive(Serialize)]
struct Reply<'a> {
    object: &'static str,
    data: Vec<Item>,
    model: &'a str,
    usage: ReplyUsage,
}

#[derive(Serialize)]
struct Item {
    object: &'static str,
    index: usize,
    embedding: Vector,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Vector {
    Floats(Vec<f32>),
    Base64(String),
}

#[derive(Serialize)]
struct ReplyUsage {
    prompt_tokens: u64,
    total_tokens: u64,
}

/// The answer's bytes in OpenAI's shape.
fn reply(done: Embeddings, model: &str, format: Format) -> Result<Vec<u8>, ApiError> {
    let data = done
        .vectors
        .into_iter()
        .enumerate()
        .map(|(index, v)| Item {
            object: "embedding",
            index,
            embedding: match format {
                Format::Float => Vector::Floats(v),
                Format::Base64 => Vector::Base64(base64_f32(&v)),
            },
        })
        .collect();
    let reply = Reply {
        object: "list",
        data,
        model,
        usage: ReplyUsage {
            prompt_tokens: done.input_tokens,
            total_tokens: done.input_tokens,
        },
    };
    serde_json::to_vec(&reply).map_err(|e| {
        ApiError::new(
            Class::Internal,
            format!("the answer could not be encoded: {e}"),
        )
    })
}

/// A vector as base64 of its little-endian `f32`s.
pub fn base64_f32(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A call's failure in OpenAI's shape; the fields of the gRPC request (`inputs[3]`) are named as this body names
/// them (`input[3]`).
fn api_error(e: &CallError) -> ApiError {
    let mut err = super::calls::api_error(e);
    if let Some(param) = err.param.as_mut().filter(|p| p.starts_with("inputs")) {
        let renamed = format!("input{}", &param["inputs".len()..]);
        err.message = err.message.replacen(param.as_str(), &renamed, 1);
        *param = renamed;
    }
    err
}

/// Answers one embeddings request.
pub async fn run(
    gateway: &Gateway,
    caller: &crate::keys::Caller,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, ApiError> {
    let t = crate::http::translate_body(body, translate).await?;
    let metadata = tonic::metadata::MetadataMap::from_headers(headers.clone());
    let mut done = embed(gateway, caller, t.call, &metadata)
        .await
        .map_err(|e| api_error(&e))?;
    let place = crate::offload::Where::for_items(
        done.vectors
            .len()
            .saturating_mul(done.vectors.first().map_or(0, Vec::len) / 64),
    );
    let (model, format) = (t.model, t.format);
    let relayed = std::mem::take(&mut done.headers);
    let bytes = crate::offload::run(place, move || reply(done, &model, format)).await?;
    let mut r = Response::new(crate::http::sse::full(bytes));
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(crate::http::relaying(r, &relayed))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "embeddings_tests.rs"]
mod tests;
