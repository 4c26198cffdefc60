//! The clouds that sell other makers' models, each with its addressing, its configuration and its credentials in one
//! folder: Azure OpenAI ([`azure`]: the OpenAI adapters re-addressed to deployments, the `azure` table, Entra ID),
//! Google Vertex AI ([`vertex`]: the Gemini and Anthropic adapters re-addressed, the `google` table), AWS
//! ([`aws`]: Bedrock's credentials and the SigV4 signer), and the OAuth2 token sources Vertex AI and Entra ID share
//! ([`oauth`]).

#[cfg(test)]
mod addressing_tests;
pub mod aws;
pub mod azure;
pub mod oauth;
pub mod vertex;
