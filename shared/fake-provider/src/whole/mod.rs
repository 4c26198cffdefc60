//! The answer to a request that did not ask for a stream: the protocol's one JSON document, built from the same
//! scripted reply its stream would be, as a provider answers `stream: false` (OpenAI's Chat Completions and
//! Responses, Anthropic's Messages, also on Vertex AI), Gemini's `:generateContent` (and `:streamGenerateContent`
//! without `alt=sse`, a JSON array of the chunks), and Bedrock's `converse` beside `converse-stream`.
//!
//! A test scripts a conversation once, as the stream; whether the gateway asks for it streamed or whole, the fake
//! answers in the form asked for. A stream that ends in the provider's error event is answered with that error and its
//! status, as the provider refuses a whole request; a stream with no complete answer in it (cut short, malformed)
//! has no whole form and is refused as a broken script. A reply scripted as JSON is sent as it is, to any request:
//! that is how the tests serve a whole body to a streaming request, as some servers do.

mod anthropic;
mod bedrock;
mod gemini;
mod openai;
#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::sse::split_events;
use crate::validate::{Protocol, Rejection};
use crate::{Recorded, Reply};

/// The form a request asked its answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Streamed, as scripted.
    Stream,
    /// One JSON document.
    Whole,
    /// Gemini's `:streamGenerateContent` without `alt=sse`: the chunks as one JSON array.
    Array,
}

/// One whole answer: its status, its body, and Bedrock's error type header when it is an error.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) error_type: Option<String>,
}

impl Answer {
    fn ok(body: &Value) -> Answer {
        Answer {
            status: 200,
            body: body.to_string(),
            error_type: None,
        }
    }

    fn error(status: u16, body: String) -> Answer {
        Answer {
            status,
            body,
            error_type: None,
        }
    }
}

/// Why a scripted stream has no whole form.
pub(crate) type Broken = String;

/// The form `req` asked for from `protocol`'s API.
pub(crate) fn asked(protocol: Protocol, req: &Recorded) -> Asked {
    let (path, query) = req.path.split_once('?').unwrap_or((&req.path, ""));
    match protocol {
        Protocol::Gemini | Protocol::VertexGemini => {
            if path.contains(":generateContent") {
                Asked::Whole
            } else if query.split('&').any(|kv| kv == "alt=sse") {
                Asked::Stream
            } else {
                Asked::Array
            }
        }
        Protocol::Bedrock if path.ends_with("/converse") => Asked::Whole,
        Protocol::OpenaiChat
        | Protocol::MistralChat
        | Protocol::DeepseekChat
        | Protocol::AzureChat
        | Protocol::OpenaiResponses
        | Protocol::AzureResponses
        | Protocol::Anthropic
        | Protocol::VertexAnthropic => {
            if streamed(&req.body) {
                Asked::Stream
            } else {
                Asked::Whole
            }
        }
        _ => Asked::Stream,
    }
}

/// Whether a JSON request body sets `stream: true` (read without building the rest of the body).
pub(crate) fn streamed(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Flag {
        stream: Option<Value>,
    }
    serde_json::from_slice::<Flag>(body).is_ok_and(|f| f.stream == Some(Value::Bool(true)))
}

/// `reply` in the form `req` asked for: a streamed reply turned into the whole answer when the request did not ask
/// for a stream; anything else unchanged. A stream with no whole form is the fake's own refusal.
pub(crate) fn as_asked(
    protocol: Protocol,
    req: &Recorded,
    reply: Reply,
) -> Result<Reply, Rejection> {
    in_form(protocol, asked(protocol, req), reply)
}

/// [`as_asked`] for a form already known.
pub(crate) fn in_form(protocol: Protocol, form: Asked, reply: Reply) -> Result<Reply, Rejection> {
    if form == Asked::Stream {
        return Ok(reply);
    }
    let Some(stream) = reply.stream_body() else {
        return Ok(reply);
    };
    match answer(protocol, stream, form) {
        Ok(a) => {
            let whole = reply.into_whole(a.status, a.body);
            Ok(match a.error_type {
                Some(kind) => whole.header("x-amzn-errortype", &kind),
                None => whole,
            })
        }
        Err(why) => Err(Rejection {
            protocol,
            status: 500,
            message: format!(
                "fake-provider: the request asked for a whole answer, and the scripted stream has none: {why}"
            ),
            param: None,
            code: None,
        }),
    }
}

/// The whole answer `stream` (a scripted reply of `protocol`) amounts to, in `form`.
pub(crate) fn answer(protocol: Protocol, stream: &[u8], form: Asked) -> Result<Answer, Broken> {
    match protocol {
        Protocol::OpenaiChat
        | Protocol::MistralChat
        | Protocol::DeepseekChat
        | Protocol::AzureChat => openai::chat(&items(stream)),
        Protocol::OpenaiResponses | Protocol::AzureResponses => openai::responses(&items(stream)),
        Protocol::Anthropic | Protocol::VertexAnthropic => anthropic::message(&items(stream)),
        Protocol::Gemini | Protocol::VertexGemini => {
            gemini::answer(&items(stream), form == Asked::Array)
        }
        Protocol::Bedrock => bedrock::converse(stream),
        other => Err(format!("{other:?} has no streamed form")),
    }
}

/// One SSE event: its `event:` name and its `data:` lines joined, or bytes that are no event at all (Gemini's bare
/// error JSON after its last event).
#[derive(Debug)]
pub(crate) enum Item {
    Event { name: Option<String>, data: String },
    Bare(String),
}

/// The events of an SSE body, comments and empty events left out.
pub(crate) fn items(body: &[u8]) -> Vec<Item> {
    let mut out = Vec::new();
    for event in split_events(&bytes::Bytes::copy_from_slice(body)) {
        let text = String::from_utf8_lossy(&event);
        let mut name = None;
        let mut data: Vec<&str> = Vec::new();
        let mut fields = false;
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if let Some(v) = line.strip_prefix("data:") {
                data.push(v.strip_prefix(' ').unwrap_or(v));
            } else if let Some(v) = line.strip_prefix("event:") {
                name = Some(v.trim().to_string());
            } else if !fields && !is_field(line) {
                // Not an SSE field: bytes after the events, read as one document.
                out.push(Item::Bare(text.trim().to_string()));
                break;
            }
            fields = true;
        }
        if !data.is_empty() {
            out.push(Item::Event {
                name,
                data: data.join("\n"),
            });
        }
    }
    out
}

/// A comment, an empty line, or a field an answer does not need (`id:`, `retry:`).
fn is_field(line: &str) -> bool {
    line.is_empty()
        || line.starts_with(':')
        || line.starts_with("id:")
        || line.starts_with("retry:")
}

/// The `data` of each event parsed as JSON (`[DONE]` and unparsable data left out), with the event's name.
pub(crate) fn json_events(items: &[Item]) -> Vec<(Option<&str>, Value)> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Event { name, data } => serde_json::from_str::<Value>(data)
                .ok()
                .map(|v| (name.as_deref(), v)),
            Item::Bare(_) => None,
        })
        .collect()
}

/// Appends the string `v[key]`, if it is one, to `out` (creating it).
pub(crate) fn append(out: &mut Option<String>, v: &Value, key: &str) {
    if let Some(s) = v.get(key).and_then(Value::as_str) {
        out.get_or_insert_with(String::new).push_str(s);
    }
}
