//! A Responses request's `input` → the unified conversation.
//!
//! - A string is one user message.
//! - `message` items (the `type` may be left out): `user` content (`input_text`, `input_image`, `input_file`) → a
//!   user message; `assistant` content (`output_text`, `refusal`) → assistant text; `system` and `developer` → system
//!   sections, in order.
//! - `reasoning`, assistant `message` and `function_call` items in a row are one assistant turn, as a response
//!   returned them; `function_call_output` items in a row are one tool message, each result named by the call it
//!   answers.
//! - A `reasoning` item's `encrypted_content` carries its replay data ([`super::replay`]).
//!
//! `item_reference` needs stored items and is refused, as are item types this door does not serve (hosted tool
//! calls), each naming `input[i]`.

use std::collections::HashMap;

use llm_proto::gateway as pb;
use serde::Deserialize;
use serde_json::Value;

use crate::http::body::parse;
use crate::http::errors::ApiError;
use crate::http::origins::Origins;
use crate::http::responses::replay;
use crate::http::unified;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageItem {
    #[serde(rename = "type", default)]
    _kind: Option<String>,
    role: String,
    content: Content,
    #[serde(default, rename = "id")]
    _id: Option<Value>,
    #[serde(default, rename = "status")]
    _status: Option<Value>,
    /// What an assistant message was (commentary, final answer); the model reads the text either way.
    #[serde(default, rename = "phase")]
    _phase: Option<Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Part {
    InputText {
        text: String,
    },
    OutputText {
        text: String,
        #[serde(default)]
        #[allow(dead_code)]
        annotations: Option<Value>,
        #[serde(default)]
        #[allow(dead_code)]
        logprobs: Option<Value>,
    },
    Refusal {
        refusal: String,
    },
    InputImage {
        #[serde(default)]
        image_url: Option<String>,
        #[serde(default)]
        file_id: Option<String>,
        #[serde(default)]
        detail: Option<String>,
    },
    InputFile {
        #[serde(default)]
        file_data: Option<String>,
        #[serde(default)]
        file_url: Option<String>,
        #[serde(default)]
        filename: Option<String>,
        #[serde(default)]
        file_id: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionCall {
    #[serde(rename = "type")]
    _kind: String,
    call_id: String,
    name: String,
    #[serde(default)]
    arguments: String,
    #[serde(default, rename = "id")]
    _id: Option<Value>,
    #[serde(default, rename = "status")]
    _status: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionCallOutput {
    #[serde(rename = "type")]
    _kind: String,
    call_id: String,
    output: Content,
    #[serde(default, rename = "id")]
    _id: Option<Value>,
    #[serde(default, rename = "status")]
    _status: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasoningItem {
    #[serde(rename = "type")]
    _kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    summary: Vec<SummaryPart>,
    #[serde(default)]
    content: Option<Vec<SummaryPart>>,
    #[serde(default)]
    encrypted_content: Option<String>,
    #[serde(default, rename = "status")]
    _status: Option<Value>,
}

#[derive(Deserialize)]
struct SummaryPart {
    text: String,
}

/// The conversation being built: the open assistant turn, and the tool each call id belongs to.
struct Builder<'g> {
    g: &'g mut pb::Generation,
    tool_names: HashMap<String, String>,
}

/// Appends `input` to `g`'s conversation (and system sections), noting where each piece came from in `origins`.
pub fn translate(
    input: Value,
    g: &mut pb::Generation,
    origins: &mut Origins,
) -> Result<(), ApiError> {
    let items = match input {
        Value::String(text) => {
            let mark = Origins::mark(g);
            g.messages
                .push(unified::message(pb::Role::User, vec![unified::text(text)]));
            origins.note(g, mark, "input");
            return Ok(());
        }
        Value::Array(items) => items,
        _ => {
            return Err(ApiError::invalid(
                "input",
                "must be a string or a list of items",
            ));
        }
    };
    let mut b = Builder {
        g,
        tool_names: HashMap::new(),
    };
    for (i, item) in items.into_iter().enumerate() {
        let field = format!("input[{i}]");
        let (mark, systems) = (Origins::mark(b.g), b.g.system.len());
        b.item(&field, item)?;
        origins.note(b.g, mark, &field);
        for _ in systems..b.g.system.len() {
            origins.note_system(&format!("{field}.content"));
        }
    }
    Ok(())
}

impl Builder<'_> {
    fn item(&mut self, field: &str, item: Value) -> Result<(), ApiError> {
        let kind = match item.get("type").and_then(Value::as_str) {
            Some(kind) => kind.to_string(),
            None if item.get("role").is_some() => "message".to_string(),
            None => return Err(ApiError::invalid(&format!("{field}.type"), "required")),
        };
        match kind.as_str() {
            "message" => self.message(field, parse(field, item)?),
            "function_call" => {
                let c: FunctionCall = parse(field, item)?;
                self.tool_names.insert(c.call_id.clone(), c.name.clone());
                let part = unified::tool_call(c.call_id, c.name, c.arguments);
                self.assistant().push(part);
                Ok(())
            }
            "function_call_output" => self.output(field, parse(field, item)?),
            "reasoning" => {
                let r: ReasoningItem = parse(field, item)?;
                let part = reasoning(r);
                self.assistant().push(part);
                Ok(())
            }
            "item_reference" => Err(ApiError::invalid(
                field,
                "an item reference needs stored items, and the gateway's Responses API stores none; send the item \
                 itself (with `store: false` clients do)",
            )),
            other => Err(ApiError::invalid(
                &format!("{field}.type"),
                format!("`{other}` items are not served"),
            )),
        }
    }

    fn message(&mut self, field: &str, m: MessageItem) -> Result<(), ApiError> {
        let content = format!("{field}.content");
        match m.role.as_str() {
            "user" => {
                let parts = user_parts(&content, m.content)?;
                self.g
                    .messages
                    .push(unified::message(pb::Role::User, parts));
            }
            "assistant" => {
                let text = text_of(&content, m.content, Side::Output)?;
                if !text.is_empty() {
                    self.assistant().push(unified::text(text));
                }
            }
            "system" | "developer" => {
                let text = text_of(&content, m.content, Side::Input)?;
                self.g.system.push(text);
            }
            other => {
                return Err(ApiError::invalid(
                    &format!("{field}.role"),
                    format!("unknown role `{other}`"),
                ));
            }
        }
        Ok(())
    }

    fn output(&mut self, field: &str, o: FunctionCallOutput) -> Result<(), ApiError> {
        let name = self.tool_names.get(&o.call_id).cloned().ok_or_else(|| {
            ApiError::invalid(
                &format!("{field}.call_id"),
                format!(
                    "`{}` answers no `function_call` earlier in `input`",
                    o.call_id
                ),
            )
        })?;
        let output = text_of(&format!("{field}.output"), o.output, Side::Input)?;
        let part = unified::tool_result(o.call_id, name, output, false);
        match self.g.messages.last_mut() {
            Some(last) if last.role == pb::Role::Tool as i32 => last.parts.push(part),
            _ => self
                .g
                .messages
                .push(unified::message(pb::Role::Tool, vec![part])),
        }
        Ok(())
    }

    /// The parts of the assistant turn in progress, opening one when the last message is not the assistant's.
    fn assistant(&mut self) -> &mut Vec<pb::Part> {
        let open = self
            .g
            .messages
            .last()
            .is_some_and(|m| m.role == pb::Role::Assistant as i32);
        if !open {
            self.g
                .messages
                .push(unified::message(pb::Role::Assistant, Vec::new()));
        }
        // Not empty: the assistant turn is the last message, found or just pushed.
        let last = self.g.messages.len() - 1;
        &mut self.g.messages[last].parts
    }
}

fn reasoning(r: ReasoningItem) -> pb::Part {
    let text: Vec<String> = if r.summary.is_empty() {
        r.content
            .unwrap_or_default()
            .into_iter()
            .map(|p| p.text)
            .collect()
    } else {
        r.summary.into_iter().map(|p| p.text).collect()
    };
    pb::Part {
        kind: Some(pb::part::Kind::Reasoning(pb::ReasoningPart {
            text: text.join("\n\n"),
            provider_metadata: r.encrypted_content.map(|e| replay::open(&e, &r.id)),
        })),
    }
}

/// Which side of the conversation a content is on: what part types it may hold.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Input,
    Output,
}

/// The text of a content that may hold only text, parts joined.
fn text_of(field: &str, c: Content, side: Side) -> Result<String, ApiError> {
    let parts = match c {
        Content::Text(t) => return Ok(t),
        Content::Parts(parts) => parts,
    };
    let mut out = String::new();
    for (j, p) in parts.into_iter().enumerate() {
        let field = format!("{field}[{j}]");
        match (parse(&field, p)?, side) {
            (Part::InputText { text }, Side::Input)
            | (Part::OutputText { text, .. }, Side::Output)
            | (Part::Refusal { refusal: text }, Side::Output) => out.push_str(&text),
            _ => {
                let only = if side == Side::Input {
                    "input_text"
                } else {
                    "output_text or refusal"
                };
                return Err(ApiError::invalid(
                    &field,
                    format!("only {only} parts are accepted here"),
                ));
            }
        }
    }
    Ok(out)
}

fn user_parts(field: &str, c: Content) -> Result<Vec<pb::Part>, ApiError> {
    let parts = match c {
        Content::Text(t) => return Ok(vec![unified::text(t)]),
        Content::Parts(parts) => parts,
    };
    let mut out = Vec::with_capacity(parts.len());
    for (j, p) in parts.into_iter().enumerate() {
        let field = format!("{field}[{j}]");
        out.push(user_part(&field, parse(&field, p)?)?);
    }
    Ok(out)
}

fn user_part(field: &str, part: Part) -> Result<pb::Part, ApiError> {
    const NO_FILE_IDS: &str = "uploaded file ids are not served; send the data or a URL";
    match part {
        Part::InputText { text } => Ok(unified::text(text)),
        Part::InputImage {
            image_url,
            file_id,
            detail,
        } => {
            if file_id.is_some() {
                return Err(ApiError::invalid(&format!("{field}.file_id"), NO_FILE_IDS));
            }
            unified::detail(&format!("{field}.detail"), detail)?;
            let url = image_url
                .ok_or_else(|| ApiError::invalid(&format!("{field}.image_url"), "required"))?;
            unified::file_url(field, &url, "")
        }
        Part::InputFile {
            file_data,
            file_url,
            filename,
            file_id,
        } => {
            if file_id.is_some() {
                return Err(ApiError::invalid(&format!("{field}.file_id"), NO_FILE_IDS));
            }
            let part = match (file_data, file_url) {
                (Some(data), _) => unified::file_url(field, &data, "")?,
                (None, Some(url)) => unified::file_url(field, &url, "")?,
                (None, None) => {
                    return Err(ApiError::invalid(
                        &format!("{field}.file_data"),
                        "required (or `file_url`)",
                    ));
                }
            };
            Ok(unified::named(part, filename))
        }
        Part::OutputText { .. } | Part::Refusal { .. } => Err(ApiError::invalid(
            field,
            "an output part belongs to an assistant message",
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "input_tests.rs"]
mod tests;
