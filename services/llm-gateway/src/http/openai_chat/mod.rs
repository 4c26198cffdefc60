//! `POST /v1/chat/completions`: the OpenAI Chat Completions API over the gateway's core.

pub mod request;
pub mod response;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};

use crate::generate::Gateway;
use crate::http::errors::ApiError;
use crate::http::sse::{self, Body};

/// What a streamed response sends after a silence: an SSE comment, so idle proxies keep the connection.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Answers one Chat Completions request.
pub async fn run(
    gateway: &Gateway,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, ApiError> {
    let (generation, shape) = crate::http::translate_body(body, request::translate).await?;
    let model = generation.model.clone();
    let events = crate::http::generation::start(gateway, headers, generation).await?;
    let id = crate::http::response_id("chatcmpl-");
    let created = crate::http::unix_now();
    if shape.stream {
        let mut encoder = response::ChunkEncoder::new(id, created, model, shape.include_usage);
        let body = sse::encoded(events, move |ev, out| encoder.push(ev, out), KEEP_ALIVE);
        Ok(crate::http::event_stream(body))
    } else {
        let reply = crate::http::generation::collect(events).await?;
        Ok(crate::http::json(
            StatusCode::OK,
            &response::completion(&id, created, &model, &reply),
        ))
    }
}
