//! An event as a live channel keeps it until it is written and its followers have read it.
//!
//! Most of a streaming session's events are text deltas, and the generated event enum is the size of its largest
//! variant (a whole message), several times a delta. So a delta is kept as its text and its part's ids, the ids
//! shared (`Arc`) by every delta of the part, and every other event whole; each kept event is shared (`Arc`) between
//! the ring and the write that takes it.

use std::sync::Arc;

use compact_str::CompactString;
use llm_proto::sessions as pb;
use pb::session_event::Event;
use prost::Message as _;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

/// The `SessionEvent` field number of `part_delta`, which a kept delta encodes as.
const PART_DELTA_FIELD: u32 = 5;

/// The ids a part's deltas carry: made once per part and shared by all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartIds {
    /// The part.
    pub part_id: String,
    /// Its message.
    pub message_id: String,
}

/// A kept text delta. Held in the ring by value: a delta's text is usually a few bytes, kept inline (no
/// allocation) up to 24.
#[derive(Debug, Clone)]
pub(crate) struct KeptDelta {
    /// Its part's ids.
    pub(crate) ids: Arc<PartIds>,
    /// The text appended.
    pub(crate) text: CompactString,
}

impl KeptDelta {
    /// The `PartDelta` message's encoded length.
    fn message_len(&self) -> usize {
        str_len(1, &self.ids.part_id) + str_len(2, &self.ids.message_id) + str_len(3, &self.text)
    }
}

/// One kept event (module docs).
#[derive(Debug, Clone)]
pub(crate) enum Stored {
    /// A text delta.
    Delta(KeptDelta),
    /// Any other event, encoded (a `SessionEvent` holding only it): a fraction of the generated enum's size, and
    /// decoded again only for a follower. Boxed, so a ring entry is the size of a delta (deltas are most of them).
    Whole(Box<Whole>),
}

/// A kept event other than a delta.
#[derive(Debug, Clone)]
pub(crate) struct Whole {
    /// Its encoding as a `SessionEvent` holding only it.
    bytes: bytes::Bytes,
    /// What the channel decides on: someone must act on it (a tool call to run, a permission to give, an error) or
    /// it ends the run (`done`).
    kind: Kind,
}

/// What kind of event a [`Whole`] is, as far as the channel cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `done`.
    Done,
    /// An event somebody must act on at once (tool call awaiting, permission asked, error).
    Urgent,
    /// Anything else.
    Other,
}

impl Stored {
    /// Keeps `event`.
    pub(crate) fn new(event: Event) -> Stored {
        match event {
            Event::PartDelta(d) => Stored::delta(
                Arc::new(PartIds {
                    part_id: d.part_id,
                    message_id: d.message_id,
                }),
                d.delta,
            ),
            other => {
                let kind = match other {
                    Event::Done(_) => Kind::Done,
                    Event::ToolCallAwaiting(_) | Event::PermissionAsked(_) | Event::Error(_) => {
                        Kind::Urgent
                    }
                    _ => Kind::Other,
                };
                let mut bytes = Vec::with_capacity(other.encoded_len());
                other.encode(&mut bytes);
                Stored::Whole(Box::new(Whole {
                    bytes: bytes.into(),
                    kind,
                }))
            }
        }
    }

    /// What kind of event it is, `None` for a delta.
    pub(crate) fn kind(&self) -> Option<Kind> {
        match self {
            Stored::Delta(_) => None,
            Stored::Whole(w) => Some(w.kind),
        }
    }

    /// Keeps a delta of the part `ids` names.
    pub(crate) fn delta(ids: Arc<PartIds>, text: String) -> Stored {
        Stored::Delta(KeptDelta {
            ids,
            text: CompactString::from(text),
        })
    }

    /// The delta, when it is one.
    pub(crate) fn as_delta(&self) -> Option<&KeptDelta> {
        match self {
            Stored::Delta(d) => Some(d),
            Stored::Whole(_) => None,
        }
    }

    /// The event, as a follower sends it.
    pub(crate) fn to_event(&self) -> Event {
        match self {
            Stored::Delta(d) => Event::PartDelta(pb::PartDelta {
                part_id: d.ids.part_id.clone(),
                message_id: d.ids.message_id.clone(),
                delta: d.text.to_string(),
            }),
            // Its own encoding: it decodes (an event of an unknown kind, which this build cannot have made, as
            // an empty status).
            Stored::Whole(w) => pb::SessionEvent::decode(w.bytes.clone())
                .ok()
                .and_then(|e| e.event)
                .unwrap_or_else(|| Event::Status(pb::SessionStatus::default())),
        }
    }

    /// Its weight for a channel's size bounds: a delta's text, otherwise the event's encoded size.
    pub(crate) fn weight(&self) -> usize {
        match self {
            Stored::Delta(d) => d.text.len(),
            Stored::Whole(w) => w.bytes.len(),
        }
    }

    /// The encoding of a `SessionEvent` holding only this event (a oneof encodes exactly as its message's field);
    /// an event other than a delta shares the bytes it was kept as.
    pub(crate) fn encode(&self) -> bytes::Bytes {
        match self {
            Stored::Delta(d) => {
                let len = d.message_len();
                let mut buf = Vec::with_capacity(1 + encoded_len_varint(len as u64) + len);
                encode_key(PART_DELTA_FIELD, WireType::LengthDelimited, &mut buf);
                encode_varint(len as u64, &mut buf);
                put_str(1, &d.ids.part_id, &mut buf);
                put_str(2, &d.ids.message_id, &mut buf);
                put_str(3, &d.text, &mut buf);
                buf.into()
            }
            Stored::Whole(w) => w.bytes.clone(),
        }
    }
}

/// A protobuf string field's encoded length (nothing when empty, as proto3 omits it).
fn str_len(tag: u32, s: &str) -> usize {
    if s.is_empty() {
        return 0;
    }
    key_len(tag) + encoded_len_varint(s.len() as u64) + s.len()
}

/// Writes a protobuf string field (nothing when empty, as proto3 omits it).
fn put_str(tag: u32, s: &str, buf: &mut Vec<u8>) {
    if s.is_empty() {
        return;
    }
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(s.len() as u64, buf);
    buf.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "stored_tests.rs"]
mod tests;
