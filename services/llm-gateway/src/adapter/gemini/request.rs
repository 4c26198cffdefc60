//! Request builder: unified [`pb::Generation`] → `streamGenerateContent` JSON body. A pure function of its inputs,
//! so a retried or replayed step sends the same bytes and hits Gemini's implicit prompt cache.
//!
//! Fixes applied here (docs/providers.md §4, §6), each because the API rejects the request otherwise:
//! - empty text is dropped, then turns left without parts: Gemini refuses an empty `parts` array and a part with
//!   no data field;
//! - consecutive turns of the same role are merged (tool results are `user` turns), and in a user turn the
//!   `functionResponse` parts come first, in the order of the calls they answer: Gemini pairs results with calls by
//!   name and position when there are no ids. A result is paired with a call of the previous model turn by call id,
//!   else by function name;
//! - a conversation that opens with a model turn gets a minimal user turn ([`LEADING_USER_TEXT`]) in front: `contents`
//!   must start with the user, and a function call turn must follow a user turn;
//! - a tool result's `response` is always an object: `{"output": …}`, or `{"error": …}` for a failed tool;
//! - call ids the decoder synthesized never go on the wire (see [`ReplayMetadata::function_call_id`]);
//! - thought signatures go back only to the model that produced them; on Gemini 3 the first `functionCall` of a
//!   model turn without a known signature gets [`SKIP_THOUGHT_SIGNATURE`];
//! - tool schemas are lowered to Gemini's OpenAPI subset ([`super::schema`]), and a tool without properties is
//!   declared without `parameters`;
//! - the thinking budget is clamped to the model family's range (2.5 Pro cannot turn thinking off);
//! - JSON output together with function calling is refused before Gemini 3, which rejects the combination.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::request_wire::{
    Content, FunctionCallingConfig, FunctionDeclaration, GenerateRequest, Part as WirePart,
    PartData, Response, SystemInstruction, Text, ToolConfig, Tools,
};
use super::{ReplayMetadata, SKIP_THOUGHT_SIGNATURE, schema};
use crate::adapter::common::encoding::{LEADING_USER_TEXT, base64, json_object, media_type};
use crate::adapter::common::features;
use crate::adapter::common::turns::{self, Role};
use crate::adapter::{BuildError, HttpRequest, Protocol, Target, pb};
use crate::catalog::ModelInfo;

use pb::file_part::Source;
use pb::part::Kind;

use super::generation_config::*;

/// Builds the HTTP request for `g` on `t`.
pub(super) fn build(g: &pb::Generation, t: &Target<'_>) -> Result<HttpRequest, BuildError> {
    let built = build_request(g, t);
    #[cfg(test)]
    crate::adapter::testing::golden::record_request(Protocol::Gemini, g, t, &built);
    built
}

/// What the function above builds, which it records for the golden tests (`adapter/testing/golden.rs`).
fn build_request(g: &pb::Generation, t: &Target<'_>) -> Result<HttpRequest, BuildError> {
    let model = t.model;
    let name = model.name.as_str();
    // The name goes into the URL path: anything but a plain model name could walk to another endpoint.
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err(BuildError::new(
            "generation.model",
            format!("`{name}` is not a valid Gemini model name (letters, digits, `.`, `-`, `_`)"),
        ));
    }
    let family = Family::of(name);

    let contents = contents(g, model, family)?;
    if contents.is_empty() {
        return Err(BuildError::new(
            "generation.messages",
            "no message has any content to send",
        ));
    }
    let system = join_non_empty(g.system.iter().map(String::as_str), "\n\n");
    let choice = tool_config(g)?;
    let tools = (!g.tools.is_empty()).then(|| tools(&g.tools)).transpose()?;
    let request = GenerateRequest {
        contents,
        system_instruction: (!system.is_empty()).then_some(SystemInstruction {
            parts: [Text { text: system }],
        }),
        tool_config: choice.filter(|_| tools.is_some()),
        tools,
        generation_config: generation_config(g, model, family)?,
    };
    let mut body = json_object(&request)?;
    merge_provider_options(&mut body, &g.provider_options_json)?;

    if body.contains_key("cachedContent")
        && ["systemInstruction", "tools", "toolConfig"]
            .iter()
            .any(|k| body.contains_key(*k))
    {
        // Gemini answers this combination with a 400: the cached content already holds them.
        return Err(BuildError::new(
            "generation.provider_options_json",
            "`gemini.cachedContent` cannot be combined with system sections or tools: Gemini takes them from the \
             cached content, so put them there",
        ));
    }

    Ok(HttpRequest {
        path: format!("/v1beta/models/{name}:streamGenerateContent?alt=sse"),
        headers: Vec::new(),
        body: Value::Object(body),
    })
}

/// `text` pieces joined by `sep`, skipping empty ones.
fn join_non_empty<'a>(pieces: impl Iterator<Item = &'a str>, sep: &str) -> String {
    let mut out = String::new();
    for piece in pieces.filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push_str(sep);
        }
        out.push_str(piece);
    }
    out
}

/// One turn of `contents`, before it is serialised (the assistant's turns are Gemini's `model` turns).
type Turn<'a> = turns::Turn<Part<'a>>;

/// One part of a turn, before it is serialised.
struct Part<'a> {
    wire: WirePart<'a>,
    /// The caller's call id on `functionCall` and `functionResponse` parts: what pairs a result with its call,
    /// whether or not the id itself goes on the wire.
    call_id: Option<&'a str>,
}

impl<'a> Part<'a> {
    fn plain(wire: WirePart<'a>) -> Part<'a> {
        Part {
            wire,
            call_id: None,
        }
    }

    fn call(wire: WirePart<'a>, call_id: &'a str) -> Part<'a> {
        Part {
            wire,
            call_id: (!call_id.is_empty()).then_some(call_id),
        }
    }
}

/// A part of `data` alone.
fn part(data: PartData<'_>) -> WirePart<'_> {
    WirePart {
        data,
        thought: None,
        thought_signature: None,
    }
}

/// What the request knows about one tool call of the conversation, by call id.
struct CallInfo<'a> {
    name: &'a str,
    /// Gemini's own id for the call, when it sent one.
    provider_id: Option<String>,
}

/// The `contents` array: turns with empty parts dropped, same-role turns merged, a user turn first, results ordered
/// by their calls.
fn contents<'a>(
    g: &'a pb::Generation,
    model: &ModelInfo,
    family: Family,
) -> Result<Vec<Content<'a>>, BuildError> {
    let calls = calls(g);
    let mut turns = turns::merged(g, |role, kind, field| {
        Ok(match (role, kind) {
            (pb::Role::User | pb::Role::Assistant, Kind::Text(t)) => {
                (!t.text.is_empty()).then(|| Part::plain(text_part(&t.text)))
            }
            (pb::Role::User | pb::Role::Assistant, Kind::File(f)) => {
                file_part(f, model, field)?.map(Part::plain)
            }
            (pb::Role::Assistant, Kind::Reasoning(r)) => reasoning_part(r, model).map(Part::plain),
            (pb::Role::Assistant, Kind::ToolCall(c)) => {
                Some(Part::call(call_part(c, model, field)?, &c.call_id))
            }
            (pb::Role::User | pb::Role::Tool, Kind::ToolResult(r)) => {
                Some(Part::call(response_part(r, &calls, field)?, &r.call_id))
            }
            // Tool messages hold results only; an empty text there is harmless and dropped.
            (pb::Role::Tool, Kind::Text(t)) if t.text.is_empty() => None,
            (role, _) => return Err(turns::not_allowed(field, role)),
        })
    })?;
    // Gemini refuses `contents` that open with a model turn (and a function call turn that follows no user turn).
    turns::lead_with_user(&mut turns, || Part::plain(text_part(LEADING_USER_TEXT)));
    for k in 1..turns.len() {
        if turns[k].role == Role::User && turns[k - 1].role == Role::Assistant {
            let called = called_functions(&turns[k - 1]);
            order_responses(&mut turns[k], &called);
        }
    }
    if family == Family::Gemini3 {
        for turn in turns.iter_mut().filter(|t| t.role == Role::Assistant) {
            sign_first_call(turn);
        }
    }

    Ok(turns
        .into_iter()
        .map(|t| Content {
            role: match t.role {
                Role::User => "user",
                Role::Assistant => "model",
            },
            parts: t.blocks.into_iter().map(|p| p.wire).collect(),
        })
        .collect())
}

/// The assistant's tool calls by call id, across the whole conversation: a result needs its call's function name
/// (when the caller left it out) and Gemini's own id for the call.
fn calls(g: &pb::Generation) -> HashMap<&str, CallInfo<'_>> {
    let mut calls = HashMap::new();
    for m in g
        .messages
        .iter()
        .filter(|m| m.role() == pb::Role::Assistant)
    {
        for p in &m.parts {
            if let Some(Kind::ToolCall(c)) = &p.kind
                && !c.call_id.is_empty()
            {
                calls.insert(
                    c.call_id.as_str(),
                    CallInfo {
                        name: c.tool_name.as_str(),
                        provider_id: gemini_meta(c.provider_metadata.as_ref())
                            .and_then(|m| m.function_call_id),
                    },
                );
            }
        }
    }
    calls
}

fn text_part(text: &str) -> WirePart<'_> {
    part(PartData::Text(Cow::Borrowed(text)))
}

/// The Gemini replay data on `meta`, when it was made by this protocol (any model).
fn gemini_meta(meta: Option<&pb::ProviderMetadata>) -> Option<ReplayMetadata> {
    meta.filter(|m| m.protocol == Protocol::Gemini.as_str())
        .map(|m| ReplayMetadata::from_json(&m.json))
}

/// The thought signature on `meta`, when it was made by this exact model: a signature is only valid there.
fn own_signature(meta: Option<&pb::ProviderMetadata>, model: &ModelInfo) -> Option<String> {
    let meta = meta.filter(|m| m.model == model.id)?;
    gemini_meta(Some(meta))?
        .thought_signature
        .filter(|s| !s.is_empty())
}

/// `inlineData` for bytes, `fileData` for a URL Gemini fetches itself. Empty data is dropped like empty text.
fn file_part<'a>(
    f: &'a pb::FilePart,
    model: &ModelInfo,
    field: &str,
) -> Result<Option<WirePart<'a>>, BuildError> {
    let media = media_type(f);
    if media.starts_with("image/") && !model.capabilities.vision {
        return Err(BuildError::new(
            format!("{field}.file"),
            "this model does not accept images",
        ));
    }
    let data = match &f.source {
        Some(Source::Data(d)) if d.is_empty() => return Ok(None),
        Some(Source::Data(d)) => {
            if media.is_empty() {
                // Gemini needs the type of inline data and guessing it from bytes is not the gateway's job.
                return Err(BuildError::new(
                    format!("{field}.file.media_type"),
                    "inline file data needs a media type",
                ));
            }
            PartData::InlineData {
                mime_type: media,
                data: base64(d),
            }
        }
        Some(Source::Url(u)) if u.trim().is_empty() => {
            return Err(BuildError::new(
                format!("{field}.file.url"),
                "the file has an empty url",
            ));
        }
        Some(Source::Url(u)) => PartData::FileData {
            mime_type: (!media.is_empty()).then_some(media),
            file_uri: u,
        },
        None => {
            return Err(BuildError::new(
                format!("{field}.file"),
                "the file has no data or url",
            ));
        }
    };
    Ok(Some(part(data)))
}

/// Replays reasoning as a thought part with its signature, only to the Gemini model that produced it; anything else
/// is dropped (Gemini does not read thoughts from other models, and a foreign signature fails validation). Thought
/// text without a signature is dropped too: Gemini ignores replayed thought text, so it would only cost tokens.
fn reasoning_part<'a>(r: &'a pb::ReasoningPart, model: &ModelInfo) -> Option<WirePart<'a>> {
    let signature = own_signature(r.provider_metadata.as_ref(), model)?;
    Some(WirePart {
        data: PartData::Text(Cow::Borrowed(&r.text)),
        // A signature-only block (see the module docs of `super`) came from a plain empty text part: it goes back
        // as one. The empty `text` is the part's data field, which Gemini requires.
        thought: (!r.text.is_empty()).then_some(true),
        thought_signature: Some(Cow::Owned(signature)),
    })
}

/// A `functionCall` part, with its thought signature when this model made it and Gemini's own id when it sent one.
fn call_part<'a>(
    c: &'a pb::ToolCallPart,
    model: &ModelInfo,
    field: &str,
) -> Result<WirePart<'a>, BuildError> {
    let args_field = || format!("{field}.tool_call.input_json");
    let args: Value = if c.input_json.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str(&c.input_json)
            .map_err(|e| BuildError::new(args_field(), format!("not valid JSON: {e}")))?
    };
    if !args.is_object() {
        return Err(BuildError::new(args_field(), "must be a JSON object"));
    }
    if c.tool_name.is_empty() {
        return Err(BuildError::new(
            format!("{field}.tool_call.tool_name"),
            "a tool call needs the tool name",
        ));
    }
    Ok(WirePart {
        data: PartData::FunctionCall {
            name: &c.tool_name,
            args,
            id: gemini_meta(c.provider_metadata.as_ref()).and_then(|m| m.function_call_id),
        },
        thought: None,
        thought_signature: own_signature(c.provider_metadata.as_ref(), model).map(Cow::Owned),
    })
}

/// A `functionResponse` part. `response` must be an object, so the output is wrapped as `{"output": …}`, or
/// `{"error": …}` for a failed tool (the shape python-genai documents).
fn response_part<'a>(
    r: &'a pb::ToolResultPart,
    calls: &HashMap<&str, CallInfo<'a>>,
    field: &str,
) -> Result<WirePart<'a>, BuildError> {
    let call = calls.get(r.call_id.as_str());
    let name = if r.tool_name.is_empty() {
        call.map(|c| c.name).unwrap_or_default()
    } else {
        r.tool_name.as_str()
    };
    if name.is_empty() {
        return Err(BuildError::new(
            format!("{field}.tool_result.tool_name"),
            "Gemini pairs results with calls by function name; set the tool name or a call_id of an earlier call",
        ));
    }
    Ok(part(PartData::FunctionResponse {
        name,
        response: if r.is_error {
            Response::Error(&r.output)
        } else {
            Response::Output(&r.output)
        },
        id: call.and_then(|c| c.provider_id.clone()),
    }))
}

/// `(caller's call id, name)` of every `functionCall` in a model turn, in order.
fn called_functions<'a>(turn: &Turn<'a>) -> Vec<(Option<&'a str>, &'a str)> {
    turn.blocks
        .iter()
        .filter_map(|p| match p.wire.data {
            PartData::FunctionCall { name, .. } => Some((p.call_id, name)),
            _ => None,
        })
        .collect()
}

/// Puts the `functionResponse` parts of a user turn first, in the order of the calls they answer (paired by the
/// caller's call id, else by name), unpaired responses after them and every other part last, each group in its
/// original order.
fn order_responses(turn: &mut Turn, called: &[(Option<&str>, &str)]) {
    let mut used = vec![false; called.len()];
    let mut keyed: Vec<((u8, usize), Part)> = Vec::with_capacity(turn.blocks.len());
    for (pos, part) in std::mem::take(&mut turn.blocks).into_iter().enumerate() {
        let responds_to = match part.wire.data {
            PartData::FunctionResponse { name, .. } => Some(name),
            _ => None,
        };
        let key = match responds_to {
            Some(name) => {
                let by_id = part.call_id.and_then(|id| {
                    (0..called.len()).find(|&k| !used[k] && called[k].0 == Some(id))
                });
                let slot =
                    by_id.or_else(|| (0..called.len()).find(|&k| !used[k] && called[k].1 == name));
                match slot {
                    Some(k) => {
                        used[k] = true;
                        (0, k)
                    }
                    None => (1, pos),
                }
            }
            None => (2, pos),
        };
        keyed.push((key, part));
    }
    keyed.sort_by_key(|(key, _)| *key);
    turn.blocks = keyed.into_iter().map(|(_, p)| p).collect();
}

/// Gemini 3 validates the signature of the first function call of each model turn ("Function call is missing a
/// thought_signature"). When it is unknown (history from another model), the documented sentinel goes there. Later
/// calls of the turn are left as they are: Gemini signs only the first of parallel calls.
fn sign_first_call(turn: &mut Turn) {
    if let Some(first) = turn
        .blocks
        .iter_mut()
        .find(|p| matches!(p.wire.data, PartData::FunctionCall { .. }))
    {
        first
            .wire
            .thought_signature
            .get_or_insert(Cow::Borrowed(SKIP_THOUGHT_SIGNATURE));
    }
}

/// Gemini's function-name rule (docs/providers.md §6.2): a letter or `_` first, then `[A-Za-z0-9_.:-]`.
fn valid_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
        && name.len() <= 64
}

/// `[{"functionDeclarations": […]}]`: every tool in one declaration list, parameters lowered to Gemini's schema.
fn tools(tools: &[pb::Tool]) -> Result<[Tools<'_>; 1], BuildError> {
    let mut declarations = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        if !valid_function_name(&tool.name) {
            return Err(BuildError::new(
                format!("generation.tools[{i}].name"),
                format!(
                    "`{}` is not a valid Gemini function name: it must start with a letter or `_` and use only \
                     letters, digits, `_`, `.`, `:` and `-` (at most 64)",
                    tool.name
                ),
            ));
        }
        let field = format!("generation.tools[{i}].input_schema_json");
        declarations.push(FunctionDeclaration {
            name: &tool.name,
            description: (!tool.description.is_empty()).then_some(tool.description.as_str()),
            parameters: schema::parameters(&tool.input_schema_json, &field)?,
        });
    }
    Ok([Tools {
        function_declarations: declarations,
    }])
}

/// Whether the request needs function calling mode `VALIDATED`: a tool the caller marked strict, on a choice that
/// leaves the model free to answer in text (the default or AUTO). `VALIDATED` is AUTO with every call constrained
/// to its schema; `ANY` (a required or named tool) is constrained already, and NONE makes no call. Returns the
/// first strict tool, for a refusal to name.
pub(crate) fn validated_mode(g: &pb::Generation) -> Result<Option<usize>, BuildError> {
    use turns::ToolChoice;
    let free = matches!(
        turns::tool_choice(g)?,
        ToolChoice::Default | ToolChoice::Auto
    );
    Ok(features::first_strict_tool(g).filter(|_| free))
}

/// `toolConfig`, `None` for Gemini's default (AUTO). Validated even without tools, so a bad choice is reported
/// whatever else the request holds. Gemini has no switch for one call per step, so that is refused.
fn tool_config(g: &pb::Generation) -> Result<Option<ToolConfig<'_>>, BuildError> {
    use turns::ToolChoice;
    features::refuse_one_call_per_step(g, "Gemini")?;
    let (mode, allowed) = if validated_mode(g)?.is_some() {
        ("VALIDATED", None)
    } else {
        match turns::tool_choice(g)? {
            ToolChoice::Default => return Ok(None),
            ToolChoice::Auto => ("AUTO", None),
            ToolChoice::None => ("NONE", None),
            ToolChoice::Required => ("ANY", None),
            ToolChoice::Tool(name) => ("ANY", Some([name])),
        }
    };
    Ok(Some(ToolConfig {
        function_calling_config: FunctionCallingConfig {
            mode,
            allowed_function_names: allowed,
        },
    }))
}
