//! The `streamGenerateContent` request body as typed structs, borrowing from the generation where they can. Field
//! order is the order on the wire (what keeps a step's bytes, and so the implicit prompt cache, stable); a field that
//! is `None` is left out. Gemini's JSON names are camelCase.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

/// `POST …:streamGenerateContent?alt=sse`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GenerateRequest<'a> {
    pub(super) contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) system_instruction: Option<SystemInstruction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tools: Option<[Tools<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "GenerationConfig::is_empty")]
    pub(super) generation_config: GenerationConfig<'a>,
}

/// One turn of `contents`: `user` or `model`.
#[derive(Serialize)]
pub(super) struct Content<'a> {
    pub(super) role: &'static str,
    pub(super) parts: Vec<Part<'a>>,
}

/// `systemInstruction`: the system prompt as one text part.
#[derive(Serialize)]
pub(super) struct SystemInstruction {
    pub(super) parts: [Text; 1],
}

/// A part that is only text.
#[derive(Serialize)]
pub(super) struct Text {
    pub(super) text: String,
}

/// One part of a turn: exactly one data field, then the thought flag and the signature Gemini handed out.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Part<'a> {
    #[serde(flatten)]
    pub(super) data: PartData<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) thought: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) thought_signature: Option<Cow<'a, str>>,
}

/// A part's data field, named by its kind.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum PartData<'a> {
    Text(Cow<'a, str>),
    InlineData {
        #[serde(rename = "mimeType")]
        mime_type: String,
        data: String,
    },
    FileData {
        #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(rename = "fileUri")]
        file_uri: &'a str,
    },
    FunctionCall {
        name: &'a str,
        args: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    FunctionResponse {
        name: &'a str,
        response: Response<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
}

/// A function's result: always an object, `{"output": …}` or `{"error": …}` for a failed tool.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Response<'a> {
    Output(&'a str),
    Error(&'a str),
}

/// The one entry of `tools`: every function declaration.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Tools<'a> {
    pub(super) function_declarations: Vec<FunctionDeclaration<'a>>,
}

/// One function.
#[derive(Serialize)]
pub(super) struct FunctionDeclaration<'a> {
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) parameters: Option<Value>,
}

/// `toolConfig`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolConfig<'a> {
    pub(super) function_calling_config: FunctionCallingConfig<'a>,
}

/// `toolConfig.functionCallingConfig`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FunctionCallingConfig<'a> {
    pub(super) mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) allowed_function_names: Option<[&'a str; 1]>,
}

/// `generationConfig`: left out when nothing in it is set.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top_k: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stop_sequences: Option<Vec<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) seed: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) response_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) thinking_config: Option<ThinkingConfig>,
}

impl GenerationConfig<'_> {
    /// True when nothing is set: the model's defaults apply throughout.
    pub(super) fn is_empty(&self) -> bool {
        self.temperature.is_none()
            && self.top_p.is_none()
            && self.top_k.is_none()
            && self.max_output_tokens.is_none()
            && self.stop_sequences.is_none()
            && self.seed.is_none()
            && self.response_mime_type.is_none()
            && self.response_schema.is_none()
            && self.thinking_config.is_none()
    }
}

/// `generationConfig.thinkingConfig`: a level (Gemini 3) or a budget (2.5).
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThinkingConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) include_thoughts: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) thinking_level: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) thinking_budget: Option<u32>,
}
