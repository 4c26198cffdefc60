//! The loop's gateway client: one HTTP/2 connection (or a balanced pool) carrying every session's calls with the
//! processor's bearer token, the caller's trace context on each call, and the catalog lookups the loop needs.

use llm_proto::gateway as gw;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::Engine;
use crate::context::Limits;

/// A gateway client that sends the processor's bearer token.
pub type GatewayClient = GatewayServiceClient<InterceptedService<Channel, GatewayAuth>>;

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
    gateway_client_balanced(url, token, crate::gateway_pool::Balance::Connection)
}

/// Connects (lazily) to the gateway, spreading calls as `balance` says (see [`crate::gateway_pool`]).
pub fn gateway_client_balanced(
    url: &str,
    token: &str,
    balance: crate::gateway_pool::Balance,
) -> Result<GatewayClient, Box<dyn std::error::Error + Send + Sync>> {
    let channel = crate::gateway_pool::channel(url, balance)?;
    let auth = if token.is_empty() {
        None
    } else {
        Some(format!("Bearer {token}").parse()?)
    };
    Ok(
        GatewayServiceClient::with_interceptor(channel, GatewayAuth(auth))
            .max_decoding_message_size(64 * 1024 * 1024),
    )
}

/// Attaches the run's trace context to a gateway request.
///
/// When spans are exported, the gateway call becomes a child of the current span (the step); otherwise the caller's
/// own context is passed through unchanged, so the trace id still reaches the gateway and the provider.
pub(super) fn with_trace<T>(request: &mut tonic::Request<T>, trace: &[(String, String)]) {
    if llm_telemetry::inject_metadata(&tracing::Span::current(), request.metadata_mut()) {
        return;
    }
    insert_trace(request.metadata_mut(), trace);
}

/// Puts `trace` (W3C `traceparent`, `tracestate`) into gRPC metadata, skipping what is not a valid header.
pub(super) fn insert_trace(
    metadata: &mut tonic::metadata::MetadataMap,
    trace: &[(String, String)],
) {
    for (k, v) in trace {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(k.as_bytes()),
            tonic::metadata::MetadataValue::try_from(v.as_str()),
        ) {
            metadata.insert(key, value);
        }
    }
}

impl Engine {
    /// The model's limits from the gateway's catalog; `None` when the gateway does not know the model (then no
    /// estimate-based compaction happens, and only the provider's own overflow error triggers one).
    pub(super) async fn model_limits(
        &self,
        model: &str,
        trace: &[(String, String)],
    ) -> Option<Limits> {
        let mut gateway = self.gateway.clone();
        let mut request = tonic::Request::new(gw::GetModelRequest {
            model: model.into(),
        });
        with_trace(&mut request, trace);
        let m = gateway.get_model(request).await.ok()?.into_inner().model?;
        Some(Limits::of(&m))
    }
}
