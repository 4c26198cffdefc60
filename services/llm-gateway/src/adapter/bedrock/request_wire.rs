//! The Converse request body as typed structs, borrowing from the generation where they can. Field order is the
//! order on the wire (the signature covers the exact bytes, and a retry must sign the same ones); a field that is
//! `None` is left out. Converse's JSON names are camelCase, and a content block is an object of one member named by
//! its kind.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::adapter::anthropic::Thinking;

/// `POST /model/{modelId}/converse-stream` (or `/converse`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ConverseRequest<'a> {
    pub(super) messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) system: Option<Vec<Block<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_config: Option<ToolConfig<'a>>,
    pub(super) inference_config: InferenceConfig<'a>,
    #[serde(skip_serializing_if = "Additional::is_empty")]
    pub(super) additional_model_request_fields: Additional,
}

/// One turn of `messages`.
#[derive(Serialize)]
pub(super) struct Message<'a> {
    pub(super) role: &'static str,
    pub(super) content: Vec<Block<'a>>,
}

/// One content block (of a turn, or of `system`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub(super) enum Block<'a> {
    Text(Cow<'a, str>),
    Image {
        format: String,
        source: Bytes,
    },
    Document {
        format: &'static str,
        name: String,
        source: Bytes,
    },
    ToolUse {
        tool_use_id: Cow<'a, str>,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        /// Required, and a text block may not be blank.
        content: [Text<'a>; 1],
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<&'static str>,
    },
    ReasoningContent(Reasoning<'a>),
    CachePoint(CachePoint),
}

/// A text block of a tool result.
#[derive(Serialize)]
pub(super) struct Text<'a> {
    pub(super) text: &'a str,
}

/// Inline bytes, base64.
#[derive(Serialize)]
pub(super) struct Bytes {
    pub(super) bytes: String,
}

/// `reasoningContent`: signed reasoning text, or redacted reasoning.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum Reasoning<'a> {
    ReasoningText { text: &'a str, signature: String },
    RedactedContent(String),
}

/// `cachePoint: {"type": "default"}`.
#[derive(Serialize)]
pub(super) struct CachePoint {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
}

/// `toolConfig`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolConfig<'a> {
    pub(super) tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_choice: Option<ToolChoice<'a>>,
}

/// One entry of `toolConfig.tools`: a tool, or the cache point after them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum Tool<'a> {
    ToolSpec(ToolSpec<'a>),
    CachePoint(CachePoint),
}

/// `toolSpec`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolSpec<'a> {
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) description: Option<&'a str>,
    pub(super) input_schema: InputSchema,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) strict: Option<bool>,
}

/// `inputSchema: {"json": …}`.
#[derive(Serialize)]
pub(super) struct InputSchema {
    pub(super) json: Value,
}

/// `toolChoice`: an object of one member.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum ToolChoice<'a> {
    Auto {},
    Any {},
    Tool { name: &'a str },
}

/// `inferenceConfig`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InferenceConfig<'a> {
    pub(super) max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top_p: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) stop_sequences: Vec<&'a str>,
}

/// `additionalModelRequestFields`: what Claude takes that Converse has no field for, in Anthropic's names.
#[derive(Serialize, Default)]
pub(super) struct Additional {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top_k: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) thinking: Option<Thinking>,
}

impl Additional {
    /// True when Converse's own fields say everything.
    pub(super) fn is_empty(&self) -> bool {
        self.top_k.is_none() && self.thinking.is_none()
    }
}
