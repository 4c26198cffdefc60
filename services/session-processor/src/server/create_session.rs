//! `CreateSession`: a new idle session of the caller's tenant, within its quota, running an agent it may select.

use std::time::SystemTime;

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use crate::api::{access, catalog, status, validate};
use crate::config::usd_to_nano;
use crate::engine::Engine;
use crate::ids;

pub(super) async fn create_session(
    engine: &Engine,
    request: Request<pb::CreateSessionRequest>,
) -> Result<Response<pb::CreateSessionResponse>, Status> {
    let caller = access::caller(&request)?;
    let req = request.into_inner();
    validate::create_session(&req)?;
    let config = engine.config();
    let agent = access::agent(config, &caller, "agent", &req.agent)?.to_string();
    if !req.default_model.is_empty() {
        catalog::check_model(engine, "default_model", &req.default_model).await?;
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
    engine
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
