//! One attempt's preparation: a candidate model, its hooks and provider request, and opening the provider stream.

use llm_proto::gateway as pb;

use crate::adapter::framing::Framing;
use crate::adapter::transport::Opening;
use crate::adapter::{Adapter, Decoder, EncodedRequest, Target};
use crate::catalog::ModelInfo;
use crate::config::Provider;
use crate::error::{ErrorKind, ProviderError};
use crate::metrics::{Metrics, ModelLabels};

use super::{StartError, State};

/// A model the generation may be served by, resolved when the generation starts.
pub(super) struct Candidate {
    pub(super) model: ModelInfo,
    pub(super) provider: Provider,
    pub(super) labels: ModelLabels,
}

/// A candidate's request, built and ready to send.
pub(super) struct Prepared {
    pub(super) adapter: &'static dyn Adapter,
    /// The request, its body serialised where it was built.
    pub(super) request: EncodedRequest,
    /// How the provider frames its answer to this request.
    pub(super) framing: Framing,
    pub(super) decoder: Box<dyn Decoder>,
}

/// Applies `candidate`'s catalog sampling defaults to `generation`, runs its hooks and builds its provider request
/// with its protocol's adapter.
pub(super) async fn prepare(
    state: &State,
    metrics: &Metrics,
    candidate: &Candidate,
    mut generation: pb::Generation,
) -> Result<Prepared, StartError> {
    let adapter = candidate.model.protocol.adapter();
    let target = Target::new(&candidate.model);
    let min_budget = if candidate.model.capabilities.reasoning {
        adapter.min_thinking_budget(&target)
    } else {
        0
    };
    crate::validate::model_rules(&generation, &candidate.model, min_budget)?;
    // The model's catalog defaults come first, so the hooks (operator policy) see and may override them.
    if let Some(defaults) = state.config.catalog.defaults(&candidate.model.id) {
        defaults.apply(&mut generation);
    }
    let hook_headers = state
        .hooks
        .apply(&candidate.model, &mut generation, metrics)
        .await?;
    let model = candidate.model.clone();
    let azure = candidate.provider.azure.clone();
    let place = crate::offload::placement(&generation);
    // Building (schema lowering, serialising the body) is the CPU-heavy part of a large request: off the async
    // workers, and so is dropping what it was built from.
    crate::offload::run(place, move || {
        let target = Target {
            model: &model,
            azure: azure.as_ref(),
        };
        let mut request = adapter.build(&generation, &target)?;
        // Hook headers are operator policy: they replace the adapter's (whose reserved ones hooks cannot name).
        for (name, value) in &hook_headers {
            crate::hooks::set_header(&mut request.headers, name, value);
        }
        // Caller headers go last but cannot replace anything already set (validation refused auth and framing
        // headers), so a caller can tag requests but never re-route, re-authenticate them or undo a hook.
        for (name, value) in &generation.extra_headers {
            let lower = name.to_ascii_lowercase();
            if !request.headers.iter().any(|(n, _)| *n == lower) {
                request.headers.push((lower, value.clone()));
            }
        }
        let decoder = adapter.decoder_for(&target, &generation);
        let framing = adapter.framing_of(&request);
        Ok(Prepared {
            adapter,
            request: request.encode(),
            framing,
            decoder,
        })
    })
    .await
}

/// Opens one provider request: authenticated with the provider's API key, or with an access token from its token
/// source (Vertex AI, Azure with Entra ID), fetched or taken from the cache here so a token failure is an attempt
/// failure like any other (retried when it is transient).
pub(super) async fn open_attempt(
    transport: &crate::adapter::transport::Transport,
    provider: &Provider,
    adapter: &'static dyn Adapter,
    request: &EncodedRequest,
    opening: Opening<'_>,
) -> Result<crate::adapter::transport::ProviderStream, ProviderError> {
    authenticated(provider, adapter, |auth| async move {
        transport
            .open_with(&provider.base_url, &auth, request, opening)
            .await
    })
    .await
}

/// Runs `send` with the provider's auth headers: its API key's, or those of an access token from its token source,
/// which is dropped when the provider answers 401 (revoked), so the next request fetches a new one.
pub(crate) async fn authenticated<T, F, Fut>(
    provider: &Provider,
    adapter: &dyn Adapter,
    send: F,
) -> Result<T, ProviderError>
where
    F: FnOnce(Vec<(&'static str, String)>) -> Fut,
    Fut: std::future::Future<Output = Result<T, ProviderError>>,
{
    let Some(tokens) = &provider.tokens else {
        return send(adapter.auth_headers(provider.api_key.expose())).await;
    };
    let token = tokens.token().await?;
    let sent = send(adapter.token_headers(token.expose())).await;
    if let Err(e) = &sent
        && e.http_status == Some(401)
    {
        tokens.invalidate(&token).await;
    }
    sent
}

/// Error kinds another model may not share: fall back on these once the model's own retries are spent. Never on
/// invalid_request, content_filter or context_overflow (the request itself is the problem, or the caller must act,
/// e.g. compact), nor on cancelled.
pub(super) fn falls_back(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::RateLimited
            | ErrorKind::Overloaded
            | ErrorKind::Timeout
            | ErrorKind::Network
            | ErrorKind::ProviderError
            | ErrorKind::Auth
    )
}
