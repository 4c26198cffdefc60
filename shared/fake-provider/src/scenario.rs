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

use crate::openai_sse::text_stream;
use crate::reply::error_json;
use crate::whole::Asked;
use crate::{Recorded, Reply};

/// Gap between events of the demo's streams, slow enough to watch.
pub const DEMO_PACE: Duration = Duration::from_millis(30);

pub use crate::demo::{DEMO_FILE, DEMO_PREAMBLE, DEMO_TOOL};

/// The demo provider as an OpenAI-Chat-compatible endpoint: each turn calls the next tool of its plan (`write`,
/// then [`DEMO_TOOL`], then any other client tool offered), one per step, and answers in text once none is left;
/// the rules are in [`crate::demo`]. Paced at [`DEMO_PACE`]; usage counts prompt tokens as about a quarter of the
/// request body's length.
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
        let reply = if interval.is_zero() {
            reply
        } else {
            reply.pace(interval).burst_head(2)
        };
        as_requested(body.stream == Some(true), reply)
    })
}

/// Paced bodies by (model, prompt tokens), with [`PACED_ID_SLOT`] for the id.
type Templates = HashMap<(String, u64), Arc<str>>;

/// The id placeholder in a cached paced body.
const PACED_ID_SLOT: &str = "chatcmpl-paced-ID-SLOT";
/// Distinct (model, prompt tokens) bodies kept; the cache starts over beyond.
const TEMPLATE_CACHE: usize = 64;

/// The two fields of a request the paced scenario reads. Reading only them (the rest of the body is checked to be
/// JSON but never built) keeps the fake cheap beside a gateway under measurement: a real provider parses a
/// multi-megabyte request on its own machine, not on the gateway's cores.
#[derive(serde::Deserialize)]
struct ModelOnly {
    model: Option<String>,
    stream: Option<bool>,
}

/// The model a request names, when it names none.
const DEFAULT_MODEL: &str = "demo-model";

/// Wraps a chat-completions handler with the shared routing; its stream is answered whole when the request did not
/// ask for one, as OpenAI answers.
fn chat_route(handler: impl Fn(&Recorded, &Value) -> Reply + Send + Sync + 'static) -> Reply {
    chat_route_as(move |req, body: Value| {
        let streamed = body.get("stream") == Some(&Value::Bool(true));
        as_requested(streamed, handler(req, &body))
    })
}

/// `reply` (a stream) whole unless `streamed`.
fn as_requested(streamed: bool, reply: Reply) -> Reply {
    let form = if streamed {
        Asked::Stream
    } else {
        Asked::Whole
    };
    match crate::whole::in_form(crate::Protocol::OpenaiChat, form, reply) {
        Ok(reply) => reply,
        Err(rejection) => rejection.reply(),
    }
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
    let id = format!("chatcmpl-demo-{n}");
    let sse = crate::demo::turn(body, model_of(body), &id, n, prompt_tokens(req));
    Reply::sse(sse).pace(DEMO_PACE)
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
