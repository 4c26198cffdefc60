//! How session events are written in a session's event log: event ids (`<ms>-<seq>`, as Redis stream ids) and
//! the batch encoding of a stream entry; and how a stream writes the events it sends (`Outgoing`). A leaf: the store reads and writes these bytes, the event hub
//! (`crate::events`) produces and consumes them, and neither needs the other for it.

mod codec;
mod id;
mod outgoing;
mod stored;

pub(crate) use codec::{BatchError, decode_batch, encode_batch};
pub use id::{BadEventId, EventId};
pub(crate) use outgoing::Outgoing;
pub use stored::PartIds;
pub(crate) use stored::{KeptDelta, Kind, Stored};
