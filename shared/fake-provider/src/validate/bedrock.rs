//! Bedrock Converse request rules: the SigV4 signature, recomputed with the test secret, and the Converse body.
//!
//! The signature check is written independently of the gateway's signer (it works from the bytes the server
//! received, as the real service does): the canonical request is rebuilt from the request line, the headers the
//! client says it signed and the SHA-256 of the body, and the signature must match the one derived from
//! [`TEST_SECRET_ACCESS_KEY`].

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Check, Fail, Protocol, array, object, string, word_chars};
use crate::Recorded;
use crate::percent::percent_decode;

/// The access key id the fake accepts (AWS's documented example id).
pub const TEST_ACCESS_KEY_ID: &str = "AKIDEXAMPLE";
/// The secret the fake verifies signatures with (AWS's documented example secret).
pub const TEST_SECRET_ACCESS_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
/// The region the fake serves.
pub const TEST_REGION: &str = "us-east-1";

/// Top-level fields Converse accepts.
const FIELDS: [&str; 10] = [
    "messages",
    "system",
    "inferenceConfig",
    "toolConfig",
    "additionalModelRequestFields",
    "additionalModelResponseFieldPaths",
    "guardrailConfig",
    "promptVariables",
    "requestMetadata",
    "performanceConfig",
];

/// Fields of a `toolSpec` (`strict`: Bedrock's structured outputs, calls constrained to the schema).
const TOOL_SPEC_FIELDS: [&str; 4] = ["name", "description", "inputSchema", "strict"];
/// The signature, then the rules of the operation `protocol` names: Converse's, the embedding models' `InvokeModel`
/// bodies ([`super::embeddings`]) or `CountTokens` ([`super::counting`]).
pub(super) fn check_operation(protocol: Protocol, req: &Recorded, body: &Value) -> Check {
    match protocol {
        Protocol::BedrockEmbeddings => {
            signature(req)?;
            super::embeddings::bedrock(&path_model(&req.path), body)
        }
        Protocol::BedrockCountTokens => {
            signature(req)?;
            super::counting::bedrock(&path_model(&req.path), body)
        }
        _ => check(req, body),
    }
}

/// The decoded model id of `/model/{id}/{operation}` (empty when the path is not one).
pub(super) fn path_model(path: &str) -> String {
    path.split('?')
        .next()
        .and_then(|p| p.strip_prefix("/model/"))
        .and_then(|rest| rest.rsplit_once('/'))
        .map(|(id, _)| percent_decode(id))
        .unwrap_or_default()
}

/// The signature, then the path, then the body. A signature failure is a 403 with AWS's wording.
fn check(req: &Recorded, body: &Value) -> Check {
    signature(req)?;
    let model = model_id(&req.path).ok_or_else(|| {
        Fail::new("The provided model identifier is invalid.").code("ValidationException")
    })?;
    if model.contains('/') && !model.starts_with("arn:") {
        return Err(
            Fail::new("The provided model identifier is invalid.").code("ValidationException")
        );
    }
    if req
        .path
        .split('?')
        .next()
        .unwrap_or("")
        .ends_with("/converse-stream")
        && body.get("toolConfig").is_some()
        && !streams_tool_use(&model)
    {
        return Err(
            Fail::new("This model doesn't support tool use in streaming mode.")
                .code("ValidationException"),
        );
    }
    converse(body).map_err(|f| f.code("ValidationException"))
}

/// Whether the model takes tools on ConverseStream: Bedrock's Meta Llama and Mistral models take them only on the
/// non-streaming Converse (AWS's "streaming tool use: no"), whatever the inference-profile prefix.
fn streams_tool_use(model: &str) -> bool {
    let family = model.rsplit('/').next().unwrap_or(model);
    !(family.contains("meta.llama") || family.contains("mistral."))
}

/// The decoded model id of `/model/{id}/converse-stream` (or `/converse`).
fn model_id(path: &str) -> Option<String> {
    let path = path.split('?').next()?;
    let rest = path.strip_prefix("/model/")?;
    let id = rest
        .strip_suffix("/converse-stream")
        .or_else(|| rest.strip_suffix("/converse"))?;
    if id.is_empty() || id.contains('/') {
        return None;
    }
    Some(percent_decode(id))
}

fn denied(message: &str) -> Fail {
    Fail::new(message).code("InvalidSignatureException")
}

/// The `Credential`, `SignedHeaders` and `Signature` of the `authorization` header.
fn authorization(req: &Recorded) -> Result<(&str, &str, &str), Fail> {
    let auth = req.header("authorization").ok_or_else(|| {
        Fail::new("Missing Authentication Token").code("MissingAuthenticationTokenException")
    })?;
    let rest = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| denied("Unsupported signature algorithm"))?;
    let field = |name: &str| {
        rest.split(", ")
            .find_map(|p| p.trim().strip_prefix(name)?.strip_prefix('='))
    };
    match (
        field("Credential"),
        field("SignedHeaders"),
        field("Signature"),
    ) {
        (Some(c), Some(h), Some(s)) => Ok((c, h, s)),
        _ => Err(denied(
            "Authorization header requires Credential, SignedHeaders and Signature",
        )),
    }
}

fn signature(req: &Recorded) -> Check {
    let (credential, signed, given) = authorization(req)?;
    let parts: Vec<&str> = credential.split('/').collect();
    let [key_id, date, region, service, "aws4_request"] = parts[..] else {
        return Err(denied(
            "Credential should be scoped to a valid region, service and aws4_request",
        ));
    };
    if key_id != TEST_ACCESS_KEY_ID {
        return Err(
            Fail::new("The security token included in the request is invalid.")
                .code("UnrecognizedClientException"),
        );
    }
    if region != TEST_REGION || service != "bedrock" {
        return Err(denied(
            "Credential should be scoped to a valid region and the bedrock service",
        ));
    }
    let amz_date = req.header("x-amz-date").unwrap_or("");
    if !amz_date.starts_with(date) || amz_date.len() != 16 {
        return Err(denied(
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date",
        ));
    }
    let names: Vec<&str> = signed.split(';').collect();
    for required in ["host", "x-amz-date"] {
        if !names.contains(&required) {
            return Err(denied(&format!("'{required}' must be a signed header")));
        }
    }
    if req.header("x-amz-security-token").is_some() && !names.contains(&"x-amz-security-token") {
        return Err(denied("x-amz-security-token must be a signed header"));
    }
    let payload = hex(&Sha256::digest(&req.body));
    if let Some(claimed) = req.header("x-amz-content-sha256")
        && claimed != payload
    {
        return Err(denied(
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
        ));
    }
    let canonical = canonical_request(req, &names, &payload);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{date}/{region}/{service}/aws4_request\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let mut key = hmac(
        format!("AWS4{TEST_SECRET_ACCESS_KEY}").as_bytes(),
        date.as_bytes(),
    );
    for part in [region, service, "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    if hex(&hmac(&key, to_sign.as_bytes())) != given {
        return Err(denied(
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret \
             Access Key and signing method. Consult the service documentation for details.",
        ));
    }
    Ok(())
}

fn canonical_request(req: &Recorded, names: &[&str], payload: &str) -> String {
    let (path, query) = req.path.split_once('?').unwrap_or((&req.path, ""));
    let mut uri = String::new();
    for &b in path.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    let mut pairs: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    pairs.sort_unstable();
    let mut out = format!("{}\n{uri}\n{}\n", req.method, pairs.join("&"));
    for name in names {
        let values: Vec<String> = req
            .headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        out.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    out.push_str(&format!("\n{}\n{payload}", names.join(";")));
    out
}

fn hmac(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let inner = Sha256::new()
        .chain_update(k.map(|b| b ^ 0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(k.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The Converse body rules alone (no signature).
pub(super) fn check_body(body: &Value) -> Check {
    converse(body).map_err(|f| f.code("ValidationException"))
}

/// The Converse body rules.
pub(super) fn converse(body: &Value) -> Check {
    let Some(obj) = body.as_object() else {
        return Err(Fail::new(
            "Malformed input request: the body must be a JSON object",
        ));
    };
    if let Some(k) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(Fail::new(format!(
            "Malformed input request: extraneous key [{k}] is not permitted"
        )));
    }
    let messages = array(body, "messages");
    if messages.is_empty() {
        return Err(Fail::new("A conversation must start with a user message."));
    }
    for b in array(body, "system") {
        if !(b
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.trim().is_empty())
            || b.get("cachePoint").is_some())
        {
            return Err(Fail::new(
                "The text field in the SystemContentBlock object is blank.",
            ));
        }
    }
    let mut previous_uses: Vec<&str> = Vec::new();
    let mut uses_tools = false;
    for (i, m) in messages.iter().enumerate() {
        let role = string(m, "role").unwrap_or("");
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if role != want {
            return Err(Fail::new(
                "A conversation must alternate between user and assistant roles. Make sure the conversation \
                 alternates between user and assistant roles and try again.",
            ));
        }
        let content = array(m, "content");
        if content.is_empty() {
            return Err(Fail::new(format!(
                "messages.{i}.content: the content must not be empty"
            )));
        }
        let mut uses = Vec::new();
        for b in content {
            uses_tools |= block(role, b, &previous_uses)?;
            if let Some(id) = b.pointer("/toolUse/toolUseId").and_then(Value::as_str) {
                uses.push(id);
            }
        }
        previous_uses = uses;
    }
    if uses_tools && object(body, "toolConfig").is_none() {
        return Err(Fail::new(
            "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
        ));
    }
    tool_config(body)?;
    inference(body)
}

/// One content block; `true` when it is a tool block.
fn block(role: &str, b: &Value, previous_uses: &[&str]) -> Result<bool, Fail> {
    let Some(obj) = b.as_object().filter(|o| o.len() == 1) else {
        return Err(Fail::new(
            "A ContentBlock must have exactly one member set.",
        ));
    };
    let (kind, value) = obj
        .iter()
        .next()
        .map(|(k, v)| (k.as_str(), v))
        .unwrap_or_default();
    match (kind, role) {
        ("text", _) => {
            if value.as_str().is_none_or(|t| t.trim().is_empty()) {
                return Err(Fail::new(
                    "The text field in the ContentBlock object is blank. Add text to the text field, and try again.",
                ));
            }
        }
        ("cachePoint", _) => {}
        ("image" | "document", "user") => {
            if value
                .pointer("/source/bytes")
                .and_then(Value::as_str)
                .is_none()
            {
                return Err(Fail::new(format!("The {kind} block needs source.bytes")));
            }
        }
        ("toolUse", "assistant") => {
            let id = string(value, "toolUseId").unwrap_or("");
            if !word_chars(id, 64) {
                return Err(Fail::new(format!(
                    "Value '{id}' at 'toolUse.toolUseId' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+"
                )));
            }
            if !value.get("input").is_some_and(Value::is_object) || string(value, "name").is_none()
            {
                return Err(Fail::new("toolUse needs a name and an input object"));
            }
            return Ok(true);
        }
        ("toolResult", "user") => {
            let id = string(value, "toolUseId").unwrap_or("");
            if !previous_uses.contains(&id) {
                return Err(Fail::new(
                    "The number of toolResult blocks at messages.2.content exceeds the number of toolUse blocks of previous turn.",
                ));
            }
            if array(value, "content").is_empty() {
                return Err(Fail::new("toolResult.content must not be empty"));
            }
            return Ok(true);
        }
        ("reasoningContent", "assistant") => {
            let signed = value
                .pointer("/reasoningText/signature")
                .and_then(Value::as_str);
            if signed.is_none_or(str::is_empty) && value.get("redactedContent").is_none() {
                return Err(Fail::new("reasoningContent must carry its signature"));
            }
        }
        _ => {
            return Err(Fail::new(format!(
                "A {kind} block is not allowed in a {role} message"
            )));
        }
    }
    Ok(false)
}

fn tool_config(body: &Value) -> Check {
    let Some(config) = body.get("toolConfig") else {
        return Ok(());
    };
    let tools = array(config, "tools");
    if tools.is_empty() {
        return Err(Fail::new("toolConfig.tools must not be empty"));
    }
    for t in tools {
        if t.get("cachePoint").is_some() {
            continue;
        }
        if let Some(k) = object(t, "toolSpec").and_then(|spec| {
            spec.keys()
                .find(|k| !TOOL_SPEC_FIELDS.contains(&k.as_str()))
        }) {
            return Err(Fail::new(format!(
                "Malformed input request: extraneous key [{k}] is not permitted"
            )));
        }
        if t.pointer("/toolSpec/strict")
            .is_some_and(|s| !s.is_boolean())
        {
            return Err(Fail::new(
                "Malformed input request: toolSpec.strict must be a boolean",
            ));
        }
        let name = t
            .pointer("/toolSpec/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !word_chars(name, 64) {
            return Err(Fail::new(format!("Invalid tool name '{name}'")));
        }
        if !t
            .pointer("/toolSpec/inputSchema/json")
            .is_some_and(Value::is_object)
        {
            return Err(Fail::new("toolSpec.inputSchema.json must be an object"));
        }
    }
    if let Some(choice) = config.get("toolChoice") {
        let members: Vec<&String> = choice
            .as_object()
            .map(|c| c.keys().collect())
            .unwrap_or_default();
        if !matches!(members.as_slice(), [m] if ["auto", "any", "tool"].contains(&m.as_str())) {
            return Err(Fail::new(
                "Malformed input request: toolChoice must have exactly one of auto, any or tool",
            ));
        }
    }
    Ok(())
}

fn inference(body: &Value) -> Check {
    let max = body.pointer("/inferenceConfig/maxTokens");
    if max.is_some_and(|m| m.as_u64().is_none_or(|n| n == 0)) {
        return Err(Fail::new(
            "inferenceConfig.maxTokens must be a positive integer",
        ));
    }
    if let Some(budget) = body.pointer("/additionalModelRequestFields/thinking/budget_tokens") {
        let budget = budget.as_u64().unwrap_or(0);
        if budget < 1024 {
            return Err(Fail::new(
                "thinking.budget_tokens: Input should be greater than or equal to 1024",
            ));
        }
        if max.and_then(Value::as_u64).is_some_and(|m| m <= budget) {
            return Err(Fail::new(
                "`max_tokens` must be greater than `thinking.budget_tokens`",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "bedrock_tests.rs"]
mod tests;
