//! Recent traces in memory: spans grouped by trace id, the oldest trace dropped once more than the bound are kept,
//! and each span reduced to what a tree shows (a bounded number of short attributes).

use std::collections::{HashMap, VecDeque};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;

/// Attributes kept per span.
const MAX_ATTRIBUTES: usize = 32;
/// Characters kept of an attribute's value.
const MAX_VALUE_CHARS: usize = 200;
/// Spans kept per trace; later ones are counted, not kept.
const MAX_SPANS_PER_TRACE: usize = 2000;

/// One span, as a tree shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// `service.name` of the exporting resource.
    pub service: String,
    /// Hex trace id.
    pub trace_id: String,
    /// Hex span id.
    pub span_id: String,
    /// Hex parent span id; empty for a root.
    pub parent_id: String,
    /// The span's name.
    pub name: String,
    /// Start and end, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// Whether its status is an error.
    pub error: bool,
    /// Its scalar attributes, values rendered as text and cut short.
    pub attributes: Vec<(String, String)>,
}

impl SpanRecord {
    /// An attribute's value.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The spans of an export request.
pub fn records_of(request: ExportTraceServiceRequest) -> Vec<SpanRecord> {
    let mut out = Vec::new();
    for rs in request.resource_spans {
        let attrs = rs.resource.map(|r| r.attributes).unwrap_or_default();
        let service = service_name(&attrs);
        for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
            out.push(SpanRecord {
                service: service.clone(),
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_id: hex(&span.parent_span_id),
                name: span.name,
                start_ns: span.start_time_unix_nano,
                end_ns: span.end_time_unix_nano,
                error: span
                    .status
                    .is_some_and(|s| s.code == StatusCode::Error as i32),
                attributes: span
                    .attributes
                    .iter()
                    .filter_map(|kv| Some((kv.key.clone(), text_of(kv)?)))
                    .take(MAX_ATTRIBUTES)
                    .collect(),
            });
        }
    }
    out
}

/// A scalar attribute's value as text, cut to [`MAX_VALUE_CHARS`].
fn text_of(kv: &KeyValue) -> Option<String> {
    let text = match kv.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        Value::DoubleValue(d) => d.to_string(),
        Value::BoolValue(b) => b.to_string(),
        _ => return None,
    };
    Some(text.chars().take(MAX_VALUE_CHARS).collect())
}

/// The `service.name` of a resource's attributes; empty when it has none.
pub fn service_name(resource: &[KeyValue]) -> String {
    resource
        .iter()
        .find(|kv| kv.key == "service.name")
        .and_then(text_of)
        .unwrap_or_default()
}

/// An OTLP id (trace or span) as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The most recent traces, at most `max_traces` of them.
#[derive(Debug)]
pub struct Traces {
    /// Trace ids, oldest first.
    order: VecDeque<String>,
    by_id: HashMap<String, Vec<SpanRecord>>,
    max_traces: usize,
}

impl Traces {
    /// An empty store keeping at most `max_traces` traces (at least one).
    pub fn new(max_traces: usize) -> Traces {
        Traces {
            order: VecDeque::new(),
            by_id: HashMap::new(),
            max_traces: max_traces.max(1),
        }
    }

    /// Adds spans, dropping the oldest traces beyond the bound.
    pub fn add(&mut self, spans: Vec<SpanRecord>) {
        for span in spans {
            let list = match self.by_id.get_mut(&span.trace_id) {
                Some(list) => list,
                None => {
                    self.order.push_back(span.trace_id.clone());
                    self.by_id.entry(span.trace_id.clone()).or_default()
                }
            };
            if list.len() < MAX_SPANS_PER_TRACE {
                list.push(span);
            }
        }
        while self.order.len() > self.max_traces {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }

    /// A trace's spans, in arrival order.
    pub fn trace(&self, id: &str) -> Option<&[SpanRecord]> {
        self.by_id.get(id).map(Vec::as_slice)
    }

    /// Up to `limit` traces, newest first.
    pub fn recent(&self, limit: usize) -> Vec<&[SpanRecord]> {
        self.order
            .iter()
            .rev()
            .filter_map(|id| self.trace(id))
            .take(limit)
            .collect()
    }

    /// The traces with a span whose attribute `key` is `value`, oldest first.
    pub fn with_attribute(&self, key: &str, value: &str) -> Vec<&[SpanRecord]> {
        self.order
            .iter()
            .filter_map(|id| self.trace(id))
            .filter(|spans| spans.iter().any(|s| s.attribute(key) == Some(value)))
            .collect()
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
