//! The Chat Completions request body as typed structs, borrowing from the generation where they can: the request
//! half of [`super::wire`]. Field order is the order on the wire (what keeps a step's bytes, and so the provider's
//! prompt cache, stable); a field that is `None` or empty is left out unless the API wants it said.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::adapter::common::openai::{Function, Named, Nested, ToolFields};

/// `POST /chat/completions`.
#[derive(Serialize)]
pub(super) struct ChatRequest<'a> {
    pub(super) model: &'a str,
    pub(super) messages: Vec<Message<'a>>,
    /// Function tools and the choice nest the function's fields under `function`.
    #[serde(flatten)]
    pub(super) tools: ToolFields<Nested<Function<'a>>, Nested<Named<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) response_format: Option<ResponseFormat<'a>>,
    #[serde(flatten)]
    pub(super) sampling: Sampling<'a>,
    pub(super) stream: bool,
    pub(super) stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) prompt_cache_key: Option<&'a str>,
}

/// The sampling parameters and the reasoning effort, each only when set and taken by the model.
#[derive(Serialize, Default)]
pub(super) struct Sampling<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stop: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reasoning_effort: Option<&'static str>,
}

/// `stream_options`.
#[derive(Serialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

/// One entry of `messages`.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Message<'a> {
    /// `system`, `developer`, or a user turn of text only: `content` as one string.
    Text {
        role: &'static str,
        content: Cow<'a, str>,
    },
    /// A user turn with files: `content` as typed parts.
    Parts {
        role: &'static str,
        content: Vec<Part<'a>>,
    },
    Assistant(Assistant<'a>),
    /// The answer to one tool call.
    Tool {
        role: &'static str,
        tool_call_id: Cow<'a, str>,
        content: &'a str,
    },
}

/// One content part of a user turn.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl<'a> },
    File { file: File },
}

/// `image_url`: the caller's URL or a data URL.
#[derive(Serialize)]
pub(super) struct ImageUrl<'a> {
    pub(super) url: Cow<'a, str>,
}

/// `file`: inline data with the filename OpenAI requires beside it.
#[derive(Serialize)]
pub(super) struct File {
    pub(super) filename: String,
    pub(super) file_data: String,
}

/// An assistant turn: `content` is `null` when the turn has only tool calls.
#[derive(Serialize)]
pub(super) struct Assistant<'a> {
    pub(super) role: &'static str,
    pub(super) content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reasoning: Option<String>,
    /// OpenRouter's structured reasoning, replayed as it came.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) reasoning_details: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tool_calls: Vec<ToolCall<'a>>,
}

/// One `tool_calls[]` entry.
#[derive(Serialize)]
pub(super) struct ToolCall<'a> {
    pub(super) id: Cow<'a, str>,
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) function: CalledFunction<'a>,
}

/// The function a tool call called, its arguments as JSON text.
#[derive(Serialize)]
pub(super) struct CalledFunction<'a> {
    pub(super) name: &'a str,
    pub(super) arguments: &'a str,
}

/// `response_format`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ResponseFormat<'a> {
    JsonObject,
    JsonSchema { json_schema: JsonSchema<'a> },
}

/// `response_format.json_schema`.
#[derive(Serialize)]
pub(super) struct JsonSchema<'a> {
    pub(super) name: &'a str,
    pub(super) schema: Value,
    pub(super) strict: bool,
}
