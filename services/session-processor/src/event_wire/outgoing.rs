//! An event as a stream sends it: made whole (read from the log, or made by the stream), or still as this replica's
//! channel keeps it, written straight into the response from the kept form.
//!
//! Most of a followed session's events come from the local channel's ring, and most of those are text deltas. Made
//! into a `SessionEvent` each cost five strings (the id formatted, the session's id, the part's and message's ids and
//! the text copied), the generated message's encoding, and as many frees; an event other than a delta was decoded
//! from its kept bytes only to be encoded again. A kept event is encoded here from what the ring holds: the id's text
//! made on the stack, the session's id shared, the event's bytes as kept.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::BufMut;
use llm_proto::sessions as pb;
use pb::session_event::Event;
use prost::encoding::{WireType, encode_key, encode_varint};

use super::stored::{put_str, str_len};
use super::{EventId, Kind, Stored};

/// `SessionEvent` field numbers.
const EVENT_ID_FIELD: u32 = 1;
const SESSION_ID_FIELD: u32 = 2;

/// The field every streamed response (`PromptResponse`, `SubscribeResponse`, `CompactResponse`) holds its
/// `SessionEvent` in.
const RESPONSE_EVENT_FIELD: u32 = 1;

/// One event a stream sends (module docs).
#[derive(Debug, Clone)]
pub(crate) enum Outgoing {
    /// A whole event: read from the log, or made by the stream itself.
    Event(Box<pb::SessionEvent>),
    /// An event of the local channel's ring, as kept.
    Kept {
        /// Its id.
        id: EventId,
        /// The session's id.
        session_id: Arc<str>,
        /// The event.
        event: Stored,
    },
}

impl Outgoing {
    /// The event as a whole message.
    pub fn into_event(self) -> pb::SessionEvent {
        match self {
            Outgoing::Event(e) => *e,
            Outgoing::Kept {
                id,
                session_id,
                event,
            } => pb::SessionEvent {
                event_id: id.to_id_string(),
                session_id: session_id.to_string(),
                event: Some(event.to_event()),
            },
        }
    }

    /// Whether it is `done`.
    pub fn is_done(&self) -> bool {
        match self {
            Outgoing::Event(e) => matches!(e.event, Some(Event::Done(_))),
            Outgoing::Kept { event, .. } => event.kind() == Some(Kind::Done),
        }
    }

    /// Whether it is not in the log (an event a stream made itself, without an id).
    pub fn unlogged(&self) -> bool {
        matches!(self, Outgoing::Event(e) if e.event_id.is_empty())
    }

    /// The message, when it is `message_updated` (a kept one decoded only then).
    pub fn message_updated(&self) -> Option<Cow<'_, pb::Message>> {
        match self {
            Outgoing::Event(e) => match &e.event {
                Some(Event::MessageUpdated(m)) => Some(Cow::Borrowed(m)),
                _ => None,
            },
            Outgoing::Kept { event, .. } if event.is_message_update() => match event.to_event() {
                Event::MessageUpdated(m) => Some(Cow::Owned(m)),
                _ => None,
            },
            Outgoing::Kept { .. } => None,
        }
    }

    /// Writes it as a streamed response: a message whose field 1 is the `SessionEvent` (what `PromptResponse`,
    /// `SubscribeResponse` and `CompactResponse` all are).
    pub fn encode_response(&self, buf: &mut impl BufMut) {
        match self {
            Outgoing::Event(e) => prost::encoding::message::encode(RESPONSE_EVENT_FIELD, &**e, buf),
            Outgoing::Kept {
                id,
                session_id,
                event,
            } => {
                let id = id.text();
                encode_key(RESPONSE_EVENT_FIELD, WireType::LengthDelimited, buf);
                encode_varint(kept_len(id.as_str(), session_id, event) as u64, buf);
                put_str(EVENT_ID_FIELD, id.as_str(), buf);
                put_str(SESSION_ID_FIELD, session_id, buf);
                event.encode_to(buf);
            }
        }
    }
}

/// A kept event's length as a `SessionEvent`.
fn kept_len(id: &str, session_id: &str, event: &Stored) -> usize {
    str_len(EVENT_ID_FIELD, id) + str_len(SESSION_ID_FIELD, session_id) + event.encoded_len()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "outgoing_tests.rs"]
mod tests;
