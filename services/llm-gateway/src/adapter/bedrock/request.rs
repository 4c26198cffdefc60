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

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::adapter::encoding::{LEADING_USER_TEXT, base64, media_type, object_schema, tool_input};
use crate::adapter::features::{self, Output};
use crate::adapter::turns::{self, Role};
use crate::adapter::{BuildError, Protocol, Target, anthropic, ids, options, pb};
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
type Turn = turns::Turn<Value>;

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
    crate::adapter::golden::record(Protocol::Bedrock, g, target.model, built.as_ref());
    built
}

/// What the function above builds, which it records for the golden tests (`adapter/golden.rs`).
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
    let forced = choice.as_ref().is_some_and(|c| c.get("auto").is_none());
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
    let mut system: Vec<Value> = g
        .system
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| json!({"text": s}))
        .collect();
    if model.capabilities.prompt_cache {
        place_cache_points(&mut tools, &mut system, &mut turns);
    }

    let mut body = Map::new();
    body.insert(
        "messages".into(),
        Value::Array(
            turns
                .into_iter()
                .map(|t| {
                    let role = match t.role {
                        Role::User => "user",
                        Role::Assistant => "assistant",
                    };
                    json!({"role": role, "content": t.blocks})
                })
                .collect(),
        ),
    );
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    insert_tool_config(g, tools, choice, &mut body);
    let mut additional = Map::new();
    body.insert(
        "inferenceConfig".into(),
        inference_config(g, model, max_tokens, budget.is_some(), &mut additional),
    );
    if let Some(b) = budget {
        additional.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": b}),
        );
    }
    if !additional.is_empty() {
        body.insert(
            "additionalModelRequestFields".into(),
            Value::Object(additional),
        );
    }
    merge_provider_options(g, &mut body)?;
    Ok(Value::Object(body))
}

/// `toolConfig`, unless there are no tools or the choice is NONE; with NONE it is still sent when the history holds
/// tool blocks (Converse refuses them without it), without a `toolChoice`.
fn insert_tool_config(
    g: &pb::Generation,
    tools: Vec<Value>,
    choice: Option<Value>,
    body: &mut Map<String, Value>,
) {
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
        return;
    }
    let mut config = Map::new();
    config.insert("tools".into(), Value::Array(tools));
    if let Some(c) = choice {
        config.insert("toolChoice".into(), c);
    }
    body.insert("toolConfig".into(), Value::Object(config));
}

/// Translates the conversation into alternating turns.
fn turns(g: &pb::Generation, model: &ModelInfo, replay: bool) -> Result<Vec<Turn>, BuildError> {
    let mut turns = turns::merged(g, |role, kind, field| {
        Ok(match (role, kind) {
            (pb::Role::User | pb::Role::Assistant, Kind::Text(t)) => {
                (!t.text.trim().is_empty()).then(|| json!({"text": t.text}))
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
    turns::trim_prefill(&mut turns, |b| turns::string(b.get_mut("text")));
    turns::lead_with_user(&mut turns, || json!({"text": LEADING_USER_TEXT}));
    Ok(turns)
}

fn is_tool_result(b: &Value) -> bool {
    b.get("toolResult").is_some()
}

/// With thinking on, the assistant turn opening the current tool loop must start with a reasoning block.
fn thinking_fits_history(turns: &[Turn]) -> bool {
    turns::loop_opens_with(turns, is_tool_result, |b| {
        b.get("reasoningContent").is_some()
    })
}

fn reasoning_block(r: &pb::ReasoningPart, model: &ModelInfo) -> Option<Value> {
    let meta = r.provider_metadata.as_ref()?;
    if meta.protocol != Protocol::Bedrock.as_str() || meta.model != model.id {
        return None;
    }
    let replay: ReplayMeta = serde_json::from_str(&meta.json).ok()?;
    if let Some(data) = replay.redacted.filter(|d| !d.is_empty()) {
        return Some(json!({"reasoningContent": {"redactedContent": data}}));
    }
    let signature = replay.signature.filter(|s| !s.is_empty())?;
    Some(json!({"reasoningContent": {"reasoningText": {"text": r.text, "signature": signature}}}))
}

fn tool_use_block(c: &pb::ToolCallPart, field: &str) -> Result<Value, BuildError> {
    let input = tool_input(c, field)?;
    Ok(json!({"toolUse": {
        "toolUseId": ids::bedrock(&c.call_id),
        "name": c.tool_name,
        "input": input,
    }}))
}

fn tool_result_block(r: &pb::ToolResultPart) -> Value {
    let mut result = Map::new();
    result.insert(
        "toolUseId".into(),
        Value::from(ids::bedrock(&r.call_id).as_ref()),
    );
    // `content` is required and a text block may not be blank.
    let text = if r.output.trim().is_empty() {
        "(empty)"
    } else {
        r.output.as_str()
    };
    result.insert("content".into(), json!([{"text": text}]));
    if r.is_error {
        result.insert("status".into(), Value::from("error"));
    }
    json!({"toolResult": result})
}

/// `image` for png/jpeg/gif/webp bytes, `document` for the document formats Converse reads. URLs are refused:
/// Converse fetches only from S3.
fn file_block(
    f: &pb::FilePart,
    model: &ModelInfo,
    field: &str,
) -> Result<Option<Value>, BuildError> {
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
        return Ok(Some(
            json!({"image": {"format": format, "source": {"bytes": base64(data)}}}),
        ));
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
    Ok(Some(json!({"document": {
        "format": format,
        "name": document_name(&f.filename),
        "source": {"bytes": base64(data)},
    }})))
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
fn tool_config(g: &pb::Generation) -> Result<(Vec<Value>, Option<Value>), BuildError> {
    use turns::ToolChoice;
    let mut tools = Vec::with_capacity(g.tools.len());
    for (i, t) in g.tools.iter().enumerate() {
        let schema = object_schema(t, i)?;
        let mut spec = Map::new();
        spec.insert("name".into(), Value::from(t.name.as_str()));
        if !t.description.is_empty() {
            spec.insert("description".into(), Value::from(t.description.as_str()));
        }
        spec.insert("inputSchema".into(), json!({"json": schema}));
        // Bedrock's structured outputs: the call's input constrained to the schema, on the models that have them
        // (the others answer with a ValidationException, relayed as INVALID_ARGUMENT).
        if t.strict {
            spec.insert("strict".into(), Value::Bool(true));
        }
        tools.push(json!({"toolSpec": spec}));
    }
    let choice = match turns::tool_choice(g)? {
        ToolChoice::Default | ToolChoice::None => None,
        ToolChoice::Auto => Some(json!({"auto": {}})),
        ToolChoice::Required => Some(json!({"any": {}})),
        ToolChoice::Tool(name) => Some(json!({"tool": {"name": name}})),
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

/// `inferenceConfig`; Claude's `top_k` goes to `additional` (Converse has no field for it).
fn inference_config(
    g: &pb::Generation,
    model: &ModelInfo,
    max_tokens: u64,
    thinking: bool,
    additional: &mut Map<String, Value>,
) -> Value {
    let caps = model.capabilities;
    let mut config = Map::new();
    config.insert("maxTokens".into(), Value::from(max_tokens));
    let Some(s) = &g.sampling else {
        return Value::Object(config);
    };
    let s = anthropic::ClaudeSampling::new(s, &caps, thinking, is_claude(&model.name));
    if let Some(t) = s.temperature {
        config.insert("temperature".into(), Value::from(t));
    }
    if let Some(p) = s.top_p {
        config.insert("topP".into(), Value::from(p));
    }
    if let Some(k) = s.top_k {
        additional.insert("top_k".into(), Value::from(k));
    }
    if !s.stop_sequences.is_empty() {
        config.insert("stopSequences".into(), json!(s.stop_sequences));
    }
    Value::Object(config)
}

/// Cache points, at most [`MAX_CACHE_POINTS`]: after the tools, after the system blocks, at the end of the last two
/// user turns (the same policy as the Anthropic adapter, in Converse's own block).
fn place_cache_points(tools: &mut Vec<Value>, system: &mut Vec<Value>, turns: &mut [Turn]) {
    let point = || json!({"cachePoint": {"type": "default"}});
    let mut left = MAX_CACHE_POINTS;
    if !tools.is_empty() {
        tools.push(point());
        left -= 1;
    }
    if !system.is_empty() {
        system.push(point());
        left -= 1;
    }
    for t in turns
        .iter_mut()
        .rev()
        .filter(|t| t.role == Role::User)
        .take(left.min(2))
    {
        t.blocks.push(point());
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
