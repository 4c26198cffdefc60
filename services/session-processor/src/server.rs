//! The `SessionService` gRPC server: validation, authentication, health, reflection, and streams that follow the
//! session's events (live from this replica's event hub, or from the event log in Redis), so any replica can serve
//! any caller.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::Stream;
use llm_proto::sessions as pb;
use llm_proto::sessions::session_service_server::{SessionService, SessionServiceServer};
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::config::{Tenant, usd_to_nano};
use crate::engine::{Engine, LoopError};
use crate::ids;
use crate::store::StoreError;
use crate::structured;

/// Start-up failures.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("transport: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves on `listener` (over TLS when `server.tls` is configured) until `shutdown` resolves.
pub async fn run(
    engine: Arc<Engine>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<SessionServiceServer<Sessions>>().await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(llm_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let auth = Auth {
        tokens: engine.config.auth_tokens.clone(),
        open: engine.config.allow_unauthenticated,
    };
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = &engine.config.server_tls {
        builder = builder.tls_config(tls.tonic_config())?;
    }
    let service =
        SessionServiceServer::new(Sessions { engine }).max_decoding_message_size(32 * 1024 * 1024);
    builder
        .add_service(health_service)
        .add_service(reflection)
        .add_service(InterceptedService::new(service, auth))
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await?;
    Ok(())
}

#[derive(Clone)]
struct Auth {
    tokens: Vec<String>,
    open: bool,
}

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        if self.open && self.tokens.is_empty() {
            return Ok(request);
        }
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                Status::unauthenticated("missing `authorization: Bearer <token>` metadata")
            })?;
        let ok = self.tokens.iter().any(|t| {
            t.len() == presented.len()
                && t.bytes()
                    .zip(presented.bytes())
                    .fold(0u8, |a, (x, y)| a | (x ^ y))
                    == 0
        });
        if ok {
            // Handlers need to know who called (the token decides the tenant).
            let caller = Caller(presented.to_string());
            let mut request = request;
            request.extensions_mut().insert(caller);
            Ok(request)
        } else {
            Err(Status::unauthenticated("invalid bearer token"))
        }
    }
}

/// The authenticated caller's token, put in the request's extensions by the auth interceptor.
#[derive(Clone)]
struct Caller(String);

/// The tenant of the request's caller, if its token belongs to one.
fn caller_tenant<'a, T>(engine: &'a Engine, request: &Request<T>) -> Option<&'a Tenant> {
    let caller = request.extensions().get::<Caller>()?;
    engine.config.tenant_for_token(&caller.0)
}

/// The `SessionService` implementation.
pub struct Sessions {
    engine: Arc<Engine>,
}

fn invalid(field: &str, message: &str) -> Status {
    let mut details = ErrorDetails::new();
    details.add_bad_request_violation(field, message);
    Status::with_error_details(
        Code::InvalidArgument,
        format!("{field}: {message}"),
        details,
    )
}

fn store_status(e: StoreError) -> Status {
    tracing::error!(message = "storage failure", error = %e);
    Status::unavailable(format!("storage: {e}"))
}

fn loop_status(e: LoopError) -> Status {
    match e {
        LoopError::NotFound(what) => Status::not_found(format!("{what} not found")),
        LoopError::Store(e) => store_status(e),
        LoopError::Precondition(why) => Status::failed_precondition(why),
    }
}

/// The caller's W3C trace context, passed on to every gateway call of the loop this prompt starts.
fn trace_context(metadata: &tonic::metadata::MetadataMap) -> Vec<(String, String)> {
    ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|k| {
            let v = metadata.get(k)?.to_str().ok()?;
            (v.len() <= 512).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

fn require(field: &str, value: &str) -> Result<(), Status> {
    if value.is_empty() {
        Err(invalid(field, "required"))
    } else {
        Ok(())
    }
}

fn valid_workspace(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name != "."
        && name != ".."
}

type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// Follows the session's events after `after` (from this replica's event hub while the loop runs here, otherwise
/// from the event log in Redis); ends after a `Done` event when `until_done`. `after` must be an event id (callers
/// validate what a client sent).
fn follow<T: Send + 'static>(
    engine: Arc<Engine>,
    session_id: String,
    after: String,
    until_done: bool,
    wrap: fn(pb::SessionEvent) -> T,
) -> EventStream<T> {
    let follower = match engine.events.follow(&session_id, &after) {
        Ok(f) => f,
        Err(e) => {
            let status = invalid("after_event_id", &e.to_string());
            return Box::pin(futures::stream::once(async move { Err(status) }));
        }
    };
    let patience = engine.config.lease_ttl;
    Box::pin(futures::stream::unfold(
        (follower, false),
        move |(mut follower, finished)| async move {
            if finished {
                return None;
            }
            match next_event(&mut follower, patience).await {
                Some(ev) => {
                    let done =
                        until_done && matches!(ev.event, Some(pb::session_event::Event::Done(_)));
                    Some((Ok(wrap(ev)), (follower, done)))
                }
                None => {
                    // Storage stayed unreadable: end with a terminal event that says so, never silence.
                    let ev = pb::SessionEvent {
                        event_id: String::new(),
                        session_id: follower.session_id().to_string(),
                        event: Some(pb::session_event::Event::Done(pb::Done {
                            stopped_by: pb::StopReason::StorageUnavailable as i32,
                            ..Default::default()
                        })),
                    };
                    Some((Ok(wrap(ev)), (follower, true)))
                }
            }
        },
    ))
}

/// The follower's next event. Storage errors are retried (with backoff) for up to `patience`, the lease time: a
/// Redis restart shorter than that is invisible to the caller; `None` when it lasts longer.
async fn next_event(
    follower: &mut crate::events::Follower,
    patience: Duration,
) -> Option<pb::SessionEvent> {
    let mut failing_since: Option<std::time::Instant> = None;
    let mut delay = Duration::from_millis(50);
    loop {
        match follower.next().await {
            Ok(ev) => return Some(ev),
            Err(e) => {
                let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() + delay > patience {
                    tracing::warn!(message = "cannot read the session's events; ending the stream", session_id = %follower.session_id(), error = %e);
                    return None;
                }
                tracing::debug!(message = "reading the session's events failed; retrying", session_id = %follower.session_id(), error = %e);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(500));
            }
        }
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
        let tenant = caller_tenant(&self.engine, &request)
            .map(|t| t.name.clone())
            .unwrap_or_default();
        let req = request.into_inner();
        let budget_nano_usd = usd_to_nano(req.budget_usd)
            .ok_or_else(|| invalid("budget_usd", "must be a non-negative amount of USD"))?;
        let agent = if req.agent.is_empty() {
            "default".to_string()
        } else {
            req.agent.clone()
        };
        if self.engine.agent(&agent).is_none()
            || (!req.agent.is_empty() && !self.engine.config.agents.contains_key(&req.agent))
        {
            return Err(invalid("agent", "no such agent"));
        }
        if !req.default_model.is_empty() && !req.default_model.contains('/') {
            return Err(invalid("default_model", "must be `provider/model`"));
        }
        if !req.workspace.is_empty() && !valid_workspace(&req.workspace) {
            return Err(invalid(
                "workspace",
                "a directory name of [A-Za-z0-9._-], not a path",
            ));
        }
        let now = prost_types::Timestamp::from(SystemTime::now());
        let session = pb::Session {
            id: ids::new("ses"),
            agent,
            default_model: req.default_model,
            workspace: req.workspace,
            metadata: req.metadata,
            created_at: Some(now),
            updated_at: Some(now),
            budget_nano_usd,
            tenant,
            tokens: Some(pb::Tokens::default()),
            status: Some(pb::SessionStatus {
                kind: pb::session_status::Kind::Idle as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        if !session.workspace.is_empty() {
            let dir = self.engine.config.workspace_root.join(&session.workspace);
            std::fs::create_dir_all(&dir)
                .map_err(|e| Status::internal(format!("workspace: {e}")))?;
        }
        self.engine
            .store
            .create_session(&session)
            .await
            .map_err(store_status)?;
        Ok(Response::new(pb::CreateSessionResponse {
            session: Some(session),
        }))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        let id = &request.get_ref().session_id;
        require("session_id", id)?;
        let mut session = self
            .engine
            .store
            .get_session(id)
            .await
            .map_err(store_status)?
            .ok_or_else(|| Status::not_found("session not found"))?;
        // RETRY (attempt, next attempt, error) while the loop waits to retry a step, BUSY under a live lease, IDLE.
        session.status = Some(
            self.engine
                .store
                .live_status(id)
                .await
                .map_err(store_status)?,
        );
        Ok(Response::new(pb::GetSessionResponse {
            session: Some(session),
        }))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let req = request.into_inner();
        let size = match req.page_size {
            0 => 50,
            n if n < 0 => return Err(invalid("page_size", "must not be negative")),
            n => n.min(500) as usize,
        };
        let after = Some(req.page_token.as_str()).filter(|t| !t.is_empty());
        let (mut sessions, next) = self
            .engine
            .store
            .list_sessions(size, after)
            .await
            .map_err(store_status)?;
        let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        let statuses = self
            .engine
            .store
            .live_statuses(&ids)
            .await
            .map_err(store_status)?;
        for (session, status) in sessions.iter_mut().zip(statuses) {
            session.status = Some(status);
        }
        Ok(Response::new(pb::ListSessionsResponse {
            sessions,
            next_page_token: next.unwrap_or_default(),
        }))
    }

    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        let id = &request.get_ref().session_id;
        require("session_id", id)?;
        self.engine.abort(id);
        if !self
            .engine
            .store
            .delete_session(id)
            .await
            .map_err(store_status)?
        {
            return Err(Status::not_found("session not found"));
        }
        // The session's snapshots go with it (a replica whose snapshot root is not shared removes its own copy at
        // its next sweep).
        if let Some(dir) = crate::snapshot::session_dir(&self.engine.config.snapshots, id) {
            match tokio::fs::remove_dir_all(&dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(message = "removing a deleted session's snapshots failed", session_id = %id, error = %e);
                }
            }
        }
        Ok(Response::new(pb::DeleteSessionResponse {}))
    }

    async fn prompt(
        &self,
        request: Request<pb::PromptRequest>,
    ) -> Result<Response<Self::PromptStream>, Status> {
        let trace = trace_context(request.metadata());
        let req = request.into_inner();
        require("session_id", &req.session_id)?;
        let has_text = req.parts.iter().any(|p| match &p.kind {
            Some(pb::prompt_part::Kind::Text(t)) => !t.trim().is_empty(),
            Some(pb::prompt_part::Kind::File(_)) => true,
            None => false,
        });
        if !has_text {
            return Err(invalid(
                "parts",
                "at least one non-empty text or file part is required",
            ));
        }
        if !req.model.is_empty() && !req.model.contains('/') {
            return Err(invalid("model", "must be `provider/model`"));
        }
        let structured = match &req.format {
            Some(f) => structured::Format::from_proto(f)
                .map_err(|m| invalid("format", &m))?
                .is_some(),
            None => false,
        };
        for (i, t) in req.client_tools.iter().enumerate() {
            if structured && t.name == structured::TOOL_NAME {
                return Err(invalid(
                    &format!("client_tools[{i}].name"),
                    "`structured_output` is reserved while a format is requested",
                ));
            }
            if t.name.is_empty()
                || t.name.len() > 64
                || !t
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(invalid(
                    &format!("client_tools[{i}].name"),
                    "must match ^[a-zA-Z0-9_-]{1,64}$",
                ));
            }
            if !matches!(
                serde_json::from_str::<serde_json::Value>(&t.input_schema_json),
                Ok(serde_json::Value::Object(_))
            ) {
                return Err(invalid(
                    &format!("client_tools[{i}].input_schema_json"),
                    "must be a JSON object schema",
                ));
            }
        }
        let session_id = req.session_id.clone();
        let start = if req.idempotency_key.is_empty() {
            self.engine
                .prompt(req, trace.clone())
                .await
                .map_err(loop_status)?
        } else {
            let start = self
                .engine
                .events
                .last_event_id(&session_id)
                .await
                .map_err(store_status)?;
            match self
                .engine
                .store
                .claim_idempotency_key(
                    &session_id,
                    &req.idempotency_key,
                    &start,
                    Duration::from_secs(24 * 3600),
                )
                .await
                .map_err(store_status)?
            {
                Some(first_start) => first_start,
                None => self
                    .engine
                    .prompt(req, trace.clone())
                    .await
                    .map_err(loop_status)?,
            }
        };
        Ok(Response::new(follow(
            self.engine.clone(),
            session_id,
            start,
            true,
            |e| pb::PromptResponse { event: Some(e) },
        )))
    }

    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let req = request.into_inner();
        require("session_id", &req.session_id)?;
        if self
            .engine
            .store
            .get_session(&req.session_id)
            .await
            .map_err(store_status)?
            .is_none()
        {
            return Err(Status::not_found("session not found"));
        }
        if !req.after_event_id.is_empty()
            && let Err(e) = req.after_event_id.parse::<crate::events::EventId>()
        {
            return Err(invalid("after_event_id", &e.to_string()));
        }
        let after = if req.after_event_id.is_empty() {
            self.engine
                .events
                .last_event_id(&req.session_id)
                .await
                .map_err(store_status)?
        } else {
            req.after_event_id
        };
        Ok(Response::new(follow(
            self.engine.clone(),
            req.session_id,
            after,
            false,
            |e| pb::SubscribeResponse { event: Some(e) },
        )))
    }

    async fn list_messages(
        &self,
        request: Request<pb::ListMessagesRequest>,
    ) -> Result<Response<pb::ListMessagesResponse>, Status> {
        let req = request.into_inner();
        require("session_id", &req.session_id)?;
        let size = match req.page_size {
            0 => 100,
            n if n < 0 => return Err(invalid("page_size", "must not be negative")),
            n => n.min(1000) as usize,
        };
        let after = Some(req.page_token.as_str()).filter(|t| !t.is_empty());
        let (messages, next) = self
            .engine
            .store
            .list_messages(&req.session_id, after, size)
            .await
            .map_err(store_status)?;
        Ok(Response::new(pb::ListMessagesResponse {
            messages,
            next_page_token: next.unwrap_or_default(),
        }))
    }

    async fn abort(
        &self,
        request: Request<pb::AbortRequest>,
    ) -> Result<Response<pb::AbortResponse>, Status> {
        let id = &request.get_ref().session_id;
        require("session_id", id)?;
        Ok(Response::new(pb::AbortResponse {
            aborted: self.engine.abort(id),
        }))
    }

    async fn submit_tool_result(
        &self,
        request: Request<pb::SubmitToolResultRequest>,
    ) -> Result<Response<pb::SubmitToolResultResponse>, Status> {
        let r = request.into_inner();
        require("session_id", &r.session_id)?;
        require("call_id", &r.call_id)?;
        self.engine
            .store
            .submit_tool_result(&r.session_id, &r.call_id, &r.output, r.is_error)
            .await
            .map_err(store_status)?;
        Ok(Response::new(pb::SubmitToolResultResponse {}))
    }

    async fn compact(
        &self,
        request: Request<pb::CompactRequest>,
    ) -> Result<Response<Self::CompactStream>, Status> {
        let req = request.into_inner();
        require("session_id", &req.session_id)?;
        if !req.model.is_empty() && !req.model.contains('/') {
            return Err(invalid("model", "must be `provider/model`"));
        }
        let start = self
            .engine
            .compact_now(&req.session_id, &req.model)
            .await
            .map_err(loop_status)?;
        Ok(Response::new(follow(
            self.engine.clone(),
            req.session_id,
            start,
            true,
            |e| pb::CompactResponse { event: Some(e) },
        )))
    }

    async fn get_spend(
        &self,
        request: Request<pb::GetSpendRequest>,
    ) -> Result<Response<pb::GetSpendResponse>, Status> {
        let own = caller_tenant(&self.engine, &request).map(|t| t.name.clone());
        let asked = request.into_inner().tenant;
        let name = match (own, asked.is_empty()) {
            (Some(own), true) => own,
            (Some(own), false) if own == asked => own,
            (Some(_), false) => {
                return Err(Status::permission_denied(
                    "a tenant's token reads its own tenant's spend only",
                ));
            }
            (None, true) => return Err(invalid("tenant", "required for a token without a tenant")),
            (None, false) => asked,
        };
        let tenant = self
            .engine
            .config
            .tenants
            .get(&name)
            .ok_or_else(|| Status::not_found(format!("tenant {name} not found")))?;
        let spend = self
            .engine
            .store
            .tenant_spend(&tenant.name)
            .await
            .map_err(store_status)?;
        Ok(Response::new(pb::GetSpendResponse {
            tenant: tenant.name.clone(),
            spend_nano_usd: spend,
            budget_nano_usd: tenant.budget_nano_usd,
        }))
    }

    async fn get_diff(
        &self,
        request: Request<pb::GetDiffRequest>,
    ) -> Result<Response<pb::GetDiffResponse>, Status> {
        crate::diff_api::get_diff(&self.engine, request.into_inner()).await
    }

    async fn diagnose(
        &self,
        request: Request<pb::DiagnoseRequest>,
    ) -> Result<Response<pb::DiagnoseResponse>, Status> {
        crate::diagnostics::diagnose(&self.engine, request.into_inner()).await
    }

    async fn reply_permission(
        &self,
        request: Request<pb::ReplyPermissionRequest>,
    ) -> Result<Response<pb::ReplyPermissionResponse>, Status> {
        let r = request.into_inner();
        require("session_id", &r.session_id)?;
        require("permission_id", &r.permission_id)?;
        self.engine
            .store
            .reply_permission(&r.session_id, &r.permission_id, r.allow)
            .await
            .map_err(store_status)?;
        Ok(Response::new(pb::ReplyPermissionResponse {}))
    }
}
