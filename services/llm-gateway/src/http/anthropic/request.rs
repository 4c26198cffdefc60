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
//! `cache_control` markers are accepted and not copied: for models with prompt caching the Anthropic adapter places
//! its own breakpoints (tools, system, the last two user turns), which covers what callers mark in practice.
//! Server tools (`web_search`, `code_execution`, …), `mcp_servers` and `container` are refused naming the field;
//! other fields (`metadata`, `service_tier`, and fields this version does not know) are accepted and ignored.

use std::collections::HashMap;

use llm_proto::gateway as pb;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::body::parse;
use crate::http::errors::ApiError;
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
    thinking: Option<Thinking>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u32>,
    #[serde(default)]
    stop_sequences: Vec<String>,
    mcp_servers: Option<Value>,
    container: Option<Value>,
}

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
#[serde(tag = "type", rename_all = "snake_case")]
enum ToolChoice {
    Auto,
    Any,
    None,
    Tool { name: String },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Thinking {
    Enabled { budget_tokens: u32 },
    Disabled,
}

#[derive(Deserialize)]
struct Tool {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    name: String,
    #[serde(default)]
    description: String,
    input_schema: Value,
}

/// Translates a Messages body into the unified request; the flag is `stream`.
pub fn translate(body: Value) -> Result<(pb::Generation, bool), ApiError> {
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
    let mut g = pb::Generation {
        model: b.model,
        ..Default::default()
    };
    g.system = match b.system {
        None => Vec::new(),
        Some(Content::Text(t)) => vec![t],
        Some(Content::Blocks(blocks)) => blocks
            .into_iter()
            .enumerate()
            .map(|(i, v)| text_of(&format!("system[{i}]"), v))
            .collect::<Result<_, _>>()?,
    };
    let mut tool_names = HashMap::new();
    for (i, m) in b.messages.into_iter().enumerate() {
        let field = format!("messages[{i}]");
        let m: Message = parse(&field, m)?;
        message(&field, m, &mut g, &mut tool_names)?;
    }
    for (i, t) in b.tools.into_iter().enumerate() {
        let field = format!("tools[{i}]");
        let t: Tool = parse(&field, t)?;
        if t.kind.as_deref().is_some_and(|k| k != "custom") {
            return Err(ApiError::invalid(
                &format!("{field}.type"),
                "only custom tools are served",
            ));
        }
        g.tools.push(pb::Tool {
            name: t.name,
            description: t.description,
            input_schema_json: t.input_schema.to_string(),
            ..Default::default()
        });
    }
    g.tool_choice = b.tool_choice.map(tool_choice);
    g.reasoning = b.thinking.map(|t| match t {
        Thinking::Enabled { budget_tokens } => pb::Reasoning {
            effort: 0,
            budget_tokens,
        },
        Thinking::Disabled => pb::Reasoning {
            effort: pb::reasoning::Effort::None as i32,
            budget_tokens: 0,
        },
    });
    g.sampling = Some(pb::Sampling {
        temperature: b.temperature,
        top_p: b.top_p,
        top_k: b.top_k,
        max_output_tokens: b.max_tokens,
        stop_sequences: b.stop_sequences,
        seed: None,
    });
    Ok((g, b.stream))
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
    let (results, parts) = parts(field, &m.role, blocks, &g.model, tool_names)?;
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
    model: &str,
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
                parts.push(reasoning(model, thinking, json!({"signature": signature})));
            }
            (Role::Assistant, Block::RedactedThinking { data }) => {
                parts.push(reasoning(
                    model,
                    String::new(),
                    json!({"redacted_data": data}),
                ));
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

/// A reasoning part carrying Anthropic's replay data, attributed to the requested model (the one that made it).
fn reasoning(model: &str, text: String, replay: Value) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::Reasoning(pb::ReasoningPart {
            text,
            provider_metadata: Some(pb::ProviderMetadata {
                protocol: Protocol::Anthropic.as_str().to_string(),
                model: model.to_string(),
                json: replay.to_string(),
            }),
        })),
    }
}

fn tool_choice(c: ToolChoice) -> pb::ToolChoice {
    use pb::tool_choice::Mode;
    let (mode, name) = match c {
        ToolChoice::Auto => (Mode::Auto, String::new()),
        ToolChoice::Any => (Mode::Required, String::new()),
        ToolChoice::None => (Mode::None, String::new()),
        ToolChoice::Tool { name } => (Mode::Tool, name),
    };
    pb::ToolChoice {
        mode: mode as i32,
        tool_name: name,
        ..Default::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "request_tests.rs"]
mod tests;
