//! OpenAI Responses request body (`POST /v1/responses`) → the unified request, statelessly.
//!
//! What maps to what (docs/gateway.md "OpenAI Responses"): `instructions` → the first system section; `input` (a
//! string, or items: messages, `function_call`, `function_call_output`, `reasoning`; see [`super::input`]) → the
//! conversation; function `tools` (with `strict`), `tool_choice`, `parallel_tool_calls`; `text.format` (`json_schema`
//! with `strict`, `json_object`) → output format; `reasoning.effort`; `max_output_tokens`, `temperature`, `top_p`.
//!
//! The stateful features are refused naming the field: the gateway keeps nothing between calls (the
//! session-processor is the stateful door). Every other field is sorted by [`super::super::fields`]'s policy: hints
//! (`metadata`, `user`, …) go to providers that speak Responses and nowhere else, fields this door does not map
//! (`text.verbosity`, and unknown ones) go to Responses providers only and are refused for any other, and fields no
//! provider could honour here are refused.

use llm_proto::gateway as pb;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::http::body::parse;
use crate::http::errors::ApiError;
use crate::http::fields::Extras;
use crate::http::origins::{self, Origins};
use crate::http::responses::input;
use crate::http::unified;

/// The parts of the request that shape the response rather than the generation, echoed in the response object.
#[derive(Debug, Clone, Default)]
pub struct Shape {
    /// `stream: true`.
    pub stream: bool,
    /// The request's fields a response object repeats (`instructions`, `tools`, `text`, …), as sent.
    pub echo: Map<String, Value>,
    /// Where each piece of the unified request came from, for errors found after translation.
    pub origins: Origins,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Text {
    #[serde(default)]
    format: Option<Value>,
    #[serde(default)]
    verbosity: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reasoning {
    #[serde(default)]
    effort: Option<String>,
    #[serde(default)]
    summary: Option<Value>,
    /// The older name of `summary`.
    #[serde(default)]
    generate_summary: Option<Value>,
}

/// The fields this door reads itself; everything else is an [`Extras`] field.
const READ: [&str; 16] = [
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "reasoning",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "stream_options",
    "include",
    "store",
    "background",
];

/// Fields that hint at how a provider should serve the request without changing the answer: sent to providers that
/// speak Responses, left out for others.
pub const HINTS: [&str; 6] = [
    "metadata",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "service_tier",
];

/// Translates a Responses body into the unified request, the fields left for the provider, and the response shape.
pub fn translate(body: Value) -> Result<(pb::Generation, Extras, Shape), ApiError> {
    let Value::Object(mut body) = body else {
        return Err(ApiError::invalid("body", "must be a JSON object"));
    };
    refuse_stateful(&body)?;
    let mut shape = Shape {
        stream: take_bool(&mut body, "stream")?.unwrap_or(false),
        echo: Map::new(),
        origins: Origins::new(origins::RESPONSES, ".parameters"),
    };
    for key in [
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "text",
        "reasoning",
        "max_output_tokens",
        "temperature",
        "top_p",
        "metadata",
    ] {
        if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
            shape.echo.insert(key.to_string(), v.clone());
        }
    }
    let model: String = parse("model", body.remove("model").unwrap_or(Value::Null))?;
    let mut g = pb::Generation {
        model,
        ..Default::default()
    };
    if let Some(instructions) = body.remove("instructions").filter(|v| !v.is_null()) {
        g.system.push(parse("instructions", instructions)?);
        shape.origins.note_system("instructions");
    }
    let input = body
        .remove("input")
        .ok_or_else(|| ApiError::invalid("input", "required"))?;
    input::translate(input, &mut g, &mut shape.origins)?;
    tools(&mut body, &mut g)?;
    let mut extras = Extras::default();
    text(&mut body, &mut g, &mut extras)?;
    reasoning(&mut body, &mut g, &mut extras)?;
    g.sampling = Some(pb::Sampling {
        temperature: take(&mut body, "temperature")?,
        top_p: take(&mut body, "top_p")?,
        max_output_tokens: take(&mut body, "max_output_tokens")?,
        ..Default::default()
    });
    accepted(&mut body)?;
    for key in READ {
        body.remove(key);
    }
    extras.absorb(body, &HINTS);
    Ok((g, extras, shape))
}

/// The features that need state the gateway does not keep, refused naming the field.
fn refuse_stateful(body: &Map<String, Value>) -> Result<(), ApiError> {
    const STATELESS: &str = "the gateway's Responses API is stateless; the session-processor serves stored \
                             responses and conversations";
    for key in ["previous_response_id", "conversation", "prompt"] {
        if body.get(key).is_some_and(|v| !v.is_null()) {
            return Err(ApiError::invalid(key, STATELESS));
        }
    }
    if body.get("store") == Some(&Value::Bool(true)) {
        return Err(ApiError::invalid(
            "store",
            format!("must be false or left out: {STATELESS}"),
        ));
    }
    if body.get("background") == Some(&Value::Bool(true)) {
        return Err(ApiError::invalid("background", STATELESS));
    }
    Ok(())
}

/// Fields accepted with the only values this door can honour.
fn accepted(body: &mut Map<String, Value>) -> Result<(), ApiError> {
    if let Some(v) = body.remove("truncation").filter(|v| !v.is_null())
        && v != "disabled"
    {
        return Err(ApiError::invalid(
            "truncation",
            "only `disabled` is served: a stateless call sends the whole input, and a context overflow is an error",
        ));
    }
    if let Some(v) = body.remove("top_logprobs").filter(|v| !v.is_null())
        && v != 0
    {
        return Err(ApiError::invalid(
            "top_logprobs",
            "log probabilities are not served",
        ));
    }
    if body.remove("max_tool_calls").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::invalid(
            "max_tool_calls",
            "limits hosted tool calls, which are not served",
        ));
    }
    if let Some(include) = body.remove("include").filter(|v| !v.is_null()) {
        let include: Vec<String> = parse("include", include)?;
        // Encrypted reasoning is always in the reasoning items this door returns.
        if let Some((i, other)) = include
            .iter()
            .enumerate()
            .find(|(_, v)| *v != "reasoning.encrypted_content")
        {
            return Err(ApiError::invalid(
                &format!("include[{i}]"),
                format!("`{other}` is not served (only `reasoning.encrypted_content`)"),
            ));
        }
    }
    // `include_obfuscation` asks for padding on deltas; this door adds none, which is what `false` asks for and
    // harmless where `true` was asked (the padding carries nothing).
    if let Some(options) = body.remove("stream_options").filter(|v| !v.is_null()) {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct StreamOptions {
            #[serde(default)]
            #[allow(dead_code)]
            include_obfuscation: Option<bool>,
        }
        let _: StreamOptions = parse("stream_options", options)?;
    }
    Ok(())
}

fn tools(body: &mut Map<String, Value>, g: &mut pb::Generation) -> Result<(), ApiError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Function {
        #[serde(rename = "type")]
        kind: String,
        name: String,
        #[serde(default)]
        description: Option<String>,
        #[serde(default)]
        parameters: Option<Value>,
        #[serde(default)]
        strict: Option<bool>,
    }
    let tools: Vec<Value> = match body.remove("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => parse("tools", v)?,
    };
    for (i, t) in tools.into_iter().enumerate() {
        let field = format!("tools[{i}]");
        let kind = t.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind != "function" {
            return Err(ApiError::invalid(
                &format!("{field}.type"),
                format!("`{kind}` tools are not served; only `function` tools are"),
            ));
        }
        let f: Function = parse(&field, t)?;
        debug_assert_eq!(f.kind, "function");
        let schema = f
            .parameters
            .filter(|p| !p.is_null())
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        g.tools.push(pb::Tool {
            name: f.name,
            description: f.description.unwrap_or_default(),
            input_schema_json: schema.to_string(),
            // OpenAI's default for Responses function tools is strict.
            strict: f.strict.unwrap_or(true),
        });
    }
    let parallel = take_bool(body, "parallel_tool_calls")?;
    let choice = body.remove("tool_choice").filter(|v| !v.is_null());
    g.tool_choice = unified::tool_choice(choice.map(tool_choice).transpose()?, parallel);
    Ok(())
}

fn tool_choice(v: Value) -> Result<pb::ToolChoice, ApiError> {
    match &v {
        Value::String(s) => unified::tool_choice_named("tool_choice", s),
        Value::Object(o) => match (o.get("type").and_then(Value::as_str), o.get("name")) {
            (Some("function"), Some(Value::String(name))) => Ok(unified::tool_choice_of(name)),
            (Some("function"), _) => Err(ApiError::invalid("tool_choice.name", "required")),
            (Some(other), _) => Err(ApiError::invalid(
                "tool_choice.type",
                format!("`{other}` is not served; use a function or `auto`, `none`, `required`"),
            )),
            (None, _) => Err(ApiError::invalid("tool_choice.type", "required")),
        },
        _ => Err(ApiError::invalid(
            "tool_choice",
            "must be a string or an object",
        )),
    }
}

fn text(
    body: &mut Map<String, Value>,
    g: &mut pb::Generation,
    extras: &mut Extras,
) -> Result<(), ApiError> {
    use pb::output_format::Type;
    let Some(text) = body.remove("text").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let t: Text = parse("text", text)?;
    if let Some(v) = t.verbosity.filter(|v| !v.is_null()) {
        extras.same_protocol(
            "text.verbosity",
            "text",
            serde_json::json!({"verbosity": v}),
        );
    }
    let Some(format) = t.format.filter(|v| !v.is_null()) else {
        return Ok(());
    };
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Format {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        schema: Option<Value>,
        #[serde(default)]
        strict: Option<bool>,
        #[serde(default)]
        description: Option<String>,
    }
    let f: Format = parse("text.format", format)?;
    g.output_format = match f.kind.as_str() {
        "text" => None,
        "json_object" => Some(pb::OutputFormat {
            r#type: Type::JsonObject as i32,
            ..Default::default()
        }),
        "json_schema" => {
            let schema = f
                .schema
                .ok_or_else(|| ApiError::invalid("text.format.schema", "required"))?;
            if f.description.is_some() {
                return Err(ApiError::invalid(
                    "text.format.description",
                    "a schema description is not served; describe the output in `instructions`",
                ));
            }
            Some(pb::OutputFormat {
                r#type: Type::JsonSchema as i32,
                name: f.name.unwrap_or_else(|| "output".into()),
                schema_json: schema.to_string(),
                strict: f.strict.unwrap_or(false),
            })
        }
        other => {
            return Err(ApiError::invalid(
                "text.format.type",
                format!("unknown value `{other}` (`text`, `json_schema` or `json_object`)"),
            ));
        }
    };
    Ok(())
}

fn reasoning(
    body: &mut Map<String, Value>,
    g: &mut pb::Generation,
    extras: &mut Extras,
) -> Result<(), ApiError> {
    let Some(value) = body.remove("reasoning").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let r: Reasoning = parse("reasoning", value.clone())?;
    if r.summary
        .as_ref()
        .or(r.generate_summary.as_ref())
        .is_some_and(|v| !v.is_null())
    {
        // The summary style is a Responses provider's; others return the reasoning text they have.
        extras.hint("reasoning", value);
    }
    if let Some(effort) = r.effort {
        g.reasoning = Some(pb::Reasoning {
            effort: crate::http::fields::effort("reasoning.effort", &effort)? as i32,
            budget_tokens: 0,
        });
    }
    Ok(())
}

/// Removes `key` and reads it as `T` (null is absent).
fn take<T: serde::de::DeserializeOwned>(
    body: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<T>, ApiError> {
    match body.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => parse(key, v).map(Some),
    }
}

fn take_bool(body: &mut Map<String, Value>, key: &str) -> Result<Option<bool>, ApiError> {
    take(body, key)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "request_tests.rs"]
mod tests;
