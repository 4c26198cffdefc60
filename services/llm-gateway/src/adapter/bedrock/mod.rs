//! AWS Bedrock Converse adapter (`POST /model/{modelId}/converse-stream`, docs/providers.md "Bedrock").
//!
//! - [`request`] builds the Converse body (messages, system blocks, tool config, cache points, reasoning through
//!   `additionalModelRequestFields`) with the fixes the API needs;
//! - [`decode`] turns the eventstream messages (`messageStart` … `metadata`, and exception messages) into unified
//!   events;
//! - [`converse`] decodes the one JSON answer of the non-streaming `POST /model/{modelId}/converse`, which a model
//!   without streaming tool use (the catalog's `streaming_tool_use = false`) gets for every request carrying a
//!   `toolConfig`: the same events, all at once;
//! - [`auth`] resolves the AWS credentials and signs each request with [`sigv4`] once its body bytes are known (the
//!   transport calls it: the signature covers the exact body).
//!
//! The model id goes into the path percent-encoded (a `:` of `anthropic.claude-…-v1:0` becomes `%3A`), so
//! inference-profile ids (`us.anthropic.…`, `eu.…`, `global.…`) and ARNs work unchanged.

mod converse;
mod decode;
mod request;
mod request_wire;

pub use decode::BedrockDecoder;

use crate::adapter::framing::Framing;
use crate::adapter::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

/// The Bedrock Converse protocol.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bedrock;

/// `/model/{modelId}/converse-stream` with the id percent-encoded as one path segment.
pub fn stream_path(model_id: &str) -> Result<String, BuildError> {
    Ok(format!(
        "/model/{}/converse-stream",
        model_segment(model_id)?
    ))
}

/// `/model/{modelId}/converse`: the non-streaming operation, answered with one JSON document.
pub fn converse_path(model_id: &str) -> Result<String, BuildError> {
    Ok(format!("/model/{}/converse", model_segment(model_id)?))
}

/// The model id as one path segment: every byte but the unreserved ones percent-encoded (so `/`, `?`, `#`, `%`,
/// spaces, CR/LF and non-ASCII cannot leave the segment), and the ids a URL parser would take for a dot segment
/// (`.`, `..`) refused: `/model/../converse-stream` is sent as `/converse-stream`, another operation than the one
/// signed. `%2E` cannot be written, since a caller's `%` is encoded too.
pub(crate) fn model_segment(model_id: &str) -> Result<String, BuildError> {
    if matches!(model_id, "" | "." | "..") {
        return Err(BuildError::new(
            "generation.model",
            format!("`{model_id}` is not a Bedrock model id"),
        ));
    }
    Ok(crate::adapter::cloud::aws::sigv4::uri_encode(
        model_id, true,
    ))
}

/// Whether a request with this body goes to the non-streaming `Converse`: it carries tools (or tool blocks, which
/// need `toolConfig` too) and the model takes tools only there.
fn needs_converse(target: &Target<'_>, body: &serde_json::Value) -> bool {
    !target.model.capabilities.streaming_tool_use && body.get("toolConfig").is_some()
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
        let body = request::body(generation, target)?;
        let path = if needs_converse(target, &body) {
            converse_path(&target.model.name)?
        } else {
            stream_path(&target.model.name)?
        };
        Ok(HttpRequest {
            path,
            headers: Vec::new(),
            body,
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

    fn framing_of(&self, request: &HttpRequest) -> Framing {
        if request.path.ends_with("/converse") {
            Framing::Json
        } else {
            Framing::EventStream
        }
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
