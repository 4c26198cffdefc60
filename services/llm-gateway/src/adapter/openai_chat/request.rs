//! Request builder: unified [`pb::Generation`] → Chat Completions JSON body. A pure function of its inputs.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::request_wire::{
    Assistant, CalledFunction, ChatRequest, File, ImageUrl, JsonSchema, Message, Part,
    ResponseFormat, Sampling, StreamOptions, ToolCall,
};
use crate::adapter::common::encoding::{OpenAiFile, json_object};
use crate::adapter::common::features::{self, Output};
use crate::adapter::common::openai::{
    Nested, call_arguments, json_schema_output, part_field, tool_fields, tool_results, wrong_part,
};
use crate::adapter::{BuildError, HttpRequest, Protocol, Target, common::ids, common::options, pb};
use crate::catalog::{Capabilities, ModelInfo, ReasoningReplay, ToolCallIds};
use pb::part::Kind;

/// Appended to the provider base URL, which already ends in `/v1` as with the OpenAI SDK.
const PATH: &str = "/chat/completions";

/// Body keys the gateway sets itself; `provider_options_json` may not override them, or a caller could turn off
/// streaming or usage reporting, or smuggle in tools the gateway does not know about.
const OWNED_KEYS: [&str; 6] = [
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
];

/// Chat Completions nests a function's fields under `function`, in `tools` and in a named `tool_choice` alike.
fn nested<F>(function: F) -> Nested<F> {
    Nested { function }
}

/// Separates the caller's text parts in one user message when they are sent as a single string: they are separate
/// pieces (a pasted document and a question, say) that must not run into each other.
const USER_TEXT_SEPARATOR: &str = "\n\n";

/// Parameters reasoning models reject (`unsupported_parameter` / `unsupported_value`, docs/providers.md §1).
/// The typed sampling fields are already left out for them; these are dropped from `provider_options_json` too,
/// because provider options are keyed by protocol, not by model: options meant for `gpt-4o` reach `o3` when it is
/// the fallback, or when a hook adds them for every `openai/*` model.
const REJECTED_BY_REASONING_MODELS: [&str; 7] = [
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
];

/// Builds the HTTP request for `g` on `t` (see the module docs of [`super`] for the fixes applied).
pub(super) fn build(g: &pb::Generation, t: &Target<'_>) -> Result<HttpRequest, BuildError> {
    let built = build_request(g, t);
    #[cfg(test)]
    crate::adapter::testing::golden::record_request(Protocol::OpenaiChat, g, t, &built);
    built
}

/// What the function above builds, which it records for the golden tests (`adapter/testing/golden.rs`).
fn build_request(g: &pb::Generation, t: &Target<'_>) -> Result<HttpRequest, BuildError> {
    let caps = &t.model.capabilities;
    let request = ChatRequest {
        model: &t.model.name,
        messages: messages(g, t.model)?,
        tools: tool_fields(g, caps.strict_schemas, false, nested, nested)?,
        response_format: response_format(g, caps.strict_schemas)?,
        sampling: sampling(g, t),
        stream: true,
        // Without it the stream carries no usage at all, and the step could not be priced.
        stream_options: StreamOptions {
            include_usage: true,
        },
        // Only OpenAI itself documents `prompt_cache_key`; compatible servers may reject unknown keys.
        prompt_cache_key: g
            .context
            .as_ref()
            .map(|ctx| ctx.session_id.as_str())
            .filter(|id| t.model.provider == "openai" && !id.is_empty()),
    };
    let mut body = json_object(&request)?;
    merge_provider_options(&mut body, &g.provider_options_json, caps)?;

    Ok(HttpRequest {
        path: PATH.to_string(),
        headers: Vec::new(),
        body: Value::Object(body),
    })
}

/// The `messages` array: the system prompt, then the conversation with empty parts and empty turns dropped.
fn messages<'a>(g: &'a pb::Generation, model: &ModelInfo) -> Result<Vec<Message<'a>>, BuildError> {
    let caps = &model.capabilities;
    let mut out = Vec::with_capacity(g.messages.len() + 1);

    let system = join_non_empty(g.system.iter().map(String::as_str), "\n\n");
    if !system.is_empty() {
        // Reasoning models take the system prompt under the `developer` role (docs/providers.md §1).
        let role = if caps.reasoning {
            "developer"
        } else {
            "system"
        };
        out.push(Message::Text {
            role,
            content: Cow::Owned(system),
        });
    }

    for (i, m) in g.messages.iter().enumerate() {
        match pb::Role::try_from(m.role).unwrap_or(pb::Role::Unspecified) {
            pb::Role::User => {
                if let Some(msg) = user_message(i, m)? {
                    out.push(msg);
                }
            }
            pb::Role::Assistant => {
                if let Some(msg) = assistant_message(i, m, model)? {
                    out.push(msg);
                }
            }
            pb::Role::Tool => tool_messages(i, m, caps, &mut out)?,
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

/// A user turn: a plain string when it holds only text (the form every compatible server accepts), else an array
/// of content parts. `None` when nothing is left once empty parts are dropped.
fn user_message(i: usize, m: &pb::Message) -> Result<Option<Message<'_>>, BuildError> {
    let mut texts: Vec<&str> = Vec::new();
    let mut has_files = false;
    for (j, part) in m.parts.iter().enumerate() {
        match &part.kind {
            Some(Kind::Text(t)) if !t.text.is_empty() => texts.push(&t.text),
            Some(Kind::Text(_)) => {}
            Some(Kind::File(_)) => has_files = true,
            Some(Kind::Reasoning(_)) => return Err(wrong_part(i, j, "reasoning", "user")),
            Some(Kind::ToolCall(_)) => return Err(wrong_part(i, j, "tool call", "user")),
            Some(Kind::ToolResult(_)) => return Err(wrong_part(i, j, "tool result", "user")),
            // A part with nothing in it is dropped like empty text: providers reject bare `{}` parts.
            None => {}
        }
    }

    if !has_files {
        if texts.is_empty() {
            return Ok(None);
        }
        let content = join_non_empty(texts.into_iter(), USER_TEXT_SEPARATOR);
        return Ok(Some(Message::Text {
            role: "user",
            content: Cow::Owned(content),
        }));
    }

    let mut content = Vec::with_capacity(m.parts.len());
    for (j, part) in m.parts.iter().enumerate() {
        match &part.kind {
            Some(Kind::Text(t)) if !t.text.is_empty() => {
                content.push(Part::Text { text: &t.text });
            }
            Some(Kind::File(f)) => content.push(file_part(i, j, f)?),
            _ => {}
        }
    }
    Ok(Some(Message::Parts {
        role: "user",
        content,
    }))
}

/// An image becomes an `image_url` part (inline data URL or the caller's https URL); any other file a `file` part
/// with inline base64 data, the only form Chat Completions takes besides an uploaded file id.
fn file_part(i: usize, j: usize, f: &pb::FilePart) -> Result<Part<'_>, BuildError> {
    let image = |url| Part::ImageUrl {
        image_url: ImageUrl { url },
    };
    Ok(match OpenAiFile::of(i, j, f)? {
        OpenAiFile::ImageUrl(url) => image(Cow::Borrowed(url)),
        OpenAiFile::ImageData(url) => image(Cow::Owned(url)),
        // OpenAI needs a filename with inline file data; `OpenAiFile` invents a stable one from the part position.
        OpenAiFile::FileData { filename, data_url } => Part::File {
            file: File {
                filename,
                file_data: data_url,
            },
        },
        OpenAiFile::FileUrl { .. } => {
            return Err(BuildError::new(
                format!("{}.file.url", part_field(i, j)),
                "OpenAI Chat Completions takes non-image files only as inline data, not by URL",
            ));
        }
    })
}

/// An assistant turn: text joined as `content` (`null` when there is only tool calls, which OpenAI accepts), then
/// `tool_calls`, and the turn's reasoning where the model's `reasoning_replay` wants it. `None` when there is
/// neither text nor tool calls: Mistral and others reject an empty assistant turn, and reasoning alone is not an
/// answer worth replaying.
fn assistant_message<'a>(
    i: usize,
    m: &'a pb::Message,
    model: &ModelInfo,
) -> Result<Option<Message<'a>>, BuildError> {
    let caps = &model.capabilities;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    // OpenRouter's structured reasoning, replayed whole to the model that produced it whatever `reasoning_replay`
    // says: only OpenRouter records it, and Claude behind it needs its signatures back in a tool loop.
    let mut details: Vec<Value> = Vec::new();
    for (j, part) in m.parts.iter().enumerate() {
        if let Some(Kind::Reasoning(r)) = &part.kind
            && replayable(r, model)
            && let Some(list) = r
                .provider_metadata
                .as_ref()
                .and_then(|meta| super::details::from_metadata(&meta.json))
        {
            details.extend(list);
        }
        match &part.kind {
            // Joined with nothing in between: the parts are pieces of the model's own output, which some providers
            // stream as many small blocks (Gemini parts); a separator would land mid-sentence.
            Some(Kind::Text(t)) => text.push_str(&t.text),
            // Replayed only to the model that produced it (see `replayable`); joined like text, since the blocks
            // are pieces of one stream.
            Some(Kind::Reasoning(r))
                if caps.reasoning_replay != ReasoningReplay::None && replayable(r, model) =>
            {
                reasoning.push_str(&r.text);
            }
            Some(Kind::Reasoning(_)) | None => {}
            Some(Kind::ToolCall(c)) => calls.push(tool_call(i, j, c, caps)?),
            // Chat Completions assistant messages hold only text and tool calls, so a file the model produced
            // elsewhere (a Gemini image, say) cannot be replayed here. Dropped rather than refused, so that a
            // conversation can move to this provider mid-way.
            Some(Kind::File(_)) => {}
            Some(Kind::ToolResult(_)) => {
                return Err(wrong_part(i, j, "tool result", "assistant"));
            }
        }
    }
    if text.is_empty() && calls.is_empty() {
        return Ok(None);
    }
    let (reasoning_content, reasoning) = match caps.reasoning_replay {
        ReasoningReplay::None => (None, None),
        // On every assistant turn, empty when the turn has none of this model's reasoning: DeepSeek V4 in thinking
        // mode refuses an assistant message without the field ("Missing `reasoning_content` field").
        ReasoningReplay::ReasoningContent => (Some(reasoning), None),
        ReasoningReplay::Reasoning => (None, Some(reasoning).filter(|r| !r.is_empty())),
    };
    Ok(Some(Message::Assistant(Assistant {
        role: "assistant",
        content: Some(text).filter(|t| !t.is_empty()),
        reasoning_content,
        reasoning,
        reasoning_details: details,
        tool_calls: calls,
    })))
}

/// Reasoning is replayed only to the exact model that produced it over this protocol (docs/providers.md §6.3: "dropped when
/// the model changed"). Another model's chain of thought is not this model's own: replayed as reasoning it would be
/// passed off as the model's, and turned into visible text it would read as something the assistant *said*, which
/// it never did. Every adapter drops it for the same reason.
fn replayable(r: &pb::ReasoningPart, model: &ModelInfo) -> bool {
    r.provider_metadata
        .as_ref()
        .is_some_and(|m| m.protocol == Protocol::OpenaiChat.as_str() && m.model == model.id)
}

/// The call id as the server behind the model accepts it (docs/providers.md §6.2). Applied to `tool_calls[].id`
/// and to the `tool_call_id` answering it alike, and deterministic, so the pair stays matched.
fn call_id<'a>(id: &'a str, caps: &Capabilities) -> Cow<'a, str> {
    match caps.tool_call_ids {
        ToolCallIds::Standard => ids::openai(id),
        ToolCallIds::Mistral => ids::mistral(id),
    }
}

/// One `tool_calls[]` entry. The id goes through [`call_id`], as does the matching result's `tool_call_id`, so the
/// pair stays matched after a long id (a Responses `fc_…` id, say) is shortened to OpenAI's 40 characters, or any
/// id is rewritten to Mistral's nine alphanumerics.
fn tool_call<'a>(
    i: usize,
    j: usize,
    c: &'a pb::ToolCallPart,
    caps: &Capabilities,
) -> Result<ToolCall<'a>, BuildError> {
    Ok(ToolCall {
        id: call_id(&c.call_id, caps),
        kind: "function",
        function: CalledFunction {
            name: &c.tool_name,
            arguments: call_arguments(i, j, c)?,
        },
    })
}

/// One `tool` message per result, in order ([`tool_results`]).
fn tool_messages<'a>(
    i: usize,
    m: &'a pb::Message,
    caps: &Capabilities,
    out: &mut Vec<Message<'a>>,
) -> Result<(), BuildError> {
    tool_results(i, m, out, |r| Message::Tool {
        role: "tool",
        tool_call_id: call_id(&r.call_id, caps),
        content: &r.output,
    })
}

/// `response_format` for JSON-object output, or for JSON Schema output ([`json_schema_output`]).
fn response_format(
    g: &pb::Generation,
    strict: bool,
) -> Result<Option<ResponseFormat<'_>>, BuildError> {
    if features::output(g) == Output::JsonObject {
        return Ok(Some(ResponseFormat::JsonObject));
    }
    Ok(
        json_schema_output(g, strict)?.map(|(name, schema, strict)| ResponseFormat::JsonSchema {
            json_schema: JsonSchema {
                name,
                schema,
                strict,
            },
        }),
    )
}

/// Sampling parameters, minus the ones the model rejects.
fn sampling<'a>(g: &'a pb::Generation, t: &Target<'_>) -> Sampling<'a> {
    let caps = &t.model.capabilities;
    let mut out = Sampling::default();
    if let Some(s) = &g.sampling {
        // Reasoning models reject temperature and top_p outright (docs/providers.md §1).
        if !caps.reasoning {
            out.temperature = s.temperature.filter(|_| caps.temperature);
            out.top_p = s.top_p;
        }
        // top_k is not an OpenAI parameter; compatible servers that have it take it via provider options.
        // Reasoning models reject `max_tokens` with `unsupported_parameter`; the others may predate
        // `max_completion_tokens` (most compatible servers).
        if caps.reasoning {
            out.max_completion_tokens = s.max_output_tokens;
        } else {
            out.max_tokens = s.max_output_tokens;
        }
        out.stop = (!s.stop_sequences.is_empty()).then_some(s.stop_sequences.as_slice());
        out.seed = s.seed;
    }

    // Only reasoning models take `reasoning_effort`; ordinary ones reject the unknown parameter.
    if caps.reasoning {
        out.reasoning_effort = g
            .reasoning
            .as_ref()
            .and_then(|r| crate::adapter::common::openai::effort_name(r.effort));
    }
    out
}

/// Merges `{"openai_chat":{...}}` from the caller's provider options into the body. Keys the gateway owns are
/// refused rather than silently ignored, so a caller learns at once that the option has no effect. On a reasoning
/// model the parameters it rejects are dropped ([`REJECTED_BY_REASONING_MODELS`]) and `max_tokens` is sent as
/// `max_completion_tokens`, the only spelling it takes.
fn merge_provider_options(
    body: &mut Map<String, Value>,
    json: &str,
    caps: &Capabilities,
) -> Result<(), BuildError> {
    let Some(mut options) = options::for_protocol(json, Protocol::OpenaiChat, &OWNED_KEYS)? else {
        return Ok(());
    };
    if caps.reasoning {
        options.retain(|k, _| !REJECTED_BY_REASONING_MODELS.contains(&k.as_str()));
        if let Some(max) = options.remove("max_tokens") {
            options.insert("max_completion_tokens".into(), max);
        }
    }
    body.extend(options);
    Ok(())
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
