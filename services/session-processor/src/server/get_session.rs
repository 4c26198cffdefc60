//! `GetSession`: the session with its live status.

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use super::prelude::{open, session_id};
use crate::api::status;
use crate::engine::Engine;

pub(super) async fn get_session(
    engine: &Engine,
    request: Request<pb::GetSessionRequest>,
) -> Result<Response<pb::GetSessionResponse>, Status> {
    let (_, _, mut session) = open(engine, request, "GetSession", session_id).await?;
    // RETRY (attempt, next attempt, error) while the loop waits to retry a step, BUSY under a live lease, IDLE.
    session.status = Some(
        engine
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
