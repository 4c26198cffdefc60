//! `POST /v1/messages`: the Anthropic Messages API over the gateway's core.

pub mod request;
pub mod response;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};

use crate::generate::Gateway;
use crate::http::errors::ApiError;
use crate::http::sse::{self, Body};
use crate::protocol::Protocol;

/// What a streamed response sends after a silence, as Anthropic's own streams do.
pub(crate) const PING: &[u8] = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// Answers one Messages request.
pub async fn run(
    gateway: &Gateway,
    caller: &crate::keys::Caller,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, ApiError> {
    let (mut generation, mut extras, shape) =
        crate::http::translate_body(body, request::translate).await?;
    // Beta features are Anthropic's: asked of an Anthropic provider, left out for any other (a client sends its
    // betas whatever the model).
    for beta in headers.get_all("anthropic-beta") {
        if let Ok(beta) = beta.to_str() {
            extras.hint_header("anthropic-beta", beta);
        }
    }
    let served = crate::http::settle(gateway, &mut generation, extras, Protocol::Anthropic)?;
    if let Some(r) = &served {
        // The thinking a caller sends back was made by the model it addresses.
        let id = r.alias_of.as_deref().unwrap_or(&r.model.id);
        crate::http::unified::fill_model(&mut generation, id);
    }
    let model = generation.model.clone();
    let started = crate::http::generation::start(gateway, caller, headers, generation)
        .await
        .map_err(|e| e.located(&shape.origins))?;
    let protocol = started.protocol;
    let id = crate::http::response_id("msg_");
    if shape.stream {
        let mut encoder = response::EventEncoder::new(id, model, protocol);
        let body = sse::encoded(started.events, move |ev, out| encoder.push(ev, out), PING);
        Ok(crate::http::relaying(
            crate::http::event_stream(body),
            &started.headers,
        ))
    } else {
        let reply = crate::http::generation::collect(started.events, protocol).await?;
        let body = response::message(&id, &model, &reply);
        Ok(crate::http::relaying(
            crate::http::json(StatusCode::OK, &body),
            &started.headers,
        ))
    }
}
