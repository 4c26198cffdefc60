//! `ListMessages`: one page of a session's messages, by bytes, resuming inside a message when a page ended there.

use llm_proto::sessions as pb;
use tonic::{Request, Response, Status};

use crate::api::{access, paging, status, validate};
use crate::engine::Engine;

pub(super) async fn list_messages(
    engine: &Engine,
    request: Request<pb::ListMessagesRequest>,
) -> Result<Response<pb::ListMessagesResponse>, Status> {
    let caller = access::caller(&request)?;
    let req = request.into_inner();
    validate::session_id(&req.session_id)?;
    let size = validate::page_size(req.page_size, validate::MESSAGE_PAGE)?;
    let cursor = validate::message_cursor(&req.page_token)?;
    let session = access::session(engine, &caller, "ListMessages", &req.session_id).await?;
    let store = engine.store().messages();
    // A token inside a message: the rest of its parts first.
    let mut first = None;
    if let Some((message_id, Some(part_id))) = cursor
        && let Some(m) = store
            .get_message(&session.id, message_id)
            .await
            .map_err(status::storage)?
    {
        first = Some(paging::rest_of(m, part_id));
    }
    let after = cursor.map(|(message_id, _)| message_id);
    let (messages, next) = store
        .list_messages(&session.id, after, size)
        .await
        .map_err(status::storage)?;
    let all = first.into_iter().chain(messages).collect();
    let (messages, next) = paging::fit_messages(all, next, size, paging::PAGE_BYTES);
    Ok(Response::new(pb::ListMessagesResponse {
        messages,
        next_page_token: next.unwrap_or_default(),
    }))
}
