//! Google Gemini adapter (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`, docs/providers.md
//! §4).
//!
//! - `request` builds the body from a unified [`pb::Generation`] and applies the fixes of docs/providers.md §6
//!   that Gemini needs: empty parts and turns dropped, same-role turns merged, a minimal user turn put first when
//!   the conversation opens with the model, function results answered in the order of the calls they pair with,
//!   thought signatures replayed only to the model that made them (and the Gemini 3 sentinel where none is known),
//!   the tool JSON Schema lowered to Gemini's OpenAPI subset (`schema`), thinking budgets clamped to what each model
//!   family accepts.
//! - `decode` turns the `data:` chunks (and the bare error object Google writes outside SSE framing) back into
//!   unified [`Event`](crate::event::Event)s.
//!
//! # Replay metadata
//!
//! Gemini hands out opaque `thoughtSignature`s that must come back on the same part of the next request, and
//! sometimes its own `functionCall.id`. Both travel in [`ReplayMetadata`], the JSON the decoder puts on
//! `ToolCall.metadata` and `ReasoningEnd.metadata` and the request builder reads back from
//! `ToolCallPart.provider_metadata` / `ReasoningPart.provider_metadata`:
//!
//! - a signature on a `functionCall` part rides on that call's `ToolCall`;
//! - a signature on a thought part rides on the `ReasoningEnd` of its reasoning block;
//! - a signature on any other part (typically the final empty `{"text": ""}` part, after the answer text) becomes
//!   a reasoning block of its own with no text: `ReasoningStart` + `ReasoningEnd` carrying the signature, in stream
//!   order, so replaying the conversation puts it back where it was. When a reasoning block is still open and the
//!   signed part has no text, the signature joins that block instead.

mod decode;
#[cfg(test)]
mod fast_tests;
mod generation_config;
mod partial_args;
#[cfg(test)]
mod partial_args_tests;
mod request;
#[cfg(test)]
mod request_features_tests;
#[cfg(test)]
mod request_tests;
mod request_wire;
mod schema;
#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod stream_tests;

use serde::{Deserialize, Serialize};

use crate::adapter::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

pub use decode::GeminiDecoder;
pub(crate) use request::validated_mode;

/// The `thoughtSignature` Google documents for replaying a function call whose real signature is unknown (history
/// from another model or provider). Gemini 3 refuses a function call without a signature; this value tells it to
/// skip the check (docs/providers.md §6.3).
pub const SKIP_THOUGHT_SIGNATURE: &str = "skip_thought_signature_validator";

/// Opaque data the Gemini adapter hands out with `ToolCall` and `ReasoningEnd` and needs back on the next step.
///
/// Serialised as a JSON object with only the fields that are set, e.g. `{"thought_signature":"CtIDAVSo…"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayMetadata {
    /// Gemini's `thoughtSignature` for the part, sent back unchanged on the replayed part. Signatures are only
    /// valid for the model that produced them, so they are replayed only to that model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// Gemini's own `functionCall.id`, when it sent one. Only such ids go back on the wire (on the replayed
    /// `functionCall` and on the `functionResponse` answering it): ids the decoder synthesized never leave the
    /// gateway, because the Gemini API has answered client-made ids with `Unknown name "id"` 400s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_call_id: Option<String>,
}

impl ReplayMetadata {
    /// The metadata as event JSON, or `None` when there is nothing to replay.
    pub fn to_json(&self) -> Option<String> {
        if self.thought_signature.is_none() && self.function_call_id.is_none() {
            return None;
        }
        serde_json::to_string(self).ok()
    }

    /// Reads metadata this adapter produced; anything else (another protocol's JSON, garbage) reads as empty, since
    /// replay data is an optimisation the request stays valid without.
    pub fn from_json(json: &str) -> ReplayMetadata {
        serde_json::from_str(json).unwrap_or_default()
    }
}

/// The Google Gemini protocol. Stateless: every call is a pure translation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gemini;

impl Adapter for Gemini {
    fn protocol(&self) -> Protocol {
        Protocol::Gemini
    }

    fn build(
        &self,
        generation: &pb::Generation,
        target: &Target<'_>,
    ) -> Result<HttpRequest, BuildError> {
        request::build(generation, target)
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        // A header, never the `key=` query parameter the REST docs also allow: a URL ends up in proxy and access
        // logs, a header does not. Omitted without a key, for keyless local proxies.
        if api_key.is_empty() {
            return Vec::new();
        }
        vec![("x-goog-api-key", api_key.to_string())]
    }

    fn decoder(&self, _target: &Target<'_>) -> Box<dyn Decoder> {
        Box::new(GeminiDecoder::new())
    }

    fn min_thinking_budget(&self, target: &Target<'_>) -> u32 {
        generation_config::Family::of(&target.model.name).min_budget()
    }
}

#[cfg(test)]
mod tests;
