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

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::ReasoningMetadata;
use super::request_wire::{Content, Format, Item, Reasoning, ResponsesRequest, Summary, Text};
use crate::adapter::common::encoding::{OpenAiFile, json_object};
use crate::adapter::common::features::{self, Output};
use crate::adapter::common::openai::{
    call_arguments, json_schema_output, tool_fields, tool_results, wrong_part,
};
use crate::adapter::{BuildError, HttpRequest, Protocol, Target, common::options, pb};
use crate::catalog::ModelInfo;

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
    crate::adapter::testing::golden::record_request(Protocol::OpenaiResponses, g, t, &built);
    built
}

/// What the function above builds, which it records for the golden tests (`adapter/testing/golden.rs`).
fn build_request(g: &pb::Generation, t: &Target<'_>) -> Result<HttpRequest, BuildError> {
    let caps = &t.model.capabilities;
    let instructions = join_non_empty(g.system.iter().map(String::as_str), "\n\n");
    // Reasoning models reject temperature and top_p outright (docs/providers.md §1, §6.6). `stop_sequences`, `seed`
    // and `top_k` have no Responses parameter; the API would reject them as unknown, so they are dropped like any
    // other parameter a model does not take.
    let sampling = g.sampling.as_ref();
    let sampled = sampling.filter(|_| !caps.reasoning);
    let request = ResponsesRequest {
        model: &t.model.name,
        instructions: (!instructions.is_empty()).then_some(instructions),
        input: input(g, t.model)?,
        // `strict` is sent explicitly either way: Responses defaults function tools to strict mode, which rejects any
        // schema that does not list every property in `required` and forbid additional properties, and callers'
        // schemas rarely do. Tools and a named choice are flat.
        tools: tool_fields(g, caps.strict_schemas, true, |f| f, |n| n)?,
        text: text_format(g, caps.strict_schemas)?.map(|format| Text { format }),
        temperature: sampled
            .and_then(|s| s.temperature)
            .filter(|_| caps.temperature),
        top_p: sampled.and_then(|s| s.top_p),
        max_output_tokens: sampling.and_then(|s| s.max_output_tokens),
        reasoning: caps.reasoning.then(|| reasoning(g)),
        include: caps.reasoning.then_some([ENCRYPTED_REASONING]),
        store: false,
        stream: true,
        prompt_cache_key: g
            .context
            .as_ref()
            .map(|ctx| ctx.session_id.as_str())
            .filter(|id| !id.is_empty()),
    };
    let mut body = json_object(&request)?;
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
fn input<'a>(g: &'a pb::Generation, model: &ModelInfo) -> Result<Vec<Item<'a>>, BuildError> {
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
fn user_item(i: usize, m: &pb::Message) -> Result<Option<Item<'_>>, BuildError> {
    let mut content = Vec::with_capacity(m.parts.len());
    for (j, part) in m.parts.iter().enumerate() {
        match &part.kind {
            Some(Kind::Text(t)) if !t.text.is_empty() => {
                content.push(Content::InputText { text: &t.text });
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
    Ok(Some(Item::Message {
        role: "user",
        content,
    }))
}

/// An image becomes `input_image` (inline data URL or the caller's URL); any other file `input_file`, inline with a
/// filename (which the API requires alongside `file_data`) or by `file_url`.
fn file_part(i: usize, j: usize, f: &pb::FilePart) -> Result<Content<'_>, BuildError> {
    Ok(match OpenAiFile::of(i, j, f)? {
        OpenAiFile::ImageUrl(url) => Content::InputImage {
            image_url: Cow::Borrowed(url),
        },
        OpenAiFile::ImageData(url) => Content::InputImage {
            image_url: Cow::Owned(url),
        },
        OpenAiFile::FileData { filename, data_url } => Content::InputFile {
            filename: Some(Cow::Owned(filename)),
            file_data: Some(data_url),
            file_url: None,
        },
        OpenAiFile::FileUrl { filename, url } => Content::InputFile {
            filename: (!filename.is_empty()).then_some(Cow::Borrowed(filename)),
            file_data: None,
            file_url: Some(url),
        },
    })
}

/// An assistant turn becomes several items, in the turn's order: text runs as `message` items, replayable reasoning
/// as `reasoning` items, tool calls as `function_call` items. Order matters: the API wants a reasoning item directly
/// before the output it led to.
fn assistant_items<'a>(
    i: usize,
    m: &'a pb::Message,
    model: &ModelInfo,
    out: &mut Vec<Item<'a>>,
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
fn flush_text(text: &mut String, out: &mut Vec<Item<'_>>) {
    if text.is_empty() {
        return;
    }
    out.push(Item::Message {
        role: "assistant",
        content: vec![Content::OutputText {
            text: std::mem::take(text),
        }],
    });
}

/// A `reasoning` item for a part this protocol and this exact model produced, with its encrypted content; `None`
/// otherwise. Encrypted reasoning is only valid for the model that wrote it, and without the encrypted content the
/// item cannot be resolved under `store: false`.
fn reasoning_item<'a>(r: &'a pb::ReasoningPart, model: &ModelInfo) -> Option<Item<'a>> {
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
    let summary = if r.text.is_empty() {
        Vec::new()
    } else {
        vec![Summary {
            kind: "summary_text",
            text: &r.text,
        }]
    };
    Some(Item::Reasoning {
        kind: "reasoning",
        id: replay.item_id,
        encrypted_content: encrypted,
        summary,
    })
}

/// A `function_call` item. Its `call_id` is the one the decoder reported (the provider's `call_…`), so the
/// `function_call_output` quoting the same id pairs with it.
fn function_call(i: usize, j: usize, c: &pb::ToolCallPart) -> Result<Item<'_>, BuildError> {
    Ok(Item::FunctionCall {
        kind: "function_call",
        call_id: &c.call_id,
        name: &c.tool_name,
        arguments: call_arguments(i, j, c)?,
    })
}

/// One `function_call_output` item per result, in order ([`tool_results`]).
fn tool_outputs<'a>(
    i: usize,
    m: &'a pb::Message,
    out: &mut Vec<Item<'a>>,
) -> Result<(), BuildError> {
    tool_results(i, m, out, |r| Item::FunctionCallOutput {
        kind: "function_call_output",
        call_id: &r.call_id,
        output: &r.output,
    })
}

/// `text.format` for JSON-object output, or for JSON Schema output ([`json_schema_output`]).
fn text_format(g: &pb::Generation, strict: bool) -> Result<Option<Format<'_>>, BuildError> {
    if features::output(g) == Output::JsonObject {
        return Ok(Some(Format::JsonObject));
    }
    Ok(
        json_schema_output(g, strict)?.map(|(name, schema, strict)| Format::JsonSchema {
            name,
            schema,
            strict,
        }),
    )
}

/// `reasoning: {effort, summary: "auto"}`. The summary is always asked for: it is the only reasoning text OpenAI
/// models show, and without it reasoning blocks would arrive empty.
fn reasoning(g: &pb::Generation) -> Reasoning {
    Reasoning {
        effort: g
            .reasoning
            .as_ref()
            .and_then(|r| crate::adapter::common::openai::effort_name(r.effort)),
        summary: "auto",
    }
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
    // `text` and `reasoning` are objects the gateway fills too (`format`, `effort`): an option naming one of their
    // keys (`verbosity`, `summary`) joins them rather than replacing what the gateway wrote.
    for key in ["text", "reasoning"] {
        if let (Some(Value::Object(ours)), Some(Value::Object(theirs))) =
            (body.get_mut(key), options.get_mut(key))
        {
            ours.extend(std::mem::take(theirs));
            options.remove(key);
        }
    }
    body.extend(options);
    Ok(())
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
