//! Request validation: the shape of a `Generation` before anything else looks at it, and the rules that depend on
//! the model it resolves to. Malformed → `INVALID_ARGUMENT` naming the field; over a `[limits]` value →
//! `RESOURCE_EXHAUSTED` naming the limit. Every check is one pass over the request (names and ids go through hash
//! sets), and the size limits are checked first, so an oversized request costs no more than counting it.

use std::collections::HashSet;

use llm_proto::gateway as pb;
use tonic::{Code, Status};

use crate::adapter::BuildError;
use crate::catalog::ModelInfo;
use crate::census::Census;
use crate::headers::reserved_header;
use crate::limits::Limits;
use crate::status::{ERROR_DOMAIN, invalid};

/// Longest `RequestContext` id accepted (session, request, agent), in bytes.
pub const MAX_CONTEXT_ID_BYTES: usize = 1024;
/// Longest model id accepted (`generation.model`, `generation.fallback_models[]`), in bytes.
pub const MAX_MODEL_ID_BYTES: usize = 512;
/// Stop sequences per request (more than any provider takes; each provider's own lower limit is its to enforce).
pub const MAX_STOP_SEQUENCES: usize = 64;
/// Bytes of one stop sequence.
pub const MAX_STOP_SEQUENCE_BYTES: usize = 1024;
/// Extra headers per request: providers answer 431 well before a thousand.
pub const MAX_EXTRA_HEADERS: usize = 64;
/// Bytes of one extra header's name and value together (8 KiB, what common HTTP servers accept per header line).
pub const MAX_EXTRA_HEADER_BYTES: usize = 8 * 1024;

/// A `RESOURCE_EXHAUSTED` status for a request over the limit `limit` (a `[limits]` key, or one of the fixed
/// limits above by its name).
pub fn too_large(field: &str, limit: &str, message: &str) -> Status {
    service_kit::status::with_info(
        Code::ResourceExhausted,
        format!("{field}: {message} ({limit})"),
        ERROR_DOMAIN,
        "REQUEST_TOO_LARGE",
        &[("field", field), ("limit", limit)],
    )
}

/// Checks the request shape. Returns the first violation found.
pub fn validate<'g>(
    generation: Option<&'g pb::Generation>,
    limits: &Limits,
) -> Result<&'g pb::Generation, Status> {
    let g = generation.ok_or_else(|| invalid("generation", "required"))?;
    sizes(g, limits)?;
    model_id("generation.model", &g.model)?;
    context(g.context.as_ref())?;
    if g.messages.is_empty() {
        return Err(invalid(
            "generation.messages",
            "at least one message is required",
        ));
    }
    messages(&g.messages)?;
    tools(g)?;
    choices(g)?;
    sampling(g.sampling.as_ref())?;
    if !g.provider_options_json.is_empty()
        && !matches!(
            serde_json::from_str::<serde_json::Value>(&g.provider_options_json),
            Ok(serde_json::Value::Object(_))
        )
    {
        return Err(invalid(
            "generation.provider_options_json",
            "must be a JSON object keyed by protocol",
        ));
    }
    if g.fallback_models.len() > crate::catalog::MAX_FALLBACKS {
        return Err(invalid(
            "generation.fallback_models",
            &format!("at most {} models", crate::catalog::MAX_FALLBACKS),
        ));
    }
    for (i, f) in g.fallback_models.iter().enumerate() {
        model_id(&format!("generation.fallback_models[{i}]"), f)?;
    }
    headers(g)?;
    Ok(g)
}

/// The `[limits]` on counts and sizes, checked before anything is parsed.
pub fn sizes(g: &pb::Generation, limits: &Limits) -> Result<(), Status> {
    counts(&Census::of(g), limits)
}

/// The `[limits]` on counts and sizes, over a request's census (decoded or still encoded).
pub fn counts(c: &Census, limits: &Limits) -> Result<(), Status> {
    if c.messages > limits.max_messages {
        return Err(too_large(
            "generation.messages",
            "limits.max_messages",
            &format!("at most {} messages", limits.max_messages),
        ));
    }
    if c.parts > limits.max_parts {
        return Err(too_large(
            "generation.messages",
            "limits.max_parts",
            &format!("at most {} parts over all messages", limits.max_parts),
        ));
    }
    if c.tools > limits.max_tools {
        return Err(too_large(
            "generation.tools",
            "limits.max_tools",
            &format!("at most {} tools", limits.max_tools),
        ));
    }
    if c.schema_bytes > limits.max_tool_schema_bytes {
        return Err(too_large(
            "generation.tools",
            "limits.max_tool_schema_bytes",
            &format!(
                "tool schemas hold {} bytes, at most {}",
                c.schema_bytes, limits.max_tool_schema_bytes
            ),
        ));
    }
    Ok(())
}

/// A model name (an id, an alias or a bare name; which one is decided when the generation starts).
fn model_id(field: &str, id: &str) -> Result<(), Status> {
    if id.is_empty() {
        return Err(invalid(
            field,
            "required (`provider/model`, an alias or a model name)",
        ));
    }
    if id.len() > MAX_MODEL_ID_BYTES {
        return Err(invalid(
            field,
            &format!("at most {MAX_MODEL_ID_BYTES} bytes"),
        ));
    }
    // A CR/LF would forge a log line wherever the id is echoed, and bidirectional overrides would make it read as
    // another name; no provider names a model with either.
    if id.chars().any(|c| c.is_control() || is_bidi_control(c)) {
        return Err(invalid(
            field,
            "must not contain control or bidirectional formatting characters",
        ));
    }
    Ok(())
}

/// The characters that reorder how text displays (Unicode's bidirectional marks, embeddings, overrides, isolates).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn context(c: Option<&pb::RequestContext>) -> Result<(), Status> {
    context_at("generation.context", c)
}

/// The `RequestContext` at `field`: ids of bounded length, without control characters.
pub(crate) fn context_at(field: &str, c: Option<&pb::RequestContext>) -> Result<(), Status> {
    let Some(c) = c else { return Ok(()) };
    for (name, value) in [
        ("session_id", &c.session_id),
        ("request_id", &c.request_id),
        ("agent", &c.agent),
    ] {
        if value.len() > MAX_CONTEXT_ID_BYTES {
            return Err(invalid(
                &format!("{field}.{name}"),
                &format!("at most {MAX_CONTEXT_ID_BYTES} bytes"),
            ));
        }
        if value.chars().any(char::is_control) {
            return Err(invalid(
                &format!("{field}.{name}"),
                "must not contain control characters",
            ));
        }
    }
    Ok(())
}

/// Roles, part kinds, tool-call ids (unique, and every result answering an earlier call) and files.
fn messages(list: &[pb::Message]) -> Result<(), Status> {
    let mut call_ids: HashSet<&str> = HashSet::new();
    for (i, m) in list.iter().enumerate() {
        let role = pb::Role::try_from(m.role).map_err(|_| {
            invalid(
                &format!("generation.messages[{i}].role"),
                &format!("unknown value {}", m.role),
            )
        })?;
        if role == pb::Role::Unspecified {
            return Err(invalid(
                &format!("generation.messages[{i}].role"),
                "must be USER, ASSISTANT or TOOL",
            ));
        }
        if m.parts.is_empty() {
            return Err(invalid(
                &format!("generation.messages[{i}].parts"),
                "a message needs at least one part",
            ));
        }
        for (j, part) in m.parts.iter().enumerate() {
            let field = format!("generation.messages[{i}].parts[{j}]");
            let Some(kind) = &part.kind else {
                return Err(invalid(&field, "empty part"));
            };
            part_kind(&field, role, kind, &mut call_ids)?;
        }
    }
    Ok(())
}

fn part_kind<'a>(
    field: &str,
    role: pb::Role,
    kind: &'a pb::part::Kind,
    call_ids: &mut HashSet<&'a str>,
) -> Result<(), Status> {
    use pb::part::Kind;
    let allowed = matches!(
        (role, kind),
        (pb::Role::User, Kind::Text(_) | Kind::File(_))
            | (
                pb::Role::Assistant,
                Kind::Text(_) | Kind::Reasoning(_) | Kind::ToolCall(_) | Kind::File(_)
            )
            | (pb::Role::Tool, Kind::ToolResult(_))
    );
    if !allowed {
        return Err(invalid(
            field,
            "this part kind is not allowed in a message of this role",
        ));
    }
    match kind {
        Kind::ToolCall(c) => {
            let id_field = format!("{field}.tool_call.call_id");
            if c.call_id.is_empty() {
                return Err(invalid(&id_field, "required"));
            }
            if !valid_tool_name(&c.tool_name) {
                return Err(invalid(
                    &format!("{field}.tool_call.tool_name"),
                    "must match ^[a-zA-Z0-9_-]{1,64}$",
                ));
            }
            if !call_ids.insert(&c.call_id) {
                return Err(invalid(
                    &id_field,
                    "duplicate tool-call id: an earlier call has the same id",
                ));
            }
        }
        Kind::ToolResult(r) => {
            let id_field = format!("{field}.tool_result.call_id");
            if r.call_id.is_empty() {
                return Err(invalid(&id_field, "required"));
            }
            if !call_ids.contains(r.call_id.as_str()) {
                return Err(invalid(
                    &id_field,
                    "answers no earlier tool call of this conversation",
                ));
            }
        }
        Kind::File(f) => file(field, f)?,
        Kind::Reasoning(r) => {
            let json = r.provider_metadata.as_ref().map_or("", |m| m.json.as_str());
            if !json.is_empty() && serde_json::from_str::<serde::de::IgnoredAny>(json).is_err() {
                return Err(invalid(
                    &format!("{field}.reasoning.provider_metadata.json"),
                    "must be the JSON the gateway sent in `reasoning_end`, unchanged",
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// A media type is `type/subtype` of RFC 9110 token characters, optionally followed by `; parameters` of visible
/// characters; a URL is https and holds no whitespace or control character (a CR/LF could split a header or a
/// request line further along).
fn file(field: &str, f: &pb::FilePart) -> Result<(), Status> {
    let media_field = format!("{field}.file.media_type");
    if f.media_type.is_empty() {
        return Err(invalid(&media_field, "required"));
    }
    if !valid_media_type(&f.media_type) {
        return Err(invalid(
            &media_field,
            "must be `type/subtype` without control characters",
        ));
    }
    match &f.source {
        None => Err(invalid(
            &format!("{field}.file.source"),
            "data or url required",
        )),
        Some(pb::file_part::Source::Url(u)) => {
            let url_field = format!("{field}.file.url");
            if u.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(invalid(
                    &url_field,
                    "must not contain whitespace or control characters",
                ));
            }
            if !u.starts_with("https://") {
                return Err(invalid(&url_field, "must be an https URL"));
            }
            Ok(())
        }
        Some(pb::file_part::Source::Data(d)) if d.is_empty() => Err(invalid(
            &format!("{field}.file.data"),
            "empty: a file or image needs its bytes",
        )),
        Some(pb::file_part::Source::Data(_)) => Ok(()),
    }
}

fn valid_media_type(m: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let (essence, params) = m.split_once(';').unwrap_or((m, ""));
    let Some((ty, sub)) = essence.trim_end().split_once('/') else {
        return false;
    };
    token(ty) && token(sub) && params.bytes().all(|b| (b' '..0x7f).contains(&b))
}

/// Tool names (valid, unique) and schemas (JSON objects).
fn tools(g: &pb::Generation) -> Result<(), Status> {
    let mut names: HashSet<&str> = HashSet::with_capacity(g.tools.len());
    for (i, t) in g.tools.iter().enumerate() {
        if !valid_tool_name(&t.name) {
            return Err(invalid(
                &format!("generation.tools[{i}].name"),
                "must match ^[a-zA-Z0-9_-]{1,64}$",
            ));
        }
        if !names.insert(&t.name) {
            return Err(invalid(
                &format!("generation.tools[{i}].name"),
                "duplicate tool name",
            ));
        }
        schema_is_an_object(&t.input_schema_json)
            .map_err(|why| invalid(&format!("generation.tools[{i}].input_schema_json"), &why))?;
    }
    Ok(())
}

/// Checks that `text` is one JSON object, without building it: the adapters parse each schema once more to lower
/// it, and a request may carry tens of thousands.
fn schema_is_an_object(text: &str) -> Result<(), String> {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Err(format!("not valid JSON: {e}"));
    }
    // Valid JSON: its first character past whitespace tells its type.
    match text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .as_bytes()
        .first()
    {
        Some(b'{') => Ok(()),
        _ => Err("must be a JSON object (a JSON Schema)".to_owned()),
    }
}

/// Tool choice, output format and reasoning: enums in range and their dependent fields.
fn choices(g: &pb::Generation) -> Result<(), Status> {
    if let Some(choice) = &g.tool_choice {
        let mode = pb::tool_choice::Mode::try_from(choice.mode).map_err(|_| {
            invalid(
                "generation.tool_choice.mode",
                &format!("unknown value {}", choice.mode),
            )
        })?;
        if mode == pb::tool_choice::Mode::Required && g.tools.is_empty() {
            return Err(invalid(
                "generation.tool_choice.mode",
                "REQUIRED needs at least one tool in generation.tools",
            ));
        }
        if mode == pb::tool_choice::Mode::Tool
            && !g.tools.iter().any(|t| t.name == choice.tool_name)
        {
            return Err(invalid(
                "generation.tool_choice.tool_name",
                "must name one of generation.tools",
            ));
        }
    }
    if let Some(f) = &g.output_format {
        let ty = pb::output_format::Type::try_from(f.r#type).map_err(|_| {
            invalid(
                "generation.output_format.type",
                &format!("unknown value {}", f.r#type),
            )
        })?;
        if ty == pb::output_format::Type::JsonSchema
            && !matches!(
                serde_json::from_str::<serde_json::Value>(&f.schema_json),
                Ok(serde_json::Value::Object(_))
            )
        {
            return Err(invalid(
                "generation.output_format.schema_json",
                "must be a JSON object (a JSON Schema)",
            ));
        }
        // Nothing the caller sends is ignored: a schema or `strict` that the asked-for output cannot use is refused.
        if ty == pb::output_format::Type::JsonObject && !f.schema_json.is_empty() {
            return Err(invalid(
                "generation.output_format.schema_json",
                "JSON_OBJECT output takes no schema; ask for TYPE_JSON_SCHEMA to send one",
            ));
        }
        if f.strict && ty != pb::output_format::Type::JsonSchema {
            return Err(invalid(
                "generation.output_format.strict",
                "only JSON_SCHEMA output can be strict",
            ));
        }
    }
    if let Some(r) = &g.reasoning
        && pb::reasoning::Effort::try_from(r.effort).is_err()
    {
        return Err(invalid(
            "generation.reasoning.effort",
            &format!("unknown value {}", r.effort),
        ));
    }
    Ok(())
}

fn sampling(s: Option<&pb::Sampling>) -> Result<(), Status> {
    let Some(s) = s else { return Ok(()) };
    if s.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(invalid(
            "generation.sampling.temperature",
            "must be between 0 and 2",
        ));
    }
    if s.top_p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        return Err(invalid(
            "generation.sampling.top_p",
            "must be between 0 and 1",
        ));
    }
    if s.stop_sequences.len() > MAX_STOP_SEQUENCES {
        return Err(too_large(
            "generation.sampling.stop_sequences",
            "max_stop_sequences",
            &format!("at most {MAX_STOP_SEQUENCES} stop sequences"),
        ));
    }
    for (i, stop) in s.stop_sequences.iter().enumerate() {
        if stop.is_empty() || stop.len() > MAX_STOP_SEQUENCE_BYTES {
            return Err(invalid(
                &format!("generation.sampling.stop_sequences[{i}]"),
                &format!("must be 1 to {MAX_STOP_SEQUENCE_BYTES} bytes"),
            ));
        }
    }
    if s.max_output_tokens == Some(0) {
        return Err(invalid(
            "generation.sampling.max_output_tokens",
            "must be positive",
        ));
    }
    Ok(())
}

/// Hop-by-hop, framing and expectation headers: they describe one HTTP connection, not the request, so a caller
/// setting them could desynchronise the provider connection (`te`, `upgrade`, `expect: 100-continue`...).
const HOP_BY_HOP: &[&str] = &[
    "te",
    "trailer",
    "upgrade",
    "expect",
    "keep-alive",
    "proxy-connection",
    "http2-settings",
];

fn headers(g: &pb::Generation) -> Result<(), Status> {
    if g.extra_headers.len() > MAX_EXTRA_HEADERS {
        return Err(too_large(
            "generation.extra_headers",
            "max_extra_headers",
            &format!("at most {MAX_EXTRA_HEADERS} headers"),
        ));
    }
    for (name, value) in &g.extra_headers {
        if name.len() + value.len() > MAX_EXTRA_HEADER_BYTES {
            return Err(too_large(
                &format!("generation.extra_headers[{}]", crate::limits::echo(name)),
                "max_extra_header_bytes",
                &format!("a header's name and value hold at most {MAX_EXTRA_HEADER_BYTES} bytes"),
            ));
        }
        let field = format!("generation.extra_headers[{name}]");
        if reserved_header(name) {
            return Err(invalid(
                &field,
                "this header is set by the gateway and cannot be overridden",
            ));
        }
        if HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name)) {
            return Err(invalid(
                &field,
                "hop-by-hop and framing headers cannot be forwarded",
            ));
        }
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(invalid(&field, "not a valid header name"));
        }
        if http::HeaderValue::from_str(value).is_err() {
            return Err(invalid(&field, "not a valid header value"));
        }
    }
    Ok(())
}

/// A tool name the providers accept: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Rules that depend on the model the request resolved to, on the caller's own values (before catalog defaults and
/// hooks): `max_output_tokens` within the model's limit, and an explicit thinking budget at least the provider's
/// minimum (`min_budget`, 0 when the protocol has none).
pub fn model_rules(
    g: &pb::Generation,
    model: &ModelInfo,
    min_budget: u32,
) -> Result<(), BuildError> {
    if let Some(n) = g.sampling.as_ref().and_then(|s| s.max_output_tokens)
        && u64::from(n) > model.max_output_tokens
    {
        return Err(BuildError::new(
            "generation.sampling.max_output_tokens",
            format!(
                "{n} is above {}'s limit of {} output tokens",
                model.id, model.max_output_tokens
            ),
        ));
    }
    if let Some(r) = &g.reasoning
        && r.budget_tokens > 0
        && r.budget_tokens < min_budget
    {
        return Err(BuildError::new(
            "generation.reasoning.budget_tokens",
            format!(
                "{} is below {}'s minimum thinking budget of {min_budget} tokens",
                r.budget_tokens, model.id
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
