//! The replay data of a reasoning item, carried in its `encrypted_content` through a client that stores it and
//! sends it back on the next turn (as the SDKs do with `store: false`).
//!
//! A reasoning item this door returns may come from any provider: OpenAI's encrypted reasoning, an Anthropic thinking
//! signature, a Gemini thought signature. The unified event carries it as provider metadata (protocol, model, data),
//! and the request builders replay it only to the model that produced it. To round-trip all of it through the one
//! opaque field a Responses client keeps, the door seals the metadata into `encrypted_content` as
//! `gwr1.<base64url of {"p": protocol, "m": model, "j": data}>`, and opens it when the item comes back. Content
//! sealed by someone else (OpenAI's own) is taken as OpenAI Responses reasoning of the requested model.
//!
//! The envelope is not secret, as the provider's own data in it is not: it is what the provider gave the caller.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use llm_proto::gateway as pb;
use serde::{Deserialize, Serialize};

/// What an envelope starts with.
const PREFIX: &str = "gwr1.";

#[derive(Serialize)]
struct Sealed<'a> {
    p: &'a str,
    m: &'a str,
    j: &'a str,
}

/// [`Sealed`] read back: owned, since the data is JSON text whose escapes a borrow could not hold.
#[derive(Deserialize)]
struct Opened {
    p: String,
    m: String,
    j: String,
}

/// `metadata` sealed for a reasoning item's `encrypted_content`.
pub fn seal(metadata: &pb::ProviderMetadata) -> String {
    let sealed = Sealed {
        p: &metadata.protocol,
        m: &metadata.model,
        j: &metadata.json,
    };
    // Serialising three strings cannot fail.
    let json = serde_json::to_vec(&sealed).unwrap_or_default();
    let mut out = String::with_capacity(PREFIX.len() + json.len() * 4 / 3 + 4);
    out.push_str(PREFIX);
    URL_SAFE_NO_PAD.encode_string(json, &mut out);
    out
}

/// The metadata in `encrypted_content` of reasoning item `item_id`. An envelope of this door's opens to what was
/// sealed; anything else is OpenAI Responses reasoning whose model is left empty, for the caller to fill with the
/// model it is sent to (`unified::fill_model`).
pub fn open(encrypted_content: &str, item_id: &str) -> pb::ProviderMetadata {
    if let Some(sealed) = encrypted_content
        .strip_prefix(PREFIX)
        .and_then(|b| URL_SAFE_NO_PAD.decode(b).ok())
        && let Ok(s) = serde_json::from_slice::<Opened>(&sealed)
    {
        return pb::ProviderMetadata {
            protocol: s.p,
            model: s.m,
            json: s.j,
        };
    }
    pb::ProviderMetadata {
        protocol: crate::protocol::Protocol::OpenaiResponses
            .as_str()
            .to_string(),
        model: String::new(),
        json: serde_json::json!({"item_id": item_id, "encrypted_content": encrypted_content})
            .to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "replay_tests.rs"]
mod tests;
