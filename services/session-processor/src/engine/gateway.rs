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
    gateway_client_balanced(url, token, crate::gateway_pool::Balance::Connection, None)
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

/// How long a model's catalog limits are reused before the gateway is asked again (a catalog changes on a gateway
/// reload; a minute's lag only delays when an estimate-based compaction notices).
const LIMITS_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// Catalog limits by model, as the gateway last answered (`None`: it does not know the model), and when.
pub(super) type LimitsCache =
    std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, Option<Limits>)>>;

impl Engine {
    /// The model's limits from the gateway's catalog, cached for [`LIMITS_TTL`] (so a prompt does not wait for a
    /// catalog call before its first step); `None` when the gateway does not know the model (then no estimate-based
    /// compaction happens, and only the provider's own overflow error triggers one). A failed call is not cached.
    pub(super) async fn model_limits(
        &self,
        model: &str,
        trace: &[(String, String)],
    ) -> Option<Limits> {
        {
            let cache = self.limits.lock().unwrap_or_else(|p| p.into_inner());
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
        let mut cache = self.limits.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() > 1024 {
            cache.clear();
        }
        cache.insert(model.to_string(), (std::time::Instant::now(), limits));
        limits
    }
}
