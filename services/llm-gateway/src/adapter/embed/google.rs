//! Google's embeddings: the Gemini API's `batchEmbedContents` and Vertex AI's `predict`.
//!
//! On Vertex AI, `predict` on the publisher model is the method Google documents for its text embedding models
//! (`text-embedding-005`, `text-multilingual-embedding-002`, `gemini-embedding-001`), and its answer counts the
//! tokens of each input (`statistics.token_count`). `autoTruncate` is off: an input longer than the model takes is
//! the provider's 400, as on OpenAI, not the vector of its beginning. The Gemini API's answer counts no tokens.

use serde::{Deserialize, Serialize};

use super::{Batch, Embedder, Vectors, counted, encode, narrow};
use crate::adapter::transport::Answer;
use crate::adapter::{BuildError, EncodedRequest, Target};
use crate::error::ProviderError;

/// The Gemini API's limit on requests in one `batchEmbedContents`.
const GEMINI_MAX_INPUTS: usize = 100;
/// Vertex AI's limit on instances in one `predict` of a text embedding model (`gemini-embedding-001` takes one: its
/// catalog entry says so).
const VERTEX_MAX_INPUTS: usize = 250;

/// The Gemini API (`generativelanguage.googleapis.com`).
pub(super) struct Gemini;

/// Vertex AI.
pub(super) struct Vertex;

/// The model name for a URL path, named `model` when it is not a plain name.
fn name<'a>(target: &'a Target<'_>, publisher: &str) -> Result<&'a str, BuildError> {
    crate::adapter::cloud::vertex::path_name(target, publisher)
        .map_err(|e| BuildError::new("model", e.message))
}

#[derive(Serialize)]
struct BatchBody<'a> {
    requests: Vec<EmbedContent<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbedContent<'a> {
    model: &'a str,
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

#[derive(Serialize)]
struct Content<'a> {
    parts: [Part<'a>; 1],
}

#[derive(Serialize)]
struct Part<'a> {
    text: &'a str,
}

#[derive(Deserialize)]
struct BatchReply {
    #[serde(default)]
    embeddings: Vec<Values>,
}

#[derive(Deserialize)]
struct Values {
    values: Vec<f64>,
}

impl Embedder for Gemini {
    fn max_inputs(&self) -> usize {
        GEMINI_MAX_INPUTS
    }

    fn build(&self, batch: &Batch<'_>, target: &Target<'_>) -> Result<EncodedRequest, BuildError> {
        let name = name(target, "Gemini")?;
        let model = format!("models/{name}");
        let requests = batch
            .texts()?
            .into_iter()
            .map(|text| EmbedContent {
                model: &model,
                content: Content {
                    parts: [Part { text }],
                },
                output_dimensionality: batch.dimensions,
            })
            .collect();
        encode(
            format!("/v1beta/models/{name}:batchEmbedContents"),
            Vec::new(),
            &BatchBody { requests },
        )
    }

    /// The Gemini API counts no tokens in its answer: the call estimates them.
    fn decode(&self, answer: &Answer, expected: usize) -> Result<Vectors, ProviderError> {
        let api = "the Gemini API";
        let reply: BatchReply = answer.json(api)?;
        let vectors = reply
            .embeddings
            .into_iter()
            .map(|e| narrow(e.values))
            .collect();
        Ok(Vectors {
            vectors: counted(vectors, expected, api)?,
            input_tokens: None,
        })
    }
}

#[derive(Serialize)]
struct PredictBody<'a> {
    instances: Vec<Instance<'a>>,
    parameters: Parameters,
}

#[derive(Serialize)]
struct Instance<'a> {
    content: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Parameters {
    auto_truncate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

#[derive(Deserialize)]
struct PredictReply {
    #[serde(default)]
    predictions: Vec<Prediction>,
}

#[derive(Deserialize)]
struct Prediction {
    embeddings: PredictedEmbedding,
}

#[derive(Deserialize)]
struct PredictedEmbedding {
    values: Vec<f64>,
    #[serde(default)]
    statistics: Option<Statistics>,
}

#[derive(Deserialize)]
struct Statistics {
    #[serde(default)]
    token_count: f64,
}

impl Embedder for Vertex {
    fn max_inputs(&self) -> usize {
        VERTEX_MAX_INPUTS
    }

    fn build(&self, batch: &Batch<'_>, target: &Target<'_>) -> Result<EncodedRequest, BuildError> {
        let name = name(target, "Gemini")?;
        let instances = batch
            .texts()?
            .into_iter()
            .map(|content| Instance { content })
            .collect();
        let body = PredictBody {
            instances,
            parameters: Parameters {
                auto_truncate: false,
                output_dimensionality: batch.dimensions,
            },
        };
        encode(
            format!("/publishers/google/models/{name}:predict"),
            Vec::new(),
            &body,
        )
    }

    fn decode(&self, answer: &Answer, expected: usize) -> Result<Vectors, ProviderError> {
        let api = "Vertex AI";
        let reply: PredictReply = answer.json(api)?;
        let mut tokens = 0u64;
        let mut vectors = Vec::with_capacity(reply.predictions.len());
        for p in reply.predictions {
            // Vertex writes the count as a JSON number that may carry a fraction (`6.0`).
            let count = p.embeddings.statistics.map_or(0.0, |s| s.token_count);
            tokens = tokens.saturating_add(count.max(0.0) as u64);
            vectors.push(narrow(p.embeddings.values));
        }
        Ok(Vectors {
            vectors: counted(vectors, expected, api)?,
            input_tokens: Some(tokens),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "google_tests.rs"]
mod tests;
