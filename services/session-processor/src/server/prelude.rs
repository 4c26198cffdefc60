//! What the handlers share: the prelude of a call on one session (the caller, the request checked, the session if the
//! caller may see it), and the statuses of the engine's errors.

use llm_proto::sessions as pb;
use tonic::{Request, Status};

use crate::api::access::NamesSession;
use crate::api::{access, status, validate};
use crate::config::Caller;
use crate::engine::{Engine, LoopError};

/// The first steps of every handler on one session: the caller, the request checked by `check` (an
/// [`validate`] function), and the session the request names if the caller may see it (`NOT_FOUND`
/// otherwise, whether it does not exist or is another tenant's).
pub(super) async fn open<T: NamesSession>(
    engine: &Engine,
    request: Request<T>,
    rpc: &str,
    check: fn(&T) -> Result<(), Status>,
) -> Result<(Caller, T, pb::Session), Status> {
    let caller = access::caller(&request)?;
    let req = request.into_inner();
    check(&req)?;
    let session = access::session(engine, &caller, rpc, req.session_id()).await?;
    Ok((caller, req, session))
}

/// The check of a request that holds nothing but the session's id.
pub(super) fn session_id<T: NamesSession>(req: &T) -> Result<(), Status> {
    validate::session_id(req.session_id())
}

pub(super) fn loop_status(e: LoopError) -> Status {
    match e {
        LoopError::NotFound(_) => status::session_not_found(),
        LoopError::Store(e) => status::storage(e),
        LoopError::Precondition(why) => Status::failed_precondition(why),
        LoopError::Stale => Status::aborted(e.to_string()),
    }
}
