//! `ReplyPermission`: the caller's reply to a permission request the loop asked.

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use super::prelude::open;
use crate::api::{status, validate};
use crate::engine::Engine;

pub(super) async fn reply_permission(
    engine: &Engine,
    request: Request<pb::ReplyPermissionRequest>,
) -> Result<Response<pb::ReplyPermissionResponse>, Status> {
    let (_, r, _) = open(
        engine,
        request,
        "ReplyPermission",
        validate::reply_permission,
    )
    .await?;
    engine
        .store()
        .mailboxes()
        .reply_permission(&r.session_id, &r.permission_id, r.allow)
        .await
        .map_err(status::storage)?;
    Ok(Response::new(pb::ReplyPermissionResponse {}))
}
