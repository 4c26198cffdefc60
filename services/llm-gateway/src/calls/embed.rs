//! One embeddings call: check the inputs, resolve the embedding model, split the inputs into batches of at most what
//! the provider takes per request, send the batches (a few at a time), and put the vectors back in input order with
//! their usage and cost.

use std::ops::Range;

use futures::{StreamExt, TryStreamExt};
use llm_proto::gateway as pb;
use tracing::Instrument;

use super::{CallError, Meter, Sender, Target, spans};
use crate::adapter::embed::{Batch, Embedder, Input, Vectors, embedder, estimate_tokens};
use crate::adapter::{BuildError, EncodedRequest};
use crate::catalog::ModelKind;
use crate::event::Usage;
use crate::generate::{Gateway, StartError};
use crate::metrics::{Embedded, Operation};

/// Most inputs in one call: OpenAI's own limit, which its SDKs and frameworks batch to.
pub const MAX_INPUTS: usize = 2048;

/// Batches in flight at once when a call is split: enough to hide the round trips of a split call (Titan takes one
/// input per request), few enough not to trip a provider's per-second rate limit with one call.
pub const CONCURRENT_BATCHES: usize = 4;

/// What the caller asked for.
#[derive(Debug, Clone, Default)]
pub struct EmbedCall {
    /// `provider/model`.
    pub model: String,
    /// The inputs.
    pub inputs: Vec<Input>,
    /// Dimensions of each vector, when the caller chose.
    pub dimensions: Option<u32>,
    /// The end user's id.
    pub user: Option<String>,
    /// The caller's session and request ids, for the span.
    pub context: Option<pb::RequestContext>,
}

/// The answer.
#[derive(Debug, Clone)]
pub struct Embeddings {
    /// The model id.
    pub model: String,
    /// The provider id.
    pub provider: String,
    /// One vector per input, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// The inputs' tokens.
    pub input_tokens: u64,
    /// True when some tokens are the gateway's estimate (the provider counted none).
    pub estimated: bool,
    /// The cost in nano-USD, when the model is priced.
    pub cost_nano_usd: Option<i64>,
    /// Provider requests made.
    pub provider_requests: u32,
    /// The provider's rate-limit and request-id headers of the last answer, relayed by the HTTP door.
    pub headers: Vec<(String, String)>,
}

impl EmbedCall {
    /// The request from its gRPC message.
    pub fn from_pb(r: pb::EmbedRequest) -> EmbedCall {
        let inputs = r
            .inputs
            .into_iter()
            .map(|i| match i.kind {
                Some(pb::embed_input::Kind::Tokens(t)) => Input::Tokens(t.ids),
                Some(pb::embed_input::Kind::Text(t)) => Input::Text(t),
                None => Input::Text(String::new()),
            })
            .collect();
        EmbedCall {
            model: r.model,
            inputs,
            dimensions: (r.dimensions > 0).then_some(r.dimensions),
            user: (!r.user.is_empty()).then_some(r.user),
            context: r.context,
        }
    }
}

/// Checks the request's shape: a model, at least one input and at most [`MAX_INPUTS`], no empty input (every provider
/// refuses one), ids within the generations' bounds.
fn check(call: &EmbedCall) -> Result<(), CallError> {
    let invalid = |field: String, message: &str| CallError::from(BuildError::new(field, message));
    if call.model.is_empty() {
        return Err(invalid("model".into(), "required"));
    }
    if call.model.len() > crate::validate::MAX_MODEL_ID_BYTES {
        return Err(invalid("model".into(), "too long"));
    }
    if call.inputs.is_empty() {
        return Err(invalid("inputs".into(), "at least one input is required"));
    }
    if call.inputs.len() > MAX_INPUTS {
        return Err(CallError::TooLarge {
            field: "inputs".into(),
            message: format!(
                "at most {MAX_INPUTS} inputs per call, not {}",
                call.inputs.len()
            ),
        });
    }
    for (i, input) in call.inputs.iter().enumerate() {
        let empty = match input {
            Input::Text(t) => t.is_empty(),
            Input::Tokens(ids) => ids.is_empty(),
        };
        if empty {
            return Err(invalid(format!("inputs[{i}]"), "must not be empty"));
        }
    }
    crate::validate::context_at("context", call.context.as_ref()).map_err(CallError::Status)
}

/// Runs one embeddings call.
pub async fn embed(
    gateway: &Gateway,
    caller: &crate::keys::Caller,
    call: EmbedCall,
    metadata: &tonic::metadata::MetadataMap,
) -> Result<Embeddings, CallError> {
    check(&call)?;
    let metrics = gateway.metrics();
    let span = spans::embeddings(&call.model, call.inputs.len(), metadata);
    crate::access::admit(gateway, caller, "embeddings", [call.model.as_str()], &span)
        .map_err(CallError::Start)
        .inspect_err(|e| spans::failed(&span, e))?;
    let mut meter = Meter::new(&metrics, Operation::Embeddings);
    let result = run(gateway, &call, &metrics, &mut meter)
        .instrument(span.clone())
        .await;
    match &result {
        Ok(e) => record(&span, e),
        Err(e) => spans::failed(&span, e),
    }
    let embedded = result.as_ref().ok().map(|e| Embedded {
        inputs: e.vectors.len() as u64,
        tokens: e.input_tokens,
        cost_nano_usd: e.cost_nano_usd,
    });
    meter.end_with(&result, embedded);
    result
}

async fn run(
    gateway: &Gateway,
    call: &EmbedCall,
    metrics: &crate::metrics::Metrics,
    meter: &mut Meter<'_>,
) -> Result<Embeddings, CallError> {
    let _slot = gateway.slot()?;
    let snapshot = gateway.snapshot();
    let (model, provider, labels) = snapshot.resolve(&call.model)?;
    let catalog = &snapshot.config().catalog;
    // An unlisted model (a local server's) is taken at its word; a catalog chat model is refused.
    if catalog.get(&model.id).is_some() && catalog.kind(&model.id) != ModelKind::Embedding {
        return Err(StartError::WrongKind {
            field: "model".into(),
            model: model.id.clone(),
            kind: catalog.kind(&model.id),
        }
        .into());
    }
    let max = catalog.uses(&model.id).max_inputs;
    let target = Target {
        model,
        provider,
        labels,
    };
    meter.target(&target.labels);
    spans::target(&tracing::Span::current(), &target);
    let embedder = embedder(&target.adapter_target())?;
    let requests = build(call, &target, embedder, max)?;
    let sender = Sender::new(&snapshot, metrics, &target);
    let protocol = target.model.protocol;
    let answers: Vec<Batched> = futures::stream::iter(requests)
        .map(|(request, inputs)| {
            let sender = &sender;
            async move {
                let answer = sender.send(&request).await?;
                let vectors = embedder.decode(&answer, inputs.len())?;
                Ok::<_, crate::error::ProviderError>((vectors, inputs, answer.relayed))
            }
        })
        .buffered(CONCURRENT_BATCHES)
        .try_collect()
        .await
        .map_err(|error| CallError::Provider { error, protocol })?;
    Ok(assemble(
        answers,
        &call.inputs,
        &target,
        sender.requests.into_inner(),
    ))
}

/// Every batch's request, with the inputs it carries: all built before any is sent, so a request the adapter
/// refuses (a dimension a Bedrock model does not take) costs no provider call.
fn build(
    call: &EmbedCall,
    target: &Target,
    embedder: &dyn Embedder,
    configured_max: Option<u32>,
) -> Result<Vec<(EncodedRequest, Range<usize>)>, CallError> {
    let t = target.adapter_target();
    let max = configured_max
        .and_then(|m| usize::try_from(m).ok())
        .map_or(embedder.max_inputs(), |m| m.min(embedder.max_inputs()))
        .max(1);
    call.inputs
        .chunks(max)
        .enumerate()
        .map(|(i, inputs)| {
            let batch = Batch {
                inputs,
                offset: i * max,
                dimensions: call.dimensions,
                user: call.user.as_deref(),
            };
            let start = i * max;
            Ok((embedder.build(&batch, &t)?, start..start + inputs.len()))
        })
        .collect()
}

/// The answers, in input order, with their usage and cost.
/// One batch's answer: its vectors, the inputs they are of, and the provider's relayed headers.
type Batched = (Vectors, Range<usize>, Vec<(String, String)>);

fn assemble(answers: Vec<Batched>, inputs: &[Input], target: &Target, requests: u32) -> Embeddings {
    let mut vectors = Vec::new();
    let mut input_tokens = 0u64;
    let mut estimated = false;
    let mut headers = Vec::new();
    for (answer, range, relayed) in answers {
        headers = relayed;
        vectors.extend(answer.vectors);
        input_tokens += answer.input_tokens.unwrap_or_else(|| {
            estimated = true;
            estimate_tokens(&inputs[range])
        });
    }
    let usage = Usage {
        input: input_tokens,
        ..Usage::default()
    };
    Embeddings {
        model: target.model.id.clone(),
        provider: target.provider.id.clone(),
        vectors,
        input_tokens,
        estimated,
        cost_nano_usd: target
            .model
            .pricing
            .as_ref()
            .map(|p| p.cost_nano_usd(&usage)),
        provider_requests: requests,
        headers,
    }
}

/// Records the answer on the call's span.
fn record(span: &tracing::Span, e: &Embeddings) {
    span.record("gen_ai.usage.input_tokens", spans::int(e.input_tokens));
    if let Some(v) = e.vectors.first() {
        span.record(
            "gen_ai.embeddings.dimension.count",
            spans::int(v.len() as u64),
        );
    }
    span.record("llm.attempts", i64::from(e.provider_requests));
    span.record("llm.cost_nano_usd", e.cost_nano_usd.unwrap_or(0));
    span.record("llm.usage_estimated", e.estimated);
}
