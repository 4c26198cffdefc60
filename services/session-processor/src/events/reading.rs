//! What the streams on this replica read from a session's channel (`Channel::poll_read`): the events a follower
//! buffers, what it finds, where in the ring its next event is, and the wake-up of the followers waiting for one.

use std::collections::VecDeque;
use std::task::Waker;

use llm_proto::sessions as pb;

use super::EventId;
use crate::event_wire::Stored;

/// An event a follower has read and not yet delivered.
pub(super) enum Buffered {
    /// From this replica's ring: its id and the kept event, shared with the ring.
    Ring(EventId, Stored),
    /// From the log in Redis.
    Log(Box<pb::SessionEvent>),
}

/// What a follower found in a channel's ring.
pub(super) enum Ring {
    /// Events were added to the follower's buffer.
    Read,
    /// The ring no longer holds everything after the follower's position.
    Behind,
    /// Nothing new, and the channel is closed: everything it had is in Redis.
    Closed,
}

/// Wakes the followers waiting for an event (under the state's lock: waking only schedules their tasks). The list
/// keeps its room, so waiting costs no allocation per event.
pub(super) fn wake_followers(waiting: &mut Vec<Waker>) {
    for waker in waiting.drain(..) {
        waker.wake();
    }
}

/// The index of the ring's first event after `id`. A follower or a write looks for the events since it last looked,
/// nearly always a few at the ring's end, so the scan starts there and reads a cache line or two (a binary search
/// probes lines all over the ring, for every delta every follower reads); further back, it searches.
pub(super) fn first_after(ring: &VecDeque<(EventId, Stored)>, id: EventId) -> usize {
    const NEAR: usize = 8;
    let len = ring.len();
    let newer = ring
        .iter()
        .rev()
        .take(NEAR)
        .take_while(|(e, _)| *e > id)
        .count();
    if newer < NEAR.min(len) {
        return len - newer;
    }
    ring.partition_point(|(e, _)| *e <= id)
}
