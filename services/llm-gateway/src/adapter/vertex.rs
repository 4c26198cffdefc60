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
//! token from the provider's [`TokenSource`](crate::google_auth::TokenSource), handed to
//! [`Adapter::auth_headers`] in place of an API key.

use super::anthropic::Anthropic;
use super::gemini::Gemini;
use super::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

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
fn path_name<'a>(target: &'a Target<'_>, publisher: &str) -> Result<&'a str, BuildError> {
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::catalog::ModelInfo;

    fn model(name: &str, protocol: Protocol) -> ModelInfo {
        ModelInfo::for_tests(name, protocol)
    }

    fn generation(model: &str) -> pb::Generation {
        pb::Generation {
            model: model.into(),
            messages: vec![pb::Message {
                role: pb::Role::User.into(),
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::Text(pb::TextPart {
                        text: "Say hello".into(),
                    })),
                }],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn gemini_on_vertex_is_the_gemini_body_at_the_publisher_path_with_a_bearer_token() {
        let m = model("gemini-2.5-flash", Protocol::VertexGemini);
        let t = Target { model: &m };
        let g = generation("vertex/gemini-2.5-flash");
        let vertex = VertexGemini.build(&g, &t).unwrap();
        let plain = Gemini.build(&g, &t).unwrap();
        assert_eq!(
            vertex.path,
            "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(vertex.body, plain.body);
        assert_eq!(vertex.headers, plain.headers);
        assert_eq!(
            VertexGemini.auth_headers("ya29.t"),
            vec![("authorization", "Bearer ya29.t".to_string())]
        );
        assert!(VertexGemini.auth_headers("").is_empty());
    }

    #[test]
    fn anthropic_on_vertex_moves_the_model_to_the_path_and_the_version_into_the_body() {
        let m = model("claude-sonnet-4-5@20250929", Protocol::VertexAnthropic);
        let t = Target { model: &m };
        let g = generation("vertex/claude-sonnet-4-5@20250929");
        let vertex = VertexAnthropic.build(&g, &t).unwrap();
        let plain = Anthropic.build(&g, &t).unwrap();
        assert_eq!(
            vertex.path,
            "/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
        );
        assert!(vertex.headers.iter().all(|(n, _)| n != "anthropic-version"));
        let mut want = plain.body.clone();
        want.as_object_mut().unwrap().remove("model");
        want["anthropic_version"] = VERTEX_ANTHROPIC_VERSION.into();
        assert_eq!(vertex.body, want);
        assert_eq!(vertex.body.get("model"), None);
        assert_eq!(vertex.body["stream"], true);
    }

    #[test]
    fn names_that_could_leave_the_model_path_are_refused_naming_the_field() {
        for name in ["../../secrets", "a/b", "m?x=1", "", ".hidden"] {
            for protocol in [Protocol::VertexGemini, Protocol::VertexAnthropic] {
                let m = model(name, protocol);
                let t = Target { model: &m };
                let err = protocol.adapter().build(&generation("vertex/x"), &t);
                let err = err.unwrap_err();
                assert_eq!(err.field, "generation.model", "{name}: {err}");
            }
        }
    }
}
