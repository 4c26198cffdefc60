//! The `SessionService` gRPC server: authentication, health, reflection, compression and keepalive (the
//! conventions of `service_kit::grpc`), a span per call (`service_kit::rpc_span`), and streams that follow the session's
//! events (live from this replica's event hub, or from the event log in Redis), so any replica can serve any caller.
//!
//! Every handler is the same three steps: validate the request ([`api::validate`]), check that the caller's tenant
//! may see the session it names ([`api::access`]), delegate to the engine or the store.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::Stream;
use llm_proto::sessions as pb;
use llm_proto::sessions::session_service_server::{SessionService, SessionServiceServer};
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use crate::api::access::NamesSession;
use crate::api::stream_end::{StreamEnd, Until, Verdict};
use crate::api::stream_slots::{StreamSlot, StreamSlots};
use crate::api::{access, catalog, edge, paging, status, validate};
use crate::config::{Caller, usd_to_nano};
use crate::engine::{Accepted, Engine, LoopError, PromptSession};
use crate::event_wire::Outgoing;
use crate::ids;
use crate::store::Scope;

pub use service_kit::serve::ServeError;

mod routes;

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
    let served = [<SessionServiceServer<Sessions> as tonic::server::NamedService>::NAME];
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

/// The `SessionService` implementation.
pub struct Sessions {
    engine: Arc<Engine>,
    /// The streams each tenant has open here.
    slots: Arc<StreamSlots>,
}

impl Sessions {
    /// The first steps of every handler on one session: the caller, the request checked by `check` (an
    /// [`api::validate`] function), and the session the request names if the caller may see it (`NOT_FOUND`
    /// otherwise, whether it does not exist or is another tenant's).
    async fn open<T: NamesSession>(
        &self,
        request: Request<T>,
        rpc: &str,
        check: fn(&T) -> Result<(), Status>,
    ) -> Result<(Caller, T, pb::Session), Status> {
        let caller = access::caller(&request)?;
        let req = request.into_inner();
        check(&req)?;
        let session = access::session(&self.engine, &caller, rpc, req.session_id()).await?;
        Ok((caller, req, session))
    }

    /// The session a prompt runs in, if the caller may see it, and the agent it selects (the prompt's, else the
    /// session's), if the caller's tenant may (still) select it. With `known`, from what this replica last knew of
    /// the session when it knows it (see [`Sessions::begin_prompt`]).
    async fn prompt_session(
        &self,
        caller: &Caller,
        req: &pb::PromptRequest,
        known: bool,
    ) -> Result<PromptSession, Status> {
        let read = access::session_for_prompt(&self.engine, caller, &req.session_id, known).await?;
        let agent = if req.agent.is_empty() {
            &read.session.agent
        } else {
            &req.agent
        };
        access::agent(self.engine.config(), caller, "agent", agent)?;
        Ok(read)
    }

    /// Begins a prompt validated against `read`; when Redis no longer holds the record or prompt model `read` had
    /// (this replica's knowledge was stale, or the session changed in between), nothing was written, and the
    /// prompt is validated again against a fresh read and begun again.
    async fn begin_prompt(
        &self,
        caller: &Caller,
        req: &pb::PromptRequest,
        trace: &[(String, String)],
        mut read: PromptSession,
    ) -> Result<Accepted, Status> {
        for _ in 0..STALE_ATTEMPTS {
            match self.engine.prompt(req, trace.to_vec(), read).await {
                Err(LoopError::Stale) => read = self.prompt_session(caller, req, false).await?,
                started => return started.map_err(loop_status),
            }
        }
        Err(Status::aborted(
            "the session kept changing while the prompt began; send it again",
        ))
    }
}

/// The streaming calls, as the routes serve them (`routes`): each event as [`Outgoing`], which the routes' codec
/// writes straight into the response. The generated service's methods (below) make whole messages of the same
/// streams.
impl Sessions {
    async fn prompt_events(
        &self,
        request: Request<pb::PromptRequest>,
    ) -> Result<Response<OutgoingStream>, Status> {
        let caller = access::caller(&request)?;
        let trace = trace_context(request.metadata());
        let req = request.into_inner();
        validate::prompt(&req)?;
        // Before anything is written: a prompt whose stream cannot open is not run.
        let slot = self.slots.take(&caller)?;
        let read = self.prompt_session(&caller, &req, true).await?;
        let session_id = req.session_id.clone();
        let accepted = if req.idempotency_key.is_empty() {
            self.begin_prompt(&caller, &req, &trace, read).await?
        } else {
            let start = self
                .engine
                .events()
                .last_event_id(&session_id)
                .await
                .map_err(status::storage)?;
            match self
                .engine
                .store()
                .prompts()
                .claim_idempotency_key(
                    &session_id,
                    &req.idempotency_key,
                    &start,
                    Duration::from_secs(24 * 3600),
                )
                .await
                .map_err(status::storage)?
            {
                // A retry follows from where the first call's stream started, to the first `done`.
                Some(first_start) => Accepted {
                    start: first_start,
                    queued: None,
                },
                None => self.begin_prompt(&caller, &req, &trace, read).await?,
            }
        };
        let until = accepted.queued.map_or(Until::Done, Until::Answered);
        Ok(Response::new(follow(
            self.engine.clone(),
            slot,
            session_id,
            accepted.start,
            until,
        )))
    }

    async fn subscribe_events(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<OutgoingStream>, Status> {
        let (caller, req, _) = self.open(request, "Subscribe", validate::subscribe).await?;
        let slot = self.slots.take(&caller)?;
        let after = if req.after_event_id.is_empty() {
            self.engine
                .events()
                .last_event_id(&req.session_id)
                .await
                .map_err(status::storage)?
        } else {
            req.after_event_id
        };
        Ok(Response::new(follow(
            self.engine.clone(),
            slot,
            req.session_id,
            after,
            Until::Never,
        )))
    }

    async fn compact_events(
        &self,
        request: Request<pb::CompactRequest>,
    ) -> Result<Response<OutgoingStream>, Status> {
        let (caller, req, _) = self.open(request, "Compact", validate::compact).await?;
        let slot = self.slots.take(&caller)?;
        let start = self
            .engine
            .compact_now(&req.session_id, &req.model)
            .await
            .map_err(loop_status)?;
        Ok(Response::new(follow(
            self.engine.clone(),
            slot,
            req.session_id,
            start,
            Until::Done,
        )))
    }
}

/// Attempts of a prompt's begin against a session that keeps changing under it (each attempt reads it afresh).
const STALE_ATTEMPTS: usize = 4;

/// The check of a request that holds nothing but the session's id.
fn session_id<T: NamesSession>(req: &T) -> Result<(), Status> {
    validate::session_id(req.session_id())
}

/// A new idle session of `tenant` for a validated request, running `agent`.
fn new_session(req: pb::CreateSessionRequest, agent: String, tenant: String) -> pb::Session {
    let now = prost_types::Timestamp::from(SystemTime::now());
    pb::Session {
        id: ids::new("ses"),
        agent,
        default_model: req.default_model,
        workspace: req.workspace,
        metadata: req.metadata,
        created_at: Some(now),
        updated_at: Some(now),
        budget_nano_usd: usd_to_nano(req.budget_usd).unwrap_or_default(),
        tenant,
        tokens: Some(pb::Tokens::default()),
        status: Some(pb::SessionStatus {
            kind: pb::session_status::Kind::Idle as i32,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn loop_status(e: LoopError) -> Status {
    match e {
        LoopError::NotFound(_) => status::session_not_found(),
        LoopError::Store(e) => status::storage(e),
        LoopError::Precondition(why) => Status::failed_precondition(why),
        LoopError::Stale => Status::aborted(e.to_string()),
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

type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// A followed session's events as the routes send them.
type OutgoingStream = EventStream<Outgoing>;

/// The same stream as whole messages, each in its call's response (`wrap`): what the generated service returns.
fn whole<T: Send + 'static>(
    response: Response<OutgoingStream>,
    wrap: fn(pb::SessionEvent) -> T,
) -> Response<EventStream<T>> {
    use futures::StreamExt as _;
    response.map(|events| -> EventStream<T> {
        Box::pin(events.map(move |e| e.map(|e| wrap(e.into_event()))))
    })
}

/// Follows the session's events after `after` (from this replica's event hub while the loop runs here, otherwise
/// from the event log in Redis), ending as `until` says ([`crate::api::stream_end`]). `after` must be an event id (callers
/// validate what a client sent).
fn follow(
    engine: Arc<Engine>,
    slot: StreamSlot,
    session_id: String,
    after: String,
    until: Until,
) -> OutgoingStream {
    let follower = match engine.events().follow(&session_id, &after) {
        Ok(f) => f,
        Err(e) => {
            let refused = status::invalid("after_event_id", &e.to_string());
            return Box::pin(futures::stream::once(async move { Err(refused) }));
        }
    };
    let state = Following {
        patience: engine.config().lease_ttl,
        engine,
        follower,
        end: StreamEnd::new(until),
        _slot: slot,
        finished: false,
    };
    Box::pin(futures::stream::unfold(state, move |mut st| async move {
        if st.finished {
            return None;
        }
        let ev = match next_event(&mut st.follower, st.patience).await {
            Ok(ev) => ev,
            Err(Ended::Gone) => {
                st.finished = true;
                return Some((Err(status::session_not_found()), st));
            }
            Err(Ended::Unreadable) => {
                // Storage stayed unreadable: end with a terminal event that says so, never silence.
                let ev = pb::SessionEvent {
                    event_id: String::new(),
                    session_id: st.follower.session_id().to_string(),
                    event: Some(pb::session_event::Event::Done(pb::Done {
                        stopped_by: pb::StopReason::StorageUnavailable as i32,
                        ..Default::default()
                    })),
                };
                st.finished = true;
                return Some((Ok(Outgoing::Event(Box::new(ev))), st));
            }
        };
        st.finished = match st.end.observe(&ev) {
            Verdict::Go => false,
            Verdict::End => true,
            Verdict::Ask(tag) => {
                answered(
                    &st.engine,
                    &st.end,
                    st.follower.session_id(),
                    &tag,
                    st.patience,
                )
                .await
            }
        };
        Some((Ok(ev), st))
    }))
}

/// What a stream that follows a session carries from one event to the next.
struct Following {
    engine: Arc<Engine>,
    follower: crate::events::Follower,
    end: StreamEnd,
    /// Its place in its tenant's count of open streams, freed with the stream (when it ends or the caller leaves).
    _slot: StreamSlot,
    patience: Duration,
    finished: bool,
}

/// Whether the `done` a queued prompt's stream just saw ends it (see [`crate::api::stream_end`]). A failed read is
/// retried like the stream's own ([`Patience`]): the first request after a Redis restart can fail on a connection
/// nothing used since. When Redis still cannot say, the stream ends there: a stream that ends early can be resumed
/// with `Subscribe`, one that never ends cannot.
async fn answered(
    engine: &Engine,
    end: &StreamEnd,
    session_id: &str,
    tag: &str,
    patience: Duration,
) -> bool {
    let mut patience = Patience::new(patience);
    let queue = engine.store().queue();
    loop {
        let e = match queue.prompt_delivery(session_id, tag).await {
            Ok(delivery) => return end.answered(&delivery),
            Err(e @ crate::store::StoreError::NotFound(_)) => e,
            Err(e) => match patience.retry(e).await {
                Ok(()) => continue,
                Err(e) => e,
            },
        };
        tracing::warn!(message = "cannot tell whether a queued prompt was answered; ending its stream", session_id = %session_id, error = %e);
        return true;
    }
}

/// How long a stream keeps retrying a failed read of storage (the lease time: a Redis restart shorter than that is
/// invisible to the caller), with backoff between tries.
struct Patience {
    limit: Duration,
    failing_since: Option<std::time::Instant>,
    delay: Duration,
}

impl Patience {
    fn new(limit: Duration) -> Patience {
        Patience {
            limit,
            failing_since: None,
            delay: Duration::from_millis(50),
        }
    }

    /// After a failure: waits before the next try, or hands the failure back when that try would come past the
    /// limit.
    async fn retry<E>(&mut self, failure: E) -> Result<(), E> {
        let since = *self
            .failing_since
            .get_or_insert_with(std::time::Instant::now);
        if since.elapsed() + self.delay > self.limit {
            return Err(failure);
        }
        tokio::time::sleep(self.delay).await;
        self.delay = (self.delay * 2).min(Duration::from_millis(500));
        Ok(())
    }
}

/// Why a stream ends without a next event.
enum Ended {
    /// The session no longer exists (deleted while the stream followed it).
    Gone,
    /// Storage stayed unreadable for the whole patience.
    Unreadable,
}

/// The follower's next event. Storage errors are retried (with backoff) for up to `patience`, the lease time: a
/// Redis restart shorter than that is invisible to the caller.
async fn next_event(
    follower: &mut crate::events::Follower,
    patience: Duration,
) -> Result<Outgoing, Ended> {
    let mut patience = Patience::new(patience);
    loop {
        match follower.next_outgoing().await {
            Ok(ev) => return Ok(ev),
            Err(crate::store::StoreError::NotFound(_)) => return Err(Ended::Gone),
            Err(e) => {
                tracing::debug!(message = "reading the session's events failed; retrying", session_id = %follower.session_id(), error = %e);
                // Boxed: rare, and the stream's future (one per open stream) would otherwise keep room for it.
                if let Err(e) = Box::pin(patience.retry(e)).await {
                    tracing::warn!(message = "cannot read the session's events; ending the stream", session_id = %follower.session_id(), error = %e);
                    return Err(Ended::Unreadable);
                }
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
        let caller = access::caller(&request)?;
        let req = request.into_inner();
        validate::create_session(&req)?;
        let config = self.engine.config();
        let agent = access::agent(config, &caller, "agent", &req.agent)?.to_string();
        if !req.default_model.is_empty() {
            catalog::check_model(&self.engine, "default_model", &req.default_model).await?;
        }
        let session = new_session(req, agent, caller.owner().to_string());
        if !session.workspace.is_empty() {
            crate::tools::Workspace::for_session(
                &config.workspace_root,
                &session.tenant,
                &session.workspace,
            )
            .map_err(|e| {
                tracing::error!(message = "cannot open a session's workspace", tenant = %session.tenant, workspace = %session.workspace, error = %e);
                Status::failed_precondition("the workspace cannot be opened on this replica")
            })?;
        }
        let quota = config.session_quota(&session.tenant);
        self.engine
            .store()
            .sessions()
            .create_session_within(&session, Some(quota))
            .await
            .map_err(status::storage)?;
        access::audit(&caller, "CreateSession", &session.id, &session.tenant);
        Ok(Response::new(pb::CreateSessionResponse {
            session: Some(session),
        }))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        let (_, _, mut session) = self.open(request, "GetSession", session_id).await?;
        // RETRY (attempt, next attempt, error) while the loop waits to retry a step, BUSY under a live lease, IDLE.
        session.status = Some(
            self.engine
                .store()
                .statuses()
                .live_status(&session.id)
                .await
                .map_err(status::storage)?,
        );
        Ok(Response::new(pb::GetSessionResponse {
            session: Some(session),
        }))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let caller = access::caller(&request)?;
        let req = request.into_inner();
        let size = validate::page_size(req.page_size, validate::SESSION_PAGE)?;
        let after = validate::session_cursor(&req.page_token)?;
        let scope = match &caller {
            Caller::Operator => Scope::All,
            Caller::Tenant(own) => Scope::Tenant(own),
        };
        access::audit(&caller, "ListSessions", "", "*");
        let store = self.engine.store();
        let (mut listed, next) = store
            .index()
            .list_sessions(scope, size, after)
            .await
            .map_err(status::storage)?;
        let ids: Vec<&str> = listed.iter().map(|l| l.session.id.as_str()).collect();
        let statuses = store
            .statuses()
            .live_statuses(&ids)
            .await
            .map_err(status::storage)?;
        for (l, status) in listed.iter_mut().zip(statuses) {
            l.session.status = Some(status);
        }
        let items = listed.into_iter().map(|l| (l.cursor, l.session)).collect();
        let (sessions, next) = paging::fit(items, next, paging::PAGE_BYTES);
        Ok(Response::new(pb::ListSessionsResponse {
            sessions,
            next_page_token: next.unwrap_or_default(),
        }))
    }

    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteSessionResponse>, Status> {
        let (_, _, session) = self.open(request, "DeleteSession", session_id).await?;
        let id = &session.id;
        self.engine.abort(id);
        if !self
            .engine
            .store()
            .sessions()
            .delete_session(id)
            .await
            .map_err(status::storage)?
        {
            return Err(status::session_not_found());
        }
        // Its streams here end now (`NOT_FOUND`); those on other replicas at their next look, within seconds.
        self.engine.events().wake_followers(id);
        // The session's snapshots go with it (a replica whose snapshot root is not shared removes its own copy at
        // its next sweep).
        if let Some(dir) = crate::snapshot::session_dir(&self.engine.config().snapshots, id) {
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
        let caller = access::caller(&request)?;
        let req = request.into_inner();
        validate::session_id(&req.session_id)?;
        let size = validate::page_size(req.page_size, validate::MESSAGE_PAGE)?;
        let cursor = validate::message_cursor(&req.page_token)?;
        let session =
            access::session(&self.engine, &caller, "ListMessages", &req.session_id).await?;
        let store = self.engine.store().messages();
        // A token inside a message: the rest of its parts first.
        let mut first = None;
        if let Some((message_id, Some(part_id))) = cursor
            && let Some(m) = store
                .get_message(&session.id, message_id)
                .await
                .map_err(status::storage)?
        {
            first = Some(paging::rest_of(m, part_id));
        }
        let after = cursor.map(|(message_id, _)| message_id);
        let (messages, next) = store
            .list_messages(&session.id, after, size)
            .await
            .map_err(status::storage)?;
        let all = first.into_iter().chain(messages).collect();
        let (messages, next) = paging::fit_messages(all, next, size, paging::PAGE_BYTES);
        Ok(Response::new(pb::ListMessagesResponse {
            messages,
            next_page_token: next.unwrap_or_default(),
        }))
    }

    async fn abort(
        &self,
        request: Request<pb::AbortRequest>,
    ) -> Result<Response<pb::AbortResponse>, Status> {
        let (_, _, session) = self.open(request, "Abort", session_id).await?;
        Ok(Response::new(pb::AbortResponse {
            aborted: self.engine.abort(&session.id),
        }))
    }

    async fn submit_tool_result(
        &self,
        request: Request<pb::SubmitToolResultRequest>,
    ) -> Result<Response<pb::SubmitToolResultResponse>, Status> {
        let (_, r, _) = self
            .open(request, "SubmitToolResult", validate::submit_tool_result)
            .await?;
        self.engine
            .store()
            .mailboxes()
            .submit_tool_result(&r.session_id, &r.call_id, &r.output, r.is_error)
            .await
            .map_err(status::storage)?;
        Ok(Response::new(pb::SubmitToolResultResponse {}))
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
        let caller = access::caller(&request)?;
        let asked = request.into_inner();
        validate::get_spend(&asked)?;
        let name = match (&caller, asked.tenant.is_empty()) {
            (Caller::Operator, true) => {
                return Err(status::invalid("tenant", "required with an operator token"));
            }
            (Caller::Operator, false) => asked.tenant,
            (Caller::Tenant(own), true) if own.is_empty() => {
                return Err(status::invalid(
                    "tenant",
                    "this token belongs to no tenant, so it has no spend to read",
                ));
            }
            (Caller::Tenant(own), true) => own.clone(),
            (Caller::Tenant(own), false) if *own == asked.tenant => asked.tenant,
            // Another tenant's spend: as if it did not exist.
            (Caller::Tenant(_), false) => return Err(status::tenant_not_found()),
        };
        access::audit(&caller, "GetSpend", "", &name);
        let tenant = self
            .engine
            .config()
            .tenants
            .get(&name)
            .ok_or_else(status::tenant_not_found)?;
        let spend = self
            .engine
            .store()
            .spend()
            .tenant_spend(&tenant.name)
            .await
            .map_err(status::storage)?;
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
        let (_, req, session) = self.open(request, "GetDiff", validate::get_diff).await?;
        crate::diff_api::get_diff(&self.engine, session, req).await
    }

    async fn diagnose(
        &self,
        request: Request<pb::DiagnoseRequest>,
    ) -> Result<Response<pb::DiagnoseResponse>, Status> {
        let (_, _, session) = self.open(request, "Diagnose", session_id).await?;
        crate::diagnostics::diagnose(&self.engine, session).await
    }

    async fn reply_permission(
        &self,
        request: Request<pb::ReplyPermissionRequest>,
    ) -> Result<Response<pb::ReplyPermissionResponse>, Status> {
        let (_, r, _) = self
            .open(request, "ReplyPermission", validate::reply_permission)
            .await?;
        self.engine
            .store()
            .mailboxes()
            .reply_permission(&r.session_id, &r.permission_id, r.allow)
            .await
            .map_err(status::storage)?;
        Ok(Response::new(pb::ReplyPermissionResponse {}))
    }
}
