//! An event as a live channel keeps it until it is written and its followers have read it.
//!
//! Most of a streaming session's events are text deltas, and the generated event enum is the size of its largest
//! variant (a whole message), several times a delta's three strings. So a delta is kept as just its
//! [`pb::PartDelta`] and every other event whole, each shared (`Arc`) between the ring and the write that takes it.

use std::sync::Arc;

use llm_proto::sessions as pb;
use pb::session_event::Event;

/// The `SessionEvent` field number of `part_delta`, which a kept delta encodes as.
const PART_DELTA_FIELD: u32 = 5;

/// One kept event (module docs).
#[derive(Debug, Clone)]
pub(crate) enum Stored {
    /// A text delta.
    Delta(Arc<pb::PartDelta>),
    /// Any other event.
    Whole(Arc<Event>),
}

impl Stored {
    /// Keeps `event`.
    pub(crate) fn new(event: Event) -> Stored {
        match event {
            Event::PartDelta(d) => Stored::Delta(Arc::new(d)),
            other => Stored::Whole(Arc::new(other)),
        }
    }

    /// The delta, when it is one.
    pub(crate) fn delta(&self) -> Option<&pb::PartDelta> {
        match self {
            Stored::Delta(d) => Some(d),
            Stored::Whole(_) => None,
        }
    }

    /// The event, as a follower sends it.
    pub(crate) fn to_event(&self) -> Event {
        match self {
            Stored::Delta(d) => Event::PartDelta((**d).clone()),
            Stored::Whole(e) => (**e).clone(),
        }
    }

    /// Its weight for a channel's size bounds: a delta's text, otherwise the event's encoded size.
    pub(crate) fn weight(&self) -> usize {
        match self {
            Stored::Delta(d) => d.delta.len(),
            Stored::Whole(e) => e.encoded_len(),
        }
    }

    /// The encoding of a `SessionEvent` holding only this event (a oneof encodes exactly as its message's field).
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Stored::Delta(d) => {
                let mut buf = Vec::with_capacity(prost::encoding::message::encoded_len(
                    PART_DELTA_FIELD,
                    &**d,
                ));
                prost::encoding::message::encode(PART_DELTA_FIELD, &**d, &mut buf);
                buf
            }
            Stored::Whole(e) => {
                let mut buf = Vec::with_capacity(e.encoded_len());
                e.encode(&mut buf);
                buf
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "stored_tests.rs"]
mod tests;
