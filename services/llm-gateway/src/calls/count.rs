//! One token count: resolve the chat model, run its hooks (what they add to the prompt counts), then count through
//! the provider's endpoint or locally with the model's tokenizer, or say that neither exists.

use llm_proto::gateway as pb;
use tracing::Instrument;

use super::{CallError, Meter, Sender, Target, spans};
use crate::adapter::count::{Counting, counting, local};
use crate::catalog::{ModelKind, TokenizerName};
use crate::generate::{Gateway, Snapshot, StartError};
use crate::metrics::{Metrics, Operation};

/// How a count was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// By the provider's counting endpoint.
    Provider,
    /// By the gateway, with this tokenizer.
    Local(TokenizerName),
}

/// The answer.
#[derive(Debug, Clone)]
pub struct Counted {
    /// Input tokens.
    pub input_tokens: u64,
    /// How they were counted.
    pub method: Method,
    /// The model id.
    pub model: String,
    /// The provider id.
    pub provider: String,
    /// The counting endpoint's rate-limit and request-id headers, relayed by the HTTP door.
    pub headers: Vec<(String, String)>,
}

impl Counted {
    /// The gRPC response.
    pub fn to_pb(&self) -> pb::CountTokensResponse {
        let (method, tokenizer) = match self.method {
            Method::Provider => (pb::TokenCountMethod::Provider, String::new()),
            Method::Local(t) => (pb::TokenCountMethod::LocalTokenizer, t.as_str().to_string()),
        };
        pb::CountTokensResponse {
            input_tokens: self.input_tokens,
            method: method as i32,
            model: self.model.clone(),
            provider: self.provider.clone(),
            tokenizer,
        }
    }
}

/// Counts the input tokens of `generation` (already validated) on its model.
pub async fn count_tokens(
    gateway: &Gateway,
    caller: &crate::keys::Caller,
    generation: pb::Generation,
    metadata: &tonic::metadata::MetadataMap,
) -> Result<Counted, CallError> {
    let metrics = gateway.metrics();
    let span = spans::count_tokens(&generation.model, metadata);
    crate::access::admit(
        gateway,
        caller,
        "count_tokens",
        [generation.model.as_str()],
        &span,
    )
    .map_err(CallError::Start)
    .inspect_err(|e| spans::failed(&span, e))?;
    let mut meter = Meter::new(&metrics, Operation::CountTokens);
    let result = run(gateway, generation, &metrics, &mut meter)
        .instrument(span.clone())
        .await;
    match &result {
        Ok(c) => {
            span.record("gen_ai.usage.input_tokens", spans::int(c.input_tokens));
            let method = match c.method {
                Method::Provider => "provider",
                Method::Local(_) => "local_tokenizer",
            };
            span.record("llm.token_count.method", method);
        }
        Err(e) => spans::failed(&span, e),
    }
    meter.end_with(&result, None);
    result
}

async fn run(
    gateway: &Gateway,
    mut generation: pb::Generation,
    metrics: &Metrics,
    meter: &mut Meter<'_>,
) -> Result<Counted, CallError> {
    let _slot = gateway.slot()?;
    let snapshot = gateway.snapshot();
    let target = resolve(&snapshot, &generation.model)?;
    meter.target(&target.labels);
    spans::target(&tracing::Span::current(), &target);
    let hook_headers = snapshot
        .hooks()
        .apply(&target.model, &mut generation, metrics)
        .await
        .map_err(StartError::Hook)?;
    let configured = snapshot.config().catalog.uses(&target.model.id).tokenizer;
    let how = counting(&target.adapter_target(), configured);
    let (input_tokens, method, headers) = match how {
        Counting::Provider(counter) => {
            let place = crate::offload::placement(&generation);
            let model = target.model.clone();
            let azure = target.provider.azure.clone();
            let mut request = crate::offload::run(place, move || {
                let t = crate::adapter::Target {
                    model: &model,
                    azure: azure.as_ref(),
                };
                counter.build(&generation, &t)
            })
            .await?;
            for (name, value) in &hook_headers {
                crate::hooks::set_header(&mut request.headers, name, value);
            }
            let sender = Sender::new(&snapshot, metrics, &target);
            let protocol = target.model.protocol;
            let provider = |error| CallError::Provider { error, protocol };
            let answer = sender.send(&request).await.map_err(provider)?;
            let tokens = counter.decode(&answer).map_err(provider)?;
            tracing::Span::current()
                .record("llm.attempts", i64::from(sender.requests.into_inner()));
            (tokens, Method::Provider, answer.relayed)
        }
        Counting::Local(t) => {
            let place = crate::offload::placement(&generation);
            let tokens = crate::offload::run(place, move || local::count(&generation, t)).await?;
            (tokens, Method::Local(t), Vec::new())
        }
        Counting::Unavailable => {
            return Err(CallError::NoCounting {
                model: target.model.id.clone(),
            });
        }
    };
    Ok(Counted {
        input_tokens,
        method,
        model: target.model.id.clone(),
        provider: target.provider.id.clone(),
        headers,
    })
}

/// The chat model `id` names.
fn resolve(snapshot: &Snapshot, id: &str) -> Result<Target, CallError> {
    let (model, provider, labels) = snapshot.resolve(id)?;
    let kind = snapshot.config().catalog.kind(&model.id);
    if kind != ModelKind::Chat {
        return Err(StartError::WrongKind {
            field: "generation.model".into(),
            model: model.id.clone(),
            kind,
        }
        .into());
    }
    Ok(Target {
        model,
        provider,
        labels,
    })
}
