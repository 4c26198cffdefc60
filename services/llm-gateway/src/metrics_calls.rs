//! The metrics of the calls that are not generations (embeddings, token counts), recorded once per call when it
//! ends. An embeddings call also adds its input tokens and cost to the generations' token and cost counters, so
//! spend dashboards count every billed call.

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{
    Buckets, LABEL_KIND, LABEL_OUTCOME, LABEL_TYPE, Metrics, ModelAnd, ModelLabels, Outcome,
    TTFE_BUCKETS, register, register_seconds,
};

/// Calls by operation and outcome.
pub const CALLS: &str = "llm_gateway_calls";
/// Calls that failed, by operation and error kind.
pub const CALL_ERRORS: &str = "llm_gateway_call_errors";
/// Time from a call to its answer.
pub const CALL_DURATION: &str = "llm_gateway_call_duration";
/// Inputs embedded.
pub const EMBEDDING_INPUTS: &str = "llm_gateway_embedding_inputs";
/// Label: the call's operation (`embeddings`, `count_tokens`).
pub const LABEL_OPERATION: &str = "operation";

/// Which call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `Embed`, `POST /v1/embeddings`.
    Embeddings,
    /// `CountTokens`, `POST /v1/messages/count_tokens`.
    CountTokens,
}

impl Operation {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Embeddings => "embeddings",
            Operation::CountTokens => "count_tokens",
        }
    }
}

/// Model labels, the operation and one more closed-set label.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallLabels {
    model: ModelLabels,
    operation: Operation,
    extra: Option<(&'static str, &'static str)>,
}

impl EncodeLabelSet for CallLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        self.model.encode(encoder)?;
        (LABEL_OPERATION, self.operation.as_str()).encode(encoder.encode_label())?;
        if let Some(extra) = self.extra {
            extra.encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// The call families.
pub(super) struct CallMetrics {
    calls: Family<CallLabels, Counter>,
    errors: Family<CallLabels, Counter>,
    duration: Family<CallLabels, Histogram, Buckets>,
    inputs: Family<ModelLabels, Counter>,
}

impl CallMetrics {
    /// Registers the families in `r`.
    pub(super) fn register(r: &mut Registry) -> CallMetrics {
        CallMetrics {
            calls: register(
                r,
                CALLS,
                "Calls other than generations (embeddings, count_tokens) by operation and outcome",
                Family::default(),
            ),
            errors: register(
                r,
                CALL_ERRORS,
                "Calls other than generations that failed, by operation and error kind",
                Family::default(),
            ),
            duration: register_seconds(
                r,
                CALL_DURATION,
                "Time from a call other than a generation to its answer, by operation",
                Family::new_with_constructor(TTFE_BUCKETS),
            ),
            inputs: register(
                r,
                EMBEDDING_INPUTS,
                "Inputs embedded by embeddings calls that succeeded",
                Family::default(),
            ),
        }
    }
}

/// What [`Metrics::call_ended`] records.
#[derive(Debug)]
pub struct CallEnded<'a> {
    /// The model called.
    pub labels: &'a ModelLabels,
    /// Which call.
    pub operation: Operation,
    /// How it ended.
    pub outcome: Outcome,
    /// Call to answer.
    pub duration: Duration,
    /// The error kind, when it failed.
    pub error_kind: Option<&'static str>,
    /// Embeddings: inputs embedded, their tokens and cost, when it succeeded.
    pub embedded: Option<Embedded>,
}

/// An embeddings call's inputs, tokens and cost.
#[derive(Debug, Clone, Copy)]
pub struct Embedded {
    /// Inputs embedded.
    pub inputs: u64,
    /// Their tokens.
    pub tokens: u64,
    /// Their cost in nano-USD, when the model is priced.
    pub cost_nano_usd: Option<i64>,
}

impl Metrics {
    /// A call other than a generation ended.
    pub fn call_ended(&self, end: &CallEnded<'_>) {
        let labels = |extra| CallLabels {
            model: end.labels.clone(),
            operation: end.operation,
            extra,
        };
        self.calls
            .calls
            .get_or_create(&labels(Some((LABEL_OUTCOME, end.outcome.as_str()))))
            .inc();
        self.calls
            .duration
            .get_or_create(&labels(None))
            .observe(end.duration.as_secs_f64());
        if let Some(kind) = end.error_kind {
            self.calls
                .errors
                .get_or_create(&labels(Some((LABEL_KIND, kind))))
                .inc();
        }
        if end.operation != Operation::Embeddings {
            return;
        }
        let error_type = match end.outcome {
            Outcome::Ok => None,
            Outcome::Error => Some(end.error_kind.unwrap_or("provider_error")),
            Outcome::Cancelled => Some("cancelled"),
        };
        let l = end.labels;
        let tokens = end.embedded.map(|e| e.tokens);
        self.gen_ai
            .embeddings(&l.provider, &l.model, end.duration, error_type, tokens);
        let Some(e) = end.embedded else { return };
        self.calls.inputs.get_or_create(l).inc_by(e.inputs);
        self.tokens
            .get_or_create(&ModelAnd {
                model: l.clone(),
                name: LABEL_TYPE,
                value: "input",
            })
            .inc_by(e.tokens);
        if let Some(cost) = e.cost_nano_usd {
            self.cost
                .get_or_create(l)
                .inc_by(u64::try_from(cost).unwrap_or(0));
        }
    }
}
