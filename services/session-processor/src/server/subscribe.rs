//! `Subscribe`: a session's events after an id (or from now on), until the caller leaves.

use std::sync::Arc;

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use super::follow::{OutgoingStream, follow};
use super::prelude::open;
use crate::api::stream_end::Until;
use crate::api::stream_slots::StreamSlots;
use crate::api::{status, validate};
use crate::engine::Engine;

pub(super) async fn subscribe(
    engine: &Arc<Engine>,
    slots: &Arc<StreamSlots>,
    request: Request<pb::SubscribeRequest>,
) -> Result<Response<OutgoingStream>, Status> {
    let (caller, req, _) = open(engine, request, "Subscribe", validate::subscribe).await?;
    let slot = slots.take(&caller)?;
    let after = if req.after_event_id.is_empty() {
        engine
            .events()
            .last_event_id(&req.session_id)
            .await
            .map_err(status::storage)?
    } else {
        req.after_event_id
    };
    Ok(Response::new(follow(
        engine.clone(),
        slot,
        req.session_id,
        after,
        Until::Never,
    )))
}
