//! Domain ↔ proto conversions: unified events to `StreamResponse` messages, proto errors back to the domain's, and
//! the collector that folds a stream into one `GenerateResponse`. The core calls these to emit the wire type
//! directly (one conversion per event, no second pass); error statuses are in `status`.

use std::time::Duration;

use llm_proto::gateway as pb;
use tonic::Status;

use crate::catalog::ModelInfo;
use crate::error::{ErrorKind, ProviderError};
use crate::event::{Event, FinishReason, Usage};
use crate::status::provider_error_status;

/// `stream_start` event: `model` served by `provider`, on `attempt`, with the provider's relayed response `headers`.
pub fn stream_start(
    provider: &str,
    model: &ModelInfo,
    attempt: u32,
    headers: Vec<(String, String)>,
) -> pb::StreamResponse {
    wrap(pb::stream_response::Event::StreamStart(pb::StreamStart {
        provider: provider.to_string(),
        model: model.id.clone(),
        attempt,
        protocol: model.protocol.wire().as_str().to_string(),
        provider_headers: header_map(headers),
    }))
}

/// Relayed headers as the proto's map; a name sent twice keeps its values joined by `, ` (as HTTP folds them).
fn header_map(headers: Vec<(String, String)>) -> std::collections::HashMap<String, String> {
    let mut map = std::collections::HashMap::with_capacity(headers.len());
    for (name, value) in headers {
        map.entry(name)
            .and_modify(|v: &mut String| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    map
}

/// `step_start` event.
pub fn step_start() -> pb::StreamResponse {
    wrap(pb::stream_response::Event::StepStart(pb::StepStart {}))
}

fn wrap(event: pb::stream_response::Event) -> pb::StreamResponse {
    pb::StreamResponse { event: Some(event) }
}

fn metadata(json: Option<String>, model: &ModelInfo) -> Option<pb::ProviderMetadata> {
    json.map(|json| pb::ProviderMetadata {
        protocol: model.protocol.wire().as_str().to_string(),
        model: model.id.clone(),
        json,
    })
}

/// Converts one domain event; strings are moved, not copied. `Finish` is priced here from the catalog.
pub fn event_to_pb(ev: Event, model: &ModelInfo) -> pb::StreamResponse {
    use pb::stream_response::Event as E;
    wrap(match ev {
        Event::TextStart { id } => E::TextStart(pb::TextStart { id }),
        Event::TextDelta { id, delta } => E::TextDelta(pb::TextDelta { id, delta }),
        Event::TextEnd { id } => E::TextEnd(pb::TextEnd { id }),
        Event::ReasoningStart { id } => E::ReasoningStart(pb::ReasoningStart { id }),
        Event::ReasoningDelta { id, delta } => E::ReasoningDelta(pb::ReasoningDelta { id, delta }),
        Event::ReasoningEnd { id, metadata: m } => E::ReasoningEnd(pb::ReasoningEnd {
            id,
            provider_metadata: metadata(m, model),
        }),
        Event::ToolInputStart { call_id, tool } => E::ToolInputStart(pb::ToolInputStart {
            call_id,
            tool_name: tool,
        }),
        Event::ToolInputDelta { call_id, delta } => {
            E::ToolInputDelta(pb::ToolInputDelta { call_id, delta })
        }
        Event::ToolInputEnd { call_id } => E::ToolInputEnd(pb::ToolInputEnd { call_id }),
        Event::KeepAlive => E::KeepAlive(pb::KeepAlive {}),
        Event::ToolCall {
            call_id,
            tool,
            input_json,
            metadata: m,
        } => E::ToolCall(pb::ToolCall {
            call_id,
            tool_name: tool,
            input_json,
            provider_metadata: metadata(m, model),
        }),
        Event::Finish(f) => {
            let cost = match &model.pricing {
                Some(p) => pb::Cost {
                    total_nano_usd: p.cost_nano_usd(&f.usage),
                    priced: true,
                },
                None => pb::Cost {
                    total_nano_usd: 0,
                    priced: false,
                },
            };
            E::StepFinish(pb::StepFinish {
                finish_reason: finish_reason(f.reason) as i32,
                raw_finish_reason: f.raw_reason,
                usage: Some(usage(&f.usage)),
                cost: Some(cost),
                response_id: f.response_id,
                response_model: f.response_model,
            })
        }
        Event::Error(e) => E::Error(error(e)),
    })
}

fn finish_reason(r: FinishReason) -> pb::FinishReason {
    match r {
        FinishReason::Unspecified => pb::FinishReason::Unspecified,
        FinishReason::Stop => pb::FinishReason::Stop,
        FinishReason::Length => pb::FinishReason::Length,
        FinishReason::ToolCalls => pb::FinishReason::ToolCalls,
        FinishReason::ContentFilter => pb::FinishReason::ContentFilter,
        FinishReason::Error => pb::FinishReason::Error,
        FinishReason::Other => pb::FinishReason::Other,
    }
}

pub(crate) fn usage(u: &Usage) -> pb::Usage {
    pb::Usage {
        input_tokens: u.input,
        cache_read_tokens: u.cache_read,
        cache_write_tokens: u.cache_write,
        output_tokens: u.output,
        reasoning_tokens: u.reasoning,
        total_tokens: u.total(),
    }
}

fn error_kind(k: ErrorKind) -> pb::ErrorKind {
    match k {
        ErrorKind::RateLimited => pb::ErrorKind::RateLimited,
        ErrorKind::Overloaded => pb::ErrorKind::Overloaded,
        ErrorKind::ContextOverflow => pb::ErrorKind::ContextOverflow,
        ErrorKind::Auth => pb::ErrorKind::Auth,
        ErrorKind::InvalidRequest => pb::ErrorKind::InvalidRequest,
        ErrorKind::ContentFilter => pb::ErrorKind::ContentFilter,
        ErrorKind::Timeout => pb::ErrorKind::Timeout,
        ErrorKind::Network => pb::ErrorKind::Network,
        ErrorKind::Cancelled => pb::ErrorKind::Cancelled,
        ErrorKind::ProviderError => pb::ErrorKind::ProviderError,
    }
}

fn error(e: ProviderError) -> pb::Error {
    pb::Error {
        kind: error_kind(e.kind) as i32,
        retry_after: e
            .retry_after
            .and_then(|d| prost_types::Duration::try_from(d).ok()),
        message: e.message,
        retryable: e.retryable,
        http_status: e.http_status.map(u32::from).unwrap_or(0),
        provider_body: e.provider_body,
        retry_after_beyond_cap: e.retry_after_beyond_cap,
        provider_headers: header_map(e.headers),
    }
}

/// Back from the wire type, for `Generate`'s error status.
pub fn error_from_pb(e: &pb::Error) -> ProviderError {
    let kind = match pb::ErrorKind::try_from(e.kind).unwrap_or(pb::ErrorKind::ProviderError) {
        pb::ErrorKind::RateLimited => ErrorKind::RateLimited,
        pb::ErrorKind::Overloaded => ErrorKind::Overloaded,
        pb::ErrorKind::ContextOverflow => ErrorKind::ContextOverflow,
        pb::ErrorKind::Auth => ErrorKind::Auth,
        pb::ErrorKind::InvalidRequest => ErrorKind::InvalidRequest,
        pb::ErrorKind::ContentFilter => ErrorKind::ContentFilter,
        pb::ErrorKind::Timeout => ErrorKind::Timeout,
        pb::ErrorKind::Network => ErrorKind::Network,
        pb::ErrorKind::Cancelled => ErrorKind::Cancelled,
        pb::ErrorKind::ProviderError | pb::ErrorKind::Unspecified => ErrorKind::ProviderError,
    };
    ProviderError {
        kind,
        message: e.message.clone(),
        retryable: e.retryable,
        retry_after: e.retry_after.and_then(|d| Duration::try_from(d).ok()),
        http_status: u16::try_from(e.http_status).ok().filter(|s| *s != 0),
        provider_body: e.provider_body.clone(),
        retry_after_beyond_cap: e.retry_after_beyond_cap,
        headers: e
            .provider_headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// Folds a stream's events into one `GenerateResponse`, or the status of its error.
#[derive(Default)]
pub struct Collector {
    response: pb::GenerateResponse,
    /// Index into `response.output` of each open text/reasoning block, by block id.
    open: Vec<(String, usize)>,
}

impl Collector {
    /// Adds one event. Returns the error status when the event is an error.
    pub fn push(&mut self, ev: pb::StreamResponse) -> Result<(), Status> {
        use pb::output_part::Kind as O;
        use pb::stream_response::Event as E;
        let Some(ev) = ev.event else { return Ok(()) };
        match ev {
            E::StreamStart(s) => self.response.start = Some(s),
            E::StepStart(_)
            | E::ToolInputStart(_)
            | E::ToolInputDelta(_)
            | E::ToolInputEnd(_)
            | E::KeepAlive(_) => {}
            E::TextStart(t) => self.open_block(t.id, O::Text(pb::TextPart::default())),
            E::ReasoningStart(r) => {
                self.open_block(r.id, O::Reasoning(pb::ReasoningPart::default()))
            }
            E::TextDelta(d) => {
                if let Some(O::Text(t)) = self.block(&d.id) {
                    t.text.push_str(&d.delta);
                }
            }
            E::ReasoningDelta(d) => {
                if let Some(O::Reasoning(r)) = self.block(&d.id) {
                    r.text.push_str(&d.delta);
                }
            }
            E::TextEnd(t) => self.open.retain(|(id, _)| *id != t.id),
            E::ReasoningEnd(r) => {
                if let Some(O::Reasoning(part)) = self.block(&r.id) {
                    part.provider_metadata = r.provider_metadata;
                }
                self.open.retain(|(id, _)| *id != r.id);
            }
            E::ToolCall(c) => self.response.output.push(pb::OutputPart {
                kind: Some(O::ToolCall(pb::ToolCallPart {
                    call_id: c.call_id,
                    tool_name: c.tool_name,
                    input_json: c.input_json,
                    provider_metadata: c.provider_metadata,
                })),
            }),
            E::StepFinish(f) => self.response.finish = Some(f),
            E::Error(e) => return Err(provider_error_status(&error_from_pb(&e))),
        }
        Ok(())
    }

    fn open_block(&mut self, id: String, kind: pb::output_part::Kind) {
        self.open.push((id, self.response.output.len()));
        self.response
            .output
            .push(pb::OutputPart { kind: Some(kind) });
    }

    fn block(&mut self, id: &str) -> Option<&mut pb::output_part::Kind> {
        let idx = self
            .open
            .iter()
            .rev()
            .find(|(open_id, _)| open_id == id)
            .map(|(_, i)| *i)?;
        self.response
            .output
            .get_mut(idx)
            .and_then(|p| p.kind.as_mut())
    }

    /// The collected reply; an `INTERNAL` status if the stream ended without a finish.
    pub fn finish(self) -> Result<pb::GenerateResponse, Status> {
        if self.response.finish.is_none() {
            return Err(Status::internal("generation ended without a finish event"));
        }
        Ok(self.response)
    }
}
