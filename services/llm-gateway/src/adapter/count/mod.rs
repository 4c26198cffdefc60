//! Token counts of a generation's input, without generating (docs/gateway.md "Embeddings and token counting"):
//! which way a model's tokens are counted ([`counting`]), the provider counting endpoints' pure request builders
//! and decoders ([`provider`]), and the local count with OpenAI's tokenizers ([`local`]).
//!
//! | protocol | counted by |
//! |---|---|
//! | `anthropic` | `POST /v1/messages/count_tokens` |
//! | `vertex_anthropic` | `POST …/publishers/anthropic/models/count-tokens:rawPredict` |
//! | `gemini` | `POST /v1beta/models/{m}:countTokens` |
//! | `vertex_gemini` | `POST …/publishers/google/models/{m}:countTokens` |
//! | `bedrock` | `POST /model/{id}/count-tokens` (`CountTokens`) |
//! | `openai_chat`, `openai_responses`, `azure_*` | the model's tokenizer (`o200k_base`, `cl100k_base`), locally |
//!
//! A model of an OpenAI-family protocol whose tokenizer is not known (an open model behind an OpenAI-compatible
//! server) has no count: no provider endpoint and no tokenizer of its own here. Its catalog entry may name one.

pub mod local;
pub mod provider;

use crate::adapter::Target;
use crate::catalog::TokenizerName;
use crate::protocol::Protocol;

pub use provider::ProviderCounter;

/// How a model's tokens are counted.
#[derive(Clone, Copy)]
pub enum Counting {
    /// By the provider's counting endpoint.
    Provider(&'static dyn ProviderCounter),
    /// By the gateway, with this tokenizer.
    Local(TokenizerName),
    /// Neither exists for the model.
    Unavailable,
}

impl std::fmt::Debug for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Counting::Provider(c) => write!(f, "Provider({})", c.name()),
            Counting::Local(t) => write!(f, "Local({})", t.as_str()),
            Counting::Unavailable => f.write_str("Unavailable"),
        }
    }
}

/// How `target`'s model is counted: its protocol's endpoint, else the tokenizer its catalog entry names (`configured`),
/// else the one OpenAI uses for a model of that name (OpenAI-family protocols only).
pub fn counting(target: &Target<'_>, configured: Option<TokenizerName>) -> Counting {
    if let Some(counter) = provider::for_protocol(target.model.protocol) {
        return Counting::Provider(counter);
    }
    if let Some(t) = configured {
        return Counting::Local(t);
    }
    let openai_family = matches!(
        target.model.protocol,
        Protocol::OpenaiChat
            | Protocol::OpenaiResponses
            | Protocol::AzureChat
            | Protocol::AzureResponses
    );
    match TokenizerName::of_model(&target.model.name) {
        Some(t) if openai_family => Counting::Local(t),
        _ => Counting::Unavailable,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
