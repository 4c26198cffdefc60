//! OpenAI Responses (`POST {base}/responses`, docs/providers.md §2).
//!
//! - `request` builds the body from a unified [`pb::Generation`]: `instructions` plus typed `input` items, flat
//!   function tools (lowered to strict mode with `strict: true` when the catalog says `strict_schemas`, see
//!   [`crate::adapter::common::strict`]), `store: false` always (the gateway keeps no state, so nothing may depend on a stored response),
//!   and for reasoning models `include: ["reasoning.encrypted_content"]`, so a reasoning item can be replayed on the
//!   next step from the [`ReasoningMetadata`] the caller stored, to the same model only.
//! - `decode` turns the `response.*` events back into unified [`Event`](crate::event::Event)s. Block ids are the
//!   provider's item ids (`msg_…`, `rs_…`); tool calls carry the item's `call_id` (`call_…`), never its item id
//!   (`fc_…`), because the `call_id` is what a `function_call_output` must quote on the next step.
//! - `whole` turns a whole (non-streaming) response into the stream events it is equivalent to.

mod decode;
mod request;
mod request_wire;
#[cfg(test)]
mod stream_tests;
mod whole;
mod wire;

use serde::{Deserialize, Serialize};

use crate::adapter::common::strict::StrictTools;
use crate::adapter::{Adapter, BuildError, Decoder, HttpRequest, Protocol, Target, pb};

pub use decode::ResponsesDecoder;

/// Appended to the provider base URL, which already ends in `/v1` as with the OpenAI SDK.
pub const RESPONSES_PATH: &str = "/responses";

/// What the adapter needs back to replay a reasoning item: the JSON of `ReasoningEnd.metadata` (and so of the
/// `ProviderMetadata.json` a caller sends back with the reasoning part).
///
/// With `store: false` the provider cannot look the item up by id, so the encrypted content is the reasoning
/// itself; without it the item is not replayed at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningMetadata {
    /// The reasoning item's id (`rs_…`).
    pub item_id: String,
    /// The opaque `encrypted_content` of the completed item, when the provider sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
}

/// The OpenAI Responses adapter. Stateless: every call is a pure translation.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiResponses;

impl Adapter for OpenAiResponses {
    fn protocol(&self) -> Protocol {
        Protocol::OpenaiResponses
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
        Box::new(ResponsesDecoder::new())
    }

    fn decoder_for(&self, target: &Target<'_>, generation: &pb::Generation) -> Box<dyn Decoder> {
        if !target.model.capabilities.strict_schemas {
            return self.decoder(target);
        }
        Box::new(ResponsesDecoder::with_strict(StrictTools::of(generation)))
    }
}

#[cfg(test)]
mod tests;
