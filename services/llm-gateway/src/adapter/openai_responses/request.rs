//! Request builder: unified [`pb::Generation`] → Responses JSON body. A pure function of its inputs, so a retried
//! step sends the same bytes and hits the provider's prompt cache.
//!
//! Fixes applied here (docs/providers.md §2, §6):
//! - empty text parts, empty user turns and empty assistant turns are dropped;
//! - tool calls and their results are paired by the call's `call_id`, passed through unchanged: Responses has no
//!   40-character limit on it, and rewriting would break the pairing with ids the provider itself generated;
//! - reasoning is replayed as a `reasoning` item only to the model that produced it, and only with its
//!   `encrypted_content` (with `store: false` an id alone refers to nothing);
//! - reasoning models get no `temperature` / `top_p`, which they reject;
//! - parameters Responses does not have (`stop`, `seed`, `top_k`) are dropped.

use serde_json::{Map, Value, json};

use super::ReasoningMetadata;
use crate::adapter::encoding::OpenAiFile;
use crate::adapter::features::{self, Output};
use crate::adapter::{BuildError, HttpRequest, Protocol, Target, options, pb};
use crate::catalog::ModelInfo;

use crate::adapter::encoding::json_object;
use crate::adapter::openai_common::{
    Choice, call_arguments, function_tool, json_schema_output, tool_results, wrong_part,
};
use pb::part::Kind;

/// Body keys the gateway sets itself; `provider_options_json` may not override them. `store` is among them because
/// a stored response would make later steps depend on provider-side state the gateway promises not to keep.
const OWNED_KEYS: [&str; 7] = [
    "model",
    "input",
    "instructions",
    "stream",
    "tools",
    "tool_choice",
    "store",
];

/// What `include` asks for on reasoning models: the encrypted reasoning, so it can be replayed statelessly.
const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

/// Builds the HTTP request for `g` on `t` (see the module docs for the fixes applied).
pub(super) fn build(g: &pb::Generation, t: &Target<'_>) -> Result<HttpRequest, BuildError> {
    let built = build_request(g, t);
    #[cfg(test)]
    crate::adapter::golden::record_request(Protocol::OpenaiResponses, g, t, &built);
    built
}

/// What the function above builds, which it records for the golden tests (`adapter/golden.rs`).
fn build_request(g: &pb::Generation, t: &Target<'_>) -> Result<HttpRequest, BuildError> {
    let caps = &t.model.capabilities;
    let mut body = Map::new();
    body.insert("model".into(), Value::String(t.model.name.clone()));

    let instructions = join_non_empty(g.system.iter().map(String::as_str), "\n\n");
    if !instructions.is_empty() {
        body.insert("instructions".into(), Value::String(instructions));
    }
    body.insert("input".into(), Value::Array(input(g, t.model)?));

    // Validated even without tools, so a bad tool choice is reported whatever else the request holds.
    let choice = tool_choice(g)?;
    if !g.tools.is_empty() {
        body.insert("tools".into(), tools(&g.tools, caps.strict_schemas)?);
        // OpenAI rejects `tool_choice` without `tools`, so it only goes out alongside them.
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
        if features::one_call_per_step(g) {
            body.insert("parallel_tool_calls".into(), Value::Bool(false));
        }
    }

    if let Some(format) = text_format(g, caps.strict_schemas)? {
        body.insert("text".into(), json!({ "format": format }));
    }

    sampling(g, t, &mut body);

    if caps.reasoning {
        body.insert("reasoning".into(), reasoning(g));
        body.insert("include".into(), json!([ENCRYPTED_REASONING]));
    }
    body.insert("store".into(), Value::Bool(false));
    body.insert("stream".into(), Value::Bool(true));

    if let Some(ctx) = &g.context
        && !ctx.session_id.is_empty()
    {
        body.insert(
            "prompt_cache_key".into(),
            Value::String(ctx.session_id.clone()),
        );
    }

    merge_provider_options(&mut body, &g.provider_options_json)?;

    Ok(HttpRequest {
        path: super::RESPONSES_PATH.to_string(),
        headers: Vec::new(),
        body: Value::Object(body),
    })
}

/// `pieces` joined by `sep`, skipping empty ones.
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

/// The `input` items, in conversation order.
fn input(g: &pb::Generation, model: &ModelInfo) -> Result<Vec<Value>, BuildError> {
    let mut out = Vec::with_capacity(g.messages.len());
    for (i, m) in g.messages.iter().enumerate() {
        match pb::Role::try_from(m.role).unwrap_or(pb::Role::Unspecified) {
            pb::Role::User => {
                if let Some(item) = user_item(i, m)? {
                    out.push(item);
                }
            }
            pb::Role::Assistant => assistant_items(i, m, model, &mut out)?,
            pb::Role::Tool => tool_outputs(i, m, &mut out)?,
            pb::Role::Unspecified => {
                return Err(BuildError::new(
                    format!("generation.messages[{i}].role"),
                    "the role must be user, assistant or tool",
                ));
            }
        }
    }
    Ok(out)
}

/// A user message item with typed content parts; `None` when nothing is left once empty parts are dropped.
fn user_item(i: usize, m: &pb::Message) -> Result<Option<Value>, BuildError> {
    let mut content = Vec::with_capacity(m.parts.len());
    for (j, part) in m.parts.iter().enumerate() {
        match &part.kind {
            Some(Kind::Text(t)) if !t.text.is_empty() => {
                content.push(json!({ "type": "input_text", "text": t.text }));
            }
            Some(Kind::Text(_)) => {}
            Some(Kind::File(f)) => content.push(file_part(i, j, f)?),
            Some(Kind::Reasoning(_)) => return Err(wrong_part(i, j, "reasoning", "user")),
            Some(Kind::ToolCall(_)) => return Err(wrong_part(i, j, "tool call", "user")),
            Some(Kind::ToolResult(_)) => return Err(wrong_part(i, j, "tool result", "user")),
            // A part with nothing in it is dropped like empty text: providers reject bare `{}` parts.
            None => {}
        }
    }
    if content.is_empty() {
        return Ok(None);
    }
    Ok(Some(json!({ "role": "user", "content": content })))
}

/// An image becomes `input_image` (inline data URL or the caller's URL); any other file `input_file`, inline with a
/// filename (which the API requires alongside `file_data`) or by `file_url`.
fn file_part(i: usize, j: usize, f: &pb::FilePart) -> Result<Value, BuildError> {
    Ok(match OpenAiFile::of(i, j, f)? {
        OpenAiFile::ImageUrl(url) => json!({ "type": "input_image", "image_url": url }),
        OpenAiFile::ImageData(url) => json!({ "type": "input_image", "image_url": url }),
        OpenAiFile::FileData { filename, data_url } => json!({
            "type": "input_file",
            "filename": filename,
            "file_data": data_url,
        }),
        OpenAiFile::FileUrl { filename, url } => {
            let mut part = Map::new();
            part.insert("type".into(), Value::from("input_file"));
            if !filename.is_empty() {
                part.insert("filename".into(), Value::from(filename));
            }
            part.insert("file_url".into(), Value::from(url));
            Value::Object(part)
        }
    })
}

/// An assistant turn becomes several items, in the turn's order: text runs as `message` items, replayable reasoning
/// as `reasoning` items, tool calls as `function_call` items. Order matters: the API wants a reasoning item directly
/// before the output it led to.
fn assistant_items(
    i: usize,
    m: &pb::Message,
    model: &ModelInfo,
    out: &mut Vec<Value>,
) -> Result<(), BuildError> {
    let mut text = String::new();
    for (j, part) in m.parts.iter().enumerate() {
        match &part.kind {
            // Joined with nothing in between: the parts are pieces of the model's own output, which some providers
            // stream as many small blocks; a separator would land mid-sentence.
            Some(Kind::Text(t)) => text.push_str(&t.text),
            Some(Kind::Reasoning(r)) => {
                if let Some(item) = reasoning_item(r, model) {
                    flush_text(&mut text, out);
                    out.push(item);
                }
            }
            Some(Kind::ToolCall(c)) => {
                flush_text(&mut text, out);
                out.push(function_call(i, j, c)?);
            }
            // A file the model produced elsewhere (a Gemini image, say) has no assistant-side input type here.
            // Dropped rather than refused, so that a conversation can move to this provider mid-way.
            Some(Kind::File(_)) | None => {}
            Some(Kind::ToolResult(_)) => {
                return Err(wrong_part(i, j, "tool result", "assistant"));
            }
        }
    }
    flush_text(&mut text, out);
    Ok(())
}

/// Emits the pending assistant text as one `message` item, unless it is empty.
fn flush_text(text: &mut String, out: &mut Vec<Value>) {
    if text.is_empty() {
        return;
    }
    out.push(json!({
        "role": "assistant",
        "content": [{ "type": "output_text", "text": std::mem::take(text) }],
    }));
}

/// A `reasoning` item for a part this protocol and this exact model produced, with its encrypted content; `None`
/// otherwise. Encrypted reasoning is only valid for the model that wrote it, and without the encrypted content the
/// item cannot be resolved under `store: false`.
fn reasoning_item(r: &pb::ReasoningPart, model: &ModelInfo) -> Option<Value> {
    let meta = r.provider_metadata.as_ref()?;
    if meta.protocol != Protocol::OpenaiResponses.as_str() || meta.model != model.id {
        return None;
    }
    let replay: ReasoningMetadata = serde_json::from_str(&meta.json).ok()?;
    let encrypted = replay.encrypted_content.filter(|e| !e.is_empty())?;
    if replay.item_id.is_empty() {
        return None;
    }
    // The decoder joins the item's summary parts into one text, so it goes back as one summary part; the model
    // reads the encrypted content, the summary is only what was shown.
    let summary: Vec<Value> = if r.text.is_empty() {
        Vec::new()
    } else {
        vec![json!({ "type": "summary_text", "text": r.text })]
    };
    Some(json!({
        "type": "reasoning",
        "id": replay.item_id,
        "encrypted_content": encrypted,
        "summary": summary,
    }))
}

/// A `function_call` item. Its `call_id` is the one the decoder reported (the provider's `call_…`), so the
/// `function_call_output` quoting the same id pairs with it.
fn function_call(i: usize, j: usize, c: &pb::ToolCallPart) -> Result<Value, BuildError> {
    let arguments = call_arguments(i, j, c)?;
    Ok(json!({
        "type": "function_call",
        "call_id": c.call_id,
        "name": c.tool_name,
        "arguments": arguments,
    }))
}

/// One `function_call_output` item per result, in order ([`tool_results`]).
fn tool_outputs(i: usize, m: &pb::Message, out: &mut Vec<Value>) -> Result<(), BuildError> {
    tool_results(
        i,
        m,
        out,
        |r| json!({ "type": "function_call_output", "call_id": r.call_id, "output": r.output }),
    )
}

/// The flat `tools` array ([`function_tool`]). `strict` is sent explicitly either way: Responses defaults function
/// tools to strict mode, which rejects any schema that does not list every property in `required` and forbid
/// additional properties, and callers' schemas rarely do.
fn tools(tools: &[pb::Tool], strict: bool) -> Result<Value, BuildError> {
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let mut function = Map::new();
        function.insert("type".into(), Value::from("function"));
        function.extend(json_object(&function_tool(i, tool, strict, true)?)?);
        out.push(Value::Object(function));
    }
    Ok(Value::Array(out))
}

/// The `tool_choice` value ([`tool_choice_with`]); a named tool is flat, like the tools themselves.
fn tool_choice(g: &pb::Generation) -> Result<Option<Value>, BuildError> {
    Ok(
        crate::adapter::openai_common::tool_choice(g)?.map(|c| match c {
            Choice::Mode(mode) => Value::from(mode),
            Choice::Named(name) => json!({ "type": "function", "name": name }),
        }),
    )
}

/// `text.format` for JSON-object output, or for JSON Schema output ([`json_schema_output`]).
fn text_format(g: &pb::Generation, strict: bool) -> Result<Option<Value>, BuildError> {
    if features::output(g) == Output::JsonObject {
        return Ok(Some(json!({ "type": "json_object" })));
    }
    Ok(json_schema_output(g, strict)?.map(|(name, schema, strict)| {
        json!({ "type": "json_schema", "name": name, "schema": schema, "strict": strict })
    }))
}

/// Sampling parameters, minus the ones the model or the protocol rejects.
fn sampling(g: &pb::Generation, t: &Target<'_>, body: &mut Map<String, Value>) {
    let caps = &t.model.capabilities;
    let Some(s) = &g.sampling else {
        return;
    };
    // Reasoning models reject temperature and top_p outright (docs/providers.md §1, §6.6).
    if !caps.reasoning {
        if caps.temperature
            && let Some(temperature) = s.temperature
        {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(top_p) = s.top_p {
            body.insert("top_p".into(), json!(top_p));
        }
    }
    if let Some(max) = s.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    // `stop_sequences`, `seed` and `top_k` have no Responses parameter; the API would reject them as unknown, so they
    // are dropped like any other parameter a model does not take.
}

/// `reasoning: {effort, summary: "auto"}`. The summary is always asked for: it is the only reasoning text OpenAI
/// models show, and without it reasoning blocks would arrive empty.
fn reasoning(g: &pb::Generation) -> Value {
    let mut out = Map::new();
    let effort = g
        .reasoning
        .as_ref()
        .and_then(|r| super::super::openai_common::effort_name(r.effort));
    if let Some(effort) = effort {
        out.insert("effort".into(), Value::from(effort));
    }
    out.insert("summary".into(), Value::from("auto"));
    Value::Object(out)
}

/// Merges `{"openai_responses":{...}}` from the caller's provider options into the body. Keys the gateway owns are
/// refused rather than silently ignored, so a caller learns at once that the option has no effect. A caller's
/// `include` list is extended with the gateway's entries rather than replacing them, so asking for extra output
/// (logprobs, say) does not silently turn off reasoning replay.
fn merge_provider_options(body: &mut Map<String, Value>, json: &str) -> Result<(), BuildError> {
    let Some(mut options) = options::for_protocol(json, Protocol::OpenaiResponses, &OWNED_KEYS)?
    else {
        return Ok(());
    };
    if let (Some(Value::Array(ours)), Some(Value::Array(theirs))) =
        (body.get("include"), options.get_mut("include"))
    {
        for entry in ours {
            if !theirs.contains(entry) {
                theirs.push(entry.clone());
            }
        }
    }
    body.extend(options);
    Ok(())
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
