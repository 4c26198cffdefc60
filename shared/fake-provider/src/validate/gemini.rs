//! Gemini `generateContent` request rules (docs/providers.md §4, §6).
//! Gemini parses requests as protobuf messages, so an unknown key anywhere
//! is a 400 as well.

use serde_json::{Map, Value};

use super::{Check, Fail, array, filled, object, string};

/// Fields of a `Part` that are its data (exactly one must be set).
const DATA_FIELDS: [&str; 7] = [
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
];
/// Fields of a `Part` besides its data.
const PART_METADATA: [&str; 4] = [
    "thought",
    "thoughtSignature",
    "videoMetadata",
    "partMetadata",
];
/// The `Schema` message's fields: what `parameters` and `responseSchema` may use.
const SCHEMA_FIELDS: [&str; 22] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// Function calling modes of the Gemini API (`VALIDATED`: AUTO with calls constrained to their schemas).
pub(super) const MODES: [&str; 4] = ["AUTO", "ANY", "NONE", "VALIDATED"];
/// Response media types Gemini produces.
const MIME_TYPES: [&str; 3] = ["text/plain", "application/json", "text/x.enum"];

pub(super) fn check(model: &str, body: &Value) -> Check {
    if !body.is_object() {
        return Err(Fail::new("Invalid JSON payload received."));
    }
    let contents = match body.get("contents") {
        Some(Value::Array(c)) if !c.is_empty() => c,
        _ => {
            return Err(Fail::new(
                "* GenerateContentRequest.contents: contents is not specified\n",
            ));
        }
    };
    tools(body)?;
    tool_config(body, &MODES)?;
    output(body)?;
    if let Some(schema) = object(body, "generationConfig").and_then(|c| c.get("responseSchema")) {
        self::schema(schema, "generation_config.response_schema")?;
    }
    let json_output = object(body, "generationConfig")
        .and_then(|c| c.get("responseMimeType"))
        .and_then(Value::as_str)
        == Some("application/json");
    if json_output && !array(body, "tools").is_empty() && !model.starts_with("gemini-3") {
        return Err(Fail::new(
            "Function calling with a response mime type: 'application/json' is unsupported",
        ));
    }
    for (i, c) in contents.iter().enumerate() {
        content(i, c)?;
    }
    turns(contents)?;
    first_turn(contents)?;
    if model.starts_with("gemini-3") {
        signatures(contents)?;
    }
    Ok(())
}

/// `toolConfig.functionCallingConfig`: a mode of `modes`, and `allowedFunctionNames` only with ANY or VALIDATED.
pub(super) fn tool_config(body: &Value, modes: &[&str]) -> Check {
    let Some(config) = body.pointer("/toolConfig/functionCallingConfig") else {
        return Ok(());
    };
    let mode = string(config, "mode").unwrap_or("AUTO");
    if !modes.contains(&mode) {
        return Err(Fail::new(format!(
            "Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), \"{mode}\""
        )));
    }
    if config.get("allowedFunctionNames").is_some() && !matches!(mode, "ANY" | "VALIDATED") {
        return Err(Fail::new(
            "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names can be set only when the mode is ANY or VALIDATED\n",
        ));
    }
    Ok(())
}

/// `responseMimeType` one Gemini produces, and a `responseSchema` only with a structured one.
fn output(body: &Value) -> Check {
    let Some(config) = object(body, "generationConfig") else {
        return Ok(());
    };
    let mime = config.get("responseMimeType").and_then(Value::as_str);
    if let Some(m) = mime.filter(|m| !MIME_TYPES.contains(m)) {
        return Err(Fail::new(format!(
            "* GenerateContentRequest.generation_config.response_mime_type: allowed mimetypes are `text/plain`, `application/json`, and `text/x.enum`, but got `{m}`.\n"
        )));
    }
    if config.contains_key("responseSchema")
        && !matches!(mime, Some("application/json" | "text/x.enum"))
    {
        return Err(Fail::new(
            "* GenerateContentRequest.generation_config.response_schema: response_mime_type must be `application/json` or `text/x.enum` when response_schema is set.\n",
        ));
    }
    Ok(())
}

fn role(c: &Value) -> &str {
    string(c, "role").unwrap_or("")
}

fn has(part: &Value, field: &str) -> bool {
    part.get(field).is_some()
}

fn content(i: usize, c: &Value) -> Check {
    if !matches!(role(c), "user" | "model") {
        return Err(Fail::new("Please use a valid role: user, model."));
    }
    let parts = array(c, "parts");
    if parts.is_empty() {
        return Err(Fail::new(format!(
            "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.\n"
        )));
    }
    for (j, p) in parts.iter().enumerate() {
        let Some(fields) = p.as_object() else {
            return Err(Fail::new(format!(
                "Invalid value at 'contents[{i}].parts[{j}]' (type.googleapis.com/google.ai.generativelanguage.v1beta.Part), {p}"
            )));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|k| !DATA_FIELDS.contains(&k.as_str()) && !PART_METADATA.contains(&k.as_str()))
        {
            return Err(Fail::new(format!(
                "Invalid JSON payload received. Unknown name \"{unknown}\" at 'contents[{i}].parts[{j}]': Cannot find field."
            )));
        }
        let data: Vec<&str> = DATA_FIELDS
            .iter()
            .copied()
            .filter(|f| fields.contains_key(*f))
            .collect();
        match data.as_slice() {
            [] => {
                return Err(Fail::new(format!(
                    "* GenerateContentRequest.contents[{i}].parts[{j}].data: required oneof field 'data' must have one initialized field\n"
                )));
            }
            [_] => {}
            [_, second, ..] => {
                return Err(Fail::new(format!(
                    "Invalid value at 'contents[{i}].parts[{j}]' (oneof), oneof field 'data' is already set. Cannot set '{second}'"
                )));
            }
        }
        function_fields(i, j, p)?;
        if let Some(text) = p.get("text")
            && !text.is_string()
        {
            return Err(Fail::new(format!(
                "Invalid value at 'contents[{i}].parts[{j}].text' (TYPE_STRING), {text}"
            )));
        }
    }
    Ok(())
}

/// A part's `functionCall` and `functionResponse`: valid names, object arguments and responses.
fn function_fields(i: usize, j: usize, p: &Value) -> Check {
    if let Some(call) = p.get("functionCall") {
        if !string(call, "name").is_some_and(valid_function_name) {
            return Err(Fail::new(format!(
                "* GenerateContentRequest.contents[{i}].parts[{j}].function_call.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.\n"
            )));
        }
        if call.get("args").is_some_and(|a| !a.is_object()) {
            return Err(Fail::new(format!(
                "Invalid value at 'contents[{i}].parts[{j}].function_call.args' (type.googleapis.com/google.protobuf.Struct), {}",
                call["args"]
            )));
        }
    }
    if let Some(response) = p.get("functionResponse") {
        if !string(response, "name").is_some_and(valid_function_name) {
            return Err(Fail::new(format!(
                "* GenerateContentRequest.contents[{i}].parts[{j}].function_response.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.\n"
            )));
        }
        match response.get("response") {
            Some(Value::Object(_)) => {}
            other => {
                return Err(Fail::new(format!(
                    "Invalid value at 'contents[{i}].parts[{j}].function_response.response' (type.googleapis.com/google.protobuf.Struct), {}",
                    other.cloned().unwrap_or(Value::Null)
                )));
            }
        }
    }
    Ok(())
}

fn calls(c: &Value) -> Vec<&str> {
    array(c, "parts")
        .iter()
        .filter_map(|p| p.get("functionCall"))
        .filter_map(|f| string(f, "name"))
        .collect()
}

fn responses(c: &Value) -> Vec<&str> {
    array(c, "parts")
        .iter()
        .filter_map(|p| p.get("functionResponse"))
        .filter_map(|f| string(f, "name"))
        .collect()
}

/// A function call turn follows a user turn or a function response turn;
/// the turn after it answers every call, by name.
fn turns(contents: &[Value]) -> Check {
    for (i, c) in contents.iter().enumerate() {
        let made = calls(c);
        if role(c) == "model" && !made.is_empty() {
            let after_user = i.checked_sub(1).map(|p| role(&contents[p])) == Some("user");
            if !after_user {
                return Err(Fail::new(
                    "Please ensure that function call turn comes immediately after a user turn or after a function response turn.",
                ));
            }
            if let Some(next) = contents.get(i + 1) {
                let mut answered = responses(next);
                if answered.len() != made.len() {
                    return Err(Fail::new(
                        "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
                    ));
                }
                let mut called = made.clone();
                called.sort_unstable();
                answered.sort_unstable();
                if called != answered {
                    return Err(Fail::new(format!(
                        "Please ensure that the function response turn answers the function call turn: called {called:?}, answered {answered:?}."
                    )));
                }
            }
        }
        let answered = responses(c);
        if !answered.is_empty() {
            let previous = i.checked_sub(1).map(|p| &contents[p]);
            let called = previous
                .filter(|p| role(p) == "model")
                .map(calls)
                .unwrap_or_default();
            if called.is_empty() {
                return Err(Fail::new(
                    "Please ensure that function response turn comes immediately after a function call turn.",
                ));
            }
        }
    }
    Ok(())
}

/// `contents` open with a user turn: Gemini refuses a history that starts
/// with the model, whatever that turn holds (a function call turn that
/// follows no user turn is refused by [`turns`] first, with its own message).
fn first_turn(contents: &[Value]) -> Check {
    if contents.first().map(role) == Some("model") {
        return Err(Fail::new(
            "Please ensure that multiturn requests alternate between user and model.",
        ));
    }
    Ok(())
}

/// Gemini 3 validates the thought signature of the first function call of
/// every model turn.
fn signatures(contents: &[Value]) -> Check {
    for c in contents.iter().filter(|c| role(c) == "model") {
        if let Some((position, first)) = array(c, "parts")
            .iter()
            .enumerate()
            .find(|(_, p)| has(p, "functionCall"))
            && !filled(first, "thoughtSignature")
        {
            let name = first
                .get("functionCall")
                .and_then(|f| string(f, "name"))
                .unwrap_or("");
            return Err(Fail::new(format!(
                "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{name}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                position + 1
            )));
        }
    }
    Ok(())
}

/// A letter or `_` first, then `[A-Za-z0-9_.:-]`, at most 64 characters.
fn valid_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

fn tools(body: &Value) -> Check {
    for (t, tool) in array(body, "tools").iter().enumerate() {
        for (d, decl) in array(tool, "functionDeclarations").iter().enumerate() {
            if !string(decl, "name").is_some_and(valid_function_name) {
                return Err(Fail::new(format!(
                    "* GenerateContentRequest.tools[{t}].function_declarations[{d}].name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.\n"
                )));
            }
            if let Some(parameters) = decl.get("parameters") {
                schema(
                    parameters,
                    &format!("tools[{t}].function_declarations[{d}].parameters"),
                )?;
            }
        }
    }
    Ok(())
}

/// A schema uses only the `Schema` message's fields, a single `type`, and
/// non-empty `properties` on an `OBJECT`.
fn schema(s: &Value, at: &str) -> Check {
    let Some(fields) = s.as_object() else {
        return Err(Fail::new(format!(
            "Invalid value at '{at}' (type.googleapis.com/google.ai.generativelanguage.v1beta.Schema), {s}"
        )));
    };
    if let Some(unknown) = fields.keys().find(|k| !SCHEMA_FIELDS.contains(&k.as_str())) {
        return Err(Fail::new(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\" at '{at}': Cannot find field."
        )));
    }
    if let Some(Value::Array(_)) = fields.get("type") {
        return Err(Fail::new(format!(
            "Invalid JSON payload received. Unknown name \"type\" at '{at}': Proto field is not repeating, cannot start list."
        )));
    }
    if let Some(Value::Object(properties)) = fields.get("properties") {
        if properties.is_empty() && is_object(fields) {
            return Err(Fail::new(format!(
                "* GenerateContentRequest.{at}.properties: should be non-empty for OBJECT type\n"
            )));
        }
        for (k, v) in properties {
            schema(v, &format!("{at}.properties[{k}].value"))?;
        }
    }
    if let Some(items) = fields.get("items") {
        schema(items, &format!("{at}.items"))?;
    }
    for (n, branch) in array(s, "anyOf").iter().enumerate() {
        schema(branch, &format!("{at}.any_of[{n}]"))?;
    }
    Ok(())
}

fn is_object(fields: &Map<String, Value>) -> bool {
    fields
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.eq_ignore_ascii_case("object"))
}
