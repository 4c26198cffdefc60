//! `ListSessions`: one page of the sessions the caller may see (its tenant's, or every one for an operator), newest
//! first, each with its live status.

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use crate::api::{access, paging, status, validate};
use crate::config::Caller;
use crate::engine::Engine;
use crate::store::Scope;

pub(super) async fn list_sessions(
    engine: &Engine,
    request: Request<pb::ListSessionsRequest>,
) -> Result<Response<pb::ListSessionsResponse>, Status> {
    let caller = access::caller(&request)?;
    let req = request.into_inner();
    let size = validate::page_size(req.page_size, validate::SESSION_PAGE)?;
    let after = validate::session_cursor(&req.page_token)?;
    let scope = match &caller {
        Caller::Operator => Scope::All,
        Caller::Tenant(own) => Scope::Tenant(own),
    };
    access::audit(&caller, "ListSessions", "", "*");
    let store = engine.store();
    let (mut listed, next) = store
        .index()
        .list_sessions(scope, size, after)
        .await
        .map_err(status::storage)?;
    let ids: Vec<&str> = listed.iter().map(|l| l.session.id.as_str()).collect();
    let statuses = store
        .statuses()
        .live_statuses(&ids)
        .await
        .map_err(status::storage)?;
    for (l, status) in listed.iter_mut().zip(statuses) {
        l.session.status = Some(status);
    }
    let items = listed.into_iter().map(|l| (l.cursor, l.session)).collect();
    let (sessions, next) = paging::fit(items, next, paging::PAGE_BYTES);
    Ok(Response::new(pb::ListSessionsResponse {
        sessions,
        next_page_token: next.unwrap_or_default(),
    }))
}
