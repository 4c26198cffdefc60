//! The loop's gateway client: one HTTP/2 connection (or a balanced pool) carrying every session's calls with the
//! processor's bearer token, a client span per call (`service_kit::rpc_span`) whose context goes to the gateway, and
//! the catalog lookups the loop needs.

use llm_proto::gateway as gw;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use service_kit::rpc_span::{ClientSpanLayer, SpanService};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::context::Limits;
use crate::step_event::StepEvent;

/// The channel every gateway call takes, with the processor's bearer token and a client span per call.
type Authed = SpanService<InterceptedService<Channel, GatewayAuth>>;

/// A gateway client that sends the processor's bearer token. It derefs to the generated client for the unary
/// calls; [`GatewayClient::stream_step`] is the step's `Stream` call with a small receive buffer.
#[derive(Clone)]
pub struct GatewayClient {
    client: GatewayServiceClient<Authed>,
    grpc: tonic::client::Grpc<Authed>,
}

impl std::ops::Deref for GatewayClient {
    type Target = GatewayServiceClient<Authed>;

    fn deref(&self) -> &Self::Target {
        &self.client
    }
}

impl std::ops::DerefMut for GatewayClient {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.client
    }
}

thread_local! {
    /// The gateway client of this thread's runtime, when the processor runs a runtime per core: its connection is
    /// driven by the same thread as the loops that stream through it.
    static LOCAL: std::cell::RefCell<Option<GatewayClient>> = const { std::cell::RefCell::new(None) };
}

/// Sets this thread's gateway client (see [`local_client`]).
pub fn set_local_client(client: GatewayClient) {
    LOCAL.with(|c| *c.borrow_mut() = Some(client));
}

/// This thread's gateway client, when one was set.
pub(super) fn local_client() -> Option<GatewayClient> {
    LOCAL.with(|c| c.borrow().clone())
}

/// Largest gateway message the processor reads.
const MAX_GATEWAY_MESSAGE: usize = 64 * 1024 * 1024;

/// The receive buffer a step's stream starts with: a stream of events is many small messages (a text delta is tens
/// of bytes), and the buffer grows when a large one comes. tonic's default is 8 KiB, held by every open stream.
const STREAM_RECEIVE_BUFFER: usize = 1024;

impl GatewayClient {
    fn new(inner: Authed) -> GatewayClient {
        GatewayClient {
            client: GatewayServiceClient::new(inner.clone())
                .max_decoding_message_size(MAX_GATEWAY_MESSAGE),
            grpc: tonic::client::Grpc::new(inner).max_decoding_message_size(MAX_GATEWAY_MESSAGE),
        }
    }

    /// `GatewayService.Stream`, the events read through a [`STREAM_RECEIVE_BUFFER`]-byte buffer.
    pub async fn stream_step(
        &mut self,
        request: tonic::Request<gw::StreamRequest>,
    ) -> Result<tonic::Streaming<StepEvent>, tonic::Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("gateway not ready: {e}")))?;
        let path = http::uri::PathAndQuery::from_static("/llm.gateway.v1.GatewayService/Stream");
        let mut request = request;
        request.extensions_mut().insert(tonic::GrpcMethod::new(
            "llm.gateway.v1.GatewayService",
            "Stream",
        ));
        Ok(self
            .grpc
            .server_streaming(request, path, StreamCodec)
            .await?
            .into_inner())
    }
}

/// Protobuf codec of `Stream` with a small decode buffer (see [`STREAM_RECEIVE_BUFFER`]); events decode as
/// [`StepEvent`]s (a delta without the generated message).
#[derive(Debug, Clone, Copy, Default)]
struct StreamCodec;

impl tonic::codec::Codec for StreamCodec {
    type Encode = gw::StreamRequest;
    type Decode = StepEvent;
    type Encoder = StreamCodec;
    type Decoder = StreamCodec;

    fn encoder(&mut self) -> StreamCodec {
        StreamCodec
    }

    fn decoder(&mut self) -> StreamCodec {
        StreamCodec
    }
}

impl tonic::codec::Encoder for StreamCodec {
    type Item = gw::StreamRequest;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: gw::StreamRequest,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        prost::Message::encode(&item, dst).map_err(|e| tonic::Status::internal(e.to_string()))
    }
}

impl tonic::codec::Decoder for StreamCodec {
    type Item = StepEvent;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<StepEvent>, tonic::Status> {
        use bytes::Buf as _;
        // The message is one contiguous slice of the receive buffer: read in place, no copy.
        let len = src.remaining();
        let decoded = if src.chunk().len() >= len {
            let ev = StepEvent::decode(&src.chunk()[..len]);
            src.advance(len);
            ev
        } else {
            StepEvent::decode(&src.copy_to_bytes(len))
        };
        decoded
            .map(Some)
            .map_err(|e| tonic::Status::internal(e.to_string()))
    }

    fn buffer_settings(&self) -> tonic::codec::BufferSettings {
        // tonic's default yield threshold (32 KiB): only the buffer's starting size changes.
        tonic::codec::BufferSettings::new(STREAM_RECEIVE_BUFFER, 32 * 1024)
    }
}

/// Adds `authorization: Bearer <token>` to gateway calls.
#[derive(Clone)]
pub struct GatewayAuth(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for GatewayAuth {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// Connects (lazily) to the gateway over one HTTP/2 connection.
pub fn gateway_client(
    url: &str,
    token: &str,
) -> Result<GatewayClient, Box<dyn std::error::Error + Send + Sync>> {
    gateway_client_balanced(url, token, crate::gateway_pool::Balance::default(), None)
}

/// The gateway client the configuration describes (its URL, token, balancing and TLS), connecting lazily: the
/// engine's, and each other runtime's (`crate::runtimes`).
pub fn configured_gateway_client(
    config: &crate::config::Config,
) -> Result<GatewayClient, Box<dyn std::error::Error + Send + Sync>> {
    gateway_client_balanced(
        &config.gateway_url,
        &config.gateway_token,
        config.gateway_balance,
        config.gateway_tls.clone(),
    )
}

/// Connects (lazily) to the gateway, spreading calls as `balance` says (see [`crate::gateway_pool`]), over TLS with
/// `tls` for `https://` URLs.
pub fn gateway_client_balanced(
    url: &str,
    token: &str,
    balance: crate::gateway_pool::Balance,
    tls: Option<service_kit::tls::ClientTls>,
) -> Result<GatewayClient, Box<dyn std::error::Error + Send + Sync>> {
    let channel = crate::gateway_pool::channel(url, balance, tls)?;
    let auth = if token.is_empty() {
        None
    } else {
        Some(format!("Bearer {token}").parse()?)
    };
    // The spans name the gateway's host and port when there is one URL (a list is balanced over).
    let server = match crate::gateway_pool::parse_targets(url).as_deref() {
        Ok([one]) => Some((one.host().to_string(), one.port())),
        _ => None,
    };
    let spans = ClientSpanLayer::new(server);
    Ok(GatewayClient::new(tower::Layer::layer(
        &spans,
        InterceptedService::new(channel, GatewayAuth(auth)),
    )))
}

/// Attaches the run's trace context to a gateway request.
///
/// When spans are exported, the call's client span (a child of the current span, the step) sends its own context;
/// otherwise the caller's context is passed through unchanged, so the trace id still reaches the gateway and the
/// provider.
pub(super) fn with_trace<T>(request: &mut tonic::Request<T>, trace: &[(String, String)]) {
    if !llm_telemetry::is_traced(&tracing::Span::current()) {
        insert_trace(request.metadata_mut(), trace);
    }
}

/// The metadata entry naming the tenant a gateway call belongs to (the gateway attributes the call to it when the
/// processor's key may name tenants: docs/operations.md, "Keys").
const TENANT_HEADER: &str = "x-tenant";

/// [`with_trace`], and the session's tenant (`x-tenant`; the unnamed tenant sends none, and is the key's own).
pub(super) fn with_session<T>(
    request: &mut tonic::Request<T>,
    trace: &[(String, String)],
    tenant: &str,
) {
    with_trace(request, trace);
    if !tenant.is_empty()
        && let Ok(value) = tonic::metadata::MetadataValue::try_from(tenant)
    {
        request.metadata_mut().insert(TENANT_HEADER, value);
    }
}

/// Puts `trace` (W3C `traceparent`, `tracestate`) into gRPC metadata, skipping what is not a valid header.
fn insert_trace(metadata: &mut tonic::metadata::MetadataMap, trace: &[(String, String)]) {
    for (k, v) in trace {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(k.as_bytes()),
            tonic::metadata::MetadataValue::try_from(v.as_str()),
        ) {
            metadata.insert(key, value);
        }
    }
}

/// How long a model's catalog limits are reused before the gateway is asked again (a catalog changes on a gateway
/// reload; a minute's lag only delays when an estimate-based compaction notices).
const LIMITS_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// Catalog limits by model, as the gateway last answered (`None`: it does not know the model), and when.
type LimitsCache =
    std::sync::Mutex<crate::maps::IdMap<String, (std::time::Instant, Option<Limits>)>>;

/// The catalog limits of the models the loops use, from the gateway, cached.
pub(super) struct CatalogLimits {
    gateway: GatewayClient,
    cache: LimitsCache,
}

impl CatalogLimits {
    pub(super) fn new(gateway: GatewayClient) -> CatalogLimits {
        CatalogLimits {
            gateway,
            cache: LimitsCache::default(),
        }
    }

    /// The model's limits from the gateway's catalog, cached for [`LIMITS_TTL`] (so a prompt does not wait for a
    /// catalog call before its first step); `None` when the gateway does not know the model (then no estimate-based
    /// compaction happens, and only the provider's own overflow error triggers one). A failed call is not cached.
    pub(super) async fn model_limits(
        &self,
        model: &str,
        trace: &[(String, String)],
    ) -> Option<Limits> {
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, limits)) = cache.get(model)
                && at.elapsed() < LIMITS_TTL
            {
                return *limits;
            }
        }
        let mut gateway = self.gateway.clone();
        let mut request = tonic::Request::new(gw::GetModelRequest {
            model: model.into(),
        });
        with_trace(&mut request, trace);
        let limits = match gateway.get_model(request).await {
            Ok(reply) => reply.into_inner().model.as_ref().map(Limits::of),
            Err(status) if status.code() == tonic::Code::NotFound => None,
            Err(_) => return None,
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() > 1024 {
            cache.clear();
        }
        cache.insert(model.to_string(), (std::time::Instant::now(), limits));
        limits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_tenant_goes_with_the_call_and_the_unnamed_one_does_not() {
        let mut named = tonic::Request::new(());
        with_session(&mut named, &[], "acme");
        assert_eq!(named.metadata().get(TENANT_HEADER).unwrap(), "acme");
        let mut unnamed = tonic::Request::new(());
        with_session(&mut unnamed, &[], "");
        assert!(unnamed.metadata().get(TENANT_HEADER).is_none());
    }
}
