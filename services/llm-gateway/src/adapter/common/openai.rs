//! What the two OpenAI request builders (Chat Completions and Responses) write the same way: the bearer header,
//! the field a misplaced part is named by, a function tool and its parameter schema, the tool choice, and the
//! answers to a tool turn's calls.

use serde::Serialize;
use serde_json::{Value, json};

use crate::adapter::{BuildError, common::features, common::strict, pb};
use pb::part::Kind;

/// `Authorization: Bearer {key}`, or no header at all for an empty key: local servers (Ollama, vLLM) run without
/// one, and an empty `Bearer ` makes some of them reject the request.
pub(crate) fn bearer(api_key: &str) -> Vec<(&'static str, String)> {
    if api_key.is_empty() {
        return Vec::new();
    }
    vec![("authorization", format!("Bearer {api_key}"))]
}

/// The request field of message `i`'s part `j`.
pub(crate) fn part_field(i: usize, j: usize) -> String {
    format!("generation.messages[{i}].parts[{j}]")
}

/// The error of a part of kind `what` in a message of role `role`, which cannot carry it.
pub(crate) fn wrong_part(i: usize, j: usize, what: &str, role: &str) -> BuildError {
    BuildError::new(
        part_field(i, j),
        format!("{what} parts cannot appear in {role} messages"),
    )
}

/// A replayed call's arguments (message `i`, part `j`) as the string OpenAI takes: `{}` when empty, else the JSON
/// as sent, checked here because the provider would answer a bad replayed call with an opaque 400.
pub(crate) fn call_arguments(i: usize, j: usize, c: &pb::ToolCallPart) -> Result<&str, BuildError> {
    if c.input_json.trim().is_empty() {
        return Ok("{}");
    }
    serde_json::from_str::<serde::de::IgnoredAny>(&c.input_json).map_err(|e| {
        BuildError::new(
            format!("{}.tool_call.input_json", part_field(i, j)),
            format!("not valid JSON: {e}"),
        )
    })?;
    Ok(c.input_json.as_str())
}

/// A function tool as both protocols describe it: Chat Completions nests it under `function`, Responses writes its
/// fields beside `type`.
#[derive(Serialize)]
pub(crate) struct Function<'a> {
    pub(crate) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<&'a str>,
    pub(crate) parameters: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) strict: Option<bool>,
}

/// Tool `i` as a function tool with its name, description and parameters. A tool the caller marked strict goes with
/// its schema as written and `strict: true`, whatever the model's capabilities: the caller vouches for the schema,
/// and one strict mode refuses is the provider's to refuse, never sent loose. Otherwise its schema is lowered to
/// strict mode with `strict: true` when the model opts into strict schemas (`strict`) and the schema can be lowered
/// ([`strict::lower`]); else it goes as written, with `strict: false` only when the protocol needs it said
/// (`explicit`).
pub(crate) fn function_tool(
    i: usize,
    tool: &pb::Tool,
    strict: bool,
    explicit: bool,
) -> Result<Function<'_>, BuildError> {
    let parameters = tool_parameters(i, tool)?;
    let description = (!tool.description.is_empty()).then_some(tool.description.as_str());
    let (parameters, strict) = if tool.strict {
        (parameters, Some(true))
    } else {
        match strict.then(|| strict::lower(&parameters)).flatten() {
            Some(lowered) => (lowered, Some(true)),
            None => (parameters, explicit.then_some(false)),
        }
    };
    Ok(Function {
        name: &tool.name,
        description,
        parameters,
        strict,
    })
}

/// `tools`, `tool_choice` and `parallel_tool_calls`, which both protocols write alike: a function tool as `T`, a
/// named choice as `C`.
#[derive(Serialize)]
pub(crate) struct ToolFields<T, C> {
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<OfFunction<T>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice<C>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
}

/// The tool fields of `g`: every tool as a function tool ([`function_tool`], `strict` and `explicit` as there)
/// written by `tool`, the choice ([`tool_choice`]) with a named tool written by `named`, and
/// `parallel_tool_calls: false` for one call per step. OpenAI rejects `tool_choice` and `parallel_tool_calls`
/// without `tools`, so they only go out alongside them; the choice is validated even without tools, so a bad one is
/// reported whatever else the request holds.
pub(crate) fn tool_fields<'a, T, C>(
    g: &'a pb::Generation,
    strict: bool,
    explicit: bool,
    tool: impl Fn(Function<'a>) -> T,
    named: impl FnOnce(Named<'a>) -> C,
) -> Result<ToolFields<T, C>, BuildError> {
    let choice = tool_choice(g)?;
    if g.tools.is_empty() {
        return Ok(ToolFields {
            tools: None,
            tool_choice: None,
            parallel_tool_calls: None,
        });
    }
    let tools = g
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Ok(OfFunction::new(tool(function_tool(
                i, t, strict, explicit,
            )?)))
        })
        .collect::<Result<_, BuildError>>()?;
    Ok(ToolFields {
        tools: Some(tools),
        tool_choice: choice.map(|c| c.wire(named)),
        parallel_tool_calls: features::one_call_per_step(g).then_some(false),
    })
}

/// `{"type": "function", …}`: a function tool, or the choice of one, with the fields of `F` beside `type`.
#[derive(Serialize)]
struct OfFunction<F> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    function: F,
}

impl<F> OfFunction<F> {
    fn new(function: F) -> Self {
        OfFunction {
            kind: "function",
            function,
        }
    }
}

/// Chat Completions' nesting: the function's fields under `function`.
#[derive(Serialize)]
pub(crate) struct Nested<F> {
    pub(crate) function: F,
}

/// A function by name, as a tool choice names it.
#[derive(Serialize)]
pub(crate) struct Named<'a> {
    name: &'a str,
}

/// `tool_choice` as both protocols write it: a mode, or one function (named as `F` writes it).
#[derive(Serialize)]
#[serde(untagged)]
enum ToolChoice<F> {
    Mode(&'static str),
    Function(OfFunction<F>),
}

/// The caller's tool choice, before each protocol writes it.
pub(crate) enum Choice<'a> {
    /// `auto`, `none` or `required`.
    Mode(&'static str),
    /// This tool, one of the generation's.
    Named(&'a str),
}

impl<'a> Choice<'a> {
    /// The choice on the wire, a named tool written by `named`.
    fn wire<F>(self, named: impl FnOnce(Named<'a>) -> F) -> ToolChoice<F> {
        match self {
            Choice::Mode(mode) => ToolChoice::Mode(mode),
            Choice::Named(name) => ToolChoice::Function(OfFunction::new(named(Named { name }))),
        }
    }
}

/// The tool choice, `None` for the provider default (auto); a named tool must be among the generation's tools.
pub(crate) fn tool_choice(g: &pb::Generation) -> Result<Option<Choice<'_>>, BuildError> {
    use pb::tool_choice::Mode;

    let Some(tc) = &g.tool_choice else {
        return Ok(None);
    };
    Ok(match Mode::try_from(tc.mode).unwrap_or(Mode::Unspecified) {
        Mode::Unspecified => None,
        Mode::Auto => Some(Choice::Mode("auto")),
        Mode::None => Some(Choice::Mode("none")),
        Mode::Required => Some(Choice::Mode("required")),
        Mode::Tool => {
            const FIELD: &str = "generation.tool_choice.tool_name";
            if tc.tool_name.is_empty() {
                return Err(BuildError::new(FIELD, "MODE_TOOL needs a tool name"));
            }
            if !g.tools.iter().any(|t| t.name == tc.tool_name) {
                return Err(BuildError::new(
                    FIELD,
                    format!("no tool named {:?} in generation.tools", tc.tool_name),
                ));
            }
            Some(Choice::Named(&tc.tool_name))
        }
    })
}

/// Tool `i`'s parameters: its JSON Schema, whose root must be an object schema; an empty schema means a tool
/// without arguments.
fn tool_parameters(i: usize, tool: &pb::Tool) -> Result<Value, BuildError> {
    if tool.input_schema_json.trim().is_empty() {
        return Ok(json!({ "type": "object", "properties": {} }));
    }
    parse_object_schema(
        || format!("generation.tools[{i}].input_schema_json"),
        &tool.input_schema_json,
    )
}

/// The JSON Schema output the generation asks for, if any: its name (`output` when unnamed), the schema, and
/// whether it goes in strict mode. Strict with the schema as written when the caller asks for it
/// (`OutputFormat.strict`, as for tools in [`function_tool`]); else strict only when the model opts into strict
/// schemas (`strict`) and the schema can be lowered ([`strict::lower`]): strict mode requires every property in
/// `required` and `additionalProperties: false`, which callers' schemas rarely satisfy as written.
pub(crate) fn json_schema_output(
    g: &pb::Generation,
    strict: bool,
) -> Result<Option<(&str, Value, bool)>, BuildError> {
    use pb::output_format::Type;

    let Some(of) = &g.output_format else {
        return Ok(None);
    };
    if Type::try_from(of.r#type).unwrap_or(Type::Unspecified) != Type::JsonSchema {
        return Ok(None);
    }
    let schema = parse_object_schema(
        || "generation.output_format.schema_json".to_string(),
        &of.schema_json,
    )?;
    let name = if of.name.is_empty() {
        "output"
    } else {
        of.name.as_str()
    };
    if of.strict {
        return Ok(Some((name, schema, true)));
    }
    Ok(Some(
        match strict.then(|| strict::lower(&schema)).flatten() {
            Some(lowered) => (name, lowered, true),
            None => (name, schema, false),
        },
    ))
}

/// Parses a JSON Schema whose root must be an object schema; errors name `field`.
fn parse_object_schema(field: impl Fn() -> String, text: &str) -> Result<Value, BuildError> {
    let schema: Value = serde_json::from_str(text)
        .map_err(|e| BuildError::new(field(), format!("not valid JSON: {e}")))?;
    let Value::Object(obj) = &schema else {
        return Err(BuildError::new(
            field(),
            "the schema root must be a JSON object",
        ));
    };
    if let Some(ty) = obj.get("type")
        && ty != "object"
    {
        return Err(BuildError::new(
            field(),
            "the schema root must have type \"object\"",
        ));
    }
    Ok(schema)
}

/// One item per tool result of tool message `i`, in order, as `item` writes it. A failed tool's output goes as is
/// (the model reads the error text), and an empty output is still sent: OpenAI requires an answer for every call of
/// the previous assistant turn. Empty text parts are dropped; any other part is refused.
pub(crate) fn tool_results<'a, T>(
    i: usize,
    m: &'a pb::Message,
    out: &mut Vec<T>,
    item: impl Fn(&'a pb::ToolResultPart) -> T,
) -> Result<(), BuildError> {
    for (j, part) in m.parts.iter().enumerate() {
        match &part.kind {
            Some(Kind::ToolResult(r)) => out.push(item(r)),
            Some(Kind::Text(t)) if t.text.is_empty() => {}
            None => {}
            Some(Kind::Text(_)) => return Err(wrong_part(i, j, "text", "tool")),
            Some(Kind::File(_)) => return Err(wrong_part(i, j, "file", "tool")),
            Some(Kind::Reasoning(_)) => return Err(wrong_part(i, j, "reasoning", "tool")),
            Some(Kind::ToolCall(_)) => return Err(wrong_part(i, j, "tool call", "tool")),
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "openai_tests.rs"]
mod tests;

/// The OpenAI name of a reasoning effort (`reasoning_effort`, Responses `reasoning.effort`); `None` when unset.
pub(crate) fn effort_name(effort: i32) -> Option<&'static str> {
    use pb::reasoning::Effort;
    match Effort::try_from(effort).unwrap_or(Effort::Unspecified) {
        Effort::Unspecified => None,
        Effort::None => Some("none"),
        Effort::Minimal => Some("minimal"),
        Effort::Low => Some("low"),
        Effort::Medium => Some("medium"),
        Effort::High => Some("high"),
        Effort::Xhigh => Some("xhigh"),
    }
}
