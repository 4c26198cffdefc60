//! `POST /v1/chat/completions`: the OpenAI Chat Completions API over the gateway's core.

pub mod request;
pub mod response;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};

use crate::generate::Gateway;
use crate::http::errors::ApiError;
use crate::http::sse::{self, Body};
use crate::protocol::Protocol;

/// Answers one Chat Completions request.
pub async fn run(
    gateway: &Gateway,
    caller: &crate::keys::Caller,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, ApiError> {
    let (mut generation, extras, shape) =
        crate::http::translate_body(body, request::translate).await?;
    crate::http::settle(gateway, &mut generation, extras, Protocol::OpenaiChat)?;
    let model = generation.model.clone();
    let started = crate::http::generation::start(gateway, caller, headers, generation)
        .await
        .map_err(|e| e.located(&shape.origins))?;
    let protocol = started.protocol;
    let id = crate::http::response_id("chatcmpl-");
    let created = crate::http::unix_now();
    if shape.stream {
        let mut encoder =
            response::ChunkEncoder::new(id, created, model, shape.include_usage, protocol);
        let body = sse::encoded(
            started.events,
            move |ev, out| encoder.push(ev, out),
            sse::COMMENT_KEEP_ALIVE,
        );
        Ok(crate::http::relaying(
            crate::http::event_stream(body),
            &started.headers,
        ))
    } else {
        let reply = crate::http::generation::collect(started.events, protocol).await?;
        let body = response::completion(&id, created, &model, &reply);
        Ok(crate::http::relaying(
            crate::http::json(StatusCode::OK, &body),
            &started.headers,
        ))
    }
}
