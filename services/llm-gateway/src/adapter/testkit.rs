//! Builders of unified request parts and messages for the adapters' unit tests, so a test reads as the conversation
//! it sends.

use super::pb;
use pb::file_part::Source;
use pb::part::Kind;

pub(crate) fn part(kind: Kind) -> pb::Part {
    pb::Part { kind: Some(kind) }
}

pub(crate) fn text(t: &str) -> pb::Part {
    part(Kind::Text(pb::TextPart { text: t.into() }))
}

/// A tool call without provider metadata.
pub(crate) fn call(id: &str, tool: &str, input: &str) -> pb::Part {
    call_with(id, tool, input, None)
}

pub(crate) fn call_with(
    id: &str,
    tool: &str,
    input: &str,
    metadata: Option<pb::ProviderMetadata>,
) -> pb::Part {
    part(Kind::ToolCall(pb::ToolCallPart {
        call_id: id.into(),
        tool_name: tool.into(),
        input_json: input.into(),
        provider_metadata: metadata,
    }))
}

pub(crate) fn result(id: &str, tool: &str, output: &str, is_error: bool) -> pb::Part {
    part(Kind::ToolResult(pb::ToolResultPart {
        call_id: id.into(),
        tool_name: tool.into(),
        output: output.into(),
        is_error,
    }))
}

pub(crate) fn reasoning(t: &str, metadata: Option<pb::ProviderMetadata>) -> pb::Part {
    part(Kind::Reasoning(pb::ReasoningPart {
        text: t.into(),
        provider_metadata: metadata,
    }))
}

/// Replay data made by `model` speaking `protocol`.
pub(crate) fn metadata(protocol: &str, model: &str, json: &str) -> Option<pb::ProviderMetadata> {
    Some(pb::ProviderMetadata {
        protocol: protocol.into(),
        model: model.into(),
        json: json.into(),
    })
}

pub(crate) fn file(media_type: &str, filename: &str, source: Source) -> pb::Part {
    part(Kind::File(pb::FilePart {
        media_type: media_type.into(),
        filename: filename.into(),
        source: Some(source),
    }))
}

pub(crate) fn message(role: pb::Role, parts: Vec<pb::Part>) -> pb::Message {
    pb::Message {
        role: role.into(),
        parts,
    }
}

pub(crate) fn user(parts: Vec<pb::Part>) -> pb::Message {
    message(pb::Role::User, parts)
}

pub(crate) fn assistant(parts: Vec<pb::Part>) -> pb::Message {
    message(pb::Role::Assistant, parts)
}

pub(crate) fn tool(parts: Vec<pb::Part>) -> pb::Message {
    message(pb::Role::Tool, parts)
}
