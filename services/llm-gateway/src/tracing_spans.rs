//! The generation's spans, following the OpenTelemetry GenAI semantic conventions: a `chat {model}` client span per
//! generation (a child of the call's gRPC server span, or at the HTTP front door of the caller's W3C trace context)
//! and, inside it, one span per provider HTTP request, so retries and fallbacks show as separate attempts.
//!
//! Integer attributes are recorded as `i64` (tracing-opentelemetry exports unsigned fields as strings).
//!
//! Token attributes follow the conventions' meaning: `gen_ai.usage.input_tokens` counts every prompt token (cached
//! or not) and `gen_ai.usage.output_tokens` every output token (reasoning included); the cache and reasoning parts
//! are also given on their own. `llm.cost_nano_usd` is the step's exact cost.
//!
//! Message content is recorded only when the operator opts in (`telemetry.capture_message_content`, or the
//! conventions' `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`): then the span also carries
//! `gen_ai.system_instructions`, `gen_ai.input.messages` and `gen_ai.output.messages` as JSON in the conventions'
//! shape (`[{role, parts: [{type, content | id, name, arguments | response}]}]`). File parts are recorded by media
//! type and size, never their bytes, and each attribute is cut at [`MAX_CONTENT_BYTES`].

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::Stream;
use llm_proto::gateway as pb;
use tracing::field::Empty;

use crate::start_error::StartError;

/// Longest content attribute recorded, in bytes; longer JSON is cut at a character boundary and marked with a
/// trailing `…[truncated]`, so a span never carries a whole long conversation.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// The `chat {model}` span of one generation. With `capture_content`, the system instructions and input messages
/// are recorded on it (see the module docs).
pub fn generation_span(
    g: &pb::Generation,
    metadata: &tonic::metadata::MetadataMap,
    capture_content: bool,
) -> tracing::Span {
    let ctx = g.context.as_ref();
    let context = |f: fn(&pb::RequestContext) -> &str| ctx.map_or("", f);
    let span = tracing::info_span!(
        "chat",
        "otel.name" = %format!("chat {}", g.model),
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = Empty,
        "gen_ai.request.model" = %g.model,
        "gen_ai.response.model" = Empty,
        "gen_ai.response.id" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
        "gen_ai.usage.reasoning.output_tokens" = Empty,
        "gen_ai.conversation.id" = Empty,
        "gen_ai.agent.name" = Empty,
        "gen_ai.client.time_to_first_chunk" = Empty,
        "llm.model" = Empty,
        "llm.attempts" = Empty,
        "llm.cost_nano_usd" = Empty,
        "llm.request_id" = Empty,
        "llm.tenant" = Empty,
        "llm.key" = Empty,
        "error.type" = Empty,
        "gen_ai.system_instructions" = Empty,
        "gen_ai.input.messages" = Empty,
        "gen_ai.output.messages" = Empty,
    );
    // Context the caller did not give is left out, never recorded as an empty string.
    llm_telemetry::record_present(&span, "gen_ai.conversation.id", context(|c| &c.session_id));
    llm_telemetry::record_present(&span, "gen_ai.agent.name", context(|c| &c.agent));
    llm_telemetry::record_present(&span, "llm.request_id", context(|c| &c.request_id));
    // Inside a gRPC call the call's server span is the parent (it took the caller's context); at the HTTP front
    // door the caller's context in the headers is.
    llm_telemetry::continue_trace(&span, metadata.as_ref());
    if capture_content {
        if !g.system.is_empty() {
            let parts: Vec<serde_json::Value> = g
                .system
                .iter()
                .map(|t| serde_json::json!({"type": "text", "content": t}))
                .collect();
            span.record(
                "gen_ai.system_instructions",
                capped(serde_json::Value::Array(parts).to_string()).as_str(),
            );
        }
        span.record(
            "gen_ai.input.messages",
            capped(input_messages_json(&g.messages)).as_str(),
        );
    }
    span
}

/// The input messages in the conventions' JSON shape.
pub fn input_messages_json(messages: &[pb::Message]) -> String {
    use pb::part::Kind;
    let messages: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| {
            let role = match m.role() {
                pb::Role::User | pb::Role::Unspecified => "user",
                pb::Role::Assistant => "assistant",
                pb::Role::Tool => "tool",
            };
            let parts: Vec<serde_json::Value> = m
                .parts
                .iter()
                .filter_map(|p| {
                    Some(match p.kind.as_ref()? {
                        Kind::Text(t) => serde_json::json!({"type": "text", "content": t.text}),
                        Kind::Reasoning(r) => {
                            serde_json::json!({"type": "reasoning", "content": r.text})
                        }
                        Kind::File(f) => {
                            let size = match &f.source {
                                Some(pb::file_part::Source::Data(d)) => d.len(),
                                _ => 0,
                            };
                            serde_json::json!({"type": "blob", "mime_type": f.media_type, "size": size})
                        }
                        Kind::ToolCall(c) => serde_json::json!({
                            "type": "tool_call", "id": c.call_id, "name": c.tool_name,
                            "arguments": arguments(&c.input_json),
                        }),
                        Kind::ToolResult(r) => serde_json::json!({
                            "type": "tool_call_response", "id": r.call_id, "response": r.output,
                        }),
                    })
                })
                .collect();
            serde_json::json!({"role": role, "parts": parts})
        })
        .collect();
    serde_json::Value::Array(messages).to_string()
}

fn arguments(input_json: &str) -> serde_json::Value {
    serde_json::from_str(input_json)
        .unwrap_or_else(|_| serde_json::Value::String(input_json.into()))
}

/// `json` cut at [`MAX_CONTENT_BYTES`] on a character boundary.
fn capped(mut json: String) -> String {
    if json.len() > MAX_CONTENT_BYTES {
        let mut end = MAX_CONTENT_BYTES;
        while !json.is_char_boundary(end) {
            end -= 1;
        }
        json.truncate(end);
        json.push_str("…[truncated]");
    }
    json
}

/// The output of a generation, collected from its events when content capture is on.
#[derive(Default)]
struct OutputCapture {
    text: String,
    reasoning: String,
    tool_calls: Vec<serde_json::Value>,
}

impl OutputCapture {
    fn push(&mut self, ev: &pb::StreamResponse) {
        use pb::stream_response::Event as E;
        match &ev.event {
            Some(E::TextDelta(d)) if self.text.len() < MAX_CONTENT_BYTES => {
                self.text.push_str(&d.delta);
            }
            Some(E::ReasoningDelta(d)) if self.reasoning.len() < MAX_CONTENT_BYTES => {
                self.reasoning.push_str(&d.delta);
            }
            Some(E::ToolCall(c)) => self.tool_calls.push(serde_json::json!({
                "type": "tool_call", "id": c.call_id, "name": c.tool_name,
                "arguments": arguments(&c.input_json),
            })),
            _ => {}
        }
    }

    fn json(&mut self, finish_reason: &str) -> String {
        let mut parts = Vec::new();
        if !self.reasoning.is_empty() {
            parts.push(serde_json::json!({"type": "reasoning", "content": self.reasoning}));
        }
        if !self.text.is_empty() {
            parts.push(serde_json::json!({"type": "text", "content": self.text}));
        }
        parts.append(&mut self.tool_calls);
        serde_json::json!([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}])
            .to_string()
    }
}

/// Records a generation that could not start (unknown model, invalid request, hook refusal).
pub fn start_failed(span: &tracing::Span, e: &StartError) {
    span.record(
        "error.type",
        crate::start_error::start_error_kind(e).as_str(),
    );
    span.record("otel.status_code", "ERROR");
}

/// The span of one provider HTTP request (one attempt).
pub fn attempt_span(provider: &str, base_url: &str, path: &str, attempt: u32) -> tracing::Span {
    let host = base_url
        .split("://")
        .nth(1)
        .and_then(|r| r.split(['/', ':']).next())
        .unwrap_or("");
    tracing::info_span!(
        "provider_request",
        "otel.name" = %format!("POST {path}"),
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "http.request.method" = "POST",
        "url.path" = %path,
        "server.address" = %host,
        "gen_ai.provider.name" = %provider,
        "llm.attempt" = i64::from(attempt),
        "http.response.status_code" = Empty,
        "error.type" = Empty,
    )
}

/// Records an attempt's failure on its span.
pub fn attempt_failed(span: &tracing::Span, e: &crate::error::ProviderError) {
    if let Some(status) = e.http_status {
        span.record("http.response.status_code", i64::from(status));
    }
    span.record("error.type", e.kind.as_str());
    span.record("otel.status_code", "ERROR");
}

/// The event stream of a generation, inside its span: the span is entered on every poll (so provider-request spans
/// nest under it) and the stream's milestones are recorded on it. Dropping the stream ends the span.
pub struct Traced<S> {
    inner: S,
    span: tracing::Span,
    started: Instant,
    first_chunk: bool,
    /// Present only when content capture is on, so the default path allocates nothing per event.
    output: Option<Box<OutputCapture>>,
}

impl<S> Traced<S> {
    /// Wraps `inner` in `span`; with `capture_content`, the output messages are recorded on it at the step's end.
    pub fn new(inner: S, span: tracing::Span, capture_content: bool) -> Self {
        Traced {
            inner,
            span,
            started: Instant::now(),
            first_chunk: false,
            output: capture_content.then(Box::default),
        }
    }
}

impl<S: Stream<Item = pb::StreamResponse> + Unpin> Stream for Traced<S> {
    type Item = pb::StreamResponse;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Traced {
            inner,
            span,
            started,
            first_chunk,
            output,
        } = &mut *self;
        let _entered = span.enter();
        let polled = Pin::new(inner).poll_next(cx);
        if let Poll::Ready(Some(ev)) = &polled {
            record(span, *started, first_chunk, ev);
            if let Some(out) = output {
                out.push(ev);
                if let Some(pb::stream_response::Event::StepFinish(f)) = &ev.event {
                    let json = out.json(finish_name(f.finish_reason()));
                    span.record("gen_ai.output.messages", capped(json).as_str());
                }
            }
        }
        polled
    }
}

fn record(span: &tracing::Span, started: Instant, first_chunk: &mut bool, ev: &pb::StreamResponse) {
    {
        use pb::stream_response::Event as E;
        match &ev.event {
            Some(E::StreamStart(s)) => {
                span.record("gen_ai.provider.name", s.provider.as_str());
                span.record("llm.model", s.model.as_str());
                span.record("llm.attempts", i64::from(s.attempt));
            }
            Some(E::StepStart(_)) | None => {}
            Some(E::StepFinish(f)) => {
                let u = f.usage.unwrap_or_default();
                let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                span.record(
                    "gen_ai.usage.input_tokens",
                    as_i64(u.input_tokens + u.cache_read_tokens + u.cache_write_tokens),
                );
                span.record(
                    "gen_ai.usage.output_tokens",
                    as_i64(u.output_tokens + u.reasoning_tokens),
                );
                span.record(
                    "gen_ai.usage.cache_read.input_tokens",
                    as_i64(u.cache_read_tokens),
                );
                span.record(
                    "gen_ai.usage.cache_creation.input_tokens",
                    as_i64(u.cache_write_tokens),
                );
                span.record(
                    "gen_ai.usage.reasoning.output_tokens",
                    as_i64(u.reasoning_tokens),
                );
                llm_telemetry::record_present(span, "gen_ai.response.id", &f.response_id);
                llm_telemetry::record_present(span, "gen_ai.response.model", &f.response_model);
                // A string array, as the conventions define it (a tracing field can only hold a scalar).
                llm_telemetry::set_string_array(
                    span,
                    "gen_ai.response.finish_reasons",
                    &[finish_name(f.finish_reason())],
                );
                span.record(
                    "llm.cost_nano_usd",
                    f.cost.map(|c| c.total_nano_usd).unwrap_or(0),
                );
            }
            Some(E::Error(e)) => {
                span.record("error.type", kind_name(e.kind()));
                span.record("otel.status_code", "ERROR");
            }
            Some(_) => {
                if !*first_chunk {
                    *first_chunk = true;
                    span.record(
                        "gen_ai.client.time_to_first_chunk",
                        started.elapsed().as_secs_f64(),
                    );
                }
            }
        }
    }
}

fn finish_name(r: pb::FinishReason) -> &'static str {
    match r {
        pb::FinishReason::Stop => "stop",
        pb::FinishReason::Length => "length",
        pb::FinishReason::ToolCalls => "tool_calls",
        pb::FinishReason::ContentFilter => "content_filter",
        pb::FinishReason::Error => "error",
        pb::FinishReason::Other | pb::FinishReason::Unspecified => "other",
    }
}

fn kind_name(k: pb::ErrorKind) -> &'static str {
    match k {
        pb::ErrorKind::RateLimited => "rate_limited",
        pb::ErrorKind::Overloaded => "overloaded",
        pb::ErrorKind::ContextOverflow => "context_overflow",
        pb::ErrorKind::Auth => "auth",
        pb::ErrorKind::InvalidRequest => "invalid_request",
        pb::ErrorKind::ContentFilter => "content_filter",
        pb::ErrorKind::Timeout => "timeout",
        pb::ErrorKind::Network => "network",
        pb::ErrorKind::Cancelled => "cancelled",
        pb::ErrorKind::ProviderError | pb::ErrorKind::Unspecified => "provider_error",
    }
}
