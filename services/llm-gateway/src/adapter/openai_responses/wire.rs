//! Responses stream wire types. Only the fields the decoder reads; everything else (the whole `response` echo,
//! logprobs, obfuscation padding) is skipped by serde without being materialised. Strings that may be `null` are
//! `Option`s.

use serde::Deserialize;
use std::borrow::Cow;

/// Every event's fields in one struct, so a frame is parsed in a single pass whatever its type.
#[derive(Deserialize)]
pub(super) struct WireEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(super) kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) response: Option<WireResponse<'a>>,
    #[serde(borrow, default)]
    pub(super) item: Option<WireItem<'a>>,
    #[serde(borrow, default)]
    pub(super) item_id: Option<Cow<'a, str>>,
    // Content strings are owned: events own their text anyway, and JSON escapes would defeat borrowing.
    #[serde(default)]
    pub(super) delta: Option<String>,
    #[serde(default)]
    pub(super) arguments: Option<String>,
    #[serde(default)]
    pub(super) summary_index: Option<u64>,
    #[serde(default)]
    pub(super) content_index: Option<u64>,
}

/// Only `type` and the item's `type`, to tell an ignorable frame from a malformed one.
#[derive(Deserialize)]
pub(super) struct WireHead<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(super) kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) item: Option<WireItemHead<'a>>,
}

#[derive(Deserialize)]
pub(super) struct WireItemHead<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(super) kind: Cow<'a, str>,
}

#[derive(Deserialize)]
pub(super) struct WireResponse<'a> {
    #[serde(borrow, default)]
    pub(super) id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) model: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
    #[serde(borrow, default)]
    pub(super) incomplete_details: Option<WireIncomplete<'a>>,
}

#[derive(Deserialize)]
pub(super) struct WireIncomplete<'a> {
    #[serde(borrow, default)]
    pub(super) reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct WireItem<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(super) kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) arguments: Option<String>,
    #[serde(default)]
    pub(super) encrypted_content: Option<String>,
    /// Reasoning: `[{type:"summary_text",text}]`.
    #[serde(default)]
    pub(super) summary: Option<Vec<WireText>>,
    /// Message: `[{type:"output_text",text} | {type:"refusal",refusal}]`; reasoning: `[{type:"reasoning_text",text}]`.
    #[serde(default)]
    pub(super) content: Option<Vec<WireText>>,
}

#[derive(Deserialize)]
pub(super) struct WireText {
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) refusal: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) input_tokens_details: Option<WireInputDetails>,
    #[serde(default)]
    pub(super) output_tokens: Option<u64>,
    #[serde(default)]
    pub(super) output_tokens_details: Option<WireOutputDetails>,
}

#[derive(Deserialize)]
pub(super) struct WireInputDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
    /// Newer responses report cache writes too (always 0 on OpenAI so far); counted so the five counts stay disjoint.
    #[serde(default)]
    pub(super) cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct WireOutputDetails {
    #[serde(default)]
    pub(super) reasoning_tokens: Option<u64>,
}
