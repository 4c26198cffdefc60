//! `Abort`: stops the session's loop when it runs on this replica.

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use super::prelude::{open, session_id};
use crate::engine::Engine;

pub(super) async fn abort(
    engine: &Engine,
    request: Request<pb::AbortRequest>,
) -> Result<Response<pb::AbortResponse>, Status> {
    let (_, _, session) = open(engine, request, "Abort", session_id).await?;
    Ok(Response::new(pb::AbortResponse {
        aborted: engine.abort(&session.id),
    }))
}
