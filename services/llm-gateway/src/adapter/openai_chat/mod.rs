//! OpenAI Chat Completions (`POST {base}/chat/completions`), for OpenAI and every OpenAI-compatible server: vLLM,
//! Ollama, DeepSeek, Mistral, Groq, OpenRouter, Azure (provider-protocols.md §1).
//!
//! - `request` builds the body from a unified [`pb::Generation`], applying the fixes of provider-protocols.md §6
//!   that this protocol needs (empty parts dropped, tool-call ids capped at 40 characters, sampling parameters a
//!   reasoning model rejects dropped, `stream_options.include_usage` always on).
//! - `decode` turns the `data:` chunks back into unified [`Event`](crate::event::Event)s, tolerating the field names and envelopes each
//!   compatible server uses for the same things.

mod decode;
mod request;
#[cfg(test)]
mod stream_tests;

use super::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

pub use decode::ChatDecoder;

/// The OpenAI Chat Completions adapter. Stateless: every call is a pure translation.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiChat;

impl Adapter for OpenAiChat {
    fn protocol(&self) -> Protocol {
        Protocol::OpenaiChat
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError> {
        request::build(generation, target)
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        // Local servers (Ollama, vLLM) run without a key; an empty `Bearer ` header makes some of them reject the
        // request, so no header at all is the safe form.
        if api_key.is_empty() {
            return Vec::new();
        }
        vec![("authorization", format!("Bearer {api_key}"))]
    }

    fn decoder(&self, _target: &Target<'_>) -> Box<dyn Decoder> {
        Box::new(ChatDecoder::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_header_is_bearer_and_omitted_without_key() {
        assert_eq!(
            OpenAiChat.auth_headers("sk-test"),
            vec![("authorization", "Bearer sk-test".to_string())]
        );
        assert!(OpenAiChat.auth_headers("").is_empty());
    }

    #[test]
    fn protocol_is_openai_chat() {
        assert_eq!(OpenAiChat.protocol(), Protocol::OpenaiChat);
        assert_eq!(
            Protocol::OpenaiChat.adapter().protocol(),
            Protocol::OpenaiChat
        );
    }
}
