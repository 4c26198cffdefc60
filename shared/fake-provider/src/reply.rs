//! Scripted replies and how they turn into socket writes.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use crate::Recorded;
use crate::sse;

type ReplyFn = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// What the server answers to one request; built with chained methods.
///
/// An SSE reply always sends its status line and headers first, then its
/// body event by event as chunked transfer-encoding; the modifiers
/// ([`pace`](Reply::pace), [`split_every`](Reply::split_every),
/// [`stall_after`](Reply::stall_after), [`reset_after`](Reply::reset_after))
/// act on those events. A JSON reply counts as a single event made of the
/// whole response (status line, headers and body), so `stall_after(0)` or
/// `reset_after(0)` on it means the client gets no response bytes at all.
#[derive(Clone)]
pub struct Reply {
    body: Body,
    headers: Vec<(String, String)>,
    pace: Option<Duration>,
    split: Option<usize>,
    crlf: bool,
    fault: Option<Fault>,
    delay: Option<Duration>,
    head: Option<usize>,
}

#[derive(Clone)]
enum Body {
    Sse(Bytes),
    /// A binary `application/vnd.amazon.eventstream` body (Bedrock); its events are the length-prefixed messages.
    EventStream(Bytes),
    Json {
        status: u16,
        body: Bytes,
    },
    Dynamic(Arc<ReplyFn>),
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    Stall(usize),
    Reset(usize),
}

/// Guards against a `fn_reply` that keeps returning `fn_reply`s.
const MAX_FN_DEPTH: usize = 16;

impl Reply {
    fn with_body(body: Body) -> Reply {
        Reply {
            body,
            headers: Vec::new(),
            pace: None,
            split: None,
            crlf: false,
            fault: None,
            delay: None,
            head: None,
        }
    }

    /// A `200` `text/event-stream` reply whose body is replayed as is.
    pub fn sse(body: impl Into<Bytes>) -> Reply {
        Reply::with_body(Body::Sse(body.into()))
    }

    /// A `200` `application/vnd.amazon.eventstream` reply (Bedrock) whose body is replayed as is; each message is
    /// one event for [`pace`](Reply::pace), [`split_every`](Reply::split_every) and the faults. Additive.
    pub fn eventstream(body: impl Into<Bytes>) -> Reply {
        Reply::with_body(Body::EventStream(body.into()))
    }

    /// [`Reply::eventstream`] of the file `fixtures/<path>` in this crate, read now. Additive.
    ///
    /// # Panics
    ///
    /// Panics naming the full path if the file cannot be read.
    pub fn eventstream_fixture(path: &str) -> Reply {
        let full = format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        match std::fs::read(&full) {
            Ok(bytes) => Reply::eventstream(bytes),
            Err(err) => panic!("fake-provider: cannot read fixture {full}: {err}"),
        }
    }

    /// [`Reply::sse`] of the file `fixtures/<path>` in this crate, read now.
    ///
    /// # Panics
    ///
    /// Panics naming the full path if the file cannot be read.
    pub fn fixture(path: &str) -> Reply {
        let full = format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        match std::fs::read(&full) {
            Ok(bytes) => Reply::sse(bytes),
            Err(err) => panic!("fake-provider: cannot read fixture {full}: {err}"),
        }
    }

    /// [`Reply::json`] with the body of the file `fixtures/<path>` (e.g. a
    /// recorded provider error), read now. Additive to the original brief.
    ///
    /// # Panics
    ///
    /// Panics naming the full path if the file cannot be read as UTF-8.
    pub fn json_fixture(status: u16, path: &str) -> Reply {
        let full = format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        match std::fs::read_to_string(&full) {
            Ok(body) => Reply::json(status, body),
            Err(err) => panic!("fake-provider: cannot read fixture {full}: {err}"),
        }
    }

    /// A non-streaming reply with `content-type: application/json` and a
    /// `content-length`.
    pub fn json(status: u16, body: impl Into<String>) -> Reply {
        Reply::with_body(Body::Json {
            status,
            body: Bytes::from(body.into()),
        })
    }

    /// Adds a response header.
    ///
    /// A header with the same name as one the server sets by default
    /// (`content-type`, `cache-control`, `transfer-encoding`,
    /// `content-length`) replaces the default, which lets a test serve e.g.
    /// a JSON-array stream or deliberately broken framing. `connection:
    /// close` makes the server close the connection after this reply.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sleeps `gap` before each SSE event after the first (and before a
    /// scripted reset, so the last event has time to reach the client).
    pub fn pace(mut self, gap: Duration) -> Reply {
        self.pace = Some(gap);
        self
    }

    /// With [`pace`](Reply::pace): writes the first `events` events back to
    /// back, pacing only the ones after them. Benchmarks use it so the first
    /// content chunk follows OpenAI's role chunk at once and time to first
    /// token measures the path, not a timer. Additive to the original brief.
    pub fn burst_head(mut self, events: usize) -> Reply {
        self.head = Some(events);
        self
    }

    /// Writes each event as `n`-byte pieces, each its own chunk and its own
    /// write, so SSE frames arrive split across reads. `0` means no split.
    pub fn split_every(mut self, n: usize) -> Reply {
        self.split = Some(n);
        self
    }

    /// Rewrites bare LF line endings in the SSE body to CRLF (as Gemini
    /// sends them); CRLF already present is left alone.
    pub fn crlf(mut self) -> Reply {
        self.crlf = true;
        self
    }

    /// Sends the first `events` events, then keeps the connection open
    /// without writing anything more (the chunked body is never finished).
    pub fn stall_after(mut self, events: usize) -> Reply {
        self.fault = Some(Fault::Stall(events));
        self
    }

    /// Sends the first `events` events, then aborts the connection with a
    /// TCP RST (`SO_LINGER` 0, then close).
    pub fn reset_after(mut self, events: usize) -> Reply {
        self.fault = Some(Fault::Reset(events));
        self
    }

    /// Waits `d` after the request arrived before writing anything (for
    /// first-byte timeouts). Not part of the original brief; additive.
    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = Some(d);
        self
    }

    /// Decides the reply per request.
    ///
    /// Modifiers chained onto the `fn_reply` itself apply on top of what the
    /// function returns: its headers are appended, and its pace, split,
    /// delay and fault override the returned ones when set.
    pub fn fn_reply(f: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Reply {
        Reply::with_body(Body::Dynamic(Arc::new(f)))
    }

    /// This reply with the headers `protocol`'s API sends on every answer (its request id and rate-limit state), the
    /// ones the script set kept: what clients read to pace themselves, and what the gateway relays.
    pub(crate) fn with_api_headers(mut self, protocol: crate::Protocol, id: u64) -> Reply {
        use crate::Protocol as P;
        let headers: Vec<(&str, String)> = match protocol {
            P::OpenaiChat
            | P::OpenaiResponses
            | P::OpenaiEmbeddings
            | P::AzureChat
            | P::AzureResponses
            | P::AzureEmbeddings
            | P::MistralChat
            | P::DeepseekChat => vec![
                ("x-request-id", format!("req_fake{id:08}")),
                ("openai-processing-ms", "42".into()),
                ("x-ratelimit-limit-requests", "10000".into()),
                ("x-ratelimit-remaining-requests", "9999".into()),
                ("x-ratelimit-reset-requests", "6ms".into()),
                ("x-ratelimit-limit-tokens", "30000000".into()),
                ("x-ratelimit-remaining-tokens", "29999000".into()),
                ("x-ratelimit-reset-tokens", "2ms".into()),
            ],
            P::Anthropic | P::AnthropicCountTokens => vec![
                ("request-id", format!("req_fake{id:08}")),
                ("anthropic-ratelimit-requests-limit", "4000".into()),
                ("anthropic-ratelimit-requests-remaining", "3999".into()),
                (
                    "anthropic-ratelimit-requests-reset",
                    "2026-01-01T00:00:01Z".into(),
                ),
                ("anthropic-ratelimit-tokens-limit", "2000000".into()),
                ("anthropic-ratelimit-tokens-remaining", "1999000".into()),
                (
                    "anthropic-ratelimit-tokens-reset",
                    "2026-01-01T00:00:01Z".into(),
                ),
            ],
            P::Bedrock | P::BedrockEmbeddings | P::BedrockCountTokens => {
                vec![("x-amzn-requestid", format!("fake-{id:08}"))]
            }
            P::Gemini
            | P::GeminiEmbeddings
            | P::GeminiCountTokens
            | P::VertexGemini
            | P::VertexAnthropic
            | P::VertexEmbeddings
            | P::VertexAnthropicCountTokens
            | P::VertexGeminiCountTokens => Vec::new(),
        };
        for (name, value) in headers {
            if !self
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
            {
                self.headers.push((name.to_string(), value));
            }
        }
        self
    }

    /// The body of an SSE reply.
    pub(crate) fn sse_body(&self) -> Option<&Bytes> {
        match &self.body {
            Body::Sse(b) => Some(b),
            _ => None,
        }
    }

    /// The body of a streamed reply, SSE or eventstream (`None` for a JSON one).
    pub(crate) fn stream_body(&self) -> Option<&Bytes> {
        match &self.body {
            Body::Sse(b) | Body::EventStream(b) => Some(b),
            _ => None,
        }
    }

    /// This streamed reply answered as one JSON document instead, as a provider answers a request that did not ask
    /// for a stream: its headers and delay kept, and a scripted fault striking before any byte, since a whole answer
    /// is written only once complete.
    pub(crate) fn into_whole(mut self, status: u16, body: String) -> Reply {
        self.body = Body::Json {
            status,
            body: Bytes::from(body),
        };
        self.fault = match self.fault {
            Some(Fault::Stall(_)) => Some(Fault::Stall(0)),
            Some(Fault::Reset(_)) => Some(Fault::Reset(0)),
            None => None,
        };
        self
    }

    /// Runs `fn_reply` closures until a concrete reply comes out.
    pub(crate) fn resolve(self, req: &Recorded) -> Reply {
        let mut current = self;
        for _ in 0..MAX_FN_DEPTH {
            let Body::Dynamic(f) = &current.body else {
                return current;
            };
            let inner = f(req);
            current = inner.overlay(current);
        }
        Reply::json(500, error_json("fake-provider: fn_reply nested too deeply"))
    }

    /// A resolved JSON reply's body and headers (`None` for any other reply), for tests of dynamic replies.
    #[cfg(test)]
    pub(crate) fn json_parts(&self) -> Option<(Bytes, Vec<(String, String)>)> {
        match &self.body {
            Body::Json { body, .. } => Some((body.clone(), self.headers.clone())),
            _ => None,
        }
    }

    fn overlay(mut self, outer: Reply) -> Reply {
        self.headers.extend(outer.headers);
        self.pace = outer.pace.or(self.pace);
        self.split = outer.split.or(self.split);
        self.crlf |= outer.crlf;
        self.fault = outer.fault.or(self.fault);
        self.delay = outer.delay.or(self.delay);
        self.head = outer.head.or(self.head);
        self
    }

    /// Turns a resolved reply into the exact sequence of socket actions.
    pub(crate) fn plan(&self) -> Plan {
        let mut steps = Vec::new();
        if let Some(d) = self.delay {
            steps.push(Step::Sleep(d));
        }
        let close = self.headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("connection") && v.to_ascii_lowercase().contains("close")
        });
        match &self.body {
            Body::Sse(body) => {
                let body = if self.crlf {
                    sse::lf_to_crlf(body)
                } else {
                    body.clone()
                };
                self.plan_stream("text/event-stream", sse::split_events(&body), &mut steps);
            }
            Body::EventStream(body) => self.plan_stream(
                "application/vnd.amazon.eventstream",
                split_messages(body),
                &mut steps,
            ),
            Body::Json { status, body } => self.plan_json(*status, body, &mut steps),
            // `resolve` never returns a dynamic body; answering with an
            // error beats panicking inside a server task.
            Body::Dynamic(_) => {
                let fallback = Reply::json(500, error_json("fake-provider: unresolved fn_reply"));
                return fallback.plan();
            }
        }
        Plan { steps, close }
    }

    fn plan_stream(&self, content_type: &str, events: Vec<Bytes>, steps: &mut Vec<Step>) {
        let head = self.head(
            200,
            &[
                ("content-type", content_type.to_owned()),
                ("cache-control", "no-cache".to_owned()),
                ("transfer-encoding", "chunked".to_owned()),
            ],
        );
        steps.push(Step::Write(head));
        let gap = self.pace.filter(|g| !g.is_zero());
        let first_paced = self.head.unwrap_or(0).max(1);
        // Position `i` is "before event i"; position `events.len()` is after
        // the last one, where a fault may still strike before the body end.
        for i in 0..=events.len() {
            let fault_here = match self.fault {
                Some(Fault::Stall(k) | Fault::Reset(k)) => k == i,
                None => false,
            };
            if let Some(gap) = gap
                && i >= first_paced
                && (i < events.len() || fault_here)
            {
                steps.push(Step::Sleep(gap));
            }
            if fault_here {
                steps.push(self.fault_step());
                return;
            }
            match events.get(i) {
                Some(event) => {
                    for piece in pieces(event, self.split) {
                        steps.push(Step::Write(chunk(&piece)));
                    }
                }
                None => steps.push(Step::Write(Bytes::from_static(b"0\r\n\r\n"))),
            }
        }
        // A fault index beyond the body end still stops the stream there,
        // without the terminating chunk.
        if self.fault.is_some() {
            steps.pop();
            steps.push(self.fault_step());
        }
    }

    fn plan_json(&self, status: u16, body: &Bytes, steps: &mut Vec<Step>) {
        if matches!(self.fault, Some(Fault::Stall(0) | Fault::Reset(0))) {
            steps.push(self.fault_step());
            return;
        }
        let mut whole = BytesMut::from(
            &self.head(
                status,
                &[
                    ("content-type", "application/json".to_owned()),
                    ("content-length", body.len().to_string()),
                ],
            )[..],
        );
        whole.extend_from_slice(body);
        for piece in pieces(&whole.freeze(), self.split) {
            steps.push(Step::Write(piece));
        }
        if self.fault.is_some() {
            steps.push(self.fault_step());
        }
    }

    fn fault_step(&self) -> Step {
        match self.fault {
            Some(Fault::Reset(_)) => Step::Reset,
            _ => Step::Stall,
        }
    }

    /// Status line plus headers; user headers replace same-named defaults.
    fn head(&self, status: u16, defaults: &[(&str, String)]) -> Bytes {
        let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (name, value) in defaults {
            let overridden = self
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name));
            if !overridden {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        Bytes::from(out)
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = match &self.body {
            Body::Sse(b) => format!("sse({} bytes)", b.len()),
            Body::EventStream(b) => format!("eventstream({} bytes)", b.len()),
            Body::Json { status, body } => format!("json({status}, {} bytes)", body.len()),
            Body::Dynamic(_) => "fn_reply".to_owned(),
        };
        f.debug_struct("Reply")
            .field("body", &body)
            .field("headers", &self.headers)
            .field("pace", &self.pace)
            .field("split", &self.split)
            .field("crlf", &self.crlf)
            .field("fault", &self.fault)
            .field("delay", &self.delay)
            .field("head", &self.head)
            .finish()
    }
}

/// One socket action of a reply.
pub(crate) enum Step {
    Write(Bytes),
    Sleep(Duration),
    /// Stop writing but keep the connection open until the client leaves.
    Stall,
    /// Abort the connection with RST.
    Reset,
}

/// Everything needed to send one reply.
pub(crate) struct Plan {
    pub(crate) steps: Vec<Step>,
    /// Close the connection after a complete reply.
    pub(crate) close: bool,
}

/// The reply used when nothing was scripted.
pub(crate) fn default_fallback() -> Reply {
    Reply::json(500, error_json("fake-provider: no scripted reply"))
}

/// An OpenAI-shaped error body, since the gateway's OpenAI adapter is the
/// most likely reader of an unscripted reply.
pub(crate) fn error_json(message: &str) -> String {
    serde_json::json!({
        "error": {"message": message, "type": "server_error", "param": null, "code": null}
    })
    .to_string()
}

/// The messages of an eventstream body, by their total-length prefix; a tail too short for its prefix (a fixture
/// cut on purpose) is one last event.
fn split_messages(body: &Bytes) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let len = body
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .filter(|&n| n >= 16 && at + n <= body.len())
            .unwrap_or(body.len() - at);
        out.push(body.slice(at..at + len));
        at += len;
    }
    out
}

fn pieces(data: &Bytes, split: Option<usize>) -> Vec<Bytes> {
    match split {
        Some(n) if n > 0 => (0..data.len())
            .step_by(n)
            .map(|start| data.slice(start..(start + n).min(data.len())))
            .collect(),
        _ => vec![data.clone()],
    }
}

/// One chunk of chunked transfer-encoding, ready for a single write so the
/// chunk never straddles our own write boundaries.
fn chunk(data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 12);
    out.put_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.put_slice(data);
    out.put_slice(b"\r\n");
    out.freeze()
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Site Is Overloaded",
        _ => "Status",
    }
}

#[cfg(test)]
#[path = "reply_tests.rs"]
mod tests;
