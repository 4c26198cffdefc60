//! The `SessionService` gRPC server: authentication, health, reflection, compression and keepalive (the
//! conventions of `service_kit::grpc`), a span per call (`service_kit::rpc_span`), and streams that follow the session's
//! events (live from this replica's event hub, or from the event log in Redis), so any replica can serve any caller.
//!
//! One file per RPC handler (`create_session.rs` … `reply_permission.rs`; `GetDiff` is [`crate::diff_api`],
//! `Diagnose` [`crate::diagnostics`]); this file is the listener and the router. Every handler is the same three
//! steps: validate the request ([`crate::api::validate`]), check that the caller's tenant may see the session it names
//! (`prelude::open`, through [`access`]), delegate to the engine or the store. `follow.rs` is the stream of
//! events the `Prompt`, `Subscribe` and `Compact` calls return; `routes.rs` serves those three with a codec of
//! their own.

use std::future::Future;
use std::sync::Arc;

use futures::Stream;
use llm_proto::sessions as pb;
use llm_proto::sessions::session_service_server::{SessionService, SessionServiceServer};
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use crate::api::stream_slots::StreamSlots;
use crate::api::{access, edge};
use crate::engine::Engine;
use follow::{EventStream, OutgoingStream, whole};
use prelude::session_id;

pub use service_kit::serve::ServeError;

mod abort;
mod compact;
mod create_session;
mod delete_session;
mod follow;
mod get_session;
mod get_spend;
mod list_messages;
mod list_sessions;
mod prelude;
mod prompt;
mod reply_permission;
mod routes;
pub mod store_health;
mod submit_tool_result;
mod subscribe;

/// The services whose calls get a server span (health checks and reflection do not: see docs/operations.md).
const TRACED: &[&str] = &[<SessionServiceServer<Sessions> as tonic::server::NamedService>::NAME];

/// Serves on `listener` (over TLS when `server.tls` is configured) until `shutdown` resolves.
pub async fn run(
    engine: Arc<Engine>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    run_incoming(engine, service_kit::coalesce::incoming(listener), shutdown).await
}

/// [`run`] on the connections `incoming` yields.
pub async fn run_incoming<IO, IE>(
    engine: Arc<Engine>,
    incoming: impl Stream<Item = Result<IO, IE>> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError>
where
    IO: tonic::transport::server::Connected
        + tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + Unpin
        + Send
        + 'static,
    IO::ConnectInfo: Clone + Send + Sync + 'static,
    IE: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (health, health_service) = service_kit::grpc::Health::new();
    health.set_serving::<SessionServiceServer<Sessions>>().await;
    let name = <SessionServiceServer<Sessions> as tonic::server::NamedService>::NAME;
    let served = [name];
    // Health follows storage for as long as the server runs (aborted with it).
    let store = engine.store().clone();
    let grace = engine.config().store_unreachable_grace;
    let watch = tokio::spawn(store_health::watch_store(health, name, grace, move || {
        let store = store.clone();
        async move { store.ping().await.is_ok() }
    }));
    let _stop_watch = AbortOnDrop(watch);
    let sets = [llm_proto::FILE_DESCRIPTOR_SET];
    let reflection = service_kit::grpc::reflection_v1(&sets, &served)?;
    let reflection_v1alpha = service_kit::grpc::reflection_v1alpha(&sets, &served)?;
    let auth = access::Auth::new(engine.config().clone());
    let config = engine.config();
    let mut builder = config
        .receive_window
        .apply(config.keepalive.apply(tonic::transport::Server::builder()));
    if let Some(tls) = &engine.config().server_tls {
        builder = builder.tls_config(tls.tonic_config())?;
    }
    let max_request_bytes = engine.config().max_request_bytes;
    let service = routes::session_server(
        Sessions {
            slots: StreamSlots::new(
                engine.config().max_streams_per_tenant,
                engine.metrics().open_streams(),
            ),
            engine,
        },
        max_request_bytes,
    );
    builder
        // Outermost: a span per SessionService call, with the status the caller gets.
        .layer(service_kit::rpc_span::ServerSpanLayer::new(TRACED))
        .layer(tower::util::MapResponseLayer::new(
            edge::rewrite::<tonic::body::Body>,
        ))
        // The caller's grpc-timeout bounds the whole call, streams included (DEADLINE_EXCEEDED).
        .layer(service_kit::deadline::DeadlineLayer)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(InterceptedService::new(service, auth))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}

/// Aborts a background task when the server it belongs to stops.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The `SessionService` implementation: each call routed to its handler.
pub struct Sessions {
    engine: Arc<Engine>,
    /// The streams each tenant has open here.
    slots: Arc<StreamSlots>,
}

/// The streaming calls, as the routes serve them (`routes`): each event as [`crate::event_wire::Outgoing`], which
/// the routes' codec writes straight into the response. The generated service's methods (below) make whole
/// messages of the same streams.
impl Sessions {
    async fn prompt_events(
        &self,
        request: Request<pb::PromptRequest>,
    ) -> Result<Response<OutgoingStream>, Status> {
        prompt::prompt(&self.engine, &self.slots, request).await
    }

    async fn subscribe_events(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<OutgoingStream>, Status> {
        subscribe::subscribe(&self.engine, &self.slots, request).await
    }

    async fn compact_events(
        &self,
        request: Request<pb::CompactRequest>,
    ) -> Result<Response<OutgoingStream>, Status> {
        compact::compact(&self.engine, &self.slots, request).await
    }
}

#[tonic::async_trait]
impl SessionService for Sessions {
    type PromptStream = EventStream<pb::PromptResponse>;
    type SubscribeStream = EventStream<pb::SubscribeResponse>;
    type CompactStream = EventStream<pb::CompactResponse>;

    async fn create_session(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Result<Response<pb::CreateSessionResponse>, Status> {
        create_session::create_session(&self.engine, request).await
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        get_session::get_session(&self.engine, request).await
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        list_sessions::list_sessions(&self.engine, request).await
    }

    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        delete_session::delete_session(&self.engine, request).await
    }

    async fn prompt(
        &self,
        request: Request<pb::PromptRequest>,
    ) -> Result<Response<Self::PromptStream>, Status> {
        Ok(whole(self.prompt_events(request).await?, |e| {
            pb::PromptResponse { event: Some(e) }
        }))
    }

    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        Ok(whole(self.subscribe_events(request).await?, |e| {
            pb::SubscribeResponse { event: Some(e) }
        }))
    }

    async fn list_messages(
        &self,
        request: Request<pb::ListMessagesRequest>,
    ) -> Result<Response<pb::ListMessagesResponse>, Status> {
        list_messages::list_messages(&self.engine, request).await
    }

    async fn abort(
        &self,
        request: Request<pb::AbortRequest>,
    ) -> Result<Response<pb::AbortResponse>, Status> {
        abort::abort(&self.engine, request).await
    }

    async fn submit_tool_result(
        &self,
        request: Request<pb::SubmitToolResultRequest>,
    ) -> Result<Response<pb::SubmitToolResultResponse>, Status> {
        submit_tool_result::submit_tool_result(&self.engine, request).await
    }

    async fn compact(
        &self,
        request: Request<pb::CompactRequest>,
    ) -> Result<Response<Self::CompactStream>, Status> {
        Ok(whole(self.compact_events(request).await?, |e| {
            pb::CompactResponse { event: Some(e) }
        }))
    }

    async fn get_spend(
        &self,
        request: Request<pb::GetSpendRequest>,
    ) -> Result<Response<pb::GetSpendResponse>, Status> {
        get_spend::get_spend(&self.engine, request).await
    }

    async fn get_diff(
        &self,
        request: Request<pb::GetDiffRequest>,
    ) -> Result<Response<pb::GetDiffResponse>, Status> {
        let (_, req, session) = prelude::open(
            &self.engine,
            request,
            "GetDiff",
            crate::api::validate::get_diff,
        )
        .await?;
        crate::diff_api::get_diff(&self.engine, session, req).await
    }

    async fn diagnose(
        &self,
        request: Request<pb::DiagnoseRequest>,
    ) -> Result<Response<pb::DiagnoseResponse>, Status> {
        let (_, _, session) = prelude::open(&self.engine, request, "Diagnose", session_id).await?;
        crate::diagnostics::diagnose(&self.engine, session).await
    }

    async fn reply_permission(
        &self,
        request: Request<pb::ReplyPermissionRequest>,
    ) -> Result<Response<pb::ReplyPermissionResponse>, Status> {
        reply_permission::reply_permission(&self.engine, request).await
    }
}
