//! `POST /v1/messages`: the Anthropic Messages API over the gateway's core.

pub mod request;
pub mod response;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{HeaderMap, Response, StatusCode};

use crate::generate::Gateway;
use crate::http::errors::{ApiError, Dialect};
use crate::http::sse::{self, Body};

/// Silence after which a streamed response gets a `ping` event, as Anthropic's own streams do.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Answers one Messages request.
pub async fn handle(gateway: &Gateway, headers: &HeaderMap, body: Bytes) -> Response<Body> {
    match run(gateway, headers, body).await {
        Ok(r) => r,
        Err(e) => crate::http::error(Dialect::Anthropic, &e),
    }
}

async fn run(
    gateway: &Gateway,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, ApiError> {
    let (generation, stream) = crate::http::translate_body(body, request::translate).await?;
    let model = generation.model.clone();
    let events = crate::http::generation::start(gateway, headers, generation).await?;
    let id = crate::http::response_id("msg_");
    if stream {
        let mut encoder = response::EventEncoder::new(id, model);
        let frames = events.map(move |ev| {
            let mut out = BytesMut::new();
            encoder.push(ev, &mut out);
            out.freeze()
        });
        let ping = Bytes::from_static(b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
        Ok(crate::http::event_stream(sse::body(
            frames, ping, KEEP_ALIVE,
        )))
    } else {
        let reply = crate::http::generation::collect(events).await?;
        Ok(crate::http::json(
            StatusCode::OK,
            &response::message(&id, &model, &reply),
        ))
    }
}
