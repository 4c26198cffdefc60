//! Request-aware replies served by the `fake-provider` binary, exposed here
//! so tests can run the very same scenarios in-process.
//!
//! Each scenario is a [`Reply::fn_reply`] meant for
//! [`FakeProvider::set_fallback`](crate::FakeProvider::set_fallback). It
//! routes `GET /healthz` to `200 {"status":"ok"}`, `POST /v1/chat/completions`
//! (and `/chat/completions`) to the scenario, and anything else to 404.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::openai_sse::{ChatStream, split_words, text_stream};
use crate::reply::error_json;
use crate::{Recorded, Reply};

/// Gap between events of the demo's streams, slow enough to watch.
pub const DEMO_PACE: Duration = Duration::from_millis(30);

/// The text the demo streams before its tool call.
pub const DEMO_PREAMBLE: &str = "Let me check the time for you.";

/// The tool the demo calls, with arguments `{"timezone":"UTC"}`.
pub const DEMO_TOOL: &str = "get_time";

/// The demo's two-turn tool loop, as an OpenAI-Chat-compatible endpoint.
///
/// If the request's last message has role `tool`, it streams
/// `The tool says: <content>. That's all from the demo provider.` word by
/// word and finishes with `stop`. Otherwise, when the request offers
/// [`DEMO_TOOL`], it streams [`DEMO_PREAMBLE`], then one call to it whose
/// arguments `{"timezone":"UTC"}` come in three fragments, finishing with
/// `tool_calls`; when it does not (no tools, or others only), it answers in
/// text, naming what it was offered, and never calls a tool the caller did
/// not offer. All are paced at
/// [`DEMO_PACE`] and end with usage, where prompt tokens are about a quarter
/// of the request body's length.
pub fn demo() -> Reply {
    let counter = Arc::new(AtomicU64::new(0));
    chat_route(move |req, body| {
        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
        demo_turn(req, body, n)
    })
}

/// A text stream of `chunks` content deltas, `interval` apart (zero means
/// as fast as the socket takes them), for benchmarks.
///
/// OpenAI's role chunk and the first content chunk go out back to back, so a
/// client's time to first token is the path's own latency, with no timer in
/// it; the pacing applies between content chunks (and to the finish, usage
/// and `[DONE]` events after them).
pub fn paced(chunks: usize, interval: Duration) -> Reply {
    let pieces: Vec<String> = (0..chunks)
        .map(|i| {
            if i == 0 {
                format!("tok{i}")
            } else {
                format!(" tok{i}")
            }
        })
        .collect();
    let counter = Arc::new(AtomicU64::new(0));
    // Serialising 60-odd JSON chunks per request made the fake the bottleneck when thousands of benchmark streams
    // start at once. The body is built once per (model, prompt tokens) with a placeholder id (and that moment's
    // `created`), and each request only substitutes its own id.
    let templates: Arc<Mutex<Templates>> = Arc::default();
    chat_route_as(move |req, body: ModelOnly| {
        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
        let model = body.model.as_deref().unwrap_or(DEFAULT_MODEL);
        let prompt = prompt_tokens(req);
        let template = {
            let mut cache = crate::lock(&templates);
            if cache.len() >= TEMPLATE_CACHE {
                cache.clear();
            }
            let entry = cache.entry((model.to_owned(), prompt)).or_insert_with(|| {
                let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
                text_stream(model, PACED_ID_SLOT, &refs, (prompt, chunks as u64)).into()
            });
            Arc::clone(entry)
        };
        let sse = template.replace(PACED_ID_SLOT, &format!("chatcmpl-paced-{n}"));
        let reply = Reply::sse(sse);
        if interval.is_zero() {
            reply
        } else {
            reply.pace(interval).burst_head(2)
        }
    })
}

/// Paced bodies by (model, prompt tokens), with [`PACED_ID_SLOT`] for the id.
type Templates = HashMap<(String, u64), Arc<str>>;

/// The id placeholder in a cached paced body.
const PACED_ID_SLOT: &str = "chatcmpl-paced-ID-SLOT";
/// Distinct (model, prompt tokens) bodies kept; the cache starts over beyond.
const TEMPLATE_CACHE: usize = 64;

/// The one field of a request the paced scenario reads. Reading only it (the rest of the body is checked to be
/// JSON but never built) keeps the fake cheap beside a gateway under measurement: a real provider parses a
/// multi-megabyte request on its own machine, not on the gateway's cores.
#[derive(serde::Deserialize)]
struct ModelOnly {
    model: Option<String>,
}

/// The model a request names, when it names none.
const DEFAULT_MODEL: &str = "demo-model";

/// Wraps a chat-completions handler with the shared routing.
fn chat_route(handler: impl Fn(&Recorded, &Value) -> Reply + Send + Sync + 'static) -> Reply {
    chat_route_as(move |req, body: Value| handler(req, &body))
}

/// [`chat_route`] for a handler that reads the body as `T`.
fn chat_route_as<T: serde::de::DeserializeOwned>(
    handler: impl Fn(&Recorded, T) -> Reply + Send + Sync + 'static,
) -> Reply {
    Reply::fn_reply(move |req| {
        let path = req.path.split('?').next().unwrap_or("");
        match (req.method.as_str(), path) {
            ("GET", "/healthz") => Reply::json(200, r#"{"status":"ok"}"#),
            ("POST", "/v1/chat/completions" | "/chat/completions") => {
                match serde_json::from_slice::<T>(&req.body) {
                    Ok(body) => handler(req, body),
                    Err(err) => Reply::json(
                        400,
                        invalid_request(&format!("request body is not valid JSON: {err}")),
                    ),
                }
            }
            (_, "/v1/chat/completions" | "/chat/completions") => {
                Reply::json(405, invalid_request("use POST"))
            }
            _ => Reply::json(
                404,
                error_json(&format!("fake-provider: no route for {path}")),
            ),
        }
    })
}

fn demo_turn(req: &Recorded, body: &Value, n: u64) -> Reply {
    let model = model_of(body);
    let id = format!("chatcmpl-demo-{n}");
    let prompt = prompt_tokens(req);
    let last = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last());
    let tool_result = last
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|m| content_text(m.get("content")));
    let offered = offered_tools(body);
    let sse = match tool_result {
        None if !offered.iter().any(|t| t == DEMO_TOOL) => {
            let answer = plain_answer(last, &offered);
            let words = split_words(&answer);
            text_stream(model, &id, &words, (prompt, words.len() as u64))
        }
        Some(result) => {
            let answer = format!(
                "The tool says: {}. That's all from the demo provider.",
                result.trim()
            );
            let words = split_words(&answer);
            text_stream(model, &id, &words, (prompt, words.len() as u64))
        }
        None => {
            let words = split_words(DEMO_PREAMBLE);
            let fragments = ["{\"timezone\"", ":\"UTC", "\"}"];
            ChatStream::new(model, &id)
                .text(&words)
                .tool_call(&format!("call_demo_{n}"), DEMO_TOOL, &fragments)
                .finish(
                    "tool_calls",
                    Some((prompt, (words.len() + fragments.len() + 2) as u64)),
                )
        }
    };
    Reply::sse(sse).pace(DEMO_PACE)
}

/// The names of the function tools the request offers.
fn offered_tools(body: &Value) -> Vec<String> {
    body.get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The demo's answer without its tool: what it read and what it was offered.
fn plain_answer(last: Option<&Value>, offered: &[String]) -> String {
    let said = last
        .map(|m| content_text(m.get("content")))
        .unwrap_or_default();
    let words = said.split_whitespace().count();
    let tools = if offered.is_empty() {
        "no tools".to_string()
    } else {
        format!("the tools {}", offered.join(", "))
    };
    format!(
        "This is the demo provider: I read your {words}-word message and was offered {tools}. \
         I only know how to call `{DEMO_TOOL}`, so this is all I can say."
    )
}

/// A tool message's content as text: a string, the joined `text` of content
/// parts, or the raw JSON for anything else.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn model_of(body: &Value) -> &str {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_MODEL)
}

/// Roughly four bytes per token, as a plausible stand-in for a tokenizer.
fn prompt_tokens(req: &Recorded) -> u64 {
    (req.body.len() as u64 / 4).max(1)
}

fn invalid_request(message: &str) -> String {
    serde_json::json!({
        "error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}
    })
    .to_string()
}
