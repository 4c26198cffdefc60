//! The stored form of a batch of events: one Redis Stream entry (field `b`) carrying several events with their ids.
//!
//! Consecutive deltas of one part are merged into one stored event (the concatenated text) that remembers where
//! each original delta ended and which id it had, so a reader gets back exactly the events the live subscribers
//! saw, with the same ids, and a resume after any of them is exact.

use std::sync::Arc;

use llm_proto::sessions as pb;
use pb::session_event::Event;
use prost::Message as _;

use super::{EventId, KeptDelta, Stored};

/// One stream entry's events (field `b`).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StoredBatch {
    /// The events, in order.
    #[prost(message, repeated, tag = "1")]
    pub events: Vec<StoredEvent>,
}

/// One event, or a run of merged deltas of one part.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StoredEvent {
    /// The event's id (a merged run: its last delta's id), milliseconds.
    #[prost(uint64, tag = "1")]
    pub ms: u64,
    /// The event's id, sequence.
    #[prost(uint64, tag = "2")]
    pub seq: u64,
    /// A `SessionEvent` without ids (a merged run: one `part_delta` with the whole text).
    #[prost(bytes = "bytes", tag = "3")]
    pub event: bytes::Bytes,
    /// A merged run: `(ms, seq)` of every delta but the last, flattened.
    #[prost(uint64, repeated, tag = "4")]
    pub piece_ids: Vec<u64>,
    /// A merged run: the byte length of every delta but the last (the last one is the rest of the text).
    #[prost(uint32, repeated, tag = "5")]
    pub piece_lens: Vec<u32>,
}

/// Two deltas that may be merged: same part, same message.
fn same_part(a: &Stored, b: &Stored) -> bool {
    match (a.as_delta(), b.as_delta()) {
        (Some(a), Some(b)) => Arc::ptr_eq(&a.ids, &b.ids) || a.ids == b.ids,
        _ => false,
    }
}

/// Encodes events (ids strictly increasing) as one batch, merging runs of deltas of the same part.
pub(crate) fn encode_batch(events: &[(EventId, Stored)]) -> Vec<u8> {
    let mut batch = StoredBatch {
        events: Vec::with_capacity(events.len()),
    };
    let mut i = 0;
    while let Some((id, event)) = events.get(i) {
        let mut end = i + 1;
        while events
            .get(end)
            .is_some_and(|(_, next)| same_part(event, next))
        {
            end += 1;
        }
        if let (Some(first), true) = (event.as_delta(), end - i > 1) {
            batch.events.push(merged(first, &events[i..end]));
            i = end;
            continue;
        }
        batch.events.push(StoredEvent {
            ms: id.ms,
            seq: id.seq,
            event: event.encode(),
            piece_ids: Vec::new(),
            piece_lens: Vec::new(),
        });
        i += 1;
    }
    batch.encode_to_vec()
}

/// A run of deltas of one part (`first` the first's) as one stored event: the whole text, each piece's id and
/// length but the last's.
fn merged(first: &KeptDelta, run: &[(EventId, Stored)]) -> StoredEvent {
    let mut text = String::new();
    let mut piece_ids = Vec::with_capacity(2 * (run.len() - 1));
    let mut piece_lens = Vec::with_capacity(run.len() - 1);
    for (k, (piece_id, piece)) in run.iter().enumerate() {
        let Some(d) = piece.as_delta() else {
            continue;
        };
        text.push_str(&d.text);
        if k + 1 < run.len() {
            piece_ids.push(piece_id.ms);
            piece_ids.push(piece_id.seq);
            piece_lens.push(u32::try_from(d.text.len()).unwrap_or(u32::MAX));
        }
    }
    let whole = Stored::delta(Arc::clone(&first.ids), text);
    let last = run[run.len() - 1].0;
    StoredEvent {
        ms: last.ms,
        seq: last.seq,
        event: whole.encode(),
        piece_ids,
        piece_lens,
    }
}

/// Why a stored batch cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BatchError {
    /// Not the protobuf it should be.
    #[error(transparent)]
    Decode(#[from] prost::DecodeError),
    /// The merged-delta bookkeeping does not fit the text.
    #[error("merged delta pieces do not fit its text")]
    Pieces,
}

/// Decodes a batch into events with `event_id` and `session_id` filled in, merged deltas split back into the
/// original ones. Appends to `out`.
pub(crate) fn decode_batch(
    bytes: &[u8],
    session_id: &str,
    out: &mut Vec<pb::SessionEvent>,
) -> Result<(), BatchError> {
    let batch = StoredBatch::decode(bytes)?;
    for stored in batch.events {
        let mut event = pb::SessionEvent::decode(stored.event.as_ref())?;
        event.session_id = session_id.to_string();
        if !stored.piece_lens.is_empty() {
            let Some(Event::PartDelta(d)) = &mut event.event else {
                return Err(BatchError::Pieces);
            };
            if stored.piece_ids.len() != 2 * stored.piece_lens.len() {
                return Err(BatchError::Pieces);
            }
            let mut offset = 0usize;
            for (k, len) in stored.piece_lens.iter().enumerate() {
                let end = offset.saturating_add(*len as usize);
                let piece = d.delta.get(offset..end).ok_or(BatchError::Pieces)?;
                out.push(pb::SessionEvent {
                    event_id: EventId {
                        ms: stored.piece_ids[2 * k],
                        seq: stored.piece_ids[2 * k + 1],
                    }
                    .to_string(),
                    session_id: session_id.to_string(),
                    event: Some(Event::PartDelta(pb::PartDelta {
                        part_id: d.part_id.clone(),
                        message_id: d.message_id.clone(),
                        delta: piece.to_string(),
                    })),
                });
                offset = end;
            }
            let rest = d.delta.get(offset..).ok_or(BatchError::Pieces)?;
            d.delta = rest.to_string();
        }
        event.event_id = EventId {
            ms: stored.ms,
            seq: stored.seq,
        }
        .to_string();
        out.push(event);
    }
    Ok(())
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
