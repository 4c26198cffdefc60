//! `GatewayService`'s handlers: each validates the request, hands it to the core ([`Gateway`]) and maps the result
//! to the wire. Served through the codec in `routes`; the listener, authentication and shutdown are `server`'s.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_server::GatewayService;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::generate::Gateway;
use crate::keys::Caller;
use crate::offload::{self, Incoming};
use crate::tracing_spans::Traced;
use crate::{convert, status};

/// The `GatewayService` implementation.
pub struct GatewayRpc {
    pub(crate) gateway: Gateway,
}

/// A generation's events, as the core yields them.
pub(crate) type Events = Pin<Box<dyn Stream<Item = pb::StreamResponse> + Send + 'static>>;

pub(crate) type EventStream =
    Pin<Box<dyn Stream<Item = Result<pb::StreamResponse, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl GatewayService for GatewayRpc {
    type StreamStream = EventStream;

    async fn stream(
        &self,
        request: Request<pb::StreamRequest>,
    ) -> Result<Response<EventStream>, Status> {
        self.stream_incoming(request.map(Incoming::Decoded)).await
    }

    async fn generate(
        &self,
        request: Request<pb::GenerateRequest>,
    ) -> Result<Response<pb::GenerateResponse>, Status> {
        self.generate_incoming(request.map(Incoming::Decoded)).await
    }

    async fn list_models(
        &self,
        request: Request<pb::ListModelsRequest>,
    ) -> Result<Response<pb::ListModelsResponse>, Status> {
        let caller = caller(request.extensions())?;
        let req = request.into_inner();
        let page_size = match req.page_size {
            0 => 100,
            n if n < 0 => return Err(status::invalid("page_size", "must not be negative")),
            n => usize::try_from(n.min(1000)).unwrap_or(1000),
        };
        let after = if req.page_token.is_empty() {
            None
        } else {
            Some(
                decode_page_token(&req.page_token)
                    .ok_or_else(|| status::invalid("page_token", "not a token from this API"))?,
            )
        };
        let config = self.gateway.config();
        let listed = config.names.listed(&config.catalog);
        let mut models = listed
            .iter()
            .filter(|l| req.provider.is_empty() || l.model.provider == req.provider)
            .filter(|l| caller.may_use(l.id, l.alias_of.unwrap_or(&l.model.id)))
            .filter(|l| after.as_deref().is_none_or(|a| l.id > a));
        let page: Vec<pb::Model> = models
            .by_ref()
            .take(page_size)
            .map(|l| listed_to_pb(l.id, l.model, l.alias_of, config.catalog.kind(&l.model.id)))
            .collect();
        let next_page_token = match (models.next(), page.last()) {
            (Some(_), Some(last)) => encode_page_token(&last.id),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListModelsResponse {
            models: page,
            next_page_token,
        }))
    }

    async fn get_model(
        &self,
        request: Request<pb::GetModelRequest>,
    ) -> Result<Response<pb::GetModelResponse>, Status> {
        let caller = caller(request.extensions())?;
        let id = &request.get_ref().model;
        if id.is_empty() {
            return Err(status::invalid("model", "required"));
        }
        crate::access::check(&self.gateway, &caller, id)
            .map_err(|e| status::start_error_status(&e))?;
        let resolved = self
            .gateway
            .resolve(id)
            .map_err(|e| status::start_error_status(&crate::access::scrub(&caller, e)))?;
        let id = resolved.alias_of.as_deref().unwrap_or(&resolved.model.id);
        let kind = self.gateway.config().catalog.kind(id);
        let mut model = model_to_pb(&resolved.model, kind);
        model.alias_of = resolved.alias_of.unwrap_or_default();
        Ok(Response::new(pb::GetModelResponse { model: Some(model) }))
    }

    async fn embed(
        &self,
        request: Request<pb::EmbedRequest>,
    ) -> Result<Response<pb::EmbedResponse>, Status> {
        self.embed_request(request).await
    }

    async fn count_tokens(
        &self,
        request: Request<pb::CountTokensRequest>,
    ) -> Result<Response<pb::CountTokensResponse>, Status> {
        self.count_tokens_incoming(request.map(Incoming::Decoded))
            .await
    }
}

impl GatewayRpc {
    /// `Stream`, from a request as the codec hands it over (decoded, or still encoded when large).
    pub(crate) async fn stream_incoming(
        &self,
        request: Request<Incoming<pb::StreamRequest>>,
    ) -> Result<Response<EventStream>, Status> {
        let mut traced = self.begin(request).await?;
        // The response headers go out when this returns. Returning only once the first event exists (the provider
        // answered, or every attempt failed) sends the headers and the first events in one HTTP/2 write: one
        // socket write and one wake-up of the caller instead of two before the first token. Nothing is lost by
        // waiting: the caller could not do anything with the headers alone, and cancelling still drops the
        // generation (and the provider request) at once.
        let Some(first) = traced.next().await else {
            // Never polled again after its end: the generation's stream is not fused.
            return Ok(Response::new(Box::pin(futures::stream::empty())));
        };
        Ok(Response::new(Box::pin(
            futures::stream::once(std::future::ready(first))
                .chain(traced)
                .map(Ok),
        )))
    }

    /// `Generate`, from a request as the codec hands it over: the same generation, collected into one response.
    pub(crate) async fn generate_incoming(
        &self,
        request: Request<Incoming<pb::GenerateRequest>>,
    ) -> Result<Response<pb::GenerateResponse>, Status> {
        let mut events = self.begin(request).await?;
        let mut collector = convert::Collector::default();
        while let Some(ev) = events.next().await {
            collector.push(ev)?;
        }
        Ok(Response::new(collector.finish()?))
    }

    /// What `Stream` and `Generate` share: the generation validated and started under its span.
    async fn begin<M: offload::CarriesGeneration>(
        &self,
        request: Request<Incoming<M>>,
    ) -> Result<Traced<Events>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let caller = caller(&extensions)?;
        let generation = offload::generation(message, &self.gateway.config().limits).await?;
        start_traced(&self.gateway, generation, &metadata, &caller)
            .await
            .map_err(|e| status::start_error_status(&e))
    }
}

/// The caller the authentication layer identified (`server::Auth`), from a request's extensions.
pub(crate) fn caller(extensions: &tonic::Extensions) -> Result<Caller, Status> {
    extensions
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated(service_kit::auth::MISSING_BEARER))
}

/// Starts a validated generation under its span, with the caller's trace context (from `metadata`) carried on to
/// the provider: the one start of both doors (gRPC here, HTTP in `http::generation`), which map a start error each
/// to their own wire. The caller is admitted first: attributed on the span and in the tenant metric, and refused a
/// model (or fallback model) its key may not use as if the model were not served.
pub(crate) async fn start_traced(
    gateway: &Gateway,
    mut generation: pb::Generation,
    metadata: &tonic::metadata::MetadataMap,
    caller: &Caller,
) -> Result<Traced<Events>, crate::start_error::StartError> {
    let capture = gateway.config().capture_message_content;
    let span = crate::tracing_spans::generation_span(&generation, metadata, capture);
    let models = std::iter::once(generation.model.as_str())
        .chain(generation.fallback_models.iter().map(String::as_str));
    crate::access::admit(gateway, caller, "chat", models, &span)
        .inspect_err(|e| crate::tracing_spans::start_failed(&span, e))?;
    propagate(
        &mut generation,
        service_kit::trace_context::from_metadata(metadata),
    );
    log_start(&generation, caller);
    let events = gateway
        .stream(generation)
        .instrument(span.clone())
        .await
        .map_err(|e| crate::access::scrub(caller, e))
        .inspect_err(|e| crate::tracing_spans::start_failed(&span, e))?;
    let events: Events = Box::pin(events);
    Ok(Traced::new(events, span, capture))
}

/// Carries the caller's trace context on to the provider's HTTP request, so one trace id follows a generation from
/// the caller to the provider call.
pub(crate) fn propagate(generation: &mut pb::Generation, trace: Vec<(String, String)>) {
    for (k, v) in trace {
        generation.extra_headers.insert(k, v);
    }
}

pub(crate) fn log_start(g: &pb::Generation, caller: &Caller) {
    let ctx = g.context.as_ref();
    tracing::debug!(
        message = "generation",
        model = %g.model,
        tenant = %caller.tenant,
        key = %caller.key_name(),
        session_id = %ctx.map_or("", |c| c.session_id.as_str()),
        request_id = %ctx.map_or("", |c| c.request_id.as_str()),
        messages = g.messages.len(),
        tools = g.tools.len(),
    );
}

/// Page tokens are opaque to callers: the last id of the page, hex-encoded.
fn encode_page_token(last_id: &str) -> String {
    last_id.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_page_token(token: &str) -> Option<String> {
    if !token.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// A served name's entry: the model's, under `id`, naming the model an alias stands for.
fn listed_to_pb(
    id: &str,
    m: &crate::catalog::ModelInfo,
    alias_of: Option<&str>,
    kind: crate::catalog::ModelKind,
) -> pb::Model {
    pb::Model {
        id: id.to_string(),
        alias_of: alias_of.unwrap_or_default().to_string(),
        ..model_to_pb(m, kind)
    }
}

pub(crate) fn model_to_pb(
    m: &crate::catalog::ModelInfo,
    kind: crate::catalog::ModelKind,
) -> pb::Model {
    let c = m.capabilities;
    let kind = match kind {
        crate::catalog::ModelKind::Chat => pb::ModelKind::Chat,
        crate::catalog::ModelKind::Embedding => pb::ModelKind::Embedding,
    };
    pb::Model {
        kind: kind as i32,
        id: m.id.clone(),
        provider: m.provider.clone(),
        protocol: m.protocol.as_str().to_string(),
        display_name: m.display_name.clone(),
        alias_of: String::new(),
        context_window: m.context_window,
        max_input_tokens: m.max_input_tokens,
        max_output_tokens: m.max_output_tokens,
        capabilities: Some(pb::Capabilities {
            tools: c.tools,
            reasoning: c.reasoning,
            vision: c.vision,
            json_schema: c.json_schema,
            temperature: c.temperature,
            prompt_cache: c.prompt_cache,
        }),
        pricing: m.pricing.as_ref().map(|p| pb::Pricing {
            input_nano_usd_per_mtok: p.base.input,
            output_nano_usd_per_mtok: p.base.output,
            cache_read_nano_usd_per_mtok: p.base.cache_read,
            cache_write_nano_usd_per_mtok: p.base.cache_write,
            tiers: p
                .tiers
                .iter()
                .map(|(above, t)| pb::PriceTier {
                    above_input_tokens: *above,
                    input_nano_usd_per_mtok: t.input,
                    output_nano_usd_per_mtok: t.output,
                    cache_read_nano_usd_per_mtok: t.cache_read,
                    cache_write_nano_usd_per_mtok: t.cache_write,
                })
                .collect(),
        }),
    }
}

#[path = "rpc_calls.rs"]
mod calls;

#[cfg(test)]
#[path = "rpc_tests.rs"]
mod tests;
