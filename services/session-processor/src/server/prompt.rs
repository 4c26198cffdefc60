//! `Prompt`: a prompt begun (or queued behind the running loop; or, with an idempotency key already claimed, the first
//! call's stream again) and its events until its answer is done.

use std::sync::Arc;
use std::time::Duration;

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use super::follow::{OutgoingStream, follow};
use super::prelude::loop_status;
use crate::api::stream_end::Until;
use crate::api::stream_slots::StreamSlots;
use crate::api::{access, status, validate};
use crate::config::Caller;
use crate::engine::{Accepted, Engine, LoopError, PromptSession};

pub(super) async fn prompt(
    engine: &Arc<Engine>,
    slots: &Arc<StreamSlots>,
    request: Request<pb::PromptRequest>,
) -> Result<Response<OutgoingStream>, Status> {
    let caller = access::caller(&request)?;
    // The caller's W3C trace context (when valid), passed on to every gateway call of the loop this prompt starts.
    let trace = service_kit::trace_context::from_metadata(request.metadata());
    let req = request.into_inner();
    validate::prompt(&req)?;
    // Before anything is written: a prompt whose stream cannot open is not run.
    let slot = slots.take(&caller)?;
    let read = session_for(engine, &caller, &req, true).await?;
    let session_id = req.session_id.clone();
    let accepted = if req.idempotency_key.is_empty() {
        begin(engine, &caller, &req, &trace, read).await?
    } else {
        let start = engine
            .events()
            .last_event_id(&session_id)
            .await
            .map_err(status::storage)?;
        match engine
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
            None => begin(engine, &caller, &req, &trace, read).await?,
        }
    };
    let until = accepted.queued.map_or(Until::Done, Until::Answered);
    Ok(Response::new(follow(
        engine.clone(),
        slot,
        session_id,
        accepted.start,
        until,
    )))
}

/// The session a prompt runs in, if the caller may see it, and the agent it selects (the prompt's, else the
/// session's), if the caller's tenant may (still) select it. With `known`, from what this replica last knew of
/// the session when it knows it (see [`begin`]).
async fn session_for(
    engine: &Engine,
    caller: &Caller,
    req: &pb::PromptRequest,
    known: bool,
) -> Result<PromptSession, Status> {
    let read = access::session_for_prompt(engine, caller, &req.session_id, known).await?;
    let agent = if req.agent.is_empty() {
        &read.session.agent
    } else {
        &req.agent
    };
    access::agent(engine.config(), caller, "agent", agent)?;
    Ok(read)
}

/// Begins a prompt validated against `read`; when Redis no longer holds the record or prompt model `read` had
/// (this replica's knowledge was stale, or the session changed in between), nothing was written, and the
/// prompt is validated again against a fresh read and begun again.
async fn begin(
    engine: &Arc<Engine>,
    caller: &Caller,
    req: &pb::PromptRequest,
    trace: &[(String, String)],
    mut read: PromptSession,
) -> Result<Accepted, Status> {
    for _ in 0..STALE_ATTEMPTS {
        match engine.prompt(req, trace.to_vec(), read).await {
            Err(LoopError::Stale) => read = session_for(engine, caller, req, false).await?,
            started => return started.map_err(loop_status),
        }
    }
    Err(Status::aborted(
        "the session kept changing while the prompt began; send it again",
    ))
}

/// Attempts of a prompt's begin against a session that keeps changing under it (each attempt reads it afresh).
const STALE_ATTEMPTS: usize = 4;
