//! The Messages request body as typed structs, borrowing from the generation where they can. Field order is the
//! order on the wire (what keeps a step's bytes, and so the prompt cache, stable); a field that is `None` is left
//! out.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::request::ClaudeSampling;

/// `POST /v1/messages`.
#[derive(Serialize)]
pub(super) struct MessagesRequest<'a> {
    pub(super) model: &'a str,
    pub(super) max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) system: Option<Vec<Block<'a>>>,
    pub(super) messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tools: Option<Vec<Tool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_choice: Option<ToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) output_config: Option<OutputConfig>,
    #[serde(flatten)]
    pub(super) sampling: ClaudeSampling<'a>,
    pub(super) stream: bool,
}

/// One turn of `messages`.
#[derive(Serialize)]
pub(super) struct Message<'a> {
    pub(super) role: &'static str,
    pub(super) content: Vec<Block<'a>>,
}

/// One content block (of a turn, or of `system`), with the prompt-cache marker the builder may put on it.
#[derive(Serialize)]
pub(super) struct Block<'a> {
    #[serde(flatten)]
    pub(super) content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache_control: Option<CacheControl>,
}

/// What a block holds, told by its `type`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Content<'a> {
    Text {
        text: Cow<'a, str>,
    },
    Image {
        source: Source<'a>,
    },
    Document {
        source: Source<'a>,
        /// Shown to the model as the document's title: the file name.
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
    },
    /// Sent exactly as received: the signature covers the text.
    Thinking {
        thinking: &'a str,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

/// Where an image's or a document's bytes are.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Source<'a> {
    Base64 {
        media_type: Cow<'a, str>,
        data: String,
    },
    Url {
        url: &'a str,
    },
    /// A plain-text document, inline.
    Text {
        media_type: &'static str,
        data: &'a str,
    },
}

/// `cache_control: {"type": "ephemeral"}`.
#[derive(Serialize)]
pub(super) struct CacheControl {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
}

/// One tool definition.
#[derive(Serialize)]
pub(super) struct Tool<'a> {
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) description: Option<&'a str>,
    pub(super) input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) strict: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache_control: Option<CacheControl>,
}

/// `tool_choice`.
#[derive(Serialize)]
pub(super) struct ToolChoice<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) disable_parallel_tool_use: Option<bool>,
}

/// `thinking: {"type": "enabled", "budget_tokens": …}` (also what Bedrock passes to Claude).
#[derive(Serialize)]
pub(crate) struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u64,
}

impl Thinking {
    /// Thinking on, with this budget.
    pub(crate) fn enabled(budget_tokens: u64) -> Self {
        Thinking {
            kind: "enabled",
            budget_tokens,
        }
    }
}

/// `output_config`: the JSON Schema the answer must match.
#[derive(Serialize)]
pub(super) struct OutputConfig {
    pub(super) format: OutputFormat,
}

/// `output_config.format`.
#[derive(Serialize)]
pub(super) struct OutputFormat {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) schema: Value,
}
