//! Encodings the request builders share: standard base64, `data:` URLs, how the two OpenAI protocols (Chat
//! Completions and Responses) classify a file part before each writes it in its own JSON shape, and the text of the
//! user turn put in front of a conversation that does not start with one.

use crate::adapter::{BuildError, pb};
use pb::file_part::Source;

/// The text of the user turn the Anthropic and Gemini builders put in front of a conversation whose first turn (once
/// empty turns are dropped and same-role turns merged) is the assistant's: both APIs refuse a conversation that does
/// not open with a user turn (Anthropic: `first message must use the "user" role`; Gemini: `Please ensure that
/// multiturn requests alternate between user and model`). One character, so it neither costs tokens nor asks the
/// model anything; not whitespace, which Anthropic refuses as a text block. Always the same, so the prompt prefix,
/// and with it the provider's prompt cache, stays stable from one step to the next.
pub(crate) const LEADING_USER_TEXT: &str = ".";

/// A file part's media type without its parameters, lower-cased (`Image/PNG; q=1` is `image/png`): what the
/// Anthropic, Bedrock and Gemini builders choose a block by.
pub(crate) fn media_type(f: &pb::FilePart) -> String {
    f.media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Standard base64 with padding (RFC 4648 §4): Anthropic's `source.data`, Gemini's `inlineData.data`, and the payload
/// of a data URL. Written here rather than pulled in as a crate: a dozen lines.
pub(crate) fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    base64_into(&mut out, data);
    out
}

/// [`base64`], appended to `out`.
pub(crate) fn base64_into(out: &mut String, data: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in data.chunks(3) {
        let byte = |k: usize| u32::from(chunk.get(k).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        let sextet = |shift: u32| char::from(ALPHABET[((n >> shift) & 63) as usize]);
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { '=' });
    }
}

/// Decodes standard base64 (padding optional, no whitespace); `None` when `text` is not base64. The HTTP front door
/// reads the images and documents callers send inline with it.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in text.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

/// `data:<media type>;base64,<data>`.
pub(crate) fn data_url(media_type: &str, data: &[u8]) -> String {
    let mut out = String::with_capacity(media_type.len() + 13 + data.len().div_ceil(3) * 4);
    out.push_str("data:");
    out.push_str(media_type);
    out.push_str(";base64,");
    base64_into(&mut out, data);
    out
}

/// `part-<j>.<ext>`, e.g. `part-2.pdf`: a stable name from the part position and a usual extension for the type.
pub(crate) fn default_filename(j: usize, media_type: &str) -> String {
    let subtype = media_type
        .split_once('/')
        .map_or("", |(_, s)| s)
        .split([';', '+'])
        .next()
        .unwrap_or("")
        .trim();
    let ext = match subtype {
        "plain" => "txt",
        "markdown" => "md",
        "javascript" => "js",
        s if !s.is_empty() && s.len() <= 5 && s.chars().all(|c| c.is_ascii_alphanumeric()) => s,
        _ => "bin",
    };
    format!("part-{j}.{ext}")
}

/// A file part as both OpenAI protocols see it, before each writes its own JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpenAiFile<'a> {
    /// An image by the caller's URL.
    ImageUrl(&'a str),
    /// An image as inline data: its data URL.
    ImageData(String),
    /// Any other file as inline data: a filename (the caller's, or [`default_filename`]; OpenAI requires one) and
    /// the data URL.
    FileData {
        /// The file name to send.
        filename: String,
        /// `data:<media type>;base64,…`.
        data_url: String,
    },
    /// Any other file by URL, with the caller's filename if any (Chat Completions refuses this form).
    FileUrl {
        /// The caller's file name, possibly empty.
        filename: &'a str,
        /// The URL.
        url: &'a str,
    },
}

impl<'a> OpenAiFile<'a> {
    /// Classifies `f`, part `j` of message `i` (an empty media type is `application/octet-stream`); a part without
    /// data or URL is an error naming `…parts[j].file`.
    pub(crate) fn of(i: usize, j: usize, f: &'a pb::FilePart) -> Result<Self, BuildError> {
        let media_type = if f.media_type.is_empty() {
            "application/octet-stream"
        } else {
            f.media_type.as_str()
        };
        let is_image = media_type
            .get(..6)
            .is_some_and(|p| p.eq_ignore_ascii_case("image/"));
        Ok(match &f.source {
            Some(Source::Url(url)) if is_image => OpenAiFile::ImageUrl(url),
            Some(Source::Data(data)) if is_image => {
                OpenAiFile::ImageData(data_url(media_type, data))
            }
            Some(Source::Data(data)) => OpenAiFile::FileData {
                filename: if f.filename.is_empty() {
                    default_filename(j, media_type)
                } else {
                    f.filename.clone()
                },
                data_url: data_url(media_type, data),
            },
            Some(Source::Url(url)) => OpenAiFile::FileUrl {
                filename: &f.filename,
                url,
            },
            None => {
                return Err(BuildError::new(
                    format!("generation.messages[{i}].parts[{j}].file"),
                    "a file part needs data or a url",
                ));
            }
        })
    }
}

/// A tool call's arguments as the JSON object Anthropic and Bedrock replay (`{}` when empty).
pub(crate) fn tool_input(
    c: &pb::ToolCallPart,
    field: &str,
) -> Result<serde_json::Value, BuildError> {
    let input_field = || format!("{field}.tool_call.input_json");
    let input: serde_json::Value = if c.input_json.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(&c.input_json)
            .map_err(|e| BuildError::new(input_field(), format!("not valid JSON: {e}")))?
    };
    if !input.is_object() {
        return Err(BuildError::new(input_field(), "must be a JSON object"));
    }
    Ok(input)
}

/// Tool `i`'s input schema, which must be an object schema. proto3 cannot tell an unset schema from an empty one;
/// both mean "no arguments".
pub(crate) fn object_schema(t: &pb::Tool, i: usize) -> Result<serde_json::Value, BuildError> {
    let field = || format!("generation.tools[{i}].input_schema_json");
    let schema: serde_json::Value = if t.input_schema_json.trim().is_empty() {
        serde_json::json!({"type": "object", "properties": {}})
    } else {
        serde_json::from_str(&t.input_schema_json)
            .map_err(|e| BuildError::new(field(), format!("not valid JSON: {e}")))?
    };
    if schema.get("type").and_then(serde_json::Value::as_str) != Some("object") {
        return Err(BuildError::new(
            field(),
            "the root must be an object schema (`\"type\": \"object\"`)",
        ));
    }
    Ok(schema)
}

/// A typed request body as the JSON object the transport sends and provider options merge into. Its fields keep
/// their declaration order (`serde_json`'s `preserve_order`), which is the order on the wire.
pub(crate) fn json_object<T: serde::Serialize>(
    body: &T,
) -> Result<serde_json::Map<String, serde_json::Value>, BuildError> {
    match serde_json::to_value(body) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        // Request structs have string keys and serialise to objects; anything else is a builder bug.
        Ok(other) => Err(BuildError::new(
            "generation",
            format!("the request body serialised to {other}, not an object"),
        )),
        Err(e) => Err(BuildError::new(
            "generation",
            format!("the request body could not be serialised: {e}"),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "encoding_tests.rs"]
mod tests;
