//! Unified generation → Converse request body (docs/providers.md "Bedrock").
//!
//! Pure, like every builder: the same generation gives the same bytes, so the signature and the prompt cache are
//! stable across a retry. Fixes applied here, each because the API refuses the request otherwise:
//! - blank text blocks are dropped, then empty turns; consecutive same-role turns are merged (Converse wants
//!   `user` and `assistant` alternating) and a conversation opening with the assistant gets [`LEADING_USER_TEXT`];
//!   in a user turn the `toolResult` blocks come first;
//! - tool-use ids go through [`ids::bedrock`] on both sides (`^[a-zA-Z0-9_-]{1,64}$`);
//! - `toolConfig` is sent whenever the history holds tool blocks, even with tool choice NONE (Converse refuses tool
//!   blocks without it), and NONE then simply sends no `toolChoice`;
//! - reasoning is replayed only to the model that produced it and only with its signature, and thinking is turned
//!   off for a step whose current tool loop did not start with a reasoning block (Claude's rule);
//! - `cachePoint` blocks after the tools, the system blocks and the last two user turns, for models with prompt
//!   caching.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::request_wire::{
    Additional, Block, Bytes, CachePoint, ConverseRequest, InferenceConfig, InputSchema, Message,
    Reasoning, Text, Tool, ToolChoice, ToolConfig, ToolSpec,
};
use crate::adapter::anthropic::ClaudeSampling;
use crate::adapter::anthropic::Thinking;
use crate::adapter::common::encoding::{
    LEADING_USER_TEXT, base64, json_object, media_type, object_schema, tool_input,
};
use crate::adapter::common::features::{self, Output};
use crate::adapter::common::turns::{self, Role};
use crate::adapter::{BuildError, Protocol, Target, anthropic, common::ids, common::options, pb};
use crate::catalog::ModelInfo;

use pb::file_part::Source;
use pb::part::Kind;

/// The smallest thinking budget Claude accepts.
pub(super) const MIN_THINKING_BUDGET: u32 = 1024;
/// Body fields the gateway owns; `provider_options_json["bedrock"]` cannot set them.
const RESERVED: [&str; 3] = ["messages", "system", "toolConfig"];
/// Most cache points Claude accepts in one request.
const MAX_CACHE_POINTS: usize = 4;

/// Claude models (directly or through an inference profile) take Anthropic's `thinking` and `top_k` fields.
pub(super) fn is_claude(model_name: &str) -> bool {
    model_name.contains("anthropic.")
}

/// One turn of `messages`, its content blocks before they are serialised.
type Turn<'a> = turns::Turn<Block<'a>>;

/// The replay data of a `bedrock` reasoning part (what the decoder put in `ReasoningEnd.metadata`).
#[derive(Deserialize)]
struct ReplayMeta {
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    redacted: Option<String>,
}

/// Builds the Converse body for `g` on `target`.
pub(super) fn body(g: &pb::Generation, target: &Target<'_>) -> Result<Value, BuildError> {
    let built = build_body(g, target);
    #[cfg(test)]
    crate::adapter::testing::golden::record(Protocol::Bedrock, g, target.model, built.as_ref());
    built
}

/// What the function above builds, which it records for the golden tests (`adapter/testing/golden.rs`).
fn build_body(g: &pb::Generation, target: &Target<'_>) -> Result<Value, BuildError> {
    let model = target.model;
    features::refuse_json_object(g, "Bedrock Converse")?;
    if matches!(features::output(g), Output::JsonSchema(_)) {
        return Err(BuildError::new(
            "generation.output_format",
            "json_schema output is not supported on the Bedrock protocol; use a tool",
        ));
    }
    // Converse has no field for it, and Claude's `disable_parallel_tool_use` lives inside the `tool_choice` that
    // Converse writes itself from `toolChoice`: passing it through `additionalModelRequestFields` is undocumented.
    features::refuse_one_call_per_step(g, "Bedrock Converse")?;
    let (mut tools, choice) = tool_config(g)?;
    let forced = matches!(choice, Some(ToolChoice::Any {} | ToolChoice::Tool { .. }));
    let budget = thinking_budget(g, model).filter(|_| !forced);
    // Thinking counts inside `maxTokens` and must stay below it, as on the Messages API.
    let (mut max_tokens, mut budget) = anthropic::token_plan(g, model, budget);
    let mut turns = turns(g, model, budget.is_some())?;
    if budget.is_some() && !thinking_fits_history(&turns) {
        (max_tokens, budget) = anthropic::token_plan(g, model, None);
        turns = self::turns(g, model, false)?;
    }
    if turns.is_empty() {
        return Err(BuildError::new(
            "generation.messages",
            "no message has any content to send",
        ));
    }
    let mut system: Vec<Block> = g
        .system
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| Block::Text(Cow::Borrowed(s)))
        .collect();
    if model.capabilities.prompt_cache {
        place_cache_points(&mut tools, &mut system, &mut turns);
    }
    let (inference_config, top_k) = inference_config(g, model, max_tokens, budget.is_some());
    let request = ConverseRequest {
        messages: turns.into_iter().map(message).collect(),
        system: (!system.is_empty()).then_some(system),
        tool_config: tool_config_sent(g, tools, choice),
        inference_config,
        // Claude's `top_k` and `thinking` have no Converse field.
        additional_model_request_fields: Additional {
            top_k,
            thinking: budget.map(Thinking::enabled),
        },
    };
    let mut body = json_object(&request)?;
    merge_provider_options(g, &mut body)?;
    Ok(Value::Object(body))
}

/// One turn of `messages`.
fn message(t: Turn<'_>) -> Message<'_> {
    Message {
        role: t.role.name(),
        content: t.blocks,
    }
}

/// `toolConfig`, unless there are no tools or the choice is NONE; with NONE it is still sent when the history holds
/// tool blocks (Converse refuses them without it), without a `toolChoice`.
fn tool_config_sent<'a>(
    g: &pb::Generation,
    tools: Vec<Tool<'a>>,
    choice: Option<ToolChoice<'a>>,
) -> Option<ToolConfig<'a>> {
    let has_tool_blocks = g.messages.iter().any(|m| {
        m.parts
            .iter()
            .any(|p| matches!(p.kind, Some(Kind::ToolCall(_) | Kind::ToolResult(_))))
    });
    let tool_none = g
        .tool_choice
        .as_ref()
        .is_some_and(|c| c.mode() == pb::tool_choice::Mode::None);
    if tools.is_empty() || (tool_none && !has_tool_blocks) {
        return None;
    }
    Some(ToolConfig {
        tools,
        tool_choice: choice,
    })
}

/// Translates the conversation into alternating turns.
fn turns<'a>(
    g: &'a pb::Generation,
    model: &ModelInfo,
    replay: bool,
) -> Result<Vec<Turn<'a>>, BuildError> {
    let mut turns = turns::merged(g, |role, kind, field| {
        Ok(match (role, kind) {
            (pb::Role::User | pb::Role::Assistant, Kind::Text(t)) => {
                (!t.text.trim().is_empty()).then(|| Block::Text(Cow::Borrowed(&t.text)))
            }
            (pb::Role::User, Kind::File(f)) => file_block(f, model, field)?,
            (pb::Role::Assistant, Kind::Reasoning(r)) if replay => reasoning_block(r, model),
            (pb::Role::Assistant, Kind::Reasoning(_)) => None,
            (pb::Role::Assistant, Kind::ToolCall(c)) => Some(tool_use_block(c, field)?),
            (pb::Role::Tool | pb::Role::User, Kind::ToolResult(r)) => Some(tool_result_block(r)),
            (role, _) => return Err(turns::not_allowed(field, role)),
        })
    })?;
    turns::results_first(&mut turns, is_tool_result);
    turns::trim_prefill(&mut turns, |b| match b {
        Block::Text(text) => Some(text.to_mut()),
        _ => None,
    });
    turns::lead_with_user(&mut turns, || Block::Text(Cow::Borrowed(LEADING_USER_TEXT)));
    Ok(turns)
}

fn is_tool_result(b: &Block) -> bool {
    matches!(b, Block::ToolResult { .. })
}

/// With thinking on, the assistant turn opening the current tool loop must start with a reasoning block.
fn thinking_fits_history(turns: &[Turn]) -> bool {
    turns::loop_opens_with(turns, is_tool_result, |b| {
        matches!(b, Block::ReasoningContent(_))
    })
}

fn reasoning_block<'a>(r: &'a pb::ReasoningPart, model: &ModelInfo) -> Option<Block<'a>> {
    let meta = r.provider_metadata.as_ref()?;
    if meta.protocol != Protocol::Bedrock.as_str() || meta.model != model.id {
        return None;
    }
    let replay: ReplayMeta = serde_json::from_str(&meta.json).ok()?;
    if let Some(data) = replay.redacted.filter(|d| !d.is_empty()) {
        return Some(Block::ReasoningContent(Reasoning::RedactedContent(data)));
    }
    let signature = replay.signature.filter(|s| !s.is_empty())?;
    Some(Block::ReasoningContent(Reasoning::ReasoningText {
        text: &r.text,
        signature,
    }))
}

fn tool_use_block<'a>(c: &'a pb::ToolCallPart, field: &str) -> Result<Block<'a>, BuildError> {
    Ok(Block::ToolUse {
        tool_use_id: ids::bedrock(&c.call_id),
        name: &c.tool_name,
        input: tool_input(c, field)?,
    })
}

fn tool_result_block(r: &pb::ToolResultPart) -> Block<'_> {
    // `content` is required and a text block may not be blank.
    let text = if r.output.trim().is_empty() {
        "(empty)"
    } else {
        r.output.as_str()
    };
    Block::ToolResult {
        tool_use_id: ids::bedrock(&r.call_id),
        content: [Text { text }],
        status: r.is_error.then_some("error"),
    }
}

/// `image` for png/jpeg/gif/webp bytes, `document` for the document formats Converse reads. URLs are refused:
/// Converse fetches only from S3.
fn file_block<'a>(
    f: &pb::FilePart,
    model: &ModelInfo,
    field: &str,
) -> Result<Option<Block<'a>>, BuildError> {
    let file_field = || format!("{field}.file");
    let media = media_type(f);
    let data = match &f.source {
        Some(Source::Data(d)) if d.is_empty() => return Ok(None),
        Some(Source::Data(d)) => d,
        Some(Source::Url(_)) => {
            return Err(BuildError::new(
                file_field(),
                "Bedrock takes files as data only (it fetches nothing but S3 locations)",
            ));
        }
        None => return Err(BuildError::new(file_field(), "the file has no data or url")),
    };
    if let Some(format) = media.strip_prefix("image/") {
        if !model.capabilities.vision {
            return Err(BuildError::new(
                file_field(),
                "this model does not accept images",
            ));
        }
        if !matches!(format, "png" | "jpeg" | "gif" | "webp") {
            return Err(BuildError::new(
                format!("{field}.file.media_type"),
                format!("`{media}` is not accepted; images must be png, jpeg, gif or webp"),
            ));
        }
        return Ok(Some(Block::Image {
            format: format.to_string(),
            source: Bytes {
                bytes: base64(data),
            },
        }));
    }
    let format = match media.as_str() {
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/html" => "html",
        "text/csv" => "csv",
        _ => {
            return Err(BuildError::new(
                format!("{field}.file.media_type"),
                format!("`{media}` is not supported on the Bedrock protocol"),
            ));
        }
    };
    Ok(Some(Block::Document {
        format,
        name: document_name(&f.filename),
        source: Bytes {
            bytes: base64(data),
        },
    }))
}

/// Converse accepts document names of letters, digits, single spaces, hyphens, parentheses and brackets.
fn document_name(filename: &str) -> String {
    let stem = filename.rsplit_once('.').map_or(filename, |(s, _)| s);
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']') {
                c
            } else {
                ' '
            }
        })
        .collect();
    let name = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    if name.is_empty() {
        "document".to_string()
    } else {
        name.chars().take(200).collect()
    }
}

/// The tool specs and the translated tool choice (`None` for auto-by-default or NONE).
fn tool_config(g: &pb::Generation) -> Result<(Vec<Tool<'_>>, Option<ToolChoice<'_>>), BuildError> {
    use turns::ToolChoice as Mode;
    let mut tools = Vec::with_capacity(g.tools.len());
    for (i, t) in g.tools.iter().enumerate() {
        tools.push(Tool::ToolSpec(ToolSpec {
            name: &t.name,
            description: (!t.description.is_empty()).then_some(t.description.as_str()),
            input_schema: InputSchema {
                json: object_schema(t, i)?,
            },
            // Bedrock's structured outputs: the call's input constrained to the schema, on the models that have
            // them (the others answer with a ValidationException, relayed as INVALID_ARGUMENT).
            strict: t.strict.then_some(true),
        }));
    }
    let choice = match turns::tool_choice(g)? {
        Mode::Default | Mode::None => None,
        Mode::Auto => Some(ToolChoice::Auto {}),
        Mode::Required => Some(ToolChoice::Any {}),
        Mode::Tool(name) => Some(ToolChoice::Tool { name }),
    };
    Ok((tools, choice))
}

/// The thinking budget asked for, on a reasoning-capable Claude model: Anthropic's rule (an explicit budget wins
/// over the effort, at least 1024).
fn thinking_budget(g: &pb::Generation, model: &ModelInfo) -> Option<u64> {
    if !is_claude(&model.name) {
        return None;
    }
    anthropic::thinking_budget(g, &model.capabilities)
}

/// `inferenceConfig`, and Claude's `top_k`, which Converse has no field for.
fn inference_config<'a>(
    g: &'a pb::Generation,
    model: &ModelInfo,
    max_tokens: u64,
    thinking: bool,
) -> (InferenceConfig<'a>, Option<u32>) {
    let caps = model.capabilities;
    let s = g
        .sampling
        .as_ref()
        .map_or_else(ClaudeSampling::default, |s| {
            ClaudeSampling::new(s, &caps, thinking, is_claude(&model.name))
        });
    let config = InferenceConfig {
        max_tokens,
        temperature: s.temperature,
        top_p: s.top_p,
        stop_sequences: s.stop_sequences,
    };
    (config, s.top_k)
}

/// Cache points, at most [`MAX_CACHE_POINTS`]: after the tools, after the system blocks, at the end of the last two
/// user turns (the same policy as the Anthropic adapter, in Converse's own block).
fn place_cache_points(tools: &mut Vec<Tool>, system: &mut Vec<Block>, turns: &mut [Turn]) {
    let point = || CachePoint { kind: "default" };
    let mut left = MAX_CACHE_POINTS;
    if !tools.is_empty() {
        tools.push(Tool::CachePoint(point()));
        left -= 1;
    }
    if !system.is_empty() {
        system.push(Block::CachePoint(point()));
        left -= 1;
    }
    for t in turns
        .iter_mut()
        .rev()
        .filter(|t| t.role == Role::User)
        .take(left.min(2))
    {
        t.blocks.push(Block::CachePoint(point()));
    }
}

/// Merges `provider_options_json["bedrock"]`: top-level keys replace the gateway's, except the fields it owns;
/// `additionalModelRequestFields` is merged key by key.
fn merge_provider_options(
    g: &pb::Generation,
    body: &mut Map<String, Value>,
) -> Result<(), BuildError> {
    let Some(options) =
        options::for_protocol(&g.provider_options_json, Protocol::Bedrock, &RESERVED)?
    else {
        return Ok(());
    };
    options::merge(body, options, &["additionalModelRequestFields"]);
    Ok(())
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
