//! Google Vertex AI (docs/gateway.md "Vertex AI", docs/providers.md §4 "Vertex AI"): Gemini and Anthropic models
//! behind Google Cloud's endpoints and OAuth2 access tokens.
//!
//! Vertex speaks the publishers' own wire formats, so each adapter here is the Gemini or Anthropic adapter with
//! the request re-addressed, nothing decoded differently:
//! - [`VertexGemini`]: the Gemini body as is, `POST …/publishers/google/models/{m}:streamGenerateContent?alt=sse`;
//!   the Gemini decoder, which also rebuilds Vertex's streamed function-call arguments (`partialArgs`);
//! - [`VertexAnthropic`]: the Messages body without `model` (the model is in the path) and with
//!   `anthropic_version: "vertex-2023-10-16"` instead of the `anthropic-version` header,
//!   `POST …/publishers/anthropic/models/{m}:streamRawPredict`; the Anthropic decoder.
//!
//! Paths are relative to the provider's base URL, which the configuration builds as
//! `https://{host}/v1/projects/{project}/locations/{location}` (see `config`). Authentication is a bearer access
//! token from the provider's [`TokenSource`](crate::adapter::cloud::oauth::TokenSource), sent by [`Adapter::token_headers`].

pub mod config;

use crate::adapter::anthropic::Anthropic;
use crate::adapter::gemini::Gemini;
use crate::adapter::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

/// The `anthropic_version` body field Vertex requires instead of the header.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Gemini models on Vertex AI.
#[derive(Debug, Clone, Copy, Default)]
pub struct VertexGemini;

/// Anthropic models on Vertex AI.
#[derive(Debug, Clone, Copy, Default)]
pub struct VertexAnthropic;

/// A Bearer header for a Vertex access token (none without one, for keyless local proxies).
fn bearer(token: &str) -> Vec<(&'static str, String)> {
    if token.is_empty() {
        return Vec::new();
    }
    vec![("authorization", format!("Bearer {token}"))]
}

/// The model name goes into the URL path: anything but a plain name (Vertex's Anthropic names carry an `@date`)
/// could walk to another endpoint.
pub(crate) fn path_name<'a>(
    target: &'a Target<'_>,
    publisher: &str,
) -> Result<&'a str, BuildError> {
    let name = target.model.name.as_str();
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'));
    if !plain {
        return Err(BuildError::new(
            "generation.model",
            format!(
                "`{name}` is not a valid {publisher} model name on Vertex AI (letters, digits, `.`, `-`, `_`, `@`)"
            ),
        ));
    }
    Ok(name)
}

impl Adapter for VertexGemini {
    fn protocol(&self) -> Protocol {
        Protocol::VertexGemini
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError> {
        // Vertex's v1 API has no function calling mode `VALIDATED`, the only way Gemini constrains calls while the
        // model may still answer in text; a strict tool there is refused rather than sent unconstrained.
        if let Some(i) = crate::adapter::gemini::validated_mode(generation)? {
            return Err(BuildError::new(
                crate::adapter::common::features::strict_field(i),
                "Gemini on Vertex AI cannot constrain calls while the model is free to answer in text (no \
                 `VALIDATED` mode in its v1 API); require a tool (tool choice REQUIRED or TOOL) or leave strict unset",
            ));
        }
        let mut request = Gemini.build(generation, target)?;
        let name = path_name(target, "Gemini")?;
        request.path = format!("/publishers/google/models/{name}:streamGenerateContent?alt=sse");
        Ok(request)
    }

    fn auth_headers(&self, token: &str) -> Vec<(&'static str, String)> {
        bearer(token)
    }

    fn decoder(&self, target: &Target<'_>) -> Box<dyn Decoder> {
        Gemini.decoder(target)
    }

    fn min_thinking_budget(&self, target: &Target<'_>) -> u32 {
        Gemini.min_thinking_budget(target)
    }
}

impl Adapter for VertexAnthropic {
    fn protocol(&self) -> Protocol {
        Protocol::VertexAnthropic
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError> {
        let mut request = Anthropic.build(generation, target)?;
        let name = path_name(target, "Anthropic")?;
        request.path = format!("/publishers/anthropic/models/{name}:streamRawPredict");
        request.headers.retain(|(n, _)| n != "anthropic-version");
        if let Some(body) = request.body.as_object_mut() {
            body.remove("model");
            body.insert("anthropic_version".into(), VERTEX_ANTHROPIC_VERSION.into());
        }
        Ok(request)
    }

    fn auth_headers(&self, token: &str) -> Vec<(&'static str, String)> {
        bearer(token)
    }

    fn decoder(&self, target: &Target<'_>) -> Box<dyn Decoder> {
        Anthropic.decoder(target)
    }

    fn min_thinking_budget(&self, target: &Target<'_>) -> u32 {
        Anthropic.min_thinking_budget(target)
    }
}

#[cfg(test)]
mod tests;
