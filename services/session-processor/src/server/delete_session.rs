//! `DeleteSession`: the loop stopped, every key of the session deleted, its followers told, its snapshots removed.

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use super::prelude::{open, session_id};
use crate::api::status;
use crate::engine::Engine;

pub(super) async fn delete_session(
    engine: &Engine,
    request: Request<pb::DeleteSessionRequest>,
) -> Result<Response<pb::DeleteSessionResponse>, Status> {
    let (_, _, session) = open(engine, request, "DeleteSession", session_id).await?;
    let id = &session.id;
    engine.abort(id);
    if !engine
        .store()
        .sessions()
        .delete_session(id)
        .await
        .map_err(status::storage)?
    {
        return Err(status::session_not_found());
    }
    // Its streams here end now (`NOT_FOUND`); those on other replicas at their next look, within seconds.
    engine.events().wake_followers(id);
    // The session's snapshots go with it (a replica whose snapshot root is not shared removes its own copy at
    // its next sweep).
    if let Some(dir) = crate::snapshot::session_dir(&engine.config().snapshots, id) {
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
