//! `Compact`: a manual compaction of an idle session, and its events until its `done`.

use std::sync::Arc;

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use super::follow::{OutgoingStream, follow};
use super::prelude::{loop_status, open};
use crate::api::stream_end::Until;
use crate::api::stream_slots::StreamSlots;
use crate::api::validate;
use crate::engine::Engine;

pub(super) async fn compact(
    engine: &Arc<Engine>,
    slots: &Arc<StreamSlots>,
    request: Request<pb::CompactRequest>,
) -> Result<Response<OutgoingStream>, Status> {
    let (caller, req, _) = open(engine, request, "Compact", validate::compact).await?;
    let slot = slots.take(&caller)?;
    let start = engine
        .compact_now(&req.session_id, &req.model)
        .await
        .map_err(loop_status)?;
    Ok(Response::new(follow(
        engine.clone(),
        slot,
        req.session_id,
        start,
        Until::Done,
    )))
}
