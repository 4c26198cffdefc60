//! Following a session's events: from the local channel's ring while it covers the follower, from the log in Redis
//! otherwise (see the module docs of [`super`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use llm_proto::sessions as pb;
use tokio::time::Instant;

use super::channel::Channel;
use super::reading::{Buffered, Ring};
use super::{EventId, Hub, WATCH_REFRESH, WATCH_TTL, lock};
use crate::event_wire::Outgoing;
use crate::store::StoreError;

/// Events read per Redis call.
const READ_BATCH: usize = 256;

/// Events copied per ring visit. Small: the follower's buffer keeps the room its largest read took for as long as
/// it follows, and a follower behind the ring by many events (a slow caller, a saturated replica) would otherwise
/// copy them all (48 bytes each) into a buffer per open stream; a visit is a lock and a search from the ring's end.
pub(super) const RING_BATCH: usize = 16;

/// Follows a session's events after a start id: every event exactly once, in order (see the module docs).
pub struct Follower {
    hub: Hub,
    /// Shared with every event it sends from the ring.
    session_id: Arc<str>,
    /// The last event delivered (or the start).
    after: EventId,
    /// How far the log was read (entry ids).
    cursor: EventId,
    /// Read, not yet delivered; ring events are made into messages only when delivered.
    buf: VecDeque<Buffered>,
    /// The local channel it reads while that covers it.
    live: Option<Arc<Channel>>,
    /// How long one blocking read of Redis waits.
    pub(super) block: Duration,
    /// Blocking reads of Redis since the follower started or last read a local channel.
    remote_reads: u32,
    /// When this follower last set the session's watched mark.
    marked: Option<Instant>,
}

impl Follower {
    /// A follower of `session_id`'s events after `after`.
    pub(super) fn new(hub: Hub, session_id: &str, after: EventId) -> Follower {
        Follower {
            hub,
            session_id: Arc::from(session_id),
            after,
            cursor: after,
            buf: VecDeque::new(),
            live: None,
            block: Duration::from_secs(5),
            remote_reads: 0,
            marked: None,
        }
    }

    /// The session it follows.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The room its buffer keeps, in events.
    #[cfg(test)]
    pub(super) fn buffered_room(&self) -> usize {
        self.buf.capacity()
    }

    /// The next event, whole; waits for one as long as it takes.
    pub async fn next(&mut self) -> Result<pb::SessionEvent, StoreError> {
        self.next_outgoing().await.map(Outgoing::into_event)
    }

    /// The next event as a stream sends it (a ring event as kept: see [`Outgoing`]); waits for one as long as it
    /// takes.
    pub(crate) async fn next_outgoing(&mut self) -> Result<Outgoing, StoreError> {
        loop {
            while let Some(entry) = self.buf.pop_front() {
                let id = match &entry {
                    Buffered::Ring(id, _) => *id,
                    Buffered::Log(event) => match event.event_id.parse::<EventId>() {
                        Ok(id) => id,
                        Err(_) => continue,
                    },
                };
                if id <= self.after {
                    continue;
                }
                self.after = id;
                return Ok(match entry {
                    Buffered::Ring(id, event) => Outgoing::Kept {
                        id,
                        session_id: Arc::clone(&self.session_id),
                        event,
                    },
                    Buffered::Log(event) => Outgoing::Event(event),
                });
            }
            if let Some(channel) = &self.live {
                // A page read from the log (up to READ_BATCH events) left its room behind: given back before the
                // follower settles on the ring for the rest of its stream.
                if self.buf.capacity() > RING_BATCH {
                    self.buf.shrink_to(RING_BATCH);
                }
                let at = (self.after, self.after.max(self.cursor));
                let buf = &mut self.buf;
                // Waits (registered under the channel's lock) while the ring has nothing after us.
                let ring =
                    std::future::poll_fn(|cx| channel.poll_read(at, buf, RING_BATCH, cx)).await;
                if !matches!(ring, Ring::Read) {
                    // Behind the ring, or closed (everything it had is in Redis).
                    self.live = None;
                    self.cursor = self.after;
                }
                continue;
            }
            let position = self.after.max(self.cursor);
            if let Some(channel) = self.hub.channel(&self.session_id) {
                let (covered, closed) = channel.covers(position);
                if !closed {
                    if covered {
                        self.live = Some(channel);
                        self.remote_reads = 0;
                        continue;
                    }
                    // Behind the ring: catch up from the log without waiting.
                    let read = Box::pin(self.read_log(None)).await?;
                    if !read {
                        // Nothing in the log between us and the ring (cannot happen: the ring drops only written
                        // events); attach rather than spin.
                        tracing::warn!(message = "event ring ahead of the log", session_id = %self.session_id);
                        self.cursor = self.cursor.max(channel_covered(&channel));
                    }
                    continue;
                }
            }
            // Boxed: a blocking read of Redis is kilobytes of future, and a follower of a live channel never needs it.
            Box::pin(self.wait_on_log()).await?;
        }
    }

    /// Reads the log, waiting up to `block` for an entry, unless a channel for the session opens on this replica
    /// meanwhile (then the follower attaches to it on its next turn).
    async fn wait_on_log(&mut self) -> Result<(), StoreError> {
        let notify = self.hub.waiter(&self.session_id);
        let read = {
            let opened = notify.notified();
            tokio::pin!(opened);
            // Registered before the check: a channel opening right after it still wakes us.
            opened.as_mut().enable();
            if self.hub.channel(&self.session_id).is_some() {
                Ok(())
            } else if let Err(gone) = self.mark_watched().await {
                Err(gone)
            } else {
                let block = self.block;
                tokio::select! {
                    read = self.read_log(Some(block)) => read.map(drop),
                    () = &mut opened => Ok(()),
                }
            }
        };
        self.hub.done_waiting(&self.session_id, notify);
        read
    }

    /// Before a blocking read of Redis (no loop runs here): marks the session as followed from another replica,
    /// so its loop writes with the short window, at most every [`WATCH_REFRESH`]. Not on the first such read: a
    /// stream on the loop's replica reads the log once when the channel closes (to get `done`), and a stream that
    /// needs only what is already logged should not shorten anybody's window. Best effort (the mark only tunes
    /// freshness), except that it tells when the session no longer exists: [`StoreError::NotFound`].
    async fn mark_watched(&mut self) -> Result<(), StoreError> {
        self.remote_reads = self.remote_reads.saturating_add(1);
        if self.remote_reads < 2 || self.marked.is_some_and(|t| t.elapsed() < WATCH_REFRESH) {
            return Ok(());
        }
        self.marked = Some(Instant::now());
        match self
            .hub
            .store()
            .event_log()
            .mark_watched(&self.session_id, WATCH_TTL)
            .await
        {
            // The session was deleted: nothing more will come.
            Err(e @ StoreError::NotFound(_)) => Err(e),
            Err(e) => {
                tracing::debug!(message = "cannot mark the session watched", session_id = %self.session_id, error = %e);
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// Reads the log after the cursor into the buffer; true when it returned any entry.
    async fn read_log(&mut self, block: Option<Duration>) -> Result<bool, StoreError> {
        let page = self
            .hub
            .store()
            .event_log()
            .read_event_page(&self.session_id, self.cursor, block, READ_BATCH)
            .await?;
        self.buf
            .extend(page.events.into_iter().map(|e| Buffered::Log(Box::new(e))));
        match page.cursor {
            Some(c) => {
                self.cursor = self.cursor.max(c);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

fn channel_covered(channel: &Channel) -> EventId {
    lock(&channel.state).covered
}
