//! Who calls, and what they may touch: the bearer-token check on every `SessionService` call, the tenant check on
//! every session a call names, and the audit line of every operator call.
//!
//! A caller sees only sessions of its own tenant ([`Caller::sees`]); any other session is `NOT_FOUND` with exactly
//! the status of a session that does not exist ([`status::session_not_found`]). Operators see every session, and
//! each of their calls logs `operator access` (target `session_processor::audit`) with the RPC, the session and
//! its tenant, never the token.

use llm_proto::sessions as pb;
use tonic::{Request, Status};

use super::status;
use crate::config::{Caller, Config};
use crate::engine::{Engine, PromptSession};

/// Log target of operator calls.
pub const AUDIT_TARGET: &str = "session_processor::audit";

/// The bearer-token check: puts the [`Caller`] the token names into the request's extensions.
#[derive(Clone)]
pub struct Auth {
    config: std::sync::Arc<Config>,
}

impl Auth {
    /// The check for `config`'s tokens.
    pub fn new(config: std::sync::Arc<Config>) -> Auth {
        Auth { config }
    }
}

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if self.config.allow_unauthenticated && self.config.tokens.is_empty() {
            // Local development without tokens: everyone is the unnamed tenant.
            request
                .extensions_mut()
                .insert(Caller::Tenant(String::new()));
            return Ok(request);
        }
        let presented = service_kit::auth::bearer_metadata(request.metadata())
            .ok_or_else(|| status::unauthenticated(service_kit::auth::MISSING_BEARER))?;
        let caller = self
            .config
            .caller(presented)
            .cloned()
            .ok_or_else(|| status::unauthenticated("invalid bearer token"))?;
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

/// The caller of an authenticated request. Every request passed [`Auth`]; one that somehow did not is refused.
pub fn caller<T>(request: &Request<T>) -> Result<Caller, Status> {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| status::unauthenticated("unauthenticated"))
}

/// Logs an operator call: the RPC, the session (empty when the call names none) and the tenant acted on.
pub fn audit(caller: &Caller, rpc: &str, session_id: &str, tenant: &str) {
    if *caller == Caller::Operator {
        tracing::info!(target: AUDIT_TARGET, message = "operator access", rpc, session_id, tenant);
    }
}

/// A request that names one session by its `session_id`.
pub trait NamesSession {
    fn session_id(&self) -> &str;
}

macro_rules! names_session {
    ($($request:ty),* $(,)?) => {
        $(impl NamesSession for $request {
            fn session_id(&self) -> &str {
                &self.session_id
            }
        })*
    };
}

names_session!(
    pb::GetSessionRequest,
    pb::DeleteSessionRequest,
    pb::SubscribeRequest,
    pb::AbortRequest,
    pb::SubmitToolResultRequest,
    pb::CompactRequest,
    pb::GetDiffRequest,
    pb::DiagnoseRequest,
    pb::ReplyPermissionRequest,
);

/// The session `session_id` (already validated) if `caller` may see it: `NOT_FOUND` when it does not exist or is
/// another tenant's, the same status either way. Logs operator calls.
pub async fn session(
    engine: &Engine,
    caller: &Caller,
    rpc: &str,
    session_id: &str,
) -> Result<pb::Session, Status> {
    Ok(session_record(engine, caller, rpc, session_id).await?.0)
}

/// [`session`] with the stored bytes it was decoded from (the loop starts from them without reading again).
pub async fn session_record(
    engine: &Engine,
    caller: &Caller,
    rpc: &str,
    session_id: &str,
) -> Result<(pb::Session, Vec<u8>), Status> {
    let found = engine
        .store()
        .sessions()
        .get_session_record(session_id)
        .await
        .map_err(status::storage)?;
    audit(
        caller,
        rpc,
        session_id,
        found.as_ref().map_or("", |(s, _)| s.tenant.as_str()),
    );
    match found {
        Some((s, b)) if caller.sees(&s.tenant) => Ok((s, b)),
        _ => Err(status::session_not_found()),
    }
}

/// [`session_record`] for a `Prompt`: with the model the session's latest prompt ran with, read in the same round
/// trip (the prompt's model is resolved from it when it names none). With `known`, what this replica last knew of
/// the session when it knows it (no Redis): the prompt's begin checks that it is still current.
pub async fn session_for_prompt(
    engine: &Engine,
    caller: &Caller,
    session_id: &str,
    known: bool,
) -> Result<PromptSession, Status> {
    // Another tenant's session takes the same path as a missing one (a read of Redis, then NOT_FOUND), so how fast
    // the answer comes tells nothing about what this replica knows.
    let remembered = known
        .then(|| {
            engine
                .store()
                .sessions()
                .known_session_for_prompt(session_id)
        })
        .flatten()
        .filter(|(s, _, _)| caller.sees(&s.tenant));
    let found = match remembered {
        Some(found) => Some(found),
        None => engine
            .store()
            .sessions()
            .get_session_for_prompt(session_id)
            .await
            .map_err(status::storage)?,
    };
    audit(
        caller,
        "Prompt",
        session_id,
        found.as_ref().map_or("", |(s, _, _)| s.tenant.as_str()),
    );
    match found {
        Some((session, bytes, model)) if caller.sees(&session.tenant) => Ok(PromptSession {
            session,
            bytes,
            model,
        }),
        _ => Err(status::session_not_found()),
    }
}

/// The agent a caller selects (empty: `default`), if it exists and its tenant may select it: `INVALID_ARGUMENT`
/// for an agent that is not configured, `PERMISSION_DENIED` for one the caller's tenant may not select.
pub fn agent<'a>(
    config: &Config,
    caller: &Caller,
    field: &str,
    name: &'a str,
) -> Result<&'a str, Status> {
    let name = if name.is_empty() { "default" } else { name };
    if !config.agents.contains_key(name) {
        return Err(status::invalid(field, "no such agent"));
    }
    if !config.agent_allowed(caller, name) {
        return Err(status::agent_not_allowed(field, name));
    }
    Ok(name)
}
