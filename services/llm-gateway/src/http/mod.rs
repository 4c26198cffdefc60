//! The HTTP front door: OpenAI- and Anthropic-compatible endpoints on their own listener (`server.http_listen`, off
//! by default), so code written against either vendor's SDK reaches any provider the gateway serves by changing its
//! base URL and key (docs/gateway.md "HTTP front door").
//!
//! Each endpoint is a pure translation at both ends around the same core as the gRPC API ([`generation`]):
//! - [`openai_chat`]: `POST /v1/chat/completions`;
//! - [`responses`]: `POST /v1/responses`, stateless;
//! - [`anthropic`]: `POST /v1/messages`;
//! - [`models`]: `GET /v1/models` and `GET /v1/models/{id}` from the catalog;
//! - [`embeddings`]: `POST /v1/embeddings`, and [`count_tokens`]: `POST /v1/messages/count_tokens`, over the
//!   calls that are not generations ([`crate::calls`]).
//!
//! [`auth`] checks the caller's token, [`body`] reads request bodies strictly, [`fields`] decides what happens to
//! the fields an endpoint does not map, [`errors`] renders failures in each API's shape (keeping what the provider
//! said, [`upstream`]), [`sse`] frames streamed responses, [`listener`] accepts connections (HTTP/1.1 and HTTP/2 without
//! TLS).

pub mod anthropic;
pub mod auth;
pub mod body;
pub mod calls;
pub mod count_tokens;
pub mod embeddings;
pub mod errors;
pub mod fields;
pub mod generation;
pub mod listener;
pub mod models;
pub mod openai_chat;
pub mod origins;
pub mod responses;
pub mod sse;
pub mod unified;
pub mod upstream;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::generate::Gateway;
use errors::{ApiError, Class, Dialect};
use sse::Body;

pub use listener::serve;

/// Answers one request.
pub async fn handle<B>(gateway: &Gateway, req: Request<B>) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let path = req.uri().path().to_string();
    let dialect = if path.starts_with("/v1/messages") {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    };
    let config = gateway.config();
    let caller = match auth::check(gateway, req.headers()) {
        Ok(caller) => caller,
        Err(e) => return error(dialect, &e),
    };
    let method = req.method().clone();
    match (method, path.as_str()) {
        (Method::POST, "/v1/chat/completions" | "/v1/messages" | "/v1/responses") => {
            let (parts, body) = req.into_parts();
            let answer = match read_body(body, config.max_request_bytes).await {
                Ok(body) if dialect == Dialect::Anthropic => {
                    anthropic::run(gateway, &caller, &parts.headers, body).await
                }
                Ok(body) if path == "/v1/responses" => {
                    responses::run(gateway, &caller, &parts.headers, body).await
                }
                Ok(body) => openai_chat::run(gateway, &caller, &parts.headers, body).await,
                Err(e) => Err(e),
            };
            answer.unwrap_or_else(|e| error(dialect, &e))
        }
        (Method::POST, "/v1/embeddings" | "/v1/messages/count_tokens") => {
            let (parts, body) = req.into_parts();
            let answer = match read_body(body, config.max_request_bytes).await {
                Ok(body) if dialect == Dialect::Anthropic => {
                    count_tokens::run(gateway, &caller, &parts.headers, body).await
                }
                Ok(body) => embeddings::run(gateway, &caller, &parts.headers, body).await,
                Err(e) => Err(e),
            };
            answer.unwrap_or_else(|e| error(dialect, &e))
        }
        (Method::GET, "/v1/models") => json(StatusCode::OK, &models::list(&config, &caller)),
        (Method::GET, p) if p.starts_with("/v1/models/") => {
            match models::get(gateway, &caller, &p["/v1/models/".len()..]) {
                Ok(m) => json(StatusCode::OK, &m),
                Err(e) => error(dialect, &e),
            }
        }
        (
            _,
            "/v1/chat/completions"
            | "/v1/messages"
            | "/v1/models"
            | "/v1/responses"
            | "/v1/embeddings"
            | "/v1/messages/count_tokens",
        ) => error(
            dialect,
            &ApiError::new(
                Class::MethodNotAllowed,
                format!("{} is not served on {path}", req.method()),
            ),
        ),
        _ => error(
            dialect,
            &ApiError::new(
                Class::NotFound,
                format!(
                    "no such endpoint: {path} (served: POST /v1/chat/completions, POST /v1/responses, \
                     POST /v1/messages, POST /v1/messages/count_tokens, POST /v1/embeddings, GET /v1/models)"
                ),
            ),
        ),
    }
}

/// The request body, refused when larger than `max` bytes.
async fn read_body<B>(body: B, max: usize) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let bytes = http_body_util::Limited::new(body, max)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                ApiError::new(
                    Class::TooLarge,
                    format!("the request body is larger than {max} bytes"),
                )
            } else {
                ApiError::new(
                    Class::InvalidRequest,
                    format!("the request body could not be read: {e}"),
                )
            }
        })?
        .to_bytes();
    Ok(bytes)
}

/// Bodies above this many bytes are parsed and translated off the async workers, as large gRPC requests are
/// prepared ([`crate::offload`]): the work grows with the size and would hold an async worker.
const LARGE_BODY_BYTES: usize = 256 * 1024;

/// Parses `body` as JSON and translates it with `translate`, off the async workers when the body is large.
pub async fn translate_body<T: Send + 'static>(
    body: Bytes,
    translate: fn(Value) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let place = crate::offload::Where::for_bytes(body.len(), LARGE_BODY_BYTES);
    crate::offload::run(place, move || translate(body::json(&body)?)).await
}

/// Resolves the model `generation` names and puts `extras` into it for a door speaking `door`
/// ([`fields::Extras::settle`]); the resolution when the model is served (an unknown one is left for the core to
/// report).
pub fn settle(
    gateway: &Gateway,
    generation: &mut llm_proto::gateway::Generation,
    extras: fields::Extras,
    door: crate::protocol::Protocol,
) -> Result<Option<crate::generate::Resolved>, ApiError> {
    let served = gateway.resolve(&generation.model).ok();
    extras.settle(generation, door, served.as_ref().map(|r| r.model.protocol))?;
    Ok(served)
}

/// A JSON response.
pub fn json(status: StatusCode, body: &Value) -> Response<Body> {
    let mut r = Response::new(sse::full(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// An error response in `dialect`, with the provider's relayed headers and `retry-after` when the error carries
/// one.
pub fn error(dialect: Dialect, e: &ApiError) -> Response<Body> {
    let mut r = relaying(json(e.status(dialect), &e.body(dialect)), &e.headers());
    if dialect == Dialect::OpenAi && e.class == Class::Authentication {
        r.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
    }
    r
}

/// `response` with `headers` added (the provider's relayed ones, names already lower-case and values checked; one
/// that is not a valid header is left out).
pub fn relaying(mut response: Response<Body>, headers: &[(String, String)]) -> Response<Body> {
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// A streamed `text/event-stream` response.
pub fn event_stream(body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    // Tells reverse proxies (nginx) not to buffer the stream.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// A fresh response id: `prefix` and 24 random letters and digits.
pub fn response_id(prefix: &str) -> String {
    use rand::Rng;
    let mut id = String::with_capacity(prefix.len() + 24);
    id.push_str(prefix);
    id.extend(
        rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(24)
            .map(char::from),
    );
    id
}

/// Now, in Unix seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
