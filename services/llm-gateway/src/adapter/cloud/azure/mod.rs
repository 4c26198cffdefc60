//! Azure OpenAI (docs/gateway.md "Azure OpenAI", docs/providers.md §2b): OpenAI's Chat Completions and Responses
//! behind a resource's endpoint, its deployments and its authentication.
//!
//! Azure serves OpenAI's wire formats, so each adapter here is the OpenAI adapter with the request re-addressed and
//! authenticated differently, nothing decoded differently (the Chat decoder already reads Azure's content-filter
//! chunks, see docs/providers.md §2b):
//! - [`AzureChat`]: the Chat Completions body as is (its `model` is the deployment name);
//! - [`AzureResponses`]: the Responses body as is, encrypted reasoning replayed by value as on OpenAI.
//!
//! Paths are relative to the provider's base URL, which the configuration builds as `{endpoint}/openai` (see
//! [`config`]); the [`AzureApi`] of the provider picks the surface:
//!
//! | | v1 | deployments |
//! |---|---|---|
//! | Chat | `/v1/chat/completions` | `/deployments/{deployment}/chat/completions?api-version=…` |
//! | Responses | `/v1/responses` | `/responses?api-version=…` |
//!
//! A key goes in the `api-key` header (as Azure's SDKs send it); an Entra ID access token in `authorization:
//! Bearer` ([`Adapter::token_headers`], the default).

pub mod config;

use serde::Deserialize;

use crate::adapter::openai_chat::OpenAiChat;
use crate::adapter::openai_responses::OpenAiResponses;
use crate::adapter::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

/// Which of Azure OpenAI's REST surfaces a provider calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    /// `/openai/v1/…`: OpenAI's own paths with the deployment name as `model`, no dated `api-version`.
    #[default]
    V1,
    /// The dated surface: `/openai/deployments/{deployment}/chat/completions?api-version=…`.
    Deployments,
}

/// Where an Azure provider's requests go: its surface and the `api-version` query (required on the deployments
/// surface, optional on v1, where only `preview` or `latest` make sense).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AzureApi {
    pub surface: Surface,
    pub api_version: Option<String>,
}

/// OpenAI Chat Completions on Azure OpenAI.
#[derive(Debug, Clone, Copy, Default)]
pub struct AzureChat;

/// OpenAI Responses on Azure OpenAI.
#[derive(Debug, Clone, Copy, Default)]
pub struct AzureResponses;

/// Azure's deployment names: letters, digits, `-`, `_` and `.` (the portal's rule). The name goes into the path on
/// the deployments surface, so anything else could walk to another endpoint.
pub fn valid_deployment(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `?api-version=…`, or nothing.
fn query(api: &AzureApi) -> String {
    api.api_version
        .as_deref()
        .map(|v| format!("?api-version={v}"))
        .unwrap_or_default()
}

/// The deployment of `target`, checked for the path.
fn deployment<'a>(target: &'a Target<'_>) -> Result<&'a str, BuildError> {
    let name = target.model.name.as_str();
    if !valid_deployment(name) {
        return Err(BuildError::new(
            "generation.model",
            format!(
                "`{name}` is not a valid Azure OpenAI deployment name (letters, digits, `-`, `_`, `.`)"
            ),
        ));
    }
    Ok(name)
}

/// The path of a Chat Completions request.
pub fn chat_path(target: &Target<'_>) -> Result<String, BuildError> {
    let default = AzureApi::default();
    let api = target.azure.unwrap_or(&default);
    let name = deployment(target)?;
    Ok(match api.surface {
        Surface::V1 => format!("/v1/chat/completions{}", query(api)),
        Surface::Deployments => format!("/deployments/{name}/chat/completions{}", query(api)),
    })
}

/// The path of a Responses request (the deployment is the body's `model` on both surfaces).
pub fn responses_path(target: &Target<'_>) -> Result<String, BuildError> {
    let default = AzureApi::default();
    let api = target.azure.unwrap_or(&default);
    deployment(target)?;
    Ok(match api.surface {
        Surface::V1 => format!("/v1/responses{}", query(api)),
        Surface::Deployments => format!("/responses{}", query(api)),
    })
}

/// The path of an embeddings request (docs/gateway.md "Embeddings and token counting"): the deployment is the
/// body's `model` on v1 and in the path on the deployments surface, as for Chat Completions.
pub fn embeddings_path(target: &Target<'_>) -> Result<String, BuildError> {
    let default = AzureApi::default();
    let api = target.azure.unwrap_or(&default);
    let name = deployment(target)?;
    Ok(match api.surface {
        Surface::V1 => format!("/v1/embeddings{}", query(api)),
        Surface::Deployments => format!("/deployments/{name}/embeddings{}", query(api)),
    })
}

/// The `api-key` header (none without a key: a keyless proxy in front of the resource).
fn api_key(key: &str) -> Vec<(&'static str, String)> {
    if key.is_empty() {
        return Vec::new();
    }
    vec![("api-key", key.to_string())]
}

impl Adapter for AzureChat {
    fn protocol(&self) -> Protocol {
        Protocol::AzureChat
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError> {
        let mut request = OpenAiChat.build(generation, target)?;
        request.path = chat_path(target)?;
        Ok(request)
    }

    fn auth_headers(&self, key: &str) -> Vec<(&'static str, String)> {
        api_key(key)
    }

    fn decoder(&self, target: &Target<'_>) -> Box<dyn Decoder> {
        OpenAiChat.decoder(target)
    }

    fn decoder_for(&self, target: &Target<'_>, generation: &pb::Generation) -> Box<dyn Decoder> {
        OpenAiChat.decoder_for(target, generation)
    }
}

impl Adapter for AzureResponses {
    fn protocol(&self) -> Protocol {
        Protocol::AzureResponses
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError> {
        let mut request = OpenAiResponses.build(generation, target)?;
        request.path = responses_path(target)?;
        Ok(request)
    }

    fn auth_headers(&self, key: &str) -> Vec<(&'static str, String)> {
        api_key(key)
    }

    fn decoder(&self, target: &Target<'_>) -> Box<dyn Decoder> {
        OpenAiResponses.decoder(target)
    }

    fn decoder_for(&self, target: &Target<'_>, generation: &pb::Generation) -> Box<dyn Decoder> {
        OpenAiResponses.decoder_for(target, generation)
    }
}

#[cfg(test)]
mod tests;
