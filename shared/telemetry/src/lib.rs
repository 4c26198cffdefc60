//! Telemetry shared by both services: structured logs to stderr, spans exported over OTLP/gRPC when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the standard `OTEL_*` variables configure the exporter, e.g.
//! `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_TRACES_SAMPLER`), and W3C trace-context propagation through gRPC metadata and
//! HTTP headers, so one generation is one trace across the caller, the processor, the gateway and the provider call.

pub mod gen_ai_metrics;
pub mod labels;
pub mod metrics_http;
pub mod process_metrics;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The `tracing` target of the gRPC call spans (`service_kit::rpc_span`): exported as traces, kept out of logs.
pub const RPC_SPAN_TARGET: &str = "rpc_span";

/// The `tracing` target of the other spans that only shape a trace (the processor's prompt loop and its steps):
/// exported, kept out of logs like [`RPC_SPAN_TARGET`]'s, so without an exporter they are not created at all. The log
/// lines emitted under them carry the ids they would have added (a session's id) as fields of their own.
pub const TRACE_SPAN_TARGET: &str = "trace_span";

/// Keeps the exporter alive; dropping it flushes pending spans.
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            tracing::warn!(message = "flushing spans failed", error = %e);
        }
    }
}

/// Installs the global subscriber for `service_name`. `RUST_LOG` filters logs (default `info`); `LOG_FORMAT=json`
/// switches to JSON lines; colours only when stderr is a terminal. Spans are exported only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; sampling follows
/// `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default: parent-based, always on).
pub fn init(
    service_name: &'static str,
) -> Result<Telemetry, Box<dyn std::error::Error + Send + Sync>> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("LOG_FORMAT").is_ok_and(|v| v == "json");
    // Colour codes only for a person at a terminal: log files and collectors get plain text, and every span keeps
    // its formatted fields without escape sequences (about 1 KiB less per open stream in the gateway).
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let fmt: Box<dyn Layer<Registry> + Send + Sync> = if json {
        Box::new(fmt.json())
    } else {
        Box::new(fmt)
    };
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> =
        vec![Box::new(fmt.with_filter(log_filter(filter)))];

    let provider = if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()?;
        let resource = resource(service_name);
        Some(
            opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource)
                .build(),
        )
    } else {
        None
    };
    if let Some(p) = &provider {
        let otel = tracing_opentelemetry::layer().with_tracer(p.tracer(service_name));
        layers.push(Box::new(
            otel.with_filter(tracing_subscriber::filter::LevelFilter::INFO),
        ));
    }
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    tracing_subscriber::registry().with(layers).try_init()?;
    Ok(Telemetry { provider })
}

/// What reaches the logs: `filter` (from `RUST_LOG`) without the trace-only spans. Spans go to the exporter whatever
/// the log level, so a quiet log does not lose traces; the gRPC call spans and the other trace-only ones are for
/// traces only: log lines keep their shape, and without an exporter those spans are not even created (nor entered on
/// every poll of what they wrap).
///
/// The target test keeps the log level's hint: without one the process-wide maximum level would be `TRACE`, and
/// every `trace!` and `debug!` of the libraries on the stream path (h2, hyper, tonic, redis: several per frame) would
/// look up its call site's interest instead of stopping at one global comparison.
fn log_filter<S>(filter: EnvFilter) -> impl tracing_subscriber::layer::Filter<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let not_trace_only = tracing_subscriber::filter::filter_fn(|m| {
        m.target() != RPC_SPAN_TARGET && m.target() != TRACE_SPAN_TARGET
    })
    .with_max_level_hint(tracing_subscriber::filter::LevelFilter::TRACE);
    filter.and(not_trace_only)
}

/// The resource of both services' spans: `service.name`, `service.version` (the workspace's version, which every
/// crate shares) and `service.instance.id` (a random UUID per process); `OTEL_RESOURCE_ATTRIBUTES` may set others
/// and replace these two.
fn resource(service_name: &'static str) -> opentelemetry_sdk::Resource {
    use opentelemetry_sdk::resource::{
        EnvResourceDetector, SdkProvidedResourceDetector, TelemetryResourceDetector,
    };
    opentelemetry_sdk::Resource::builder_empty()
        .with_attributes([
            opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            opentelemetry::KeyValue::new("service.instance.id", instance_id()),
        ])
        .with_detectors(&[
            Box::new(SdkProvidedResourceDetector),
            Box::new(TelemetryResourceDetector),
            Box::new(EnvResourceDetector::new()),
        ])
        .with_service_name(service_name)
        .build()
}

/// A random UUID (the kernel's), or, where that cannot be read, the host name, process id and start time.
fn instance_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map(|u| u.trim().to_string())
        .unwrap_or_else(|_| {
            let host = std::env::var("HOSTNAME").unwrap_or_default();
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            format!("{host}-{}-{nanos}", std::process::id())
        })
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::try_from(value),
        ) {
            self.0.insert(k, v);
        }
    }
}

struct VecInjector<'a>(&'a mut Vec<(String, String)>);

impl Injector for VecInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.retain(|(k, _)| k != key);
        self.0.push((key.to_string(), value));
    }
}

/// Makes `span` a child of the W3C trace context (`traceparent`, `tracestate`) in the caller's HTTP headers or gRPC
/// metadata, when there is a valid one. This is where a service takes its caller's context: the gRPC server span of
/// every call (`service_kit::rpc_span`), and [`continue_trace`] where no server span is around.
pub fn set_parent_from_headers(span: &tracing::Span, headers: &http::HeaderMap) {
    if span.is_disabled() {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// Continues the caller's trace on `span`, just created: when the current span is traced (the gRPC server span of
/// the call, which already took the caller's context), `span` stays its child; otherwise (the gateway's HTTP front
/// door, which has no call span) it becomes a child of the W3C context in `headers`. Either way the caller's context
/// is extracted once.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if !is_traced(&tracing::Span::current()) {
        set_parent_from_headers(span, headers);
    }
}

/// Records `value` in `span`'s declared (`Empty`) field `field` unless it is empty: an attribute the caller did not
/// give is left out of the span, never exported as an empty string.
pub fn record_present(span: &tracing::Span, field: &'static str, value: &str) {
    if !value.is_empty() {
        span.record(field, value);
    }
}

/// Sets a string-array attribute on `span`'s OpenTelemetry span (such as `gen_ai.response.finish_reasons`); a
/// tracing field can only carry a scalar, so the key must not be declared as a field of the span.
pub fn set_string_array(span: &tracing::Span, key: &'static str, values: &[&str]) {
    let values: Vec<opentelemetry::StringValue> =
        values.iter().map(|v| v.to_string().into()).collect();
    span.set_attribute(key, opentelemetry::Value::Array(values.into()));
}

/// True when `span` is recorded by an OpenTelemetry exporter (so its context can be propagated).
pub fn is_traced(span: &tracing::Span) -> bool {
    !span.is_disabled() && span.context().span().span_context().is_valid()
}

/// Writes `span`'s trace context into an outgoing request's HTTP headers (gRPC metadata is headers too), replacing
/// earlier values. Returns false when the span is not traced.
pub fn inject_header_map(span: &tracing::Span, headers: &mut http::HeaderMap) -> bool {
    if span.is_disabled() {
        return false;
    }
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return false;
    }
    TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(headers));
    true
}

/// Writes `span`'s trace context into HTTP headers (`traceparent`, `tracestate`), replacing earlier values. Returns
/// false when the span is not traced.
pub fn inject_headers(span: &tracing::Span, headers: &mut Vec<(String, String)>) -> bool {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return false;
    }
    TraceContextPropagator::new().inject_context(&cx, &mut VecInjector(headers));
    true
}

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
