//! `POST /v1/chat/completions`: the OpenAI Chat Completions API over the gateway's core.

pub mod request;
pub mod response;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderMap, Response, StatusCode};

use crate::generate::Gateway;
use crate::http::errors::{ApiError, Dialect};
use crate::http::sse::{self, Body};

/// Silence after which a streamed response gets an SSE comment, so idle proxies keep the connection.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Answers one Chat Completions request.
pub async fn handle(gateway: &Gateway, headers: &HeaderMap, body: Bytes) -> Response<Body> {
    match run(gateway, headers, body).await {
        Ok(r) => r,
        Err(e) => crate::http::error(Dialect::OpenAi, &e),
    }
}

async fn run(
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
        let frames = events.map(move |ev| {
            let mut out = BytesMut::new();
            encoder.push(ev, &mut out);
            out.freeze()
        });
        let body = sse::body(frames, Bytes::from_static(b": keep-alive\n\n"), KEEP_ALIVE);
        Ok(crate::http::event_stream(body))
    } else {
        let reply = crate::http::generation::collect(events).await?;
        Ok(crate::http::json(
            StatusCode::OK,
            &response::completion(&id, created, &model, &reply),
        ))
    }
}
