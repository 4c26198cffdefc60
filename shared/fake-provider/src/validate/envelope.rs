//! What every request of a protocol must carry before its body's rules apply, as the real APIs check it: the
//! credential and version headers, and no top-level body field the API does not know (OpenAI: "Unrecognized request
//! argument supplied"; Anthropic: "Extra inputs are not permitted"; Google: "Unknown name … Cannot find field").
//!
//! Compatible servers (Mistral, DeepSeek) accept parameters of their own, so only OpenAI's, Azure's, Anthropic's and
//! Google's rules refuse unknown fields.

use serde_json::Value;

use super::{Fail, Protocol};
use crate::Recorded;

/// OpenAI Chat Completions' request parameters.
const CHAT_FIELDS: &[&str] = &[
    "messages",
    "model",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

/// OpenAI Responses' request parameters.
const RESPONSES_FIELDS: &[&str] = &[
    "background",
    "conversation",
    "include",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "model",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

/// Anthropic Messages' request parameters (`output_format` is the structured-outputs beta's spelling).
const ANTHROPIC_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "container",
    "context_management",
    "mcp_servers",
    "metadata",
    "output_config",
    "output_format",
    "service_tier",
    "stop_sequences",
    "stream",
    "system",
    "temperature",
    "thinking",
    "tool_choice",
    "tools",
    "top_k",
    "top_p",
];

/// Gemini's `GenerateContentRequest` fields, in both spellings its JSON parser takes.
const GEMINI_FIELDS: &[&str] = &[
    "contents",
    "tools",
    "toolConfig",
    "tool_config",
    "safetySettings",
    "safety_settings",
    "systemInstruction",
    "system_instruction",
    "generationConfig",
    "generation_config",
    "cachedContent",
    "cached_content",
    "labels",
];

/// The API key a request to `protocol` must carry (`None`: any non-empty one), and no unknown top-level field.
pub(crate) fn check(
    protocol: Protocol,
    req: &Recorded,
    key: Option<&str>,
    body: &Value,
) -> Result<(), (u16, Fail)> {
    credential(protocol, req, key)?;
    let known = match protocol {
        Protocol::OpenaiChat | Protocol::AzureChat => CHAT_FIELDS,
        Protocol::OpenaiResponses | Protocol::AzureResponses => RESPONSES_FIELDS,
        Protocol::Anthropic => ANTHROPIC_FIELDS,
        Protocol::Gemini | Protocol::VertexGemini => GEMINI_FIELDS,
        _ => return Ok(()),
    };
    let Some(unknown) = body
        .as_object()
        .and_then(|o| o.keys().find(|k| !known.contains(&k.as_str())))
    else {
        return Ok(());
    };
    let fail = match protocol {
        Protocol::Anthropic => Fail::new(format!("{unknown}: Extra inputs are not permitted")),
        Protocol::Gemini | Protocol::VertexGemini => Fail::new(format!(
            "Invalid JSON payload received. Unknown name \"{unknown}\": Cannot find field."
        )),
        _ => Fail::new(format!("Unrecognized request argument supplied: {unknown}")),
    };
    Err((400, fail))
}

/// The credential and version headers: OpenAI `authorization: Bearer`, Azure `api-key` (or a bearer token),
/// Anthropic `x-api-key` and `anthropic-version`, Gemini `x-goog-api-key` (or `?key=`). Vertex and Bedrock
/// authenticate otherwise (their own checks).
fn credential(protocol: Protocol, req: &Recorded, key: Option<&str>) -> Result<(), (u16, Fail)> {
    let bearer = req
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|v| !v.is_empty());
    let sent = match protocol {
        Protocol::OpenaiChat
        | Protocol::OpenaiResponses
        | Protocol::OpenaiEmbeddings
        | Protocol::MistralChat
        | Protocol::DeepseekChat => {
            bearer.ok_or_else(|| {
                (401, Fail::new("You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."))
            })?
        }
        Protocol::AzureChat | Protocol::AzureResponses | Protocol::AzureEmbeddings => {
            match req.header("api-key").filter(|v| !v.is_empty()).or(bearer) {
                Some(v) => v,
                None => {
                    return Err((401, Fail::new("Access denied due to missing subscription key. Make sure to include subscription key when making requests to an API.").code("401")));
                }
            }
        }
        Protocol::Anthropic | Protocol::AnthropicCountTokens => {
            let sent = req
                .header("x-api-key")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| (401, Fail::new("x-api-key header is required")))?;
            match req.header("anthropic-version") {
                Some(v) if !v.is_empty() => {}
                _ => return Err((400, Fail::new("anthropic-version: header is required"))),
            }
            sent
        }
        Protocol::Gemini | Protocol::GeminiEmbeddings | Protocol::GeminiCountTokens => {
            let query_key = req
                .path
                .split_once('?')
                .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("key=")));
            req.header("x-goog-api-key")
                .or(query_key)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    (403, Fail::new("Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."))
                })?
        }
        // Vertex authenticates with Google tokens, Bedrock with SigV4: their own checks.
        _ => return Ok(()),
    };
    match key {
        Some(expected) if sent != expected => {
            let fail = match protocol {
                Protocol::Anthropic => Fail::new("invalid x-api-key"),
                Protocol::Gemini => Fail::new("API key not valid. Please pass a valid API key."),
                _ => Fail::new("Incorrect API key provided.").code("invalid_api_key"),
            };
            let status = if protocol == Protocol::Gemini {
                400
            } else {
                401
            };
            Err((status, fail))
        }
        _ => Ok(()),
    }
}
