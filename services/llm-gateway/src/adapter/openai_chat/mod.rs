//! OpenAI Chat Completions (`POST {base}/chat/completions`), for OpenAI and every OpenAI-compatible server: vLLM,
//! Ollama, DeepSeek, Mistral, Groq, OpenRouter, Azure (docs/providers.md §1).
//!
//! - `request` builds the body from a unified [`pb::Generation`], applying the fixes of docs/providers.md §6
//!   that this protocol needs (empty parts and empty assistant turns dropped; tool-call ids capped at 40
//!   characters, or rewritten to Mistral's nine alphanumerics when the catalog says `tool_call_ids = "mistral"`;
//!   sampling parameters a reasoning model rejects dropped, also from provider options; reasoning replayed in the
//!   field the model's `reasoning_replay` names, only to the model that produced it; tools and JSON Schema output
//!   lowered to strict mode when the catalog says `strict_schemas`; `stream_options.include_usage` always on).
//! - `decode` turns the `data:` chunks back into unified [`Event`](crate::event::Event)s, tolerating the field
//!   names and envelopes each compatible server uses for the same things. Every reasoning block ends with the
//!   replay metadata `{}`: the text is all a server takes back, but the metadata is what makes the core record the
//!   protocol and model that produced it, which replay is keyed on. OpenRouter's `reasoning_details` are the
//!   exception: merged per index (`details`), they are the block's metadata and go back whole.

mod decode;
mod details;
mod fast;
#[cfg(test)]
mod fast_tests;
#[cfg(test)]
mod openrouter_tests;
mod request;
mod request_wire;
#[cfg(test)]
mod stream_tests;
mod whole;
mod wire;

use crate::adapter::common::strict::StrictTools;
use crate::adapter::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

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
        crate::adapter::common::openai::bearer(api_key)
    }

    fn decoder(&self, _target: &Target<'_>) -> Box<dyn Decoder> {
        Box::new(ChatDecoder::new())
    }

    fn decoder_for(&self, target: &Target<'_>, generation: &pb::Generation) -> Box<dyn Decoder> {
        if !target.model.capabilities.strict_schemas {
            return self.decoder(target);
        }
        Box::new(ChatDecoder::with_strict(StrictTools::of(generation)))
    }
}

#[cfg(test)]
mod tests;
