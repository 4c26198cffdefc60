//! An event of a step's gateway stream as the loop reads it.
//!
//! Most of a stream is text (or reasoning) deltas, and the generated message would decode each into two `String`s
//! (the block id and the text): two allocations and two frees per delta, and an event the size of the largest one
//! moved through the stream. A delta is read here straight from its encoding, its id and text inline up to 24 bytes
//! each; any other event, or a delta encoded in a shape this reader does not take (a field repeated, an unknown
//! one), decodes as the generated message, which gives the same event.

use compact_str::CompactString;
use llm_proto::gateway as gw;
use prost::Message as _;

/// The `StreamResponse` keys (field number and wire type) of `text_delta` (4) and `reasoning_delta` (7), and the
/// delta's `id` (1) and `delta` (2): all length-delimited.
const TEXT_DELTA_KEY: u64 = (4 << 3) | 2;
const REASONING_DELTA_KEY: u64 = (7 << 3) | 2;
const ID_KEY: u64 = (1 << 3) | 2;
const TEXT_KEY: u64 = (2 << 3) | 2;

/// A gateway stream's event (module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum StepEvent {
    /// Text appended to a text block, or to a reasoning block when `reasoning`.
    Delta {
        /// Whether the block is a reasoning block.
        reasoning: bool,
        /// The block's id.
        id: CompactString,
        /// The text appended.
        text: CompactString,
    },
    /// Any other event, as generated; boxed, so the common event stays small.
    Other(Box<gw::StreamResponse>),
}

impl StepEvent {
    /// The event `bytes` encode (a whole `StreamResponse`).
    pub fn decode(bytes: &[u8]) -> Result<StepEvent, prost::DecodeError> {
        if let Some(delta) = delta(bytes) {
            return Ok(delta);
        }
        gw::StreamResponse::decode(bytes).map(StepEvent::from)
    }

    /// Whether the model produced something with it (anything but the stream's start or an error).
    pub fn is_output(&self) -> bool {
        match self {
            StepEvent::Delta { .. } => true,
            StepEvent::Other(ev) => !matches!(
                ev.event,
                None | Some(
                    gw::stream_response::Event::StreamStart(_)
                        | gw::stream_response::Event::Error(_)
                )
            ),
        }
    }
}

impl From<gw::StreamResponse> for StepEvent {
    fn from(event: gw::StreamResponse) -> StepEvent {
        StepEvent::Other(Box::new(event))
    }
}

/// `bytes` as a delta, when they are exactly one `text_delta` or `reasoning_delta` field whose message holds each
/// of `id` and `delta` at most once, both valid UTF-8, and nothing else.
fn delta(bytes: &[u8]) -> Option<StepEvent> {
    let outer = Field::first(bytes)?;
    let reasoning = match outer.key {
        TEXT_DELTA_KEY => false,
        REASONING_DELTA_KEY => true,
        _ => return None,
    };
    if !outer.rest.is_empty() {
        return None;
    }
    let (mut id, mut text) = (None, None);
    let mut body = outer.value;
    while !body.is_empty() {
        let f = Field::first(body)?;
        let slot = match f.key {
            ID_KEY => &mut id,
            TEXT_KEY => &mut text,
            _ => return None,
        };
        if slot.replace(f.value).is_some() {
            return None;
        }
        body = f.rest;
    }
    let id = std::str::from_utf8(id.unwrap_or_default()).ok()?;
    let text = std::str::from_utf8(text.unwrap_or_default()).ok()?;
    Some(StepEvent::Delta {
        reasoning,
        id: CompactString::from(id),
        text: CompactString::from(text),
    })
}

/// A length-delimited field read from the start of some bytes.
struct Field<'a> {
    key: u64,
    value: &'a [u8],
    /// What follows it.
    rest: &'a [u8],
}

impl<'a> Field<'a> {
    /// The field `bytes` start with; `None` when they do not start with a whole length-delimited one.
    fn first(bytes: &'a [u8]) -> Option<Field<'a>> {
        let mut rest = bytes;
        let key = prost::encoding::decode_varint(&mut rest).ok()?;
        if key & 7 != 2 {
            return None;
        }
        let len = usize::try_from(prost::encoding::decode_varint(&mut rest).ok()?).ok()?;
        if rest.len() < len {
            return None;
        }
        let (value, rest) = rest.split_at(len);
        Some(Field { key, value, rest })
    }
}

#[cfg(test)]
#[path = "step_event_tests.rs"]
mod tests;
