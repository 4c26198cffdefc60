//! Embeddings on each provider's wire (docs/gateway.md "Embeddings and token counting"): a pure [`Embedder`] per
//! API, building one provider request from a batch of inputs and decoding its answer into vectors in input order.
//! No I/O here; `crate::calls` splits a call into batches, sends them and reassembles the vectors.
//!
//! | protocol | API | inputs per request |
//! |---|---|---|
//! | `openai_chat`, `openai_responses` | `POST /embeddings` | 2048 |
//! | `azure_chat`, `azure_responses` | the deployment's `embeddings` | 2048 |
//! | `gemini` | `POST /v1beta/models/{m}:batchEmbedContents` | 100 |
//! | `vertex_gemini` | `POST …/publishers/google/models/{m}:predict` | 250 (the catalog lowers it per model) |
//! | `bedrock` | `POST /model/{id}/invoke`: Titan Text Embeddings, Cohere Embed | 1 (Titan), 96 (Cohere) |

mod bedrock;
mod google;
mod openai;
#[cfg(test)]
mod tests;

use crate::adapter::transport::Answer;
use crate::adapter::{BuildError, EncodedRequest, Target};
use crate::error::ProviderError;
use crate::protocol::Protocol;

/// One input to embed.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Text.
    Text(String),
    /// Token ids of the model's tokenizer (OpenAI and Azure OpenAI only).
    Tokens(Vec<u32>),
}

/// The inputs of one provider request, consecutive inputs of a call, and the call's options.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// The inputs.
    pub inputs: &'a [Input],
    /// Index in the call of `inputs[0]`, for the field named in an error (`inputs[130]`).
    pub offset: usize,
    /// Dimensions of each vector, when the caller chose.
    pub dimensions: Option<u32>,
    /// The end user's id, for providers that take one.
    pub user: Option<&'a str>,
}

impl Batch<'_> {
    /// The field of the batch's `i`th input, as the caller's request names it.
    pub fn field(&self, i: usize) -> String {
        format!("inputs[{}]", self.offset + i)
    }

    /// The batch's texts; an input of token ids is refused naming it (the provider takes text only).
    pub fn texts(&self) -> Result<Vec<&str>, BuildError> {
        self.inputs
            .iter()
            .enumerate()
            .map(|(i, input)| match input {
                Input::Text(t) => Ok(t.as_str()),
                Input::Tokens(_) => Err(BuildError::new(
                    self.field(i),
                    "this model takes text only, not token ids",
                )),
            })
            .collect()
    }
}

/// One provider answer, decoded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vectors {
    /// One vector per input of the batch, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// The input tokens the provider counted, when it says.
    pub input_tokens: Option<u64>,
}

/// One provider API's embeddings: a pure request builder and answer decoder.
pub trait Embedder: Send + Sync {
    /// Most inputs one request to this API takes.
    fn max_inputs(&self) -> usize;

    /// The provider request for `batch`, at most [`max_inputs`](Embedder::max_inputs) inputs.
    fn build(&self, batch: &Batch<'_>, target: &Target<'_>) -> Result<EncodedRequest, BuildError>;

    /// The vectors of the answer to a request for `expected` inputs; an answer with another number of vectors, or
    /// that is not the API's shape, is a provider error.
    fn decode(&self, answer: &Answer, expected: usize) -> Result<Vectors, ProviderError>;
}

/// The embedder of `target`'s model, by its protocol (and, on Bedrock, its model family); a model no embeddings
/// API serves is refused naming `model`.
pub fn embedder(target: &Target<'_>) -> Result<&'static dyn Embedder, BuildError> {
    let model = target.model;
    match model.protocol {
        Protocol::OpenaiChat | Protocol::OpenaiResponses => Ok(&openai::OpenAi),
        Protocol::AzureChat | Protocol::AzureResponses => Ok(&openai::Azure),
        Protocol::Gemini => Ok(&google::Gemini),
        Protocol::VertexGemini => Ok(&google::Vertex),
        Protocol::Bedrock => bedrock::family(&model.name),
        Protocol::Anthropic | Protocol::VertexAnthropic => Err(BuildError::new(
            "model",
            format!(
                "`{}` is served over the Anthropic protocol, which has no embeddings API",
                model.id
            ),
        )),
    }
}

/// Serialises a typed request body: every body here is a struct of strings, numbers and sequences, which always
/// serialise.
fn encode<T: serde::Serialize>(
    path: String,
    headers: Vec<(String, String)>,
    body: &T,
) -> Result<EncodedRequest, BuildError> {
    let body = serde_json::to_vec(body)
        .map_err(|e| BuildError::new("inputs", format!("the request could not be encoded: {e}")))?;
    Ok(EncodedRequest {
        path,
        headers,
        body: bytes::Bytes::from(body),
    })
}

/// Checks that an answer has one vector per input.
fn counted(
    vectors: Vec<Vec<f32>>,
    expected: usize,
    api: &str,
) -> Result<Vec<Vec<f32>>, ProviderError> {
    if vectors.len() != expected {
        return Err(ProviderError::malformed(format!(
            "{api} answered {} embeddings for {expected} inputs",
            vectors.len()
        )));
    }
    Ok(vectors)
}

/// The input tokens of `inputs` estimated the way Google describes its models' tokens, about four characters each
/// (rounded up per input), for a provider whose answer counts none: an estimate, so the call says so.
pub fn estimate_tokens(inputs: &[Input]) -> u64 {
    inputs
        .iter()
        .map(|input| match input {
            Input::Text(t) => (t.chars().count() as u64).div_ceil(4),
            Input::Tokens(ids) => ids.len() as u64,
        })
        .sum()
}

/// JSON numbers as `f32`: providers print each component with the digits of an `f32`, so the nearest `f32` of the
/// parsed `f64` is the component the model produced.
fn narrow(values: Vec<f64>) -> Vec<f32> {
    values.into_iter().map(|v| v as f32).collect()
}
