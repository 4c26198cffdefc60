//! `SubmitToolResult`: the caller's result of a client tool call the loop asked for.

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use super::prelude::open;
use crate::api::{status, validate};
use crate::engine::Engine;

pub(super) async fn submit_tool_result(
    engine: &Engine,
    request: Request<pb::SubmitToolResultRequest>,
) -> Result<Response<pb::SubmitToolResultResponse>, Status> {
    let (_, r, _) = open(
        engine,
        request,
        "SubmitToolResult",
        validate::submit_tool_result,
    )
    .await?;
    engine
        .store()
        .mailboxes()
        .submit_tool_result(&r.session_id, &r.call_id, &r.output, r.is_error)
        .await
        .map_err(status::storage)?;
    Ok(Response::new(pb::SubmitToolResultResponse {}))
}
