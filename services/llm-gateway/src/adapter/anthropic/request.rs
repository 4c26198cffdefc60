//! Unified generation → Messages API request body.
//!
//! The builder is pure: the same generation and model always give the same body, so a retried or re-played step
//! hits the provider's prompt cache.
//!
//! Fixes applied here (docs/providers.md §6), each because the API rejects the request otherwise:
//! - text blocks that are empty or whitespace-only are dropped, then turns left empty, and the trailing whitespace
//!   of a final assistant (prefill) text is trimmed;
//! - consecutive turns of the same role are merged so `user` and `assistant` alternate; tool messages become user
//!   turns of `tool_result` blocks, and in a merged user turn the `tool_result` blocks come first (the API wants
//!   them right after the `tool_use` turn);
//! - a conversation that opens with an assistant turn gets a minimal user turn ([`LEADING_USER_TEXT`]) in front, since
//!   the first message must be the user's;
//! - tool-use ids go through [`ids::anthropic`] on both `tool_use.id` and `tool_result.tool_use_id`, so calls made
//!   by another provider (`call:1`) still pair with their results;
//! - reasoning is replayed only when thinking is on for this request *and* it was produced by this exact model
//!   (signatures are only valid for the model that made them);
//! - sampling parameters the model or thinking mode rejects are dropped;
//! - prompt-cache markers are placed by [`place_cache_markers`].

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::request_wire::{
    Block, CacheControl, Content, Message, MessagesRequest, OutputConfig, OutputFormat,
    Source as Media, Thinking, Tool, ToolChoice,
};
use super::schema;
use crate::adapter::common::encoding::{
    LEADING_USER_TEXT, base64, json_object, media_type, object_schema, tool_input,
};
use crate::adapter::common::features::{self, Output};
use crate::adapter::common::turns::{self, Role};
use crate::adapter::{BuildError, Protocol, Target, common::ids, common::options, pb};
use crate::catalog::{Capabilities, ModelInfo};

use pb::file_part::Source;
use pb::part::Kind;

/// Most cache breakpoints the API accepts in one request.
const MAX_CACHE_MARKERS: usize = 4;
/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u64 = MIN_THINKING_BUDGET_TOKENS as u64;
/// [`MIN_THINKING_BUDGET`] as the proto field's type.
pub(super) const MIN_THINKING_BUDGET_TOKENS: u32 = 1024;
/// Tokens kept for the visible answer when `max_tokens` has to be raised above the thinking budget.
const ANSWER_ROOM: u64 = 1024;
/// Body fields the gateway owns; `provider_options_json` cannot set them.
const RESERVED_FIELDS: [&str; 6] = [
    "model",
    "messages",
    "system",
    "stream",
    "tools",
    "tool_choice",
];
/// Image types the API accepts as base64 data.
const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// One turn of `messages`, before it is serialised.
type Turn<'a> = turns::Turn<Block<'a>>;

/// The replay data an `anthropic` reasoning part carries (what the decoder put in `ReasoningEnd.metadata`).
#[derive(Deserialize)]
struct ReplayMeta {
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    redacted_data: Option<String>,
}

/// Builds the `/v1/messages` body for `g` on `target`.
pub(super) fn body(g: &pb::Generation, target: &Target<'_>) -> Result<Value, BuildError> {
    let built = build_body(g, target);
    #[cfg(test)]
    crate::adapter::testing::golden::record(Protocol::Anthropic, g, target.model, built.as_ref());
    built
}

/// What the function above builds, which it records for the golden tests (`adapter/testing/golden.rs`).
fn build_body(g: &pb::Generation, target: &Target<'_>) -> Result<Value, BuildError> {
    let model = target.model;
    let caps = model.capabilities;

    let output_config = output_config(g, &caps)?;
    let mut tools = tools(g, &caps)?;
    let choice = tool_choice(g)?;
    let mut system: Vec<Block> = g
        .system
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| text_block(Cow::Borrowed(s)))
        .collect();

    // The API refuses thinking together with a forced tool choice; the forced tool is what the caller relies on
    // (structured output), so thinking gives way.
    let requested_budget = thinking_budget(g, &caps).filter(|_| !choice.forces_tool);
    let (mut max_tokens, mut budget) = token_plan(g, model, requested_budget);

    let mut turns = turns(g, model, &caps, budget.is_some())?;
    if budget.is_some() && !thinking_fits_history(&turns) {
        // With thinking on, the assistant turn that opens the current tool loop must start with a thinking block.
        // When it has none (it came from another model, or from a step without thinking) the API answers 400, so
        // this request runs without thinking, and then may carry no thinking blocks at all. `max_tokens` goes back
        // to what the caller asked for, since no budget needs room any more.
        (max_tokens, budget) = token_plan(g, model, None);
        turns = self::turns(g, model, &caps, false)?;
    }
    if turns.is_empty() {
        return Err(BuildError::new(
            "generation.messages",
            "no message has any content to send",
        ));
    }
    if output_config.is_some() && turns.last().is_some_and(|t| t.role == Role::Assistant) {
        // The API refuses JSON output that would continue a prefilled assistant turn.
        return Err(BuildError::new(
            format!(
                "generation.messages[{}]",
                g.messages.len().saturating_sub(1)
            ),
            "Anthropic's JSON output cannot continue an assistant turn (prefill); end with a user turn",
        ));
    }

    if caps.prompt_cache {
        place_cache_markers(&mut tools, &mut system, &mut turns);
    }

    let sampling = g
        .sampling
        .as_ref()
        .map_or_else(ClaudeSampling::default, |s| {
            ClaudeSampling::new(s, &caps, budget.is_some(), true)
        });
    let with_tools = !tools.is_empty();
    let request = MessagesRequest {
        model: &model.name,
        max_tokens,
        system: (!system.is_empty()).then_some(system),
        messages: turns.into_iter().map(message).collect(),
        tools: with_tools.then_some(tools),
        tool_choice: choice.value.filter(|_| with_tools),
        thinking: budget.map(Thinking::enabled),
        output_config,
        sampling,
        stream: true,
    };
    let mut body = json_object(&request)?;
    merge_provider_options(g, &mut body)?;
    Ok(Value::Object(body))
}

/// `output_config` for JSON Schema output: Anthropic's structured outputs (`format: {type: json_schema, schema}`,
/// generally available, no beta header), on models whose catalog entry has the `json_schema` capability; the schema's
/// objects closed ([`schema::closed`]). Anthropic has no JSON mode without a schema, so JSON-object output is
/// refused.
fn output_config(
    g: &pb::Generation,
    caps: &Capabilities,
) -> Result<Option<OutputConfig>, BuildError> {
    features::refuse_json_object(g, "Anthropic")?;
    let Output::JsonSchema(format) = features::output(g) else {
        return Ok(None);
    };
    if !caps.json_schema {
        return Err(BuildError::new(
            features::OUTPUT_TYPE,
            "this model has no structured outputs (catalog capability `json_schema`); ask for the answer through \
             a tool instead",
        ));
    }
    const FIELD: &str = "generation.output_format.schema_json";
    let root: Value = serde_json::from_str(&format.schema_json)
        .map_err(|e| BuildError::new(FIELD, format!("not valid JSON: {e}")))?;
    Ok(Some(OutputConfig {
        format: OutputFormat {
            kind: "json_schema",
            schema: schema::closed(root, FIELD)?,
        },
    }))
}

/// One turn of `messages`.
fn message(t: Turn<'_>) -> Message<'_> {
    Message {
        role: t.role.name(),
        content: t.blocks,
    }
}

/// A block without a cache marker.
fn block(content: Content<'_>) -> Block<'_> {
    Block {
        content,
        cache_control: None,
    }
}

fn text_block(text: Cow<'_, str>) -> Block<'_> {
    block(Content::Text { text })
}

fn is_thinking(b: &Block) -> bool {
    matches!(
        b.content,
        Content::Thinking { .. } | Content::RedactedThinking { .. }
    )
}

fn is_tool_result(b: &Block) -> bool {
    matches!(b.content, Content::ToolResult { .. })
}

/// Translates the conversation into alternating turns. `replay_reasoning` is false when thinking is off for this
/// request: the API refuses thinking blocks in the final assistant turn then, and ignores them elsewhere.
fn turns<'a>(
    g: &'a pb::Generation,
    model: &ModelInfo,
    caps: &Capabilities,
    replay_reasoning: bool,
) -> Result<Vec<Turn<'a>>, BuildError> {
    let mut turns = turns::merged(g, |role, kind, field| {
        Ok(match (role, kind) {
            (pb::Role::User | pb::Role::Assistant, Kind::Text(t)) => {
                (!t.text.trim().is_empty()).then(|| text_block(Cow::Borrowed(&t.text)))
            }
            (pb::Role::User, Kind::File(f)) => file_block(f, caps, field)?,
            (pb::Role::Assistant, Kind::Reasoning(r)) if replay_reasoning => {
                reasoning_block(r, model)
            }
            (pb::Role::Assistant, Kind::Reasoning(_)) => None,
            (pb::Role::Assistant, Kind::ToolCall(c)) => Some(tool_use_block(c, field)?),
            (pb::Role::Tool | pb::Role::User, Kind::ToolResult(r)) => Some(tool_result_block(r)),
            (role, _) => return Err(turns::not_allowed(field, role)),
        })
    })?;
    turns::results_first(&mut turns, is_tool_result);
    turns::trim_prefill(&mut turns, |b| match &mut b.content {
        Content::Text { text } => Some(text.to_mut()),
        _ => None,
    });
    turns::lead_with_user(&mut turns, || text_block(Cow::Borrowed(LEADING_USER_TEXT)));
    Ok(turns)
}

/// With thinking on, the assistant turn that opens the current tool loop must start with a thinking or
/// redacted-thinking block.
fn thinking_fits_history(turns: &[Turn]) -> bool {
    turns::loop_opens_with(turns, is_tool_result, is_thinking)
}

/// Replays a reasoning part as `thinking` / `redacted_thinking`, or drops it when it cannot be replayed: produced by
/// another protocol or model, or without a signature (the API refuses unsigned thinking).
fn reasoning_block<'a>(r: &'a pb::ReasoningPart, model: &ModelInfo) -> Option<Block<'a>> {
    let meta = r.provider_metadata.as_ref()?;
    if meta.protocol != Protocol::Anthropic.as_str() || meta.model != model.id {
        return None;
    }
    let replay: ReplayMeta = serde_json::from_str(&meta.json).ok()?;
    if let Some(data) = replay.redacted_data.filter(|d| !d.is_empty()) {
        return Some(block(Content::RedactedThinking { data }));
    }
    let signature = replay.signature.filter(|s| !s.is_empty())?;
    // Sent exactly as received, even when empty: the signature covers the text.
    Some(block(Content::Thinking {
        thinking: &r.text,
        signature,
    }))
}

fn tool_use_block<'a>(c: &'a pb::ToolCallPart, field: &str) -> Result<Block<'a>, BuildError> {
    Ok(block(Content::ToolUse {
        id: ids::anthropic(&c.call_id),
        name: &c.tool_name,
        input: tool_input(c, field)?,
    }))
}

fn tool_result_block(r: &pb::ToolResultPart) -> Block<'_> {
    block(Content::ToolResult {
        tool_use_id: ids::anthropic(&r.call_id),
        // `content` is optional on the API; an empty string is left out rather than sent as an empty text.
        content: (!r.output.is_empty()).then_some(r.output.as_str()),
        // The API's default is `false`; only the exception is sent.
        is_error: r.is_error.then_some(true),
    })
}

/// `image` for `image/*`, `document` for PDF (base64 or URL) and `text/plain` (inline text). Empty data is dropped
/// like empty text.
fn file_block<'a>(
    f: &'a pb::FilePart,
    caps: &Capabilities,
    field: &str,
) -> Result<Option<Block<'a>>, BuildError> {
    let file_field = || format!("{field}.file");
    let media = media_type(f);
    let source = match &f.source {
        Some(Source::Data(d)) if d.is_empty() => return Ok(None),
        Some(Source::Url(u)) if u.trim().is_empty() => {
            return Err(BuildError::new(file_field(), "the file has an empty url"));
        }
        Some(s) => s,
        None => {
            return Err(BuildError::new(file_field(), "the file has no data or url"));
        }
    };
    if media.starts_with("image/") {
        return image_block(&media, source, caps, field).map(Some);
    }
    let src = match (media.as_str(), source) {
        ("application/pdf", Source::Data(d)) => Media::Base64 {
            media_type: Cow::Borrowed("application/pdf"),
            data: base64(d),
        },
        ("application/pdf", Source::Url(url)) => Media::Url { url },
        ("text/plain", Source::Data(d)) => {
            let data = std::str::from_utf8(d).map_err(|_| {
                BuildError::new(file_field(), "a text/plain file must be valid UTF-8")
            })?;
            Media::Text {
                media_type: "text/plain",
                data,
            }
        }
        ("text/plain", Source::Url(_)) => {
            return Err(BuildError::new(
                file_field(),
                "text/plain files must be sent as data; the Anthropic API fetches only PDF and image URLs",
            ));
        }
        _ => {
            return Err(BuildError::new(
                format!("{field}.file.media_type"),
                format!(
                    "`{media}` is not supported on the Anthropic protocol (images, application/pdf and text/plain are)"
                ),
            ));
        }
    };
    Ok(Some(block(Content::Document {
        source: src,
        // The API shows a document's title to the model; the file name is the natural one.
        title: (!f.filename.is_empty()).then_some(f.filename.as_str()),
    })))
}

/// An image file as an `image` block: base64 data of the types the API takes, or a URL it fetches.
fn image_block<'a>(
    media: &str,
    source: &'a Source,
    caps: &Capabilities,
    field: &str,
) -> Result<Block<'a>, BuildError> {
    if !caps.vision {
        return Err(BuildError::new(
            format!("{field}.file"),
            "this model does not accept images",
        ));
    }
    let src = match source {
        Source::Data(d) => match IMAGE_TYPES.iter().find(|t| **t == media) {
            Some(media_type) => Media::Base64 {
                media_type: Cow::Borrowed(media_type),
                data: base64(d),
            },
            None => {
                return Err(BuildError::new(
                    format!("{field}.file.media_type"),
                    format!("`{media}` is not accepted; images must be jpeg, png, gif or webp"),
                ));
            }
        },
        Source::Url(url) => Media::Url { url },
    };
    Ok(block(Content::Image { source: src }))
}

/// The tool definitions. A tool the caller marked strict goes with `strict: true` (Anthropic's strict tool use, part
/// of the structured outputs the `json_schema` capability says the model has), its schema's objects closed.
fn tools<'a>(g: &'a pb::Generation, caps: &Capabilities) -> Result<Vec<Tool<'a>>, BuildError> {
    g.tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut schema = object_schema(t, i)?;
            if t.strict {
                if !caps.json_schema {
                    return Err(BuildError::new(
                        features::strict_field(i),
                        "this model has no strict tool use (catalog capability `json_schema`)",
                    ));
                }
                schema =
                    schema::closed(schema, &format!("generation.tools[{i}].input_schema_json"))?;
            }
            Ok(Tool {
                name: &t.name,
                description: (!t.description.is_empty()).then_some(t.description.as_str()),
                input_schema: schema,
                strict: t.strict.then_some(true),
                cache_control: None,
            })
        })
        .collect()
}

/// The translated tool choice.
struct Choice<'a> {
    /// `tool_choice`, when one is sent (only with tools).
    value: Option<ToolChoice<'a>>,
    /// The model must call a tool (`any` or `tool`).
    forces_tool: bool,
}

/// `tool_choice`, with `disable_parallel_tool_use: true` when the caller wants one call per step (then `auto` is
/// said even where it is the default, since the flag needs a choice to ride on; `none` makes no call to limit).
fn tool_choice(g: &pb::Generation) -> Result<Choice<'_>, BuildError> {
    use turns::ToolChoice as Mode;
    let one_call = features::one_call_per_step(g);
    let (kind, name, forces_tool) = match turns::tool_choice(g)? {
        // The API's default is `auto`; sending nothing keeps the body minimal.
        Mode::Default if !one_call => {
            return Ok(Choice {
                value: None,
                forces_tool: false,
            });
        }
        Mode::Default | Mode::Auto => ("auto", None, false),
        Mode::None => ("none", None, false),
        Mode::Required => ("any", None, true),
        Mode::Tool(name) => ("tool", Some(name), true),
    };
    let value = ToolChoice {
        kind,
        name,
        disable_parallel_tool_use: one_call.then_some(true),
    };
    Ok(Choice {
        value: Some(value),
        forces_tool,
    })
}

/// The thinking budget the caller asked for, or `None` for no `thinking` field. An explicit budget wins over the
/// effort; `EFFORT_NONE` turns thinking off even with a budget. The budget is at least the API's minimum.
pub(crate) fn thinking_budget(g: &pb::Generation, caps: &Capabilities) -> Option<u64> {
    use pb::reasoning::Effort;
    if !caps.reasoning {
        return None;
    }
    let r = g.reasoning.as_ref()?;
    let budget = match (r.effort(), r.budget_tokens) {
        (Effort::None, _) => return None,
        (_, b) if b > 0 => u64::from(b),
        (Effort::Minimal, _) => MIN_THINKING_BUDGET,
        (Effort::Low, _) => 2048,
        (Effort::Medium, _) => 8192,
        (Effort::High, _) => 24_576,
        (Effort::Xhigh, _) => 32_768,
        (Effort::Unspecified, _) => return None,
    };
    Some(budget.max(MIN_THINKING_BUDGET))
}

/// `max_tokens` and the thinking budget that fit together.
///
/// `max_tokens` is the caller's `max_output_tokens`, else the catalog's maximum, never above the catalog's maximum.
/// The API counts thinking inside `max_tokens` and requires `budget < max_tokens`, so when the budget does not fit,
/// `max_tokens` is raised to `budget + 1024` (capped at the model's maximum); when even that is too small the budget
/// is lowered to leave 1024 tokens for the answer, and thinking is dropped when the budget would fall below 1024.
pub(crate) fn token_plan(
    g: &pb::Generation,
    model: &ModelInfo,
    budget: Option<u64>,
) -> (u64, Option<u64>) {
    let model_max = model.max_output_tokens.max(1);
    let mut max_tokens = g
        .sampling
        .as_ref()
        .and_then(|s| s.max_output_tokens)
        .filter(|&n| n > 0)
        .map_or(model_max, u64::from)
        .min(model_max);
    let Some(mut budget) = budget else {
        return (max_tokens, None);
    };
    if max_tokens <= budget {
        max_tokens = (budget + ANSWER_ROOM).min(model_max);
    }
    if max_tokens <= budget {
        budget = max_tokens.saturating_sub(ANSWER_ROOM);
    }
    (
        max_tokens,
        Some(budget).filter(|&b| b >= MIN_THINKING_BUDGET),
    )
}

/// The sampling parameters Claude accepts, on the Messages API and through Bedrock's Converse alike; serialised as
/// the Messages API names them, each only when set.
#[derive(Default, Serialize)]
pub(crate) struct ClaudeSampling<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_k: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) stop_sequences: Vec<&'a str>,
}

impl<'a> ClaudeSampling<'a> {
    /// `s` minus what the model or thinking mode rejects; `top_k` only where the model takes it.
    pub(crate) fn new(
        s: &'a pb::Sampling,
        caps: &Capabilities,
        thinking: bool,
        top_k: bool,
    ) -> Self {
        // The API's range is 0..=1 (OpenAI's is 0..=2): clamp rather than fail a request another provider accepts.
        let mut temperature = s
            .temperature
            .filter(|t| t.is_finite() && caps.temperature)
            .map(|t| t.clamp(0.0, 1.0));
        let mut top_p = s.top_p.filter(|p| p.is_finite()).map(|p| p.clamp(0.0, 1.0));
        let mut top_k = s.top_k.filter(|&k| k > 0 && top_k);
        if thinking {
            // With thinking on the API refuses temperature and top_k, and accepts top_p only in 0.95..=1.
            temperature = None;
            top_k = None;
            top_p = top_p.filter(|p| (0.95..=1.0).contains(p));
        }
        if caps.exclusive_temperature_top_p && temperature.is_some() {
            top_p = None;
        }
        // The API refuses stop sequences made only of whitespace.
        let stop_sequences = s
            .stop_sequences
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(String::as_str)
            .collect();
        ClaudeSampling {
            temperature,
            top_p,
            top_k,
            stop_sequences,
        }
    }
}

/// Prompt-cache policy: at most [`MAX_CACHE_MARKERS`] `cache_control: {"type": "ephemeral"}` markers, placed in
/// this order until the budget runs out:
/// 1. on the last tool (caches the whole tool table, which comes first in the prompt);
/// 2. on the last system block (caches tools + system);
/// 3. on the last eligible block of the last user turn (caches the conversation so far, so the next step reads it);
/// 4. on the last eligible block of the user turn before it (the previous step's breakpoint, so this step reads
///    what the last one wrote).
///
/// Thinking and redacted-thinking blocks never carry a marker (the API refuses it). A marker on the last user turn
/// works as "cache everything up to here", which is what a multi-step tool loop re-sends every step.
fn place_cache_markers(tools: &mut [Tool], system: &mut [Block], turns: &mut [Turn]) {
    let mut left = MAX_CACHE_MARKERS;
    let mut mark = |marker: &mut Option<CacheControl>| {
        if left > 0 {
            *marker = Some(CacheControl { kind: "ephemeral" });
            left -= 1;
        }
    };
    if let Some(t) = tools.last_mut() {
        mark(&mut t.cache_control);
    }
    if let Some(s) = system.last_mut() {
        mark(&mut s.cache_control);
    }
    for turn in turns
        .iter_mut()
        .rev()
        .filter(|t| t.role == Role::User)
        .take(2)
    {
        if let Some(b) = turn.blocks.iter_mut().rev().find(|b| !is_thinking(b)) {
            mark(&mut b.cache_control);
        }
    }
}

/// Merges `provider_options_json["anthropic"]` into the body, top-level keys replacing the gateway's (so a caller
/// can set `metadata`, `thinking: {"type": "adaptive"}`, `max_tokens`, …), except the fields the gateway owns;
/// `output_config` is merged key by key, so an `effort` there keeps the gateway's `format`.
fn merge_provider_options(
    g: &pb::Generation,
    body: &mut Map<String, Value>,
) -> Result<(), BuildError> {
    if let Some(options) = options::for_protocol(
        &g.provider_options_json,
        Protocol::Anthropic,
        &RESERVED_FIELDS,
    )? {
        options::merge(body, options, &["output_config"]);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "request_tests.rs"]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "request_features_tests.rs"]
mod features_tests;
