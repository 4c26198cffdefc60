//! Anthropic Messages adapter (`POST /v1/messages`, docs/providers.md §3).
//!
//! - [`request`] builds the request body from a unified generation and applies every fix the Messages API needs
//!   before the request leaves (docs/providers.md §6): empty blocks and turns dropped, turns merged so roles
//!   alternate, a minimal user turn put first when the conversation opens with the assistant, tool-use ids rewritten, thinking replayed only to the model that produced it, prompt-cache markers,
//!   sampling parameters the model rejects dropped.
//! - [`decode`] turns the SSE stream into unified events; [`whole`] turns a whole (non-streaming) response into the
//!   stream events it is equivalent to.

mod decode;
mod request;
mod request_wire;
mod schema;
mod whole;

pub use decode::AnthropicDecoder;
pub(crate) use request::{ClaudeSampling, thinking_budget, token_plan};
pub(crate) use request_wire::Thinking;

use crate::adapter::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

/// The `anthropic-version` header value the adapter speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The request path, appended to a base URL such as `https://api.anthropic.com`.
pub const MESSAGES_PATH: &str = "/v1/messages";

/// The Anthropic Messages protocol.
#[derive(Debug, Clone, Copy, Default)]
pub struct Anthropic;

impl Adapter for Anthropic {
    fn protocol(&self) -> Protocol {
        Protocol::Anthropic
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError> {
        Ok(HttpRequest {
            path: MESSAGES_PATH.to_string(),
            // No `anthropic-beta`: nothing the adapter sends needs a beta feature yet.
            headers: vec![(
                "anthropic-version".to_string(),
                ANTHROPIC_VERSION.to_string(),
            )],
            body: request::body(generation, target)?,
        })
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        vec![("x-api-key", api_key.to_string())]
    }

    fn decoder(&self, _target: &Target<'_>) -> Box<dyn Decoder> {
        Box::new(AnthropicDecoder::new())
    }

    fn min_thinking_budget(&self, _target: &Target<'_>) -> u32 {
        request::MIN_THINKING_BUDGET_TOKENS
    }
}

#[cfg(test)]
mod tests;
