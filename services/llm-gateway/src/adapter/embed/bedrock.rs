//! Bedrock's embedding models, through `InvokeModel` (`POST /model/{modelId}/invoke`, SigV4-signed like Converse):
//! the body is the model family's own.
//!
//! - Amazon Titan Text Embeddings (`amazon.titan-embed-text-v2:0`, `…-v1`): one `inputText` per request, answered
//!   with `embedding` and `inputTextTokenCount`; `dimensions` 256, 512 or 1024 on v2 only.
//! - Cohere Embed (`cohere.embed-english-v3`, `cohere.embed-multilingual-v3`, `cohere.embed-v4:0`): up to 96
//!   `texts` per request, as documents (`input_type: search_document`, what an OpenAI-shaped caller indexing text
//!   means), never truncated; the token count comes in the `x-amzn-bedrock-input-token-count` header.
//!   `output_dimension` (256, 512, 1024, 1536) on v4 only.

use serde::{Deserialize, Serialize};

use super::{Batch, Embedder, Vectors, counted, encode, narrow};
use crate::adapter::transport::Answer;
use crate::adapter::{BuildError, EncodedRequest, Target};
use crate::error::ProviderError;

/// Cohere's limit on texts per request.
const COHERE_MAX_INPUTS: usize = 96;

/// The header Bedrock counts an `InvokeModel` request's input tokens in.
pub(crate) const INPUT_TOKENS_HEADER: &str = "x-amzn-bedrock-input-token-count";

/// Amazon Titan Text Embeddings.
pub(super) struct Titan;

/// Cohere Embed.
pub(super) struct Cohere;

/// The embedder of a Bedrock model id (a foundation model, an inference profile or an ARN naming one).
pub(super) fn family(id: &str) -> Result<&'static dyn Embedder, BuildError> {
    if id.contains("amazon.titan-embed-text") {
        Ok(&Titan)
    } else if id.contains("cohere.embed") {
        Ok(&Cohere)
    } else {
        Err(BuildError::new(
            "model",
            format!(
                "`{id}` is not a Bedrock embedding model the gateway speaks: Amazon Titan Text Embeddings \
                 (`amazon.titan-embed-text-…`) and Cohere Embed (`cohere.embed-…`)"
            ),
        ))
    }
}

/// `/model/{modelId}/invoke`, the id one percent-encoded segment (as Converse's path).
pub(crate) fn invoke_path(target: &Target<'_>) -> Result<String, BuildError> {
    let segment = crate::adapter::bedrock::model_segment(&target.model.name)
        .map_err(|e| BuildError::new("model", e.message))?;
    Ok(format!("/model/{segment}/invoke"))
}

/// `dimensions` when the model takes it and the value is one it takes; otherwise refused naming the field.
fn dimensions(
    batch: &Batch<'_>,
    takes: bool,
    allowed: &[u32],
    id: &str,
) -> Result<Option<u32>, BuildError> {
    match batch.dimensions {
        None => Ok(None),
        Some(_) if !takes => Err(BuildError::new(
            "dimensions",
            format!("`{id}` has a fixed number of dimensions"),
        )),
        Some(d) if allowed.contains(&d) => Ok(Some(d)),
        Some(d) => Err(BuildError::new(
            "dimensions",
            format!("`{id}` takes {allowed:?} dimensions, not {d}"),
        )),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TitanBody<'a> {
    input_text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TitanReply {
    embedding: Vec<f64>,
    #[serde(default)]
    input_text_token_count: Option<u64>,
}

impl Embedder for Titan {
    /// Titan embeds one text per request.
    fn max_inputs(&self) -> usize {
        1
    }

    fn build(&self, batch: &Batch<'_>, target: &Target<'_>) -> Result<EncodedRequest, BuildError> {
        let id = target.model.name.as_str();
        let texts = batch.texts()?;
        let [text] = texts.as_slice() else {
            return Err(BuildError::new(
                "inputs",
                "Titan embeds one input per request",
            ));
        };
        let takes = id.contains("titan-embed-text-v2");
        let body = TitanBody {
            input_text: text,
            dimensions: dimensions(batch, takes, &[256, 512, 1024], id)?,
        };
        encode(invoke_path(target)?, Vec::new(), &body)
    }

    fn decode(&self, answer: &Answer, expected: usize) -> Result<Vectors, ProviderError> {
        let api = "Bedrock (Titan)";
        let reply: TitanReply = answer.json(api)?;
        Ok(Vectors {
            vectors: counted(vec![narrow(reply.embedding)], expected, api)?,
            input_tokens: reply
                .input_text_token_count
                .or_else(|| header_tokens(answer)),
        })
    }
}

#[derive(Serialize)]
struct CohereBody<'a> {
    texts: Vec<&'a str>,
    input_type: &'static str,
    truncate: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimension: Option<u32>,
}

#[derive(Deserialize)]
struct CohereReply {
    embeddings: CohereEmbeddings,
}

/// `embeddings_floats` answers carry an array of vectors; `embeddings_by_type` ones an object keyed by type.
#[derive(Deserialize)]
#[serde(untagged)]
enum CohereEmbeddings {
    Floats(Vec<Vec<f64>>),
    ByType { float: Vec<Vec<f64>> },
}

impl Embedder for Cohere {
    fn max_inputs(&self) -> usize {
        COHERE_MAX_INPUTS
    }

    fn build(&self, batch: &Batch<'_>, target: &Target<'_>) -> Result<EncodedRequest, BuildError> {
        let id = target.model.name.as_str();
        let takes = id.contains("cohere.embed-v4");
        let body = CohereBody {
            texts: batch.texts()?,
            input_type: "search_document",
            truncate: "NONE",
            output_dimension: dimensions(batch, takes, &[256, 512, 1024, 1536], id)?,
        };
        encode(invoke_path(target)?, Vec::new(), &body)
    }

    fn decode(&self, answer: &Answer, expected: usize) -> Result<Vectors, ProviderError> {
        let api = "Bedrock (Cohere)";
        let reply: CohereReply = answer.json(api)?;
        let vectors = match reply.embeddings {
            CohereEmbeddings::Floats(v) | CohereEmbeddings::ByType { float: v } => v,
        };
        Ok(Vectors {
            vectors: counted(vectors.into_iter().map(narrow).collect(), expected, api)?,
            input_tokens: header_tokens(answer),
        })
    }
}

/// The input tokens Bedrock counted in the answer's header.
fn header_tokens(answer: &Answer) -> Option<u64> {
    answer.header(INPUT_TOKENS_HEADER)?.trim().parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "bedrock_tests.rs"]
mod tests;
