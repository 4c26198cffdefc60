//! Anthropic Messages request body → the unified request.
//!
//! What maps to what (docs/gateway.md "HTTP front door"):
//! - `system` (a string or text blocks) → `system`; `user` turns → user messages (`text`, `image`, `document`),
//!   their `tool_result` blocks → a tool message in front of them; `assistant` turns → assistant messages (`text`,
//!   `tool_use`, and `thinking` / `redacted_thinking` with their signature kept as the reasoning's replay data, so
//!   the adapter sends them back to the model that made them);
//! - `tools` (custom tools) → tools; `tool_choice` → tool choice; `thinking.budget_tokens` → reasoning budget;
//! - `max_tokens`, `temperature`, `top_p`, `top_k`, `stop_sequences` → sampling.
//!
//! - `output_config.format` (and the beta `output_format`) → JSON Schema output; tools' `strict`;
//!   `tool_choice.disable_parallel_tool_use`.
//!
//! `cache_control` markers are accepted and not copied: for models with prompt caching the Anthropic adapter places
//! its own breakpoints (tools, system, the last two user turns), which covers what callers mark in practice.
//! Server tools (`web_search`, `code_execution`, …), `mcp_servers` and `container` are refused naming the field.
//! Every other field follows the door's field policy ([`crate::http::fields`]): `metadata`, `service_tier` and the
//! `anthropic-beta` header are hints for Anthropic providers; fields this door does not map (`thinking` of type
//! `adaptive`, `output_config.effort`, `context_management`, unknown ones) go to Anthropic providers and are refused
//! for any other.

use std::collections::HashMap;

use llm_proto::gateway as pb;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::http::body::parse;
use crate::http::errors::ApiError;
use crate::http::fields::Extras;
use crate::http::origins::{self, Origins};
use crate::http::unified;
use crate::protocol::Protocol;

#[derive(Deserialize)]
struct Body {
    model: String,
    messages: Vec<Value>,
    #[serde(default)]
    system: Option<Content>,
    max_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    tool_choice: Option<ToolChoice>,
    #[serde(default)]
    thinking: Option<Value>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u32>,
    #[serde(default)]
    stop_sequences: Vec<String>,
    /// Structured output (`{format: {type: "json_schema", schema}}`; `effort` goes to Anthropic providers).
    #[serde(default)]
    output_config: Option<Map<String, Value>>,
    /// The beta spelling of `output_config.format`.
    #[serde(default)]
    output_format: Option<Value>,
    mcp_servers: Option<Value>,
    container: Option<Value>,
    /// Every field this door does not read: hints and same-protocol fields.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Fields that hint at how a provider should serve the request without changing the answer: sent to Anthropic
/// providers, left out for others.
pub const HINTS: [&str; 2] = ["metadata", "service_tier"];

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

#[derive(Deserialize)]
struct Message {
    role: Role,
    content: Content,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Role {
    User,
    Assistant,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    Image {
        source: Source,
    },
    Document {
        source: Source,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<Content>,
        #[serde(default)]
        is_error: bool,
    },
    Thinking {
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Source {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum ToolChoice {
    Auto {
        #[serde(default)]
        disable_parallel_tool_use: bool,
    },
    Any {
        #[serde(default)]
        disable_parallel_tool_use: bool,
    },
    None {},
    Tool {
        name: String,
        #[serde(default)]
        disable_parallel_tool_use: bool,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Thinking {
    Enabled {
        budget_tokens: u32,
    },
    Disabled {},
    /// The model decides how much to think: only Anthropic providers take it.
    Adaptive {},
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tool {
    /// `custom`, or left out; any other type was refused before.
    #[serde(rename = "type", default)]
    #[allow(dead_code)]
    kind: Option<String>,
    name: String,
    #[serde(default)]
    description: String,
    input_schema: Value,
    #[serde(default)]
    strict: Option<bool>,
    /// Breakpoints are the adapter's (module docs).
    #[serde(default)]
    #[allow(dead_code)]
    cache_control: Option<Value>,
}

/// The parts of the request that shape the response rather than the generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// `stream: true`.
    pub stream: bool,
    /// Where each piece of the unified request came from, for errors found after translation.
    pub origins: Origins,
}

/// Translates a Messages body into the unified request, the fields left for the provider, and the response shape.
pub fn translate(body: Value) -> Result<(pb::Generation, Extras, Shape), ApiError> {
    let b: Body = parse("body", body)?;
    if b.mcp_servers.is_some() {
        return Err(ApiError::invalid(
            "mcp_servers",
            "MCP servers are not served",
        ));
    }
    if b.container.is_some() {
        return Err(ApiError::invalid(
            "container",
            "code execution containers are not served",
        ));
    }
    let mut extras = Extras::default();
    extras.absorb(b.rest, &HINTS);
    let mut g = pb::Generation {
        model: b.model,
        ..Default::default()
    };
    let mut origins = Origins::new(origins::MESSAGES, ".input_schema");
    match b.system {
        None => {}
        Some(Content::Text(t)) => {
            g.system.push(t);
            origins.note_system("system");
        }
        Some(Content::Blocks(blocks)) => {
            for (i, v) in blocks.into_iter().enumerate() {
                let field = format!("system[{i}]");
                g.system.push(text_of(&field, v)?);
                origins.note_system(&field);
            }
        }
    }
    let mut tool_names = HashMap::new();
    for (i, m) in b.messages.into_iter().enumerate() {
        let field = format!("messages[{i}]");
        let m: Message = parse(&field, m)?;
        let mark = Origins::mark(&g);
        message(&field, m, &mut g, &mut tool_names)?;
        origins.note(&g, mark, &field);
    }
    for (i, t) in b.tools.into_iter().enumerate() {
        let field = format!("tools[{i}]");
        // A server tool (`web_search_…`) has no input schema: its type says what it is before its fields do.
        if let Some(kind) = t
            .get("type")
            .and_then(Value::as_str)
            .filter(|k| *k != "custom")
        {
            return Err(ApiError::invalid(
                &format!("{field}.type"),
                format!("`{kind}` is a server tool, which is not served; only custom tools are"),
            ));
        }
        g.tools.push(tool(parse(&field, t)?));
    }
    g.tool_choice = b.tool_choice.map(tool_choice);
    g.reasoning = thinking(b.thinking, &mut extras)?;
    g.output_format = output(b.output_config, b.output_format, &mut extras)?;
    g.sampling = Some(pb::Sampling {
        temperature: b.temperature,
        top_p: b.top_p,
        top_k: b.top_k,
        max_output_tokens: b.max_tokens,
        stop_sequences: b.stop_sequences,
        seed: None,
    });
    Ok((
        g,
        extras,
        Shape {
            stream: b.stream,
            origins,
        },
    ))
}

fn tool(t: Tool) -> pb::Tool {
    pb::Tool {
        name: t.name,
        description: t.description,
        input_schema_json: t.input_schema.to_string(),
        strict: t.strict.unwrap_or(false),
    }
}

/// `thinking`: a budget or off for any provider; `adaptive` for Anthropic providers only.
fn thinking(v: Option<Value>, extras: &mut Extras) -> Result<Option<pb::Reasoning>, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    Ok(match parse("thinking", v.clone())? {
        Thinking::Enabled { budget_tokens } => Some(pb::Reasoning {
            effort: 0,
            budget_tokens,
        }),
        Thinking::Disabled {} => Some(pb::Reasoning {
            effort: pb::reasoning::Effort::None as i32,
            budget_tokens: 0,
        }),
        Thinking::Adaptive {} => {
            extras.same_protocol("thinking", "thinking", v);
            None
        }
    })
}

/// `output_config.format` (or the beta `output_format`) as JSON Schema output, which Anthropic always constrains;
/// the rest of `output_config` (`effort`) goes to Anthropic providers only.
fn output(
    config: Option<Map<String, Value>>,
    beta: Option<Value>,
    extras: &mut Extras,
) -> Result<Option<pb::OutputFormat>, ApiError> {
    #[derive(Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    enum Format {
        JsonSchema { schema: Value },
    }
    let (field, format) = match (config, beta.filter(|v| !v.is_null())) {
        (Some(mut config), None) => {
            let format = config.remove("format").filter(|v| !v.is_null());
            for (key, value) in config.into_iter().filter(|(_, v)| !v.is_null()) {
                let path = format!("output_config.{key}");
                let mut one = Map::new();
                one.insert(key, value);
                extras.same_protocol(&path, "output_config", Value::Object(one));
            }
            ("output_config.format", format)
        }
        (None, Some(format)) => ("output_format", Some(format)),
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "output_format",
                "give the format once: `output_config.format` (or the beta `output_format`)",
            ));
        }
        (None, None) => return Ok(None),
    };
    let Some(format) = format else {
        return Ok(None);
    };
    let Format::JsonSchema { schema } = parse(field, format)?;
    Ok(Some(pb::OutputFormat {
        r#type: pb::output_format::Type::JsonSchema as i32,
        name: "output".into(),
        schema_json: schema.to_string(),
        strict: true,
    }))
}

fn text_of(field: &str, v: Value) -> Result<String, ApiError> {
    match parse(field, v)? {
        Block::Text { text } => Ok(text),
        _ => Err(ApiError::invalid(
            field,
            "only text blocks are accepted here",
        )),
    }
}

/// One message of the request as unified messages: its `tool_result` blocks as a tool message, then the rest as a
/// message of its role.
fn message(
    field: &str,
    m: Message,
    g: &mut pb::Generation,
    tool_names: &mut HashMap<String, String>,
) -> Result<(), ApiError> {
    let blocks = match m.content {
        Content::Text(t) => vec![json!({"type": "text", "text": t})],
        Content::Blocks(b) => b,
    };
    let (results, parts) = parts(field, &m.role, blocks, tool_names)?;
    if !results.is_empty() {
        g.messages.push(unified::message(pb::Role::Tool, results));
    }
    if !parts.is_empty() {
        let role = match m.role {
            Role::User => pb::Role::User,
            Role::Assistant => pb::Role::Assistant,
        };
        g.messages.push(unified::message(role, parts));
    }
    Ok(())
}

/// A message's blocks as unified parts: (tool results, everything else). `tool_names` learns each `tool_use` so a
/// later `tool_result` can name its tool.
fn parts(
    field: &str,
    role: &Role,
    blocks: Vec<Value>,
    tool_names: &mut HashMap<String, String>,
) -> Result<(Vec<pb::Part>, Vec<pb::Part>), ApiError> {
    let (mut results, mut parts) = (Vec::new(), Vec::new());
    for (j, v) in blocks.into_iter().enumerate() {
        let field = format!("{field}.content[{j}]");
        let block: Block = parse(&field, v)?;
        match (role, block) {
            (_, Block::Text { text }) => parts.push(unified::text(text)),
            (Role::User, Block::Image { source } | Block::Document { source }) => {
                parts.push(file(&field, source)?);
            }
            (
                Role::User,
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                },
            ) => results.push(tool_result(
                &field,
                tool_use_id,
                content,
                is_error,
                tool_names,
            )?),
            (Role::Assistant, Block::ToolUse { id, name, input }) => {
                tool_names.insert(id.clone(), name.clone());
                // A call without input is a call without arguments.
                let input = if input.is_null() {
                    "{}".to_string()
                } else {
                    input.to_string()
                };
                parts.push(unified::tool_call(id, name, input));
            }
            (
                Role::Assistant,
                Block::Thinking {
                    thinking,
                    signature,
                },
            ) => {
                parts.push(reasoning(thinking, json!({"signature": signature})));
            }
            (Role::Assistant, Block::RedactedThinking { data }) => {
                parts.push(reasoning(String::new(), json!({"redacted_data": data})));
            }
            _ => {
                return Err(ApiError::invalid(
                    &field,
                    "this block type is not accepted in this role's turn",
                ));
            }
        }
    }
    Ok((results, parts))
}

/// An `image` or `document` block's source as a unified file part.
fn file(field: &str, source: Source) -> Result<pb::Part, ApiError> {
    match source {
        Source::Base64 { media_type, data } => unified::file_data(field, &media_type, &data),
        Source::Url { url } => unified::file_url(field, &url, ""),
    }
}

/// A `tool_result` block as a unified result, named after the `tool_use` it answers (an earlier assistant turn's);
/// block content is joined into one text.
fn tool_result(
    field: &str,
    tool_use_id: String,
    content: Option<Content>,
    is_error: bool,
    tool_names: &HashMap<String, String>,
) -> Result<pb::Part, ApiError> {
    let name = tool_names.get(&tool_use_id).cloned().ok_or_else(|| {
        ApiError::invalid(
            &format!("{field}.tool_use_id"),
            format!("`{tool_use_id}` answers no tool_use of an earlier assistant turn"),
        )
    })?;
    let output = match content {
        None => String::new(),
        Some(Content::Text(t)) => t,
        Some(Content::Blocks(b)) => b
            .into_iter()
            .enumerate()
            .map(|(k, v)| text_of(&format!("{field}.content[{k}]"), v))
            .collect::<Result<Vec<_>, _>>()?
            .join("\n"),
    };
    Ok(unified::tool_result(tool_use_id, name, output, is_error))
}

/// A reasoning part carrying Anthropic's replay data; its model is left empty, to be the requested model's catalog id
/// once resolved (the one that made it, [`unified::fill_model`]).
fn reasoning(text: String, replay: Value) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::Reasoning(pb::ReasoningPart {
            text,
            provider_metadata: Some(pb::ProviderMetadata {
                protocol: Protocol::Anthropic.as_str().to_string(),
                model: String::new(),
                json: replay.to_string(),
            }),
        })),
    }
}

fn tool_choice(c: ToolChoice) -> pb::ToolChoice {
    use pb::tool_choice::Mode;
    let (mode, name, disable_parallel) = match c {
        ToolChoice::Auto {
            disable_parallel_tool_use,
        } => (Mode::Auto, String::new(), disable_parallel_tool_use),
        ToolChoice::Any {
            disable_parallel_tool_use,
        } => (Mode::Required, String::new(), disable_parallel_tool_use),
        ToolChoice::None {} => (Mode::None, String::new(), false),
        ToolChoice::Tool {
            name,
            disable_parallel_tool_use,
        } => (Mode::Tool, name, disable_parallel_tool_use),
    };
    pb::ToolChoice {
        mode: mode as i32,
        tool_name: name,
        disable_parallel,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "request_tests.rs"]
mod tests;
