//! AWS Bedrock Converse adapter (`POST /model/{modelId}/converse-stream`, docs/providers.md "Bedrock").
//!
//! - [`request`] builds the Converse body (messages, system blocks, tool config, cache points, reasoning through
//!   `additionalModelRequestFields`) with the fixes the API needs;
//! - [`decode`] turns the eventstream messages (`messageStart` … `metadata`, and exception messages) into unified
//!   events;
//! - [`auth`] resolves the AWS credentials and signs each request with [`sigv4`] once its body bytes are known (the
//!   transport calls it: the signature covers the exact body).
//!
//! The model id goes into the path percent-encoded (a `:` of `anthropic.claude-…-v1:0` becomes `%3A`), so
//! inference-profile ids (`us.anthropic.…`, `eu.…`, `global.…`) and ARNs work unchanged.

pub mod auth;
mod decode;
mod request;
pub mod sigv4;

pub use decode::BedrockDecoder;

use super::transport::Framing;
use super::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

/// The Bedrock Converse protocol.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bedrock;

/// `/model/{modelId}/converse-stream` with the id percent-encoded as one path segment.
pub fn stream_path(model_id: &str) -> String {
    format!(
        "/model/{}/converse-stream",
        sigv4::uri_encode(model_id, true)
    )
}

impl Adapter for Bedrock {
    fn protocol(&self) -> Protocol {
        Protocol::Bedrock
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError> {
        Ok(HttpRequest {
            path: stream_path(&target.model.name),
            headers: Vec::new(),
            body: request::body(generation, target)?,
        })
    }

    /// None: requests are signed by the provider's [`auth::AwsSigner`] instead.
    fn auth_headers(&self, _api_key: &str) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn decoder(&self, _target: &Target<'_>) -> Box<dyn Decoder> {
        Box::new(BedrockDecoder::new())
    }

    fn framing(&self) -> Framing {
        Framing::EventStream
    }

    fn min_thinking_budget(&self, target: &Target<'_>) -> u32 {
        if request::is_claude(&target.model.name) {
            request::MIN_THINKING_BUDGET
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests;
