//! What a finished step records beside its parts: the GenAI attributes on its span and the client metrics.

use std::time::Duration;

use llm_proto::sessions as pb;

use crate::metrics::{Metrics, ToolOutcome as CallOutcome};

/// The step's tokens (as the GenAI conventions count them: input includes cached, output includes reasoning), its
/// exact cost and its finish, on the step's span.
pub(super) fn record_step(span: &tracing::Span, message: &pb::Message) {
    let t = message.tokens.unwrap_or_default();
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    span.record(
        "gen_ai.usage.input_tokens",
        as_i64(t.input + t.cache_read + t.cache_write),
    );
    span.record("gen_ai.usage.output_tokens", as_i64(t.output + t.reasoning));
    span.record("llm.cost_nano_usd", message.cost_nano_usd);
    llm_telemetry::record_present(span, "llm.finish", &message.finish);
}

/// The metrics outcome of a finished tool call.
pub(super) fn tool_outcome<T, E>(result: &Result<T, E>) -> CallOutcome {
    match result {
        Ok(_) => CallOutcome::Completed,
        Err(_) => CallOutcome::Error,
    }
}

/// The `error.type` of a failed step: the conventions' low-cardinality snake_case names (`_OTHER` for anything
/// unnamed), the same words the gateway uses for its own errors where they overlap.
fn error_type_name(kind: pb::message_error::Kind) -> &'static str {
    use pb::message_error::Kind;
    match kind {
        Kind::Aborted => "cancelled",
        Kind::Auth => "auth",
        Kind::Api => "api_error",
        Kind::ContextOverflow => "context_overflow",
        Kind::OutputLength => "output_length",
        Kind::StructuredOutput => "structured_output",
        Kind::BudgetExceeded => "budget_exceeded",
        Kind::Unspecified => "_OTHER",
    }
}

/// Records a finished step in the metrics: its finish, and the GenAI client view of its gateway call (tokens counted
/// as the conventions do, like [`record_step`]).
pub(super) fn record_step_metrics(
    metrics: &Metrics,
    message: &pb::Message,
    model: &str,
    duration: Duration,
) {
    let t = message.tokens.unwrap_or_default();
    let error_type = message
        .error
        .as_ref()
        .map(|e| pb::message_error::Kind::try_from(e.kind).map_or("_OTHER", error_type_name));
    metrics.step(
        &message.finish,
        model,
        duration,
        (
            t.input + t.cache_read + t.cache_write,
            t.output + t.reasoning,
        ),
        error_type,
    );
}
