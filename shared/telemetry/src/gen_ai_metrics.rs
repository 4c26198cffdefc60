//! The OpenTelemetry GenAI client metrics in Prometheus naming (dots become underscores, the unit is a suffix), so
//! dashboards built for the semantic conventions work on both services' scrapes.
//!
//! Label values are bounded by the caller: provider and model ids come from configuration, token and error types
//! are closed sets.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// `gen_ai.client.token.usage`: tokens per generation, by token type.
pub const TOKEN_USAGE: &str = "gen_ai_client_token_usage";
/// `gen_ai.client.operation.duration`, in seconds.
pub const OPERATION_DURATION: &str = "gen_ai_client_operation_duration";
/// Time to the first streamed chunk, in seconds.
pub const TIME_TO_FIRST_CHUNK: &str = "gen_ai_client_time_to_first_chunk";

/// Label `gen_ai.operation.name`, which the conventions require on every GenAI metric: [`OPERATION_CHAT`] for
/// every generation either service makes, [`OPERATION_EMBEDDINGS`] for the gateway's embedding calls.
pub const LABEL_OPERATION_NAME: &str = "gen_ai_operation_name";
/// The operation of every generation: `chat`.
pub const OPERATION_CHAT: &str = "chat";
/// The operation of an embeddings call: `embeddings`.
pub const OPERATION_EMBEDDINGS: &str = "embeddings";
/// Label `gen_ai.token.type`: [`TOKEN_INPUT`] or [`TOKEN_OUTPUT`].
pub const LABEL_TOKEN_TYPE: &str = "gen_ai_token_type";
/// Label `gen_ai.provider.name`: the provider id.
pub const LABEL_PROVIDER_NAME: &str = "gen_ai_provider_name";
/// Label `gen_ai.request.model`: the model id as requested.
pub const LABEL_REQUEST_MODEL: &str = "gen_ai_request_model";
/// Label `error.type`: present only on operations that failed.
pub const LABEL_ERROR_TYPE: &str = "error_type";

/// Token type of prompt tokens (cached ones included, as the conventions count them).
pub const TOKEN_INPUT: &str = "input";
/// Token type of completion tokens (reasoning included).
pub const TOKEN_OUTPUT: &str = "output";

/// Label values of one GenAI observation. `Arc<str>` so that recording clones pointers, not strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GenAiLabels {
    /// The operation: [`OPERATION_CHAT`] or [`OPERATION_EMBEDDINGS`].
    pub operation: &'static str,
    /// Provider id.
    pub provider: Arc<str>,
    /// Model id.
    pub model: Arc<str>,
    /// Token type, on token usage only.
    pub token_type: Option<&'static str>,
    /// Error type, on failed operations only.
    pub error_type: Option<&'static str>,
}

impl EncodeLabelSet for GenAiLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        (LABEL_OPERATION_NAME, self.operation).encode(encoder.encode_label())?;
        (LABEL_PROVIDER_NAME, &*self.provider).encode(encoder.encode_label())?;
        (LABEL_REQUEST_MODEL, &*self.model).encode(encoder.encode_label())?;
        if let Some(t) = self.token_type {
            (LABEL_TOKEN_TYPE, t).encode(encoder.encode_label())?;
        }
        if let Some(e) = self.error_type {
            (LABEL_ERROR_TYPE, e).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// Histogram buckets as in the conventions' advice: exponential from `start`.
#[derive(Debug, Clone, Copy)]
pub struct Buckets {
    /// Upper bound of the first bucket.
    pub start: f64,
    /// Growth per bucket.
    pub factor: f64,
    /// Number of buckets.
    pub count: u16,
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(exponential_buckets(self.start, self.factor, self.count))
    }
}

/// 1 … 4^13 (~67M) tokens: the conventions' advice spans single tokens to whole-context prompts.
const TOKEN_BUCKETS: Buckets = Buckets {
    start: 1.0,
    factor: 4.0,
    count: 14,
};
/// 10 ms … ~27 min: the longest generations run to the total timeout.
const DURATION_BUCKETS: Buckets = Buckets {
    start: 0.01,
    factor: 2.0,
    count: 18,
};

/// The three GenAI client histograms, registered into a service's registry.
#[derive(Debug, Clone)]
pub struct GenAiMetrics {
    token_usage: Family<GenAiLabels, Histogram, Buckets>,
    operation_duration: Family<GenAiLabels, Histogram, Buckets>,
    time_to_first_chunk: Family<GenAiLabels, Histogram, Buckets>,
}

impl GenAiMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &mut Registry) -> GenAiMetrics {
        let m = GenAiMetrics {
            token_usage: Family::new_with_constructor(TOKEN_BUCKETS),
            operation_duration: Family::new_with_constructor(DURATION_BUCKETS),
            time_to_first_chunk: Family::new_with_constructor(DURATION_BUCKETS),
        };
        registry.register(
            TOKEN_USAGE,
            "Tokens used per generation, by token type (input, output)",
            m.token_usage.clone(),
        );
        registry.register_with_unit(
            OPERATION_DURATION,
            "Duration of a generation; error_type is set when it failed",
            Unit::Seconds,
            m.operation_duration.clone(),
        );
        registry.register_with_unit(
            TIME_TO_FIRST_CHUNK,
            "Time from the request to the first streamed chunk",
            Unit::Seconds,
            m.time_to_first_chunk.clone(),
        );
        m
    }

    /// The first chunk of a generation arrived.
    pub fn first_chunk(&self, provider: &Arc<str>, model: &Arc<str>, elapsed: Duration) {
        self.time_to_first_chunk
            .get_or_create(&labels(provider, model, None, None))
            .observe(elapsed.as_secs_f64());
    }

    /// A generation ended after `duration`; `error_type` when it failed; `tokens` (input, output) when known.
    pub fn operation(
        &self,
        provider: &Arc<str>,
        model: &Arc<str>,
        duration: Duration,
        error_type: Option<&'static str>,
        tokens: Option<(u64, u64)>,
    ) {
        self.operation_duration
            .get_or_create(&labels(provider, model, None, error_type))
            .observe(duration.as_secs_f64());
        if let Some((input, output)) = tokens {
            for (kind, n) in [(TOKEN_INPUT, input), (TOKEN_OUTPUT, output)] {
                // Precision loss above 2^53 tokens is irrelevant for a histogram.
                self.token_usage
                    .get_or_create(&labels(provider, model, Some(kind), None))
                    .observe(n as f64);
            }
        }
    }

    /// An embeddings call ended after `duration`; `error_type` when it failed; the inputs' tokens when it succeeded.
    pub fn embeddings(
        &self,
        provider: &Arc<str>,
        model: &Arc<str>,
        duration: Duration,
        error_type: Option<&'static str>,
        input_tokens: Option<u64>,
    ) {
        let with = |token_type, error_type| GenAiLabels {
            operation: OPERATION_EMBEDDINGS,
            ..labels(provider, model, token_type, error_type)
        };
        self.operation_duration
            .get_or_create(&with(None, error_type))
            .observe(duration.as_secs_f64());
        if let Some(n) = input_tokens {
            self.token_usage
                .get_or_create(&with(Some(TOKEN_INPUT), None))
                .observe(n as f64);
        }
    }
}

fn labels(
    provider: &Arc<str>,
    model: &Arc<str>,
    token_type: Option<&'static str>,
    error_type: Option<&'static str>,
) -> GenAiLabels {
    GenAiLabels {
        operation: OPERATION_CHAT,
        provider: Arc::clone(provider),
        model: Arc::clone(model),
        token_type,
        error_type,
    }
}
