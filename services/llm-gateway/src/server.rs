//! The gRPC server: `GatewayService`, caller authentication, health, reflection, compression, keepalive, limits, a
//! span per call and graceful shutdown (the conventions shared with the processor are `service_kit::grpc`'s).
//!
//! [`run`] is the one entry that both `main` and the tests call, with a listener and a shutdown future. The
//! configuration can change under a running server through [`Gateway::reload`]: every call reads the snapshot in
//! force when it arrives (caller tokens included), while size and concurrency limits are fixed when `run` starts.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use llm_proto::gateway::gateway_service_server::GatewayServiceServer;
use llm_proto::gateway::keys_service_server::KeysServiceServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Status};

use crate::admin::KeysAdmin;
use crate::generate::Gateway;
use crate::keys::{Caller, Refusal};
use crate::routes::GatewayServer;
use crate::rpc::GatewayRpc;

pub use service_kit::serve::ServeError;

/// The services whose calls get a server span (health checks and reflection do not: see docs/operations.md).
const TRACED: &[&str] = &[
    <GatewayServer as tonic::server::NamedService>::NAME,
    <KeysServiceServer<KeysAdmin> as tonic::server::NamedService>::NAME,
];

/// Serves `gateway` on `listener` (over TLS when `server.tls` is configured) until `shutdown` resolves, then drains
/// in-flight streams for up to the configured grace period.
pub async fn run(
    gateway: Gateway,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let config = gateway.config().clone();
    let (health, health_service) = service_kit::grpc::Health::new();
    health
        .set_serving::<GatewayServiceServer<GatewayRpc>>()
        .await;

    let served = TRACED;
    let sets = [llm_proto::FILE_DESCRIPTOR_SET];
    let reflection = service_kit::grpc::reflection_v1(&sets, served)?;
    let reflection_v1alpha = service_kit::grpc::reflection_v1alpha(&sets, served)?;

    // The run-time keys follow Redis for as long as this server runs (draining included).
    let keys_stop = CancellationToken::new();
    let _keys_guard = keys_stop.clone().drop_guard();
    if let Some(settings) = config.redis.clone() {
        tokio::spawn(gateway.keys().run(settings, keys_stop));
    }
    let auth = Auth {
        gateway: gateway.clone(),
    };
    let admin = KeysServiceServer::new(KeysAdmin {
        gateway: gateway.clone(),
    });
    let service = crate::routes::gateway_server(GatewayRpc { gateway }, config.max_request_bytes);

    let token = CancellationToken::new();
    let signal = {
        let token = token.clone();
        async move {
            shutdown.await;
            tracing::info!(message = "shutting down: no new calls, draining in-flight streams");
            health
                .set_not_serving::<GatewayServiceServer<GatewayRpc>>()
                .await;
            token.cancel();
        }
    };
    let drained = token.clone();
    let incoming = service_kit::coalesce::incoming(listener);
    let mut builder = config
        .receive_window
        .apply(config.keepalive.apply(tonic::transport::Server::builder()));
    if let Some(tls) = &config.tls {
        builder = builder.tls_config(tls.tonic_config())?;
    }
    let server = builder
        .max_concurrent_streams(config.max_concurrent_streams)
        // Outermost: a span per GatewayService call, with the status the caller gets.
        .layer(service_kit::rpc_span::ServerSpanLayer::new(TRACED))
        .layer(OversizeLayer)
        // The caller's grpc-timeout bounds the whole call, streams included (DEADLINE_EXCEEDED).
        .layer(service_kit::deadline::DeadlineLayer)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(InterceptedService::new(service, auth.clone()))
        .add_service(InterceptedService::new(admin, auth))
        .serve_with_incoming_shutdown(incoming, signal);
    let grace = config.shutdown_grace;
    tokio::select! {
        r = server => r?,
        _ = async move { drained.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(message = "shutdown grace period over; dropping remaining streams", grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX));
        }
    }
    Ok(())
}

/// Identifies the caller of every call of `GatewayService` and `KeysService` (health and reflection are not
/// wrapped) and hands it to the handlers in the request's extensions. Keys come from the configuration in force, so
/// a reload changes them, and from this replica's copy of the run-time keys.
#[derive(Clone)]
struct Auth {
    gateway: Gateway,
}

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let metadata = request.metadata();
        let tenant = crate::keys::caller::named_tenant(metadata).map_err(|r| r.status())?;
        let token = service_kit::auth::bearer_metadata(metadata);
        let caller = identify(&self.gateway, token, tenant).map_err(|r| r.status())?;
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

/// The caller presenting `token` and naming `tenant`: the configuration's keys first, then this replica's copy of
/// the run-time keys. Without any key configured and `server.allow_unauthenticated`, a call without a known token is
/// the anonymous caller. The HTTP front door identifies its callers here too.
pub(crate) fn identify(
    gateway: &Gateway,
    token: Option<&str>,
    tenant: Option<&str>,
) -> Result<Caller, Refusal> {
    let config = gateway.config();
    let runtime = gateway.keys().table();
    let open = config.allow_unauthenticated && config.keys.is_empty();
    crate::keys::caller::identify(token, tenant, &[&config.keys, &runtime], open)
}

/// tonic reports a request over `max_decoding_message_size` as `OUT_OF_RANGE`; the API promises
/// `RESOURCE_EXHAUSTED` (the gRPC convention for size limits), so this layer rewrites that one status.
#[derive(Clone, Copy)]
struct OversizeLayer;

impl<S> tower::Layer<S> for OversizeLayer {
    type Service = Oversize<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Oversize { inner }
    }
}

#[derive(Clone)]
struct Oversize<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for Oversize<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut res = fut.await?;
            let headers = res.headers_mut();
            let too_large = headers.get("grpc-status").is_some_and(|v| v == "11")
                && headers
                    .get("grpc-message")
                    .and_then(|m| m.to_str().ok())
                    .is_some_and(|m| {
                        m.contains("message%20length%20too%20large")
                            || m.contains("message length too large")
                    });
            if too_large {
                headers.insert("grpc-status", http::HeaderValue::from_static("8"));
            }
            Ok(res)
        })
    }
}
