//! Small constructors of the unified request (`llm.gateway.v1.Generation`) the two request translations share.

use llm_proto::gateway as pb;
use pb::part::Kind;

use crate::http::errors::ApiError;

/// A message of `role` with `parts`.
pub fn message(role: pb::Role, parts: Vec<pb::Part>) -> pb::Message {
    pb::Message {
        role: role as i32,
        parts,
    }
}

/// A text part.
pub fn text(text: String) -> pb::Part {
    pb::Part {
        kind: Some(Kind::Text(pb::TextPart { text })),
    }
}

/// A tool-call part (`input_json` as the caller sent it; the adapters parse it).
pub fn tool_call(call_id: String, tool_name: String, input_json: String) -> pb::Part {
    pb::Part {
        kind: Some(Kind::ToolCall(pb::ToolCallPart {
            call_id,
            tool_name,
            input_json,
            provider_metadata: None,
        })),
    }
}

/// A tool-result part.
pub fn tool_result(call_id: String, tool_name: String, output: String, is_error: bool) -> pb::Part {
    pb::Part {
        kind: Some(Kind::ToolResult(pb::ToolResultPart {
            call_id,
            tool_name,
            output,
            is_error,
        })),
    }
}

/// A file part from base64 `data` of `media_type`; `field` names it in the error when `data` is not base64.
pub fn file_data(field: &str, media_type: &str, data: &str) -> Result<pb::Part, ApiError> {
    let bytes = crate::adapter::common::encoding::base64_decode(data)
        .ok_or_else(|| ApiError::invalid(field, "not valid base64"))?;
    Ok(pb::Part {
        kind: Some(Kind::File(pb::FilePart {
            media_type: media_type.to_string(),
            filename: String::new(),
            source: Some(pb::file_part::Source::Data(bytes)),
        })),
    })
}

/// A file part from a URL: a `data:<type>;base64,<data>` URL is decoded, any other URL is passed on (with
/// `media_type` when the caller gave one).
pub fn file_url(field: &str, url: &str, media_type: &str) -> Result<pb::Part, ApiError> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (media_type, data) = rest.split_once(";base64,").ok_or_else(|| {
            ApiError::invalid(field, "a data URL must be `data:<type>;base64,<data>`")
        })?;
        return file_data(field, media_type, data);
    }
    Ok(pb::Part {
        kind: Some(Kind::File(pb::FilePart {
            media_type: media_type.to_string(),
            filename: String::new(),
            source: Some(pb::file_part::Source::Url(url.to_string())),
        })),
    })
}

/// `part` (a file part) with `filename`, when there is one.
pub fn named(mut part: pb::Part, filename: Option<String>) -> pb::Part {
    if let (Some(Kind::File(f)), Some(name)) = (part.kind.as_mut(), filename) {
        f.filename = name;
    }
    part
}

/// An image's `detail` at `field`: only `auto` (or none) is served, since the image goes to the provider as sent.
pub fn detail(field: &str, detail: Option<String>) -> Result<(), ApiError> {
    match detail.as_deref() {
        None | Some("auto") => Ok(()),
        Some(_) => Err(ApiError::invalid(
            field,
            "only `auto` is served: the image goes to the provider as sent",
        )),
    }
}

/// The tool choice an OpenAI-style string names (`auto`, `none`, `required`), at `field`.
pub fn tool_choice_named(field: &str, name: &str) -> Result<pb::ToolChoice, ApiError> {
    use pb::tool_choice::Mode;
    let mode = match name {
        "auto" => Mode::Auto,
        "none" => Mode::None,
        "required" => Mode::Required,
        other => {
            return Err(ApiError::invalid(
                field,
                format!("unknown value `{other}` (`auto`, `none`, `required` or a function)"),
            ));
        }
    };
    Ok(pb::ToolChoice {
        mode: mode as i32,
        ..Default::default()
    })
}

/// The tool choice that forces tool `name`.
pub fn tool_choice_of(name: &str) -> pb::ToolChoice {
    pb::ToolChoice {
        mode: pb::tool_choice::Mode::Tool as i32,
        tool_name: name.to_string(),
        ..Default::default()
    }
}

/// The unified tool choice from a request's `choice` and its `parallel_tool_calls` (false: one call per step).
pub fn tool_choice(
    choice: Option<pb::ToolChoice>,
    parallel: Option<bool>,
) -> Option<pb::ToolChoice> {
    let disable_parallel = parallel == Some(false);
    if choice.is_none() && !disable_parallel {
        return None;
    }
    Some(pb::ToolChoice {
        disable_parallel,
        ..choice.unwrap_or_default()
    })
}

/// Names `model` (the catalog id the request resolved to) on the reasoning whose metadata names none: what a door
/// takes back from its caller was made by the model the caller addresses.
pub fn fill_model(g: &mut pb::Generation, model: &str) {
    for part in g.messages.iter_mut().flat_map(|m| m.parts.iter_mut()) {
        if let Some(pb::part::Kind::Reasoning(r)) = &mut part.kind
            && let Some(meta) = &mut r.provider_metadata
            && meta.model.is_empty()
        {
            meta.model = model.to_string();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "unified_tests.rs"]
mod tests;
