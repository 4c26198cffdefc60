//! The spans of the calls that are not generations, as the generations' (`crate::tracing_spans`): an
//! `embeddings {model}` client span (the GenAI conventions' operation) or a `count_tokens {model}` one, a child of
//! the call's gRPC server span or of the caller's trace context at the HTTP front door, with one provider-request
//! span per attempt inside. Input texts are never recorded.

use tracing::field::Empty;

use super::CallError;

/// The span of an embeddings call.
pub(super) fn embeddings(
    model: &str,
    inputs: usize,
    metadata: &tonic::metadata::MetadataMap,
) -> tracing::Span {
    let span = tracing::info_span!(
        "embeddings",
        "otel.name" = %format!("embeddings {model}"),
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "embeddings",
        "gen_ai.provider.name" = Empty,
        "gen_ai.request.model" = %model,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.embeddings.dimension.count" = Empty,
        "llm.model" = Empty,
        "llm.inputs" = i64::try_from(inputs).unwrap_or(i64::MAX),
        "llm.attempts" = Empty,
        "llm.cost_nano_usd" = Empty,
        "llm.usage_estimated" = Empty,
        "llm.tenant" = Empty,
        "llm.key" = Empty,
        "error.type" = Empty,
    );
    llm_telemetry::continue_trace(&span, metadata.as_ref());
    span
}

/// The span of a token count.
pub(super) fn count_tokens(model: &str, metadata: &tonic::metadata::MetadataMap) -> tracing::Span {
    let span = tracing::info_span!(
        "count_tokens",
        "otel.name" = %format!("count_tokens {model}"),
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "count_tokens",
        "gen_ai.provider.name" = Empty,
        "gen_ai.request.model" = %model,
        "gen_ai.usage.input_tokens" = Empty,
        "llm.model" = Empty,
        "llm.token_count.method" = Empty,
        "llm.attempts" = Empty,
        "llm.tenant" = Empty,
        "llm.key" = Empty,
        "error.type" = Empty,
    );
    llm_telemetry::continue_trace(&span, metadata.as_ref());
    span
}

/// Records the model and provider the call went to.
pub(super) fn target(span: &tracing::Span, target: &super::Target) {
    span.record("gen_ai.provider.name", target.provider.id.as_str());
    span.record("llm.model", target.model.id.as_str());
}

/// Records a failed call.
pub(super) fn failed(span: &tracing::Span, e: &CallError) {
    span.record("error.type", e.kind());
    span.record("otel.status_code", "ERROR");
}

/// An integer attribute (the exporter takes `i64`).
pub(super) fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
