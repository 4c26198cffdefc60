//! Token-counting request rules: Anthropic's `count_tokens` (and Vertex AI's `count-tokens:rawPredict` for
//! Anthropic models), the Gemini API's and Vertex AI's `countTokens`, and Bedrock's `CountTokens`. Each takes its
//! API's generation input without the generation settings, and refuses anything else.

use serde_json::Value;

use super::{Check, Fail, anthropic, bedrock, gemini, string};

/// Fields Anthropic's `count_tokens` takes.
const ANTHROPIC_FIELDS: [&str; 10] = [
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "mcp_servers",
    "context_management",
    "output_config",
    "output_format",
];

/// Anthropic's `POST /v1/messages/count_tokens`: a Messages body without `max_tokens`, `stream` or sampling, then
/// the Messages rules on what it has.
pub(super) fn anthropic(body: &Value) -> Check {
    let Some(obj) = body.as_object() else {
        return Err(Fail::new("Input should be a valid dictionary"));
    };
    if let Some(k) = obj.keys().find(|k| !ANTHROPIC_FIELDS.contains(&k.as_str())) {
        return Err(Fail::new(format!("{k}: Extra inputs are not permitted")));
    }
    if string(body, "model").is_none_or(str::is_empty) {
        return Err(Fail::new("model: Field required"));
    }
    // The Messages rules, with the one setting a count has no use for filled in above any thinking budget.
    let budget = body
        .pointer("/thinking/budget_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut as_messages = body.clone();
    if let Some(fields) = as_messages.as_object_mut() {
        fields.insert("max_tokens".into(), (budget + 1).into());
    }
    anthropic::check(&as_messages)
}

/// Vertex AI's count for Anthropic models: Vertex's `anthropic_version` and the counted `model` in the body.
pub(super) fn vertex_anthropic(body: &Value) -> Check {
    match string(body, "anthropic_version") {
        Some(super::vertex::ANTHROPIC_VERSION) => {}
        Some(_) => {
            return Err(Fail::new(format!(
                "anthropic_version: Input should be '{}'",
                super::vertex::ANTHROPIC_VERSION
            )));
        }
        None => return Err(Fail::new("anthropic_version: Field required")),
    }
    let mut rest = body.clone();
    if let Some(fields) = rest.as_object_mut() {
        fields.remove("anthropic_version");
    }
    anthropic(&rest)
}

/// The Gemini API's `POST /v1beta/models/{m}:countTokens`: `contents`, or a whole `generateContentRequest` naming
/// the path's model.
pub(super) fn gemini(model: &str, body: &Value) -> Check {
    let Some(obj) = body.as_object() else {
        return Err(Fail::new("Invalid JSON payload received."));
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !["contents", "generateContentRequest"].contains(&k.as_str()))
    {
        return Err(Fail::new(format!(
            "Invalid JSON payload received. Unknown name \"{k}\": Cannot find field."
        )));
    }
    match (obj.get("contents"), obj.get("generateContentRequest")) {
        (Some(_), Some(_)) => Err(Fail::new(
            "contents and generate_content_request cannot both be set.",
        )),
        (None, None) => Err(Fail::new(
            "* CountTokensRequest.contents: contents is not specified\n",
        )),
        (Some(_), None) => gemini::check(model, body),
        (None, Some(request)) => {
            if string(request, "model") != Some(&format!("models/{model}")) {
                return Err(Fail::new(
                    "* CountTokensRequest.generate_content_request.model: model must be `models/` and the model of \
                     the path\n",
                ));
            }
            let mut rest = request.clone();
            if let Some(fields) = rest.as_object_mut() {
                fields.remove("model");
            }
            gemini::check(model, &rest)
        }
    }
}

/// Vertex AI's `POST …/publishers/google/models/{m}:countTokens`: the contents, system instruction, tools and
/// generation config at the top level.
pub(super) fn vertex_gemini(model: &str, body: &Value) -> Check {
    let known = [
        "contents",
        "systemInstruction",
        "tools",
        "generationConfig",
        "model",
        "instances",
    ];
    let Some(obj) = body.as_object() else {
        return Err(Fail::new("Invalid JSON payload received."));
    };
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(Fail::new(format!(
            "Invalid JSON payload received. Unknown name \"{k}\": Cannot find field."
        )));
    }
    gemini::check(model, body)
}

/// Bedrock's `POST /model/{id}/count-tokens`: the id of a foundation model (inference profiles are not counted),
/// and one input, a Converse one here.
pub(super) fn bedrock(model: &str, body: &Value) -> Check {
    let invalid = |m: &str| Fail::new(m).code("ValidationException");
    let profile = [
        "us.", "us-gov.", "eu.", "apac.", "ca.", "jp.", "au.", "global.",
    ]
    .iter()
    .any(|p| model.starts_with(p));
    if profile {
        return Err(invalid("The provided model identifier is invalid."));
    }
    let Some(input) = body.get("input").and_then(Value::as_object) else {
        return Err(invalid(
            "1 validation error detected: Value null at 'input' failed to satisfy constraint: Member must not be null",
        ));
    };
    if let Some(k) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| *k != "input"))
    {
        return Err(invalid(&format!(
            "Malformed input request: extraneous key [{k}] is not permitted"
        )));
    }
    let converse = match (input.get("converse"), input.get("invokeModel"), input.len()) {
        (Some(c), None, 1) => c,
        (None, Some(_), 1) => return Ok(()),
        _ => {
            return Err(invalid(
                "input: exactly one of converse and invokeModel must be set",
            ));
        }
    };
    let known = [
        "messages",
        "system",
        "toolConfig",
        "additionalModelRequestFields",
    ];
    if let Some(k) = converse
        .as_object()
        .and_then(|o| o.keys().find(|k| !known.contains(&k.as_str())))
    {
        return Err(invalid(&format!(
            "Malformed input request: extraneous key [{k}] is not permitted"
        )));
    }
    bedrock::converse(converse).map_err(|f| f.code("ValidationException"))
}
