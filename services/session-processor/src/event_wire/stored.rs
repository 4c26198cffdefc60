//! An event as a live channel keeps it until it is written and its followers have read it.
//!
//! Most of a streaming session's events are text deltas, and the generated event enum is the size of its largest
//! variant (a whole message), several times a delta. So a delta is kept as its text and its part's ids, the ids
//! shared (`Arc`) by every delta of the part, and every other event whole; each kept event is shared (`Arc`) between
//! the ring and the write that takes it.

use std::sync::Arc;

use bytes::BufMut;
use compact_str::CompactString;
use llm_proto::sessions as pb;
use pb::session_event::Event;
use prost::Message as _;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

/// The `SessionEvent` field number of `part_delta`, which a kept delta encodes as.
const PART_DELTA_FIELD: u32 = 5;

/// The `SessionEvent` field numbers of `message_updated` and `part_updated`.
const MESSAGE_UPDATED_FIELD: u32 = 3;
const PART_UPDATED_FIELD: u32 = 4;

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
    /// never decoded to be streamed. Behind a pointer, so a ring entry is the size of a delta (deltas are most of
    /// them); shared, so the ring, the write and each follower that reads it hold one allocation.
    Whole(Arc<Whole>),
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
                Stored::whole(bytes, kind)
            }
        }
    }

    /// Keeps a `part_updated` of `part`, encoded from the reference (no copy of the part is made).
    pub(crate) fn part_updated(part: &pb::Part) -> Stored {
        Stored::whole_of(PART_UPDATED_FIELD, part)
    }

    /// Keeps a `message_updated` of `message`, encoded from the reference.
    pub(crate) fn message_updated(message: &pb::Message) -> Stored {
        Stored::whole_of(MESSAGE_UPDATED_FIELD, message)
    }

    /// An event other than a delta whose oneof field `field` is `message` (neither urgent nor `done`).
    fn whole_of<M: prost::Message>(field: u32, message: &M) -> Stored {
        let mut bytes = Vec::with_capacity(prost::encoding::message::encoded_len(field, message));
        prost::encoding::message::encode(field, message, &mut bytes);
        Stored::whole(bytes, Kind::Other)
    }

    /// An event other than a delta, from its encoding.
    fn whole(bytes: Vec<u8>, kind: Kind) -> Stored {
        Stored::Whole(Arc::new(Whole {
            bytes: bytes.into(),
            kind,
        }))
    }

    /// What kind of event it is, `None` for a delta.
    pub(crate) fn kind(&self) -> Option<Kind> {
        match self {
            Stored::Delta(_) => None,
            Stored::Whole(w) => Some(w.kind),
        }
    }

    /// Keeps a delta of the part `ids` names.
    pub(crate) fn delta(ids: Arc<PartIds>, text: impl Into<CompactString>) -> Stored {
        Stored::Delta(KeptDelta {
            ids,
            text: text.into(),
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
            Stored::Delta(_) => {
                let mut buf = Vec::with_capacity(self.encoded_len());
                self.encode_to(&mut buf);
                buf.into()
            }
            Stored::Whole(w) => w.bytes.clone(),
        }
    }

    /// The length of [`Stored::encode`]'s bytes.
    pub(crate) fn encoded_len(&self) -> usize {
        match self {
            Stored::Delta(d) => {
                let len = d.message_len();
                key_len(PART_DELTA_FIELD) + encoded_len_varint(len as u64) + len
            }
            Stored::Whole(w) => w.bytes.len(),
        }
    }

    /// Writes [`Stored::encode`]'s bytes into `buf`, with no allocation of its own.
    pub(crate) fn encode_to(&self, buf: &mut impl BufMut) {
        match self {
            Stored::Delta(d) => {
                encode_key(PART_DELTA_FIELD, WireType::LengthDelimited, buf);
                encode_varint(d.message_len() as u64, buf);
                put_str(1, &d.ids.part_id, buf);
                put_str(2, &d.ids.message_id, buf);
                put_str(3, &d.text, buf);
            }
            Stored::Whole(w) => buf.put_slice(&w.bytes),
        }
    }

    /// Whether it is a `message_updated` event.
    pub(crate) fn is_message_update(&self) -> bool {
        match self {
            Stored::Delta(_) => false,
            Stored::Whole(w) => prost::encoding::decode_key(&mut &w.bytes[..])
                .is_ok_and(|(field, _)| field == MESSAGE_UPDATED_FIELD),
        }
    }
}

/// A protobuf string field's encoded length (nothing when empty, as proto3 omits it).
pub(super) fn str_len(tag: u32, s: &str) -> usize {
    if s.is_empty() {
        return 0;
    }
    key_len(tag) + encoded_len_varint(s.len() as u64) + s.len()
}

/// Writes a protobuf string field (nothing when empty, as proto3 omits it).
pub(super) fn put_str(tag: u32, s: &str, buf: &mut impl BufMut) {
    if s.is_empty() {
        return;
    }
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(s.len() as u64, buf);
    buf.put_slice(s.as_bytes());
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "stored_tests.rs"]
mod tests;
