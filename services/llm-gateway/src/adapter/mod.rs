//! Language adapters: one per provider wire protocol, each a pure translation.
//!
//! An adapter has two halves and no I/O of its own:
//! - [`Adapter::build`] turns a unified [`pb::Generation`] into the provider's HTTP request (path, headers, JSON
//!   body), applying every fix the provider needs (docs/providers.md §6);
//! - [`Adapter::decoder`] returns a [`Decoder`], a state machine fed one SSE frame at a time that pushes unified
//!   [`Event`]s.
//!
//! The only place that talks HTTP to providers is [`transport`]; the response framings (SSE, the AWS eventstream, one JSON
//! body) are [`framing`]; [`registry`] maps each protocol to its adapter.

pub mod anthropic;
pub mod bedrock;
pub(crate) mod cloud;
pub(crate) mod common;
pub(crate) mod count;
pub(crate) mod embed;
pub mod framing;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;
mod registry;
#[cfg(any(test, feature = "fuzzing"))]
pub mod testing;
pub(crate) mod transport;

use llm_proto::gateway as pb;

use crate::catalog::ModelInfo;
use crate::event::Event;

pub use crate::protocol::Protocol;

/// What an adapter needs to know about where the request goes.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The catalog entry of the model (provider model name, limits, capabilities).
    pub model: &'a ModelInfo,
    /// An Azure OpenAI provider's REST surface and `api-version`; `None` for every other provider (and an Azure
    /// adapter then addresses the v1 surface).
    pub azure: Option<&'a cloud::azure::AzureApi>,
}

impl<'a> Target<'a> {
    /// The target of `model` on a provider with no addressing settings of its own.
    pub fn new(model: &'a ModelInfo) -> Self {
        Target { model, azure: None }
    }
}

/// A provider HTTP request, ready for the transport. Authentication is added by the transport, never here.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    /// Path appended to the provider's configured base URL, e.g. `/chat/completions` or `/v1/messages`.
    pub path: String,
    /// Headers other than authentication (e.g. `anthropic-version`), lower-case names.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: serde_json::Value,
}

impl HttpRequest {
    /// The request with its body serialised, as the transport sends it. Serialising a large body (tens of thousands
    /// of tool schemas) is CPU work proportional to its size, so it happens where the request is prepared (off the
    /// async workers for a large request), once, and retries of the request send the same bytes.
    pub fn encode(self) -> EncodedRequest {
        EncodedRequest {
            path: self.path,
            headers: self.headers,
            // A JSON value always serialises (its map keys are strings).
            body: bytes::Bytes::from(self.body.to_string()),
        }
    }
}

/// A provider request whose body is serialised: what [`transport::Transport::open_with`] sends.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedRequest {
    /// Path appended to the provider's configured base URL.
    pub path: String,
    /// Headers other than authentication, lower-case names.
    pub headers: Vec<(String, String)>,
    /// The JSON body's bytes.
    pub body: bytes::Bytes,
}

/// A request the adapter cannot translate; becomes `INVALID_ARGUMENT` naming `field`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct BuildError {
    /// Path of the offending request field, e.g. `generation.messages[2].parts[0]`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl BuildError {
    /// A new build error for `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        BuildError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// One provider protocol's pure translation.
pub trait Adapter: Send + Sync {
    /// The protocol this adapter speaks.
    fn protocol(&self) -> Protocol;

    /// Translates the unified request into the provider's HTTP request.
    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError>;

    /// Authentication headers for `api_key`. The transport marks them sensitive.
    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)>;

    /// Authentication headers for an OAuth2 access token, for providers with a token source (Vertex AI, Azure with
    /// Entra ID): `authorization: Bearer <token>`.
    fn token_headers(&self, token: &str) -> Vec<(&'static str, String)> {
        vec![("authorization", format!("Bearer {token}"))]
    }

    /// A fresh decoder for one response stream.
    fn decoder(&self, target: &Target<'_>) -> Box<dyn Decoder>;

    /// The smallest explicit thinking budget (`reasoning.budget_tokens`) the provider accepts for this model; 0 when
    /// it has no minimum or takes no budget. A smaller one is refused before any request is sent.
    fn min_thinking_budget(&self, target: &Target<'_>) -> u32 {
        let _ = target;
        0
    }

    /// How the provider frames its response stream.
    fn framing(&self) -> framing::Framing {
        framing::Framing::Sse
    }

    /// How the provider frames the response to `request`, a request [`build`](Adapter::build) made. The default is
    /// [`framing`](Adapter::framing); Bedrock answers its non-streaming `Converse` with one JSON document.
    fn framing_of(&self, request: &HttpRequest) -> framing::Framing {
        let _ = request;
        self.framing()
    }

    /// A fresh decoder for the response to the request [`build`](Adapter::build) made from `generation`. Adapters
    /// whose decoding depends on the request override it (OpenAI strict mode cleans tool-call arguments against
    /// the caller's schemas, see [`common::strict`]); the default is [`decoder`](Adapter::decoder).
    fn decoder_for(&self, target: &Target<'_>, generation: &pb::Generation) -> Box<dyn Decoder> {
        let _ = generation;
        self.decoder(target)
    }
}

/// Decodes one provider stream, frame by frame, into unified events.
///
/// Contract: events come out in order; after a `Finish` or an `Error` the decoder is done and pushes nothing more.
/// A malformed frame becomes an `Event::Error` of kind `provider_error`, never a panic.
pub trait Decoder: Send {
    /// Feeds one SSE frame (`event` is the `event:` name or empty; `data` the joined `data:` lines).
    fn frame(&mut self, event: &str, data: &str, out: &mut Vec<Event>);

    /// Feeds a JSON value that arrived outside SSE framing (Gemini's bare error object).
    fn bare_json(&mut self, json: &str, out: &mut Vec<Event>) {
        self.frame("", json, out);
    }

    /// Feeds a whole JSON response body: the provider answered with one document instead of a stream (its
    /// non-streaming response, as some servers give to a streaming request, or Bedrock's `Converse`), or with an
    /// error object under a 2xx status. Decodes it into the same events its stream would have carried, ending with
    /// the finish or the error.
    fn whole(&mut self, json: &str, out: &mut Vec<Event>);

    /// Feeds one `application/vnd.amazon.eventstream` message. The default hands its `:event-type` and payload to
    /// [`frame`](Decoder::frame); the Bedrock decoder reads the exception headers too.
    fn message(&mut self, message: &framing::eventstream::Message<'_>, out: &mut Vec<Event>) {
        let kind = message.header_str(":event-type").unwrap_or("");
        match std::str::from_utf8(message.payload) {
            Ok(payload) => self.frame(kind, payload, out),
            Err(_) => out.push(Event::Error(crate::error::ProviderError::malformed(
                "an eventstream payload is not UTF-8",
            ))),
        }
    }

    /// The body ended. Flushes what is pending (tool calls, the finish event) or reports a truncated stream.
    fn end(&mut self, out: &mut Vec<Event>);

    /// True once a `Finish` or `Error` has been pushed.
    fn is_done(&self) -> bool;

    /// A decoder for a retry of the same request: the same configuration, none of this stream's state.
    fn restart(&self) -> Box<dyn Decoder>;
}

/// The type of a frame whose body the decoder could not parse as one of its events: the body's `type` field when it
/// has a non-empty one (what names events on the Anthropic and Responses streams, whatever the `event:` line says),
/// else the `event:` name. Lets a decoder tell a broken known event from an unknown one it may skip.
pub(crate) fn frame_type<'a>(event: &'a str, data: &'a str) -> std::borrow::Cow<'a, str> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: std::borrow::Cow<'a, str>,
    }
    match serde_json::from_str::<Head<'_>>(data) {
        Ok(head) if !head.kind.is_empty() => head.kind,
        _ => std::borrow::Cow::Borrowed(event),
    }
}
