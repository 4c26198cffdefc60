//! `POST /v1/responses`: the OpenAI Responses API over the gateway's core, stateless (docs/gateway.md "OpenAI
//! Responses").
//!
//! - [`request`] and [`input`] translate the body into the unified request;
//! - [`events`] streams the unified events as Responses events, [`object`] builds the `response` object;
//! - [`replay`] carries reasoning replay data through `encrypted_content`.

pub mod events;
pub mod input;
pub mod object;
pub mod replay;
pub mod request;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};

use crate::generate::Gateway;
use crate::http::errors::ApiError;
use crate::http::sse::{self, Body};
use crate::protocol::Protocol;

/// Answers one Responses request.
pub async fn run(
    gateway: &Gateway,
    caller: &crate::keys::Caller,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response<Body>, ApiError> {
    let (
        mut generation,
        extras,
        request::Shape {
            stream,
            echo,
            origins,
        },
    ) = crate::http::translate_body(body, request::translate).await?;
    let served = crate::http::settle(gateway, &mut generation, extras, Protocol::OpenaiResponses)?;
    if let Some(r) = &served {
        // Reasoning sent back from elsewhere belongs to the model it is sent to now.
        let id = r.alias_of.as_deref().unwrap_or(&r.model.id);
        crate::http::unified::fill_model(&mut generation, id);
    }
    let head = object::Head {
        id: crate::http::response_id("resp_"),
        created_at: crate::http::unix_now(),
        model: generation.model.clone(),
        echo,
    };
    let started = crate::http::generation::start(gateway, caller, headers, generation)
        .await
        .map_err(|e| e.located(&origins))?;
    let protocol = started.protocol;
    if stream {
        let mut encoder = events::EventEncoder::new(head, protocol);
        let body = sse::encoded(
            started.events,
            move |ev, out| encoder.push(ev, out),
            sse::COMMENT_KEEP_ALIVE,
        );
        return Ok(crate::http::relaying(
            crate::http::event_stream(body),
            &started.headers,
        ));
    }
    let reply = crate::http::generation::collect(started.events, protocol).await?;
    let finish = reply.finish.clone().unwrap_or_default();
    let output = object::items(&reply);
    let body = object::response(
        &head,
        object::status_of(&finish),
        &output,
        finish.usage.as_ref(),
        None,
    );
    Ok(crate::http::relaying(
        crate::http::json(StatusCode::OK, &body),
        &started.headers,
    ))
}
