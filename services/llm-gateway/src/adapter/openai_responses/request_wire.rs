//! The Responses request body as typed structs, borrowing from the generation where they can: the request half of
//! [`super::wire`]. Field order is the order on the wire; a field that is `None` or empty is left out unless the API
//! wants it said.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::adapter::common::openai::{Function, Named, ToolFields};

/// `POST /responses`.
#[derive(Serialize)]
pub(super) struct ResponsesRequest<'a> {
    pub(super) model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) instructions: Option<String>,
    pub(super) input: Vec<Item<'a>>,
    /// Function tools and the choice are flat.
    #[serde(flatten)]
    pub(super) tools: ToolFields<Function<'a>, Named<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) text: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reasoning: Option<Reasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) include: Option<[&'static str; 1]>,
    pub(super) store: bool,
    pub(super) stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) prompt_cache_key: Option<&'a str>,
}

/// One `input` item: a message (told by its `role`) or a typed item.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Item<'a> {
    Message {
        role: &'static str,
        content: Vec<Content<'a>>,
    },
    Reasoning {
        #[serde(rename = "type")]
        kind: &'static str,
        id: String,
        encrypted_content: String,
        summary: Vec<Summary<'a>>,
    },
    FunctionCall {
        #[serde(rename = "type")]
        kind: &'static str,
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    FunctionCallOutput {
        #[serde(rename = "type")]
        kind: &'static str,
        call_id: &'a str,
        output: &'a str,
    },
}

/// One content part of a message.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Content<'a> {
    InputText {
        text: &'a str,
    },
    InputImage {
        image_url: Cow<'a, str>,
    },
    /// A file inline (with the filename the API requires beside the data) or by URL.
    InputFile {
        #[serde(skip_serializing_if = "Option::is_none")]
        filename: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        file_data: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        file_url: Option<&'a str>,
    },
    OutputText {
        text: String,
    },
}

/// One part of a reasoning item's summary.
#[derive(Serialize)]
pub(super) struct Summary<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) text: &'a str,
}

/// `text`: the output format.
#[derive(Serialize)]
pub(super) struct Text<'a> {
    pub(super) format: Format<'a>,
}

/// `text.format`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Format<'a> {
    JsonObject,
    JsonSchema {
        name: &'a str,
        schema: Value,
        strict: bool,
    },
}

/// `reasoning`.
#[derive(Serialize)]
pub(super) struct Reasoning {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) effort: Option<&'static str>,
    pub(super) summary: &'static str,
}
