//! The shape and size of every request, checked before anything touches Redis, the gateway or a workspace: a
//! malformed field is `INVALID_ARGUMENT` naming it, a field over its limit `RESOURCE_EXHAUSTED` naming it. Pure:
//! no I/O, and linear in the request's size.
//!
//! The limits are the constants below; `docs/operations.md` ("Security model", "Request limits") lists them.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use llm_proto::sessions as pb;
use tonic::Status;

use super::status::{invalid, too_large};
use crate::events::EventId;

/// Longest session, message or part id (the processor makes them: `ses_…`, 28 characters).
pub const MAX_ID: usize = 128;
/// Longest call or permission id (call ids come from the model's provider).
pub const MAX_FOREIGN_ID: usize = 256;
/// Longest model id (`provider/model`).
pub const MAX_MODEL: usize = 256;
/// Most metadata entries of a session.
pub const MAX_METADATA_ENTRIES: usize = 64;
/// Longest metadata key, in bytes.
pub const MAX_METADATA_KEY: usize = 256;
/// Longest metadata value, in bytes.
pub const MAX_METADATA_VALUE: usize = 4096;
/// Most bytes of metadata (keys plus values) of a session.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// Most parts of a prompt.
pub const MAX_PROMPT_PARTS: usize = 64;
/// Most bytes of a prompt's content: text, file data and URLs together. A user message then always fits one
/// response (see `paging`).
pub const MAX_PROMPT_BYTES: usize = 3 * 1024 * 1024;
/// Longest file name or media type of a file part.
pub const MAX_FILE_NAME: usize = 255;
/// Longest extra system text of a prompt, in bytes.
pub const MAX_SYSTEM_BYTES: usize = 64 * 1024;
/// Longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;
/// Most client tools of a prompt.
pub const MAX_CLIENT_TOOLS: usize = 64;
/// Longest client tool description, in bytes.
pub const MAX_TOOL_DESCRIPTION: usize = 4 * 1024;
/// Longest client tool input schema, and longest structured-output schema, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most bytes of a prompt's whole client tool table (names, descriptions and schemas).
pub const MAX_CLIENT_TOOL_TABLE: usize = 256 * 1024;
/// Longest client tool result, in bytes.
pub const MAX_TOOL_RESULT: usize = 1024 * 1024;
/// Default and largest `ListSessions` page (larger sizes are lowered to it).
pub const SESSION_PAGE: (usize, usize) = (50, 500);
/// Default and largest `ListMessages` page (larger sizes are lowered to it).
pub const MESSAGE_PAGE: (usize, usize) = (100, 1000);

/// Names of the built-in tools: a client tool may not take one.
static BUILTIN_TOOLS: LazyLock<HashSet<String>> = LazyLock::new(|| {
    crate::tools::builtin_specs()
        .into_iter()
        .map(|s| s.name)
        .collect()
});

/// A size limit as documented.
fn bytes(n: usize) -> String {
    format!("{n} bytes")
}

/// An id the processor made: 1 to [`MAX_ID`] characters of `[A-Za-z0-9_-]`.
pub fn id(field: &str, value: &str) -> Result<(), Status> {
    if value.is_empty() {
        return Err(invalid(field, "required"));
    }
    if value.len() > MAX_ID {
        return Err(invalid(field, &format!("longer than {MAX_ID} characters")));
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        return Err(invalid(field, "must be an id of [A-Za-z0-9_-]"));
    }
    Ok(())
}

/// An id that came from elsewhere (a provider's call id): 1 to [`MAX_FOREIGN_ID`] visible ASCII characters, no
/// braces.
pub fn foreign_id(field: &str, value: &str) -> Result<(), Status> {
    if value.is_empty() {
        return Err(invalid(field, "required"));
    }
    if value.len() > MAX_FOREIGN_ID {
        return Err(invalid(
            field,
            &format!("longer than {MAX_FOREIGN_ID} characters"),
        ));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b'{' && b != b'}')
    {
        return Err(invalid(
            field,
            "must be visible ASCII characters without braces",
        ));
    }
    Ok(())
}

/// The session id every session RPC names.
pub fn session_id(value: &str) -> Result<(), Status> {
    id("session_id", value)
}

/// An optional `provider/model`.
pub fn model(field: &str, value: &str) -> Result<(), Status> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > MAX_MODEL {
        return Err(invalid(field, &format!("longer than {MAX_MODEL} bytes")));
    }
    let well_formed = value.split_once('/').is_some_and(|(p, m)| {
        !p.is_empty()
            && !m.is_empty()
            && !value.contains(|c: char| c.is_whitespace() || c.is_control())
    });
    if !well_formed {
        return Err(invalid(field, "must be `provider/model`"));
    }
    Ok(())
}

/// A page size: 0 is `limits.0`, more than `limits.1` is `limits.1`, negative is refused.
pub fn page_size(value: i32, limits: (usize, usize)) -> Result<usize, Status> {
    match usize::try_from(value) {
        Err(_) => Err(invalid("page_size", "must not be negative")),
        Ok(0) => Ok(limits.0),
        Ok(n) => Ok(n.min(limits.1)),
    }
}

/// Session metadata: at most [`MAX_METADATA_ENTRIES`] entries of non-empty keys up to [`MAX_METADATA_KEY`] bytes
/// and values up to [`MAX_METADATA_VALUE`], [`MAX_METADATA_BYTES`] in all.
pub fn metadata(map: &HashMap<String, String>) -> Result<(), Status> {
    if map.len() > MAX_METADATA_ENTRIES {
        return Err(too_large(
            "metadata",
            &format!("{MAX_METADATA_ENTRIES} entries"),
        ));
    }
    let mut total = 0usize;
    for (k, v) in map {
        if k.is_empty() {
            return Err(invalid("metadata", "keys must not be empty"));
        }
        if k.len() > MAX_METADATA_KEY {
            return Err(too_large(
                "metadata",
                &format!("{} per key", bytes(MAX_METADATA_KEY)),
            ));
        }
        if v.len() > MAX_METADATA_VALUE {
            return Err(too_large(
                "metadata",
                &format!("{} per value", bytes(MAX_METADATA_VALUE)),
            ));
        }
        total += k.len() + v.len();
    }
    if total > MAX_METADATA_BYTES {
        return Err(too_large("metadata", &bytes(MAX_METADATA_BYTES)));
    }
    Ok(())
}

/// `CreateSession`, except what needs the configuration (the agent) or the gateway (whether the model exists).
pub fn create_session(req: &pb::CreateSessionRequest) -> Result<(), Status> {
    model("default_model", &req.default_model)?;
    if !req.workspace.is_empty() && !crate::tools::valid_workspace_name(&req.workspace) {
        return Err(invalid(
            "workspace",
            &format!(
                "a directory name of 1 to {} characters of [A-Za-z0-9._-], not a path",
                crate::tools::MAX_WORKSPACE_NAME
            ),
        ));
    }
    if crate::config::usd_to_nano(req.budget_usd).is_none() {
        return Err(invalid(
            "budget_usd",
            "must be a non-negative amount of USD",
        ));
    }
    agent_name("agent", &req.agent)?;
    metadata(&req.metadata)
}

/// An agent name's shape (whether it exists and is allowed is the caller's check against the configuration).
fn agent_name(field: &str, value: &str) -> Result<(), Status> {
    if value.len() > MAX_ID {
        return Err(invalid(field, &format!("longer than {MAX_ID} characters")));
    }
    Ok(())
}

/// A `ListSessions` page token: `<created ms>:<session id>`, as a previous page returned it.
pub fn session_cursor(token: &str) -> Result<Option<&str>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    let bad = || invalid("page_token", "not a token from a previous page");
    let (score, sid) = token.split_once(':').ok_or_else(bad)?;
    score.parse::<i64>().map_err(|_| bad())?;
    id("page_token", sid).map_err(|_| bad())?;
    Ok(Some(token))
}

/// A `ListMessages` page token: `<message id>` (after that message) or `<message id>:<part id>` (inside that
/// message, after that part), as a previous page returned it.
pub fn message_cursor(token: &str) -> Result<Option<(&str, Option<&str>)>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    let bad = || invalid("page_token", "not a token from a previous page");
    let (message, part) = match token.split_once(':') {
        Some((m, p)) => (m, Some(p)),
        None => (token, None),
    };
    id("page_token", message).map_err(|_| bad())?;
    if let Some(p) = part {
        id("page_token", p).map_err(|_| bad())?;
    }
    Ok(Some((message, part)))
}

/// `Subscribe`.
pub fn subscribe(req: &pb::SubscribeRequest) -> Result<(), Status> {
    session_id(&req.session_id)?;
    if !req.after_event_id.is_empty()
        && let Err(e) = req.after_event_id.parse::<EventId>()
    {
        return Err(invalid("after_event_id", &e.to_string()));
    }
    Ok(())
}

/// `Prompt`, except what needs the configuration (the agent).
pub fn prompt(req: &pb::PromptRequest) -> Result<(), Status> {
    session_id(&req.session_id)?;
    prompt_parts(&req.parts)?;
    model("model", &req.model)?;
    agent_name("agent", &req.agent)?;
    if req.system.len() > MAX_SYSTEM_BYTES {
        return Err(too_large("system", &bytes(MAX_SYSTEM_BYTES)));
    }
    if req.idempotency_key.len() > MAX_IDEMPOTENCY_KEY {
        return Err(invalid(
            "idempotency_key",
            &format!("longer than {MAX_IDEMPOTENCY_KEY} bytes"),
        ));
    }
    if let Some(r) = &req.reasoning {
        reasoning(r)?;
    }
    let structured = match &req.format {
        Some(f) => {
            if f.schema_json.len() > MAX_SCHEMA_BYTES {
                return Err(too_large("format.schema_json", &bytes(MAX_SCHEMA_BYTES)));
            }
            crate::structured::Format::from_proto(f)
                .map_err(|m| invalid("format", &m))?
                .is_some()
        }
        None => false,
    };
    client_tools(&req.client_tools, structured)
}

/// Largest reasoning token budget a prompt may ask for.
pub const MAX_REASONING_BUDGET: u32 = 1_000_000;

/// A prompt's reasoning settings: a known effort, and a budget of 0 (none) or 1 024 to [`MAX_REASONING_BUDGET`].
fn reasoning(r: &pb::Reasoning) -> Result<(), Status> {
    if pb::reasoning::Effort::try_from(r.effort).is_err() {
        return Err(invalid("reasoning.effort", "not a known effort"));
    }
    if r.budget_tokens != 0 && !(1024..=MAX_REASONING_BUDGET).contains(&r.budget_tokens) {
        return Err(invalid(
            "reasoning.budget_tokens",
            &format!("0 (none) or 1024 to {MAX_REASONING_BUDGET}"),
        ));
    }
    Ok(())
}

fn prompt_parts(parts: &[pb::PromptPart]) -> Result<(), Status> {
    if parts.len() > MAX_PROMPT_PARTS {
        return Err(too_large("parts", &format!("{MAX_PROMPT_PARTS} parts")));
    }
    let mut total = 0usize;
    let mut content = false;
    for (i, p) in parts.iter().enumerate() {
        match &p.kind {
            None => return Err(invalid(&format!("parts[{i}]"), "a text or file part")),
            Some(pb::prompt_part::Kind::Text(t)) => {
                content |= !t.trim().is_empty();
                total += t.len();
            }
            Some(pb::prompt_part::Kind::File(f)) => {
                total += file_part(i, f)?;
                content = true;
            }
        }
    }
    if total > MAX_PROMPT_BYTES {
        return Err(too_large("parts", &bytes(MAX_PROMPT_BYTES)));
    }
    if !content {
        return Err(invalid(
            "parts",
            "at least one non-empty text or file part is required",
        ));
    }
    Ok(())
}

/// A file part; returns the bytes of its content.
fn file_part(i: usize, f: &pb::FilePart) -> Result<usize, Status> {
    let field = |name: &str| format!("parts[{i}].file.{name}");
    if f.media_type.is_empty() || f.media_type.len() > MAX_FILE_NAME || !f.media_type.contains('/')
    {
        return Err(invalid(
            &field("media_type"),
            &format!("an IANA media type of at most {MAX_FILE_NAME} bytes"),
        ));
    }
    if f.filename.len() > MAX_FILE_NAME {
        return Err(invalid(
            &field("filename"),
            &format!("longer than {MAX_FILE_NAME} bytes"),
        ));
    }
    match &f.source {
        None => Err(invalid(&field("source"), "data or url is required")),
        Some(pb::file_part::Source::Data(d)) => Ok(d.len()),
        Some(pb::file_part::Source::Url(u)) => {
            if !u.starts_with("https://") || u.contains(char::is_whitespace) {
                return Err(invalid(&field("url"), "must be an https URL"));
            }
            Ok(u.len())
        }
    }
}

fn client_tools(tools: &[pb::ClientTool], structured: bool) -> Result<(), Status> {
    if tools.len() > MAX_CLIENT_TOOLS {
        return Err(too_large(
            "client_tools",
            &format!("{MAX_CLIENT_TOOLS} tools"),
        ));
    }
    let mut names = HashSet::new();
    let mut total = 0usize;
    for (i, t) in tools.iter().enumerate() {
        let field = |name: &str| format!("client_tools[{i}].{name}");
        if t.name.is_empty()
            || t.name.len() > 64
            || !t
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(invalid(&field("name"), "must match ^[a-zA-Z0-9_-]{1,64}$"));
        }
        if BUILTIN_TOOLS.contains(&t.name) {
            return Err(invalid(
                &field("name"),
                &format!("`{}` is a built-in tool's name", t.name),
            ));
        }
        if structured && t.name == crate::structured::TOOL_NAME {
            return Err(invalid(
                &field("name"),
                "`structured_output` is reserved while a format is requested",
            ));
        }
        if !names.insert(t.name.as_str()) {
            return Err(invalid(&field("name"), "names must be unique"));
        }
        if t.description.len() > MAX_TOOL_DESCRIPTION {
            return Err(too_large(
                &field("description"),
                &bytes(MAX_TOOL_DESCRIPTION),
            ));
        }
        if t.input_schema_json.len() > MAX_SCHEMA_BYTES {
            return Err(too_large(
                &field("input_schema_json"),
                &bytes(MAX_SCHEMA_BYTES),
            ));
        }
        if !matches!(
            serde_json::from_str::<serde_json::Value>(&t.input_schema_json),
            Ok(serde_json::Value::Object(_))
        ) {
            return Err(invalid(
                &field("input_schema_json"),
                "must be a JSON object schema",
            ));
        }
        total += t.name.len() + t.description.len() + t.input_schema_json.len();
    }
    if total > MAX_CLIENT_TOOL_TABLE {
        return Err(too_large("client_tools", &bytes(MAX_CLIENT_TOOL_TABLE)));
    }
    Ok(())
}

/// `SubmitToolResult`.
pub fn submit_tool_result(req: &pb::SubmitToolResultRequest) -> Result<(), Status> {
    session_id(&req.session_id)?;
    foreign_id("call_id", &req.call_id)?;
    if req.output.len() > MAX_TOOL_RESULT {
        return Err(too_large("output", &bytes(MAX_TOOL_RESULT)));
    }
    Ok(())
}

/// `ReplyPermission`.
pub fn reply_permission(req: &pb::ReplyPermissionRequest) -> Result<(), Status> {
    session_id(&req.session_id)?;
    foreign_id("permission_id", &req.permission_id)
}

/// `Compact`.
pub fn compact(req: &pb::CompactRequest) -> Result<(), Status> {
    session_id(&req.session_id)?;
    model("model", &req.model)
}

/// `GetDiff`.
pub fn get_diff(req: &pb::GetDiffRequest) -> Result<(), Status> {
    session_id(&req.session_id)?;
    if !req.message_id.is_empty() {
        id("message_id", &req.message_id)?;
    } else if req.step > 0 {
        return Err(invalid("step", "requires message_id"));
    }
    Ok(())
}

/// `GetSpend`: an optional tenant name.
pub fn get_spend(req: &pb::GetSpendRequest) -> Result<(), Status> {
    if !req.tenant.is_empty() && !crate::names::valid_tenant_name(&req.tenant) {
        return Err(invalid(
            "tenant",
            &format!(
                "a tenant name: 1 to {} characters of [A-Za-z0-9._-]",
                crate::names::MAX_TENANT_NAME
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
