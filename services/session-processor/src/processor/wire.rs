//! The gateway's shapes as the Processor stores them on messages and parts: finish reasons, errors, and the
//! provider metadata a later request sends back unchanged.

use llm_proto::gateway as gw;
use llm_proto::sessions as pb;

/// The unified finish reason as stored on messages and step-finish parts.
pub fn finish_name(r: gw::FinishReason) -> &'static str {
    match r {
        gw::FinishReason::Stop => "stop",
        gw::FinishReason::Length => "length",
        gw::FinishReason::ToolCalls => "tool_calls",
        gw::FinishReason::ContentFilter => "content_filter",
        gw::FinishReason::Error => "error",
        gw::FinishReason::Other | gw::FinishReason::Unspecified => "other",
    }
}

/// A gateway error as a message error.
pub fn message_error(e: &gw::Error) -> pb::MessageError {
    let kind = match e.kind() {
        gw::ErrorKind::Auth => pb::message_error::Kind::Auth,
        gw::ErrorKind::ContextOverflow => pb::message_error::Kind::ContextOverflow,
        gw::ErrorKind::Cancelled => pb::message_error::Kind::Aborted,
        _ => pb::message_error::Kind::Api,
    };
    pb::MessageError {
        kind: kind as i32,
        message: e.message.clone(),
        http_status: e.http_status,
        retryable: e.retryable,
    }
}

/// Provider metadata stored on parts as one JSON object, so it goes back to the gateway unchanged.
pub fn metadata_json(m: Option<&gw::ProviderMetadata>) -> String {
    match m {
        Some(m) => serde_json::json!({"protocol": m.protocol, "model": m.model, "json": m.json})
            .to_string(),
        None => String::new(),
    }
}

/// The inverse of [`metadata_json`].
pub fn metadata_from_json(s: &str) -> Option<gw::ProviderMetadata> {
    if s.is_empty() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(s).ok()?;
    Some(gw::ProviderMetadata {
        protocol: v.get("protocol")?.as_str()?.to_string(),
        model: v.get("model")?.as_str()?.to_string(),
        json: v.get("json")?.as_str()?.to_string(),
    })
}
