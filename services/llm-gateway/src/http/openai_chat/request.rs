//! OpenAI Chat Completions request body → the unified request.
//!
//! What maps to what (docs/gateway.md "HTTP front door"):
//! - `system` / `developer` messages → `system` (in order); `user` → user turns (text, `image_url`, `file`);
//!   `assistant` → assistant turns (`content`, `reasoning_content`, `tool_calls`); `tool` → tool results, named by
//!   the call they answer;
//! - `tools` (type `function`) → tools; `tool_choice` → tool choice; `response_format` `json_schema` → JSON Schema
//!   output; `reasoning_effort` → reasoning effort;
//! - `temperature`, `top_p`, `max_completion_tokens` (or `max_tokens`), `stop`, `seed` → sampling.
//!
//! Every other field follows the door's field policy ([`crate::http::fields`]): hints (`user`, `metadata`, `store`,
//! `service_tier`, …) go to Chat Completions providers and nowhere else; fields this door does not map (penalties,
//! `logit_bias`, `prediction`, `verbosity`, a compatible server's own parameters) go to Chat Completions providers
//! and are refused for any other; what no provider could honour here (`n` above 1, log probabilities, audio output,
//! the legacy `functions`, web search) is refused naming the field.

use std::collections::HashMap;

use llm_proto::gateway as pb;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::http::body::parse;
use crate::http::errors::ApiError;
use crate::http::fields::Extras;
use crate::http::origins::{self, Origins};
use crate::http::unified;

/// The parts of the request that shape the response rather than the generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// `stream: true`.
    pub stream: bool,
    /// `stream_options.include_usage: true`: a last chunk carries the usage.
    pub include_usage: bool,
    /// Where each piece of the unified request came from, for errors found after translation.
    pub origins: Origins,
}

#[derive(Deserialize)]
struct Body {
    model: String,
    messages: Vec<Value>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    response_format: Option<Value>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    stop: Option<Stop>,
    seed: Option<i64>,
    reasoning_effort: Option<String>,
    n: Option<u32>,
    logprobs: Option<bool>,
    top_logprobs: Option<u32>,
    modalities: Option<Vec<String>>,
    functions: Option<Value>,
    function_call: Option<Value>,
    audio: Option<Value>,
    web_search_options: Option<Value>,
    /// Every field this door does not read: hints and same-protocol fields.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Fields that hint at how a provider should serve the request without changing the answer: sent to Chat
/// Completions providers, left out for others.
pub const HINTS: [&str; 7] = [
    "user",
    "metadata",
    "store",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
    /// Padding on deltas; this door adds none, which carries nothing either way.
    #[serde(default)]
    #[allow(dead_code)]
    include_obfuscation: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message {
    System {
        content: Content,
        #[serde(flatten)]
        rest: Map<String, Value>,
    },
    Developer {
        content: Content,
        #[serde(flatten)]
        rest: Map<String, Value>,
    },
    User {
        content: Content,
        #[serde(flatten)]
        rest: Map<String, Value>,
    },
    Assistant {
        #[serde(default)]
        content: Option<Content>,
        #[serde(default)]
        reasoning_content: Option<String>,
        #[serde(default)]
        tool_calls: Option<Vec<ToolCall>>,
        /// A refusal sent back as history is what the model said.
        #[serde(default)]
        refusal: Option<String>,
        #[serde(flatten)]
        rest: Map<String, Value>,
    },
    Tool {
        tool_call_id: String,
        content: Content,
        #[serde(flatten)]
        rest: Map<String, Value>,
    },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
    File { file: FileRef },
    Refusal { refusal: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageUrl {
    url: String,
    #[serde(default)]
    detail: Option<String>,
}

#[derive(Deserialize)]
struct FileRef {
    #[serde(default)]
    file_data: Option<String>,
    #[serde(default)]
    filename: Option<String>,
}

#[derive(Deserialize)]
struct ToolCall {
    id: String,
    function: FunctionCall,
}

#[derive(Deserialize)]
struct FunctionCall {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tool {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    function: Function,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Function {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    strict: Option<bool>,
}

/// Translates a Chat Completions body into the unified request and the response shape it asks for.
pub fn translate(body: Value) -> Result<(pb::Generation, Extras, Shape), ApiError> {
    let b: Body = parse("body", body)?;
    refuse_unservable(&b)?;
    let mut extras = Extras::default();
    extras.absorb(b.rest, &HINTS);
    let mut g = pb::Generation {
        model: b.model,
        ..Default::default()
    };
    // Tool results name only the call they answer; the unified request also names the tool.
    let mut tool_names: HashMap<String, String> = HashMap::new();
    let mut origins = Origins::new(origins::CHAT, ".function.parameters");
    for (i, m) in b.messages.into_iter().enumerate() {
        let field = format!("messages[{i}]");
        let (mark, systems) = (Origins::mark(&g), g.system.len());
        message(&field, parse(&field, m)?, &mut g, &mut tool_names)?;
        origins.note(&g, mark, &field);
        for _ in systems..g.system.len() {
            origins.note_system(&format!("{field}.content"));
        }
    }
    for (i, t) in b.tools.unwrap_or_default().into_iter().enumerate() {
        let field = format!("tools[{i}]");
        g.tools.push(tool(&field, parse(&field, t)?)?);
    }
    g.tool_choice = unified::tool_choice(
        b.tool_choice.map(tool_choice).transpose()?,
        b.parallel_tool_calls,
    );
    g.output_format = b
        .response_format
        .map(response_format)
        .transpose()?
        .flatten();
    g.reasoning = b
        .reasoning_effort
        .map(|e| crate::http::fields::effort("reasoning_effort", &e))
        .transpose()?
        .map(|effort| pb::Reasoning {
            effort: effort as i32,
            budget_tokens: 0,
        });
    let stop_sequences = match b.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(v)) => v,
    };
    g.sampling = Some(pb::Sampling {
        temperature: b.temperature,
        top_p: b.top_p,
        top_k: None,
        max_output_tokens: b.max_completion_tokens.or(b.max_tokens),
        stop_sequences,
        seed: b.seed,
    });
    let shape = Shape {
        stream: b.stream.unwrap_or(false),
        include_usage: b.stream_options.is_some_and(|o| o.include_usage),
        origins,
    };
    Ok((g, extras, shape))
}

/// Fields that would change the answer but cannot be honoured, each refused naming it (rather than ignored, which
/// would answer a different request than the one sent).
fn refuse_unservable(b: &Body) -> Result<(), ApiError> {
    let refused = [
        (
            b.n.is_some_and(|n| n != 1),
            "n",
            "only one choice per request is served",
        ),
        (
            b.logprobs == Some(true),
            "logprobs",
            "log probabilities are not served",
        ),
        (
            b.top_logprobs.is_some_and(|n| n > 0),
            "top_logprobs",
            "log probabilities are not served",
        ),
        (
            b.modalities
                .as_ref()
                .is_some_and(|m| m.iter().any(|m| m != "text")),
            "modalities",
            "only text output is served",
        ),
        (b.audio.is_some(), "audio", "only text output is served"),
        (
            b.functions.is_some(),
            "functions",
            "the legacy functions API is not served; use `tools`",
        ),
        (
            b.function_call.is_some(),
            "function_call",
            "the legacy functions API is not served; use `tool_choice`",
        ),
        (
            b.web_search_options.is_some(),
            "web_search_options",
            "web search is not served: its citations have no place in the answer yet",
        ),
        (
            b.stream_options.is_some() && b.stream != Some(true),
            "stream_options",
            "only allowed when `stream` is true",
        ),
    ];
    match refused.into_iter().find(|(refuse, _, _)| *refuse) {
        Some((_, field, why)) => Err(ApiError::invalid(field, why)),
        None => Ok(()),
    }
}

fn message(
    field: &str,
    m: Message,
    g: &mut pb::Generation,
    tool_names: &mut HashMap<String, String>,
) -> Result<(), ApiError> {
    match m {
        Message::System { content, rest } | Message::Developer { content, rest } => {
            unserved(field, rest)?;
            g.system
                .push(text_only(&format!("{field}.content"), content)?);
        }
        Message::User { content, rest } => {
            unserved(field, rest)?;
            let parts = user_parts(&format!("{field}.content"), content)?;
            g.messages.push(unified::message(pb::Role::User, parts));
        }
        Message::Assistant {
            content,
            reasoning_content,
            tool_calls,
            refusal,
            rest,
        } => {
            unserved(field, rest)?;
            let reply = Reply {
                content,
                reasoning_content,
                tool_calls,
                refusal,
            };
            let parts = assistant_parts(field, reply, tool_names)?;
            g.messages
                .push(unified::message(pb::Role::Assistant, parts));
        }
        Message::Tool {
            tool_call_id,
            content,
            rest,
        } => {
            unserved(field, rest)?;
            let output = text_only(&format!("{field}.content"), content)?;
            let name = tool_names.get(&tool_call_id).cloned().ok_or_else(|| {
                ApiError::invalid(
                    &format!("{field}.tool_call_id"),
                    format!(
                        "`{tool_call_id}` answers no tool call of an earlier assistant message"
                    ),
                )
            })?;
            let part = unified::tool_result(tool_call_id, name, output, false);
            // Results of one step's parallel calls travel together in one tool message.
            match g.messages.last_mut() {
                Some(last) if last.role == pb::Role::Tool as i32 => last.parts.push(part),
                _ => g
                    .messages
                    .push(unified::message(pb::Role::Tool, vec![part])),
            }
        }
    }
    Ok(())
}

/// An assistant message's fields, as sent.
struct Reply {
    content: Option<Content>,
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<ToolCall>>,
    refusal: Option<String>,
}

/// The parts of an assistant message: its reasoning, text (or refusal) and tool calls, whose tools are noted in
/// `tool_names` for the results that answer them.
fn assistant_parts(
    field: &str,
    reply: Reply,
    tool_names: &mut HashMap<String, String>,
) -> Result<Vec<pb::Part>, ApiError> {
    let Reply {
        content,
        reasoning_content,
        tool_calls,
        refusal,
    } = reply;
    let mut parts = Vec::new();
    if let Some(r) = reasoning_content.filter(|r| !r.is_empty()) {
        parts.push(pb::Part {
            kind: Some(pb::part::Kind::Reasoning(pb::ReasoningPart {
                text: r,
                provider_metadata: None,
            })),
        });
    }
    if let Some(c) = content {
        let text = text_only(&format!("{field}.content"), c)?;
        if !text.is_empty() {
            parts.push(unified::text(text));
        }
    }
    if let Some(text) = refusal.filter(|r| !r.is_empty()) {
        parts.push(unified::text(text));
    }
    for c in tool_calls.unwrap_or_default() {
        tool_names.insert(c.id.clone(), c.function.name.clone());
        parts.push(unified::tool_call(
            c.id,
            c.function.name,
            c.function.arguments,
        ));
    }
    Ok(parts)
}

/// Fields of a message this door does not read: accepted when empty (an SDK sending back a reply it received echoes
/// `annotations: []`, `audio: null`, `function_call: null`), refused naming them otherwise. `annotations` (the
/// citations of an earlier reply) are accepted as they are: they describe the text, which the model reads.
fn unserved(field: &str, rest: Map<String, Value>) -> Result<(), ApiError> {
    for (key, value) in rest {
        let empty = match &value {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        if !empty && key != "annotations" {
            let why = if key == "name" {
                "participant names are not served"
            } else {
                "is not served on a message"
            };
            return Err(ApiError::invalid(&format!("{field}.{key}"), why));
        }
    }
    Ok(())
}

/// The text of a content that may only hold text (system, assistant, tool), parts joined.
fn text_only(field: &str, c: Content) -> Result<String, ApiError> {
    match c {
        Content::Text(t) => Ok(t),
        Content::Parts(parts) => {
            let mut out = String::new();
            for (j, p) in parts.into_iter().enumerate() {
                let field = format!("{field}[{j}]");
                match parse(&field, p)? {
                    ContentPart::Text { text } | ContentPart::Refusal { refusal: text } => {
                        out.push_str(&text)
                    }
                    _ => {
                        return Err(ApiError::invalid(
                            &field,
                            "only text parts are accepted here",
                        ));
                    }
                }
            }
            Ok(out)
        }
    }
}

fn user_parts(field: &str, c: Content) -> Result<Vec<pb::Part>, ApiError> {
    let parts = match c {
        Content::Text(t) => return Ok(vec![unified::text(t)]),
        Content::Parts(parts) => parts,
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, p) in parts.into_iter().enumerate() {
        let field = format!("{field}[{j}]");
        out.push(match parse(&field, p)? {
            ContentPart::Text { text } => unified::text(text),
            ContentPart::ImageUrl { image_url } => {
                unified::detail(&format!("{field}.image_url.detail"), image_url.detail)?;
                unified::file_url(&field, &image_url.url, "")?
            }
            ContentPart::File { file } => {
                let data = file.file_data.ok_or_else(|| {
                    ApiError::invalid(
                        &format!("{field}.file.file_data"),
                        "required (uploaded file ids are not served)",
                    )
                })?;
                unified::named(unified::file_url(&field, &data, "")?, file.filename)
            }
            ContentPart::Refusal { .. } => {
                return Err(ApiError::invalid(
                    &field,
                    "a refusal part belongs to an assistant message",
                ));
            }
        });
    }
    Ok(out)
}

fn tool(field: &str, t: Tool) -> Result<pb::Tool, ApiError> {
    if t.kind.as_deref().is_some_and(|k| k != "function") {
        return Err(ApiError::invalid(
            &format!("{field}.type"),
            "only `function` tools are served",
        ));
    }
    let schema = t
        .function
        .parameters
        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    Ok(pb::Tool {
        name: t.function.name,
        description: t.function.description,
        input_schema_json: schema.to_string(),
        strict: t.function.strict.unwrap_or(false),
    })
}

fn tool_choice(v: Value) -> Result<pb::ToolChoice, ApiError> {
    match &v {
        Value::String(s) => unified::tool_choice_named("tool_choice", s),
        Value::Object(o) => match o
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
        {
            Some(name) => Ok(unified::tool_choice_of(name)),
            None => Err(ApiError::invalid("tool_choice.function.name", "required")),
        },
        _ => Err(ApiError::invalid(
            "tool_choice",
            "must be a string or an object",
        )),
    }
}

fn response_format(v: Value) -> Result<Option<pb::OutputFormat>, ApiError> {
    use pb::output_format::Type;
    match v.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_schema") => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Spec {
                #[serde(default)]
                name: Option<String>,
                schema: Value,
                #[serde(default)]
                strict: Option<bool>,
                #[serde(default)]
                description: Option<String>,
            }
            let spec = v
                .get("json_schema")
                .cloned()
                .ok_or_else(|| ApiError::invalid("response_format.json_schema", "required"))?;
            let spec: Spec = parse("response_format.json_schema", spec)?;
            if spec.description.is_some() {
                return Err(ApiError::invalid(
                    "response_format.json_schema.description",
                    "a schema description is not served; describe the output in a message",
                ));
            }
            Ok(Some(pb::OutputFormat {
                r#type: Type::JsonSchema as i32,
                name: spec.name.unwrap_or_else(|| "output".into()),
                schema_json: spec.schema.to_string(),
                strict: spec.strict.unwrap_or(false),
            }))
        }
        Some("json_object") => Ok(Some(pb::OutputFormat {
            r#type: Type::JsonObject as i32,
            ..Default::default()
        })),
        _ => Err(ApiError::invalid(
            "response_format.type",
            "must be `text`, `json_schema` or `json_object`",
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "request_tests.rs"]
mod tests;
