//! Builders of unified request parts and messages for the adapters' unit tests, so a test reads as the conversation
//! it sends.

use crate::adapter::pb;
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

/// A message of `role` holding a part of each kind in `kinds`.
pub(crate) fn msg(role: pb::Role, kinds: Vec<Kind>) -> pb::Message {
    message(role, kinds.into_iter().map(part).collect())
}

/// What a part holds: for the tests that build messages from kinds ([`msg`]).
pub(crate) fn kind(p: pb::Part) -> Kind {
    p.kind.expect("the test kit builds parts with a kind")
}

/// Every sampling parameter set (temperature 0.2, top_p 0.9, top_k 40, 4096 output tokens, stop `END`, seed 7):
/// for the tests of what each model keeps of them.
pub(crate) fn every_sampling() -> pb::Sampling {
    pb::Sampling {
        temperature: Some(0.2),
        top_p: Some(0.9),
        top_k: Some(40),
        max_output_tokens: Some(4096),
        stop_sequences: vec!["END".into()],
        seed: Some(7),
    }
}

/// A conversation full of nothing to send: three user turns of which only the text "a" and "b" of the first
/// survive (empty text parts around them, a turn of one empty text, one of a part without a kind); an assistant
/// turn of reasoning no adapter can replay (no metadata) and empty text; a call `c1` of tool `t` without text and
/// its empty result; an assistant turn "Do", an image the model produced (which no OpenAI protocol replays), "ne.".
pub(crate) fn sparse_conversation() -> Vec<pb::Message> {
    vec![
        user(vec![text(""), text("a"), text(""), text("b")]),
        user(vec![text("")]),
        user(vec![pb::Part { kind: None }]),
        assistant(vec![reasoning("hmm", None), text("")]),
        assistant(vec![text(""), call("c1", "t", "{}")]),
        tool(vec![text(""), result("c1", "t", "", false)]),
        assistant(vec![
            text("Do"),
            file("image/png", "", Source::Data(vec![1, 2, 3])),
            text("ne."),
        ]),
    ]
}

/// A user's text and files in every form: an empty text part, a PNG inline, a JPEG by URL, a named PDF inline, a
/// plain-text file inline without a name (the fifth part, so a generated name is `part-5.txt`).
pub(crate) fn files_to_compare() -> Vec<pb::Part> {
    vec![
        text("Compare these."),
        text(""),
        file("image/png", "", Source::Data(vec![0x89, b'P', b'N', b'G'])),
        file(
            "image/jpeg",
            "",
            Source::Url("https://example.com/cat.jpg".into()),
        ),
        file(
            "application/pdf",
            "report.pdf",
            Source::Data(b"%PDF-1.7".to_vec()),
        ),
        file("text/plain", "", Source::Data(b"hi".to_vec())),
    ]
}

/// Messages holding a part their role cannot carry (a call from the user, text in a tool turn, a result from the
/// assistant) or no role, each with the field its error names.
pub(crate) fn misplaced_parts() -> Vec<(pb::Message, &'static str)> {
    vec![
        (
            user(vec![call("c", "t", "{}")]),
            "generation.messages[0].parts[0]",
        ),
        (tool(vec![text("x")]), "generation.messages[0].parts[0]"),
        (
            assistant(vec![text("x"), result("c", "t", "o", false)]),
            "generation.messages[0].parts[1]",
        ),
        (
            message(pb::Role::Unspecified, vec![text("x")]),
            "generation.messages[0].role",
        ),
    ]
}

/// JSON Schema output, unnamed: an object with a string `name`.
pub(crate) fn person_schema() -> pb::OutputFormat {
    pb::OutputFormat {
        r#type: pb::output_format::Type::JsonSchema as i32,
        name: String::new(),
        schema_json: r#"{"type":"object","properties":{"name":{"type":"string"}}}"#.into(),
        ..Default::default()
    }
}

/// The catalog entry `provider/name` speaking `protocol`, with `capabilities`.
pub(crate) fn model(
    id: &str,
    protocol: crate::protocol::Protocol,
    capabilities: crate::catalog::Capabilities,
) -> crate::catalog::ModelInfo {
    let (provider, name) = id.split_once('/').unwrap_or(("p", id));
    crate::catalog::ModelInfo {
        id: id.into(),
        provider: provider.into(),
        capabilities,
        ..crate::catalog::ModelInfo::for_tests(name, protocol)
    }
}

/// A generation for `model` of one user message saying `prompt`.
pub(crate) fn asking(model: &str, prompt: &str) -> pb::Generation {
    pb::Generation {
        model: model.into(),
        messages: vec![user(vec![text(prompt)])],
        ..Default::default()
    }
}

/// A tool taking `{"city": string}` (required, optional keys allowed as written), strict when asked: for the tests
/// of the request features.
pub(crate) fn city_tool(name: &str, strict: bool) -> pb::Tool {
    pb::Tool {
        name: name.into(),
        description: String::new(),
        input_schema_json:
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                .into(),
        strict,
    }
}

/// A tool choice of `mode` (naming `tool_name` for MODE_TOOL), one call per step when `disable_parallel`.
pub(crate) fn tool_choice(
    mode: pb::tool_choice::Mode,
    tool_name: &str,
    disable_parallel: bool,
) -> Option<pb::ToolChoice> {
    Some(pb::ToolChoice {
        mode: mode.into(),
        tool_name: tool_name.into(),
        disable_parallel,
    })
}

/// Any JSON object, no schema.
pub(crate) fn json_object() -> Option<pb::OutputFormat> {
    Some(pb::OutputFormat {
        r#type: pb::output_format::Type::JsonObject.into(),
        ..Default::default()
    })
}

/// JSON Schema output named `answer` with `schema`, strict when asked.
pub(crate) fn json_schema(schema: &str, strict: bool) -> Option<pb::OutputFormat> {
    Some(pb::OutputFormat {
        r#type: pb::output_format::Type::JsonSchema.into(),
        name: "answer".into(),
        schema_json: schema.into(),
        strict,
    })
}

/// Reasoning at high effort, without a token budget.
pub(crate) fn high_effort() -> pb::Reasoning {
    pb::Reasoning {
        effort: pb::reasoning::Effort::High as i32,
        budget_tokens: 0,
    }
}

/// The same builders, giving what the part holds: for the tests that build messages from kinds ([`msg`]).
pub(crate) mod kinds {
    use super::{Kind, kind};

    pub(crate) fn text(t: &str) -> Kind {
        kind(super::text(t))
    }

    pub(crate) fn call(id: &str, tool: &str, input: &str) -> Kind {
        kind(super::call(id, tool, input))
    }

    pub(crate) fn result(id: &str, tool: &str, output: &str, is_error: bool) -> Kind {
        kind(super::result(id, tool, output, is_error))
    }
}
