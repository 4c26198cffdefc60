//! Embeddings answered for any request, in each API's exact shape: the vector of an input is made from its text
//! ([`vector_of`]), so a test can check that every vector came back for its own input, in order, however the
//! request was split into batches. Token counts are the inputs' whitespace-separated words ([`tokens_of`]).

use base64::Engine as _;
use serde_json::{Value, json};

use crate::validate::array;
use crate::{Recorded, Reply};

/// Dimensions of a vector when the request asks for none.
pub const DEFAULT_DIMENSIONS: usize = 8;

/// The vector the fake answers for `text`: `dimensions` components, the first the text's length in bytes, the
/// others small fractions of its bytes, so two texts differ.
pub fn vector_of(text: &str, dimensions: usize) -> Vec<f32> {
    let sum: u32 = text.bytes().map(u32::from).sum();
    (0..dimensions)
        .map(|k| {
            if k == 0 {
                text.len() as f32
            } else {
                ((sum + k as u32) % 97) as f32 / 128.0
            }
        })
        .collect()
}

/// The tokens the fake counts in `text`: its whitespace-separated words.
pub fn tokens_of(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

impl Reply {
    /// Embeddings for whatever the request asks, by its path: OpenAI's and Azure OpenAI's `/embeddings` (base64
    /// or floats, as asked), the Gemini API's `:batchEmbedContents`, Vertex AI's `:predict`, and Bedrock's
    /// `/invoke` of Titan (`inputText`) or Cohere (`texts`, the count in `x-amzn-bedrock-input-token-count`).
    /// Anything else is a 404. Additive.
    pub fn embeddings() -> Reply {
        Reply::fn_reply(|req| {
            let path = req.path.split('?').next().unwrap_or("");
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            if path.ends_with("/embeddings") {
                openai(&body)
            } else if path.ends_with(":batchEmbedContents") {
                gemini(&body)
            } else if path.ends_with(":predict") {
                vertex(&body)
            } else if path.ends_with("/invoke") {
                bedrock(req, &body)
            } else {
                Reply::json(
                    404,
                    r#"{"error":{"message":"fake-provider: no embeddings route"}}"#,
                )
            }
        })
    }
}

fn dims(v: Option<&Value>) -> usize {
    v.and_then(Value::as_u64)
        .and_then(|d| usize::try_from(d).ok())
        .unwrap_or(DEFAULT_DIMENSIONS)
}

fn openai(body: &Value) -> Reply {
    let texts: Vec<String> = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|i| i.as_str().map(String::from))
            .collect(),
        // Token ids: the vector of their text written out (`1 2 3`).
        Some(Value::Array(items)) if items.iter().all(Value::is_number) => vec![ids_text(items)],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| ids_text(i.as_array().map(Vec::as_slice).unwrap_or_default()))
            .collect(),
        _ => Vec::new(),
    };
    let d = dims(body.get("dimensions"));
    let base64 = body.get("encoding_format").and_then(Value::as_str) == Some("base64");
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(index, t)| {
            let v = vector_of(t, d);
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let tokens: u64 = texts.iter().map(|t| tokens_of(t)).sum();
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    Reply::json(
        200,
        json!({"object": "list", "data": data, "model": model,
               "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
        .to_string(),
    )
}

fn ids_text(ids: &[Value]) -> String {
    ids.iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn gemini(body: &Value) -> Reply {
    let embeddings: Vec<Value> = array(body, "requests")
        .iter()
        .map(|r| {
            let text = r
                .pointer("/content/parts/0/text")
                .and_then(Value::as_str)
                .unwrap_or("");
            json!({"values": vector_of(text, dims(r.get("outputDimensionality")))})
        })
        .collect();
    Reply::json(200, json!({"embeddings": embeddings}).to_string())
}

fn vertex(body: &Value) -> Reply {
    let d = dims(body.pointer("/parameters/outputDimensionality"));
    let predictions: Vec<Value> = array(body, "instances")
        .iter()
        .map(|i| {
            let text = i.get("content").and_then(Value::as_str).unwrap_or("");
            json!({"embeddings": {
                "statistics": {"truncated": false, "token_count": tokens_of(text)},
                "values": vector_of(text, d),
            }})
        })
        .collect();
    let characters: usize = array(body, "instances")
        .iter()
        .filter_map(|i| i.get("content").and_then(Value::as_str))
        .map(|t| t.chars().filter(|c| !c.is_whitespace()).count())
        .sum();
    Reply::json(
        200,
        json!({"predictions": predictions, "metadata": {"billableCharacterCount": characters}})
            .to_string(),
    )
}

fn bedrock(req: &Recorded, body: &Value) -> Reply {
    if let Some(text) = body.get("inputText").and_then(Value::as_str) {
        let v = vector_of(text, dims(body.get("dimensions")));
        let tokens = tokens_of(text);
        return Reply::json(
            200,
            json!({"embedding": v, "embeddingsByType": {"float": v}, "inputTextTokenCount": tokens})
                .to_string(),
        );
    }
    let texts: Vec<&str> = array(body, "texts")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let d = dims(body.get("output_dimension"));
    let embeddings: Vec<Vec<f32>> = texts.iter().map(|t| vector_of(t, d)).collect();
    let tokens: u64 = texts.iter().map(|t| tokens_of(t)).sum();
    let id = format!("fake-{}", req.body.len());
    Reply::json(
        200,
        json!({"embeddings": embeddings, "id": id, "response_type": "embeddings_floats", "texts": texts})
            .to_string(),
    )
    .header("x-amzn-bedrock-input-token-count", &tokens.to_string())
}
