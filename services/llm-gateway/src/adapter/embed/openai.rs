//! OpenAI's embeddings API, `POST {base}/embeddings`, and Azure OpenAI's, which is the same body on a deployment
//! (`/v1/embeddings` with the deployment as `model`, or `/deployments/{d}/embeddings?api-version=…`).
//!
//! Vectors are asked for as base64 (little-endian `f32`s, as OpenAI's own SDKs ask for them): a quarter of the bytes
//! of JSON numbers, and exact. A compatible server that answers numbers anyway is read as well.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::{Batch, Embedder, Input, Vectors, counted, encode, narrow};
use crate::adapter::transport::Answer;
use crate::adapter::{BuildError, EncodedRequest, Target};
use crate::error::ProviderError;

/// OpenAI's limit on inputs per request.
const MAX_INPUTS: usize = 2048;

/// OpenAI and OpenAI-compatible servers.
pub(super) struct OpenAi;

/// Azure OpenAI.
pub(super) struct Azure;

#[derive(Serialize)]
struct Body<'a> {
    input: InputField<'a>,
    model: &'a str,
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
}

/// `input`: every input text, or every input token ids; the API takes no mix of the two.
#[derive(Serialize)]
#[serde(untagged)]
enum InputField<'a> {
    Texts(Vec<&'a str>),
    Tokens(Vec<&'a [u32]>),
}

#[derive(Deserialize)]
struct Reply {
    data: Vec<Item>,
    #[serde(default)]
    usage: Option<ReplyUsage>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vector,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Vector {
    Base64(String),
    Floats(Vec<f64>),
}

#[derive(Deserialize)]
struct ReplyUsage {
    prompt_tokens: u64,
}

fn body<'a>(batch: &Batch<'a>, model: &'a str) -> Result<Body<'a>, BuildError> {
    let input = if matches!(batch.inputs.first(), Some(Input::Tokens(_))) {
        InputField::Tokens(all(batch, |input| match input {
            Input::Tokens(ids) => Some(ids.as_slice()),
            Input::Text(_) => None,
        })?)
    } else {
        InputField::Texts(all(batch, |input| match input {
            Input::Text(t) => Some(t.as_str()),
            Input::Tokens(_) => None,
        })?)
    };
    Ok(Body {
        input,
        model,
        encoding_format: "base64",
        dimensions: batch.dimensions,
        user: batch.user,
    })
}

/// Every input of the batch as `pick` reads it; one it reads as `None` (the other kind) is refused naming it.
fn all<'a, T>(
    batch: &Batch<'a>,
    pick: impl Fn(&'a Input) -> Option<T>,
) -> Result<Vec<T>, BuildError> {
    batch
        .inputs
        .iter()
        .enumerate()
        .map(|(i, input)| pick(input).ok_or_else(|| mixed(batch, i)))
        .collect()
}

fn mixed(batch: &Batch<'_>, i: usize) -> BuildError {
    BuildError::new(
        batch.field(i),
        "inputs must be all text or all token ids, as the provider takes one or the other",
    )
}

/// The answer's vectors in input order (OpenAI numbers each with its `index`).
fn decode(answer: &Answer, expected: usize, api: &str) -> Result<Vectors, ProviderError> {
    let reply: Reply = answer.json(api)?;
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for item in reply.data {
        let slot = slots.get_mut(item.index).ok_or_else(|| {
            ProviderError::malformed(format!(
                "{api} answered an embedding for input {} of {expected}",
                item.index
            ))
        })?;
        *slot = Some(match item.embedding {
            Vector::Floats(values) => narrow(values),
            Vector::Base64(text) => from_base64(&text, api)?,
        });
    }
    let vectors = slots.into_iter().flatten().collect();
    Ok(Vectors {
        vectors: counted(vectors, expected, api)?,
        input_tokens: reply.usage.map(|u| u.prompt_tokens),
    })
}

/// Little-endian `f32`s from base64, as OpenAI encodes them.
pub(crate) fn from_base64(text: &str, api: &str) -> Result<Vec<f32>, ProviderError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| {
            ProviderError::malformed(format!("{api} answered a vector that is not base64: {e}"))
        })?;
    if !bytes.len().is_multiple_of(4) {
        return Err(ProviderError::malformed(format!(
            "{api} answered a vector of {} bytes, not whole f32s",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

impl Embedder for OpenAi {
    fn max_inputs(&self) -> usize {
        MAX_INPUTS
    }

    fn build(&self, batch: &Batch<'_>, target: &Target<'_>) -> Result<EncodedRequest, BuildError> {
        let body = body(batch, &target.model.name)?;
        encode("/embeddings".into(), Vec::new(), &body)
    }

    fn decode(&self, answer: &Answer, expected: usize) -> Result<Vectors, ProviderError> {
        decode(answer, expected, "the embeddings API")
    }
}

impl Embedder for Azure {
    fn max_inputs(&self) -> usize {
        MAX_INPUTS
    }

    fn build(&self, batch: &Batch<'_>, target: &Target<'_>) -> Result<EncodedRequest, BuildError> {
        let path = crate::adapter::cloud::azure::embeddings_path(target)
            .map_err(|e| BuildError::new("model", e.message))?;
        encode(path, Vec::new(), &body(batch, &target.model.name)?)
    }

    fn decode(&self, answer: &Answer, expected: usize) -> Result<Vectors, ProviderError> {
        decode(answer, expected, "Azure OpenAI's embeddings API")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "openai_tests.rs"]
mod tests;
