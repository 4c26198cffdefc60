//! One session's live events on the replica that runs its loop: ids, the ring local followers read, and the
//! coalesced writes to the session's event log (see the module docs of [`super`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use llm_proto::sessions as pb;
use pb::session_event::Event;
use prost::Message as _;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::reading::{Buffered, Ring, first_after, wake_followers};
use super::{EventId, EventsConfig, SessionTotals, local_millis, lock};
use crate::event_wire::{Kind, PartIds, Stored};
use crate::maps::IdSet;
use crate::store::{Fence, FlushWrites, Flushed, SessionCas, SessionWritten, Store, StoreError};

/// One session's live events on the replica that runs its loop.
pub(super) struct Channel {
    pub(super) session_id: String,
    pub(super) store: Store,
    pub(super) config: EventsConfig,
    pub(super) state: Mutex<State>,
    /// Serialises writes, so entries land in id order.
    pub(super) flushing: tokio::sync::Mutex<()>,
    /// Wakes the timer when a window starts, and on close.
    pub(super) timer: Notify,
}

pub(super) struct State {
    /// The last id handed out.
    pub(super) last: EventId,
    /// Redis clock minus local clock, in ms.
    pub(super) offset_ms: i64,
    /// Recent events, ids increasing; holds every event after `covered` and every unwritten one.
    pub(super) ring: VecDeque<(EventId, Stored)>,
    /// Their weight.
    pub(super) ring_bytes: usize,
    /// Every event of this channel after this id is in the ring.
    pub(super) covered: EventId,
    /// Events up to here are handed to a write (in flight or done).
    pub(super) handed: EventId,
    /// Events up to here are in Redis.
    pub(super) flushed: EventId,
    /// Events and bytes not yet handed to a write, and when the first of them came.
    pub(super) pending_events: usize,
    pub(super) pending_bytes: usize,
    pub(super) window_start: Option<Instant>,
    /// The next publish writes at once: the channel's first event while a stream on another replica follows the
    /// session (it waits on the log).
    pub(super) first: bool,
    /// The timer writes at once, on its own task (the channel's first event: written promptly, so streams waiting
    /// on Redis wake and attach, without the publisher waiting for the write).
    pub(super) asap: bool,
    /// The first `done`: local followers get it (and what follows) only when the channel closes, which the loop
    /// does once its lease is released, so `done` still means "idle" to a caller that asks right away.
    pub(super) hold: Option<EventId>,
    /// The write that logs the run's end also releases the lease when no prompt waits ([`super::LoopLease::hold_from_here`]).
    pub(super) release_at_end: bool,
    /// A write logged the run's end and released the lease with it.
    pub(super) released: bool,
    /// A background write failed; the next publish reports it.
    pub(super) failure: Option<StoreError>,
    pub(super) closed: bool,
    /// The fence of the loop this channel writes for: its writes check the lease with it, and parts need it.
    pub(super) fence: Option<Fence>,
    /// The loop's parts this channel persists (see [`super::Publisher::put_part`]), few at a time.
    pub(super) parts: Vec<Tracked>,
    /// Message heads (messages without their parts) not yet written in their latest state (see
    /// [`super::Publisher::put_message`]).
    pub(super) heads: Vec<pb::Message>,
    /// Messages a write already found listed in the session (the script checks each message once).
    pub(super) listed: IdSet<String>,
    /// The session record's new totals, not yet written (see [`super::Publisher::stage_session`]).
    pub(super) session: Option<Box<SessionTotals>>,
    /// The followers waiting for an event: each registers (under this lock) when it found nothing to read, and
    /// every event and the channel's close wake them all ([`wake_followers`]).
    pub(super) waiting: Vec<Waker>,
    /// Whether a stream on another replica followed the session at the last write: picks the window.
    pub(super) watched: bool,
    /// The loop's lease ttl, once the loop told it ([`super::LoopLease::lease_renewal_due`]): writes then renew the lease.
    pub(super) lease_ttl: Option<Duration>,
    /// When the lease was last renewed (by a write, or by the loop through [`super::LoopLease::renew_lease`]): the time the
    /// renewal was sent, so the lease lives at least `lease_ttl` after it.
    pub(super) renewed_at: Option<Instant>,
}

/// A part the channel persists.
pub(super) struct Tracked {
    /// Its latest state: as handed over, plus the text of its deltas published since. Boxed: a step's parts pass
    /// through this list, whose room would otherwise stay sized for all of them while one streams.
    pub(super) part: Box<pb::Part>,
    /// Not yet written (or not in its latest state).
    pub(super) dirty: bool,
    /// An open text or reasoning part: its deltas extend it; kept after a write.
    pub(super) open: bool,
    /// The ids its deltas carry (shared by all of them), once one came: later ones find it by pointer.
    pub(super) deltas: Option<Arc<PartIds>>,
}

/// A text or reasoning part not yet ended: its text grows with its deltas.
pub(super) fn open_text(part: &pb::Part) -> bool {
    match &part.kind {
        Some(pb::part::Kind::Text(t)) => t.ended_at.is_none(),
        Some(pb::part::Kind::Reasoning(r)) => r.ended_at.is_none(),
        _ => false,
    }
}

/// A part that may wait for the window: an open text or reasoning part, or a step start. Everything else ends
/// something and is written at once.
pub(super) fn lazy(part: &pb::Part) -> bool {
    open_text(part) || matches!(part.kind, Some(pb::part::Kind::StepStart(_)))
}

/// Appends a delta to a text or reasoning part.
pub(super) fn extend(part: &mut pb::Part, delta: &str) {
    match part.kind.as_mut() {
        Some(pb::part::Kind::Text(t)) => t.text.push_str(delta),
        Some(pb::part::Kind::Reasoning(r)) => r.text.push_str(delta),
        _ => {}
    }
}

/// The open part a delta of `ids` extends: found by the ids' pointer once a delta of it came (no string compared,
/// nothing of the part's id read), by its id the first time.
fn delta_target<'a>(parts: &'a mut [Tracked], ids: &Arc<PartIds>) -> Option<&'a mut Tracked> {
    let i = match parts
        .iter()
        .position(|t| t.open && t.deltas.as_ref().is_some_and(|d| Arc::ptr_eq(d, ids)))
    {
        Some(i) => i,
        None => {
            let i = parts
                .iter()
                .position(|t| t.open && t.part.id == ids.part_id)?;
            parts[i].deltas = Some(Arc::clone(ids));
            i
        }
    };
    parts.get_mut(i)
}

/// What a publish hands the channel to persist, under the loop's fence.
/// Owned: the channel keeps what it is handed (until written) instead of a copy.
pub(super) enum Write<'a> {
    /// A part (see [`super::Publisher::put_part`]).
    Part(Box<pb::Part>, &'a Fence),
    /// A part that waits for the channel's next write whatever it is (see [`super::Publisher::put_part_later`]).
    PartLater(Box<pb::Part>, &'a Fence),
    /// A message head (see [`super::Publisher::put_message`]).
    Message(Box<pb::Message>, &'a Fence),
}

pub(super) enum Published<'a> {
    Done(Result<(), StoreError>),
    /// The channel closed in between: publish elsewhere (with the write handed back).
    Closed(Option<Write<'a>>),
}

/// What [`Channel::queue`] did with an event.
pub(super) enum Queued<'a> {
    /// Queued; the window's write will carry it.
    Done,
    /// Queued, and the channel must write now (an urgent event, a full batch, a failed write to retry).
    Flush,
    /// The channel closed in between: publish elsewhere (with the write handed back).
    Closed(Box<Event>, Option<Write<'a>>),
}

impl Channel {
    pub(super) fn new(
        session_id: String,
        store: Store,
        config: EventsConfig,
        last: EventId,
        offset_ms: i64,
        watched: bool,
    ) -> Channel {
        Channel {
            session_id,
            store,
            config,
            state: Mutex::new(State {
                last,
                offset_ms,
                // Its bound exactly: `queue` makes room before it pushes.
                ring: VecDeque::with_capacity(config.ring_events),
                ring_bytes: 0,
                covered: last,
                handed: last,
                flushed: last,
                pending_events: 0,
                pending_bytes: 0,
                window_start: None,
                first: watched,
                asap: false,
                hold: None,
                release_at_end: false,
                released: false,
                failure: None,
                closed: false,
                fence: None,
                parts: Vec::new(),
                heads: Vec::new(),
                listed: IdSet::default(),
                session: None,
                waiting: Vec::new(),
                watched,
                lease_ttl: None,
                renewed_at: None,
            }),
            flushing: tokio::sync::Mutex::new(()),
            timer: Notify::new(),
        }
    }

    /// The fence of the loop this channel now writes for (taken at `acquired`), when it changed.
    pub(super) fn set_fence(&self, fence: Option<&Fence>, acquired: Instant) {
        if let Some(fence) = fence {
            let mut s = lock(&self.state);
            if s.fence.as_ref() != Some(fence) {
                s.fence = Some(fence.clone());
                s.renewed_at = Some(acquired);
            }
        }
    }

    pub(super) fn last_id(&self) -> Option<EventId> {
        let s = lock(&self.state);
        (!s.closed).then_some(s.last)
    }

    /// Assigns the id, delivers to local followers, and writes now only when the event, the part handed with it
    /// (see [`super::Publisher::put_part`]) or the batch asks for it. A message head waits for the next write, whatever it is.
    pub(super) async fn publish<'a>(
        &self,
        event: Stored,
        write: Option<Write<'a>>,
    ) -> Published<'a> {
        match self.queue(event, write) {
            Queued::Done => Published::Done(Ok(())),
            // Boxed: a write is rare next to the publishes that only queue an event, and every future that
            // publishes (the loop's per-delta path) would otherwise carry room for it.
            Queued::Flush => Published::Done(Box::pin(self.flush()).await),
            Queued::Closed(_, write) => Published::Closed(write),
        }
    }

    /// The part of [`Channel::publish`] that needs no await: the event queued (or handed back when the channel
    /// has closed), and whether a write must follow at once.
    pub(super) fn queue<'a>(&self, stored: Stored, write: Option<Write<'a>>) -> Queued<'a> {
        let kind = stored.kind();
        let urgent = matches!(kind, Some(Kind::Urgent | Kind::Done))
            || matches!(&write, Some(Write::Part(p, _)) if !lazy(p));
        let done = kind == Some(Kind::Done);
        let bytes = stored.weight();
        let (write_now, window_started) = {
            let mut s = lock(&self.state);
            if s.closed {
                return Queued::Closed(Box::new(stored.to_event()), write);
            }
            // A background write failed: this publish writes at once, with everything that write held, and
            // reports the failure only if Redis still refuses it (the event itself is never dropped).
            let retry_failed = s.failure.take().is_some();
            let now = u64::try_from(local_millis().saturating_add(s.offset_ms)).unwrap_or(0);
            let id = s.last.next_at(now);
            s.last = id;
            if done && s.hold.is_none() {
                s.hold = Some(id);
            }
            if let Some(d) = stored.as_delta()
                && let Some(t) = delta_target(&mut s.parts, &d.ids)
            {
                extend(&mut t.part, &d.text);
                t.dirty = true;
            }
            if let Some(write) = write {
                track(&mut s, write);
            }
            // Room first, so a full ring never reallocates to twice its size for one event.
            self.trim_to(&mut s, self.config.ring_events.saturating_sub(1));
            s.ring.push_back((id, stored));
            s.pending_events += 1;
            s.pending_bytes += bytes;
            s.ring_bytes += bytes;
            let window_started = s.window_start.is_none();
            if window_started {
                s.window_start = Some(Instant::now());
            }
            self.trim(&mut s);
            let first = std::mem::take(&mut s.first);
            s.asap |= first;
            let write_now = urgent
                || retry_failed
                || s.pending_events >= self.config.max_batch_events
                || s.pending_bytes >= self.config.max_batch_bytes;
            wake_followers(&mut s.waiting);
            (write_now, window_started || first)
        };
        if write_now {
            Queued::Flush
        } else {
            if window_started {
                self.timer.notify_one();
            }
            Queued::Done
        }
    }

    /// Drops written events beyond the ring's bounds, oldest first. A ring that grew past its bound (a window
    /// with more unwritten events than it keeps: a fast stream, or a write slow to come back) gets its room back
    /// once those are written, so an open session holds the bound's room, not its largest window's.
    pub(super) fn trim(&self, s: &mut State) {
        let bound = self.config.ring_events;
        self.trim_to(s, bound);
        if s.ring.capacity() >= 2 * bound.max(1) && s.ring.len() <= bound {
            s.ring.shrink_to(bound);
        }
    }

    /// Drops written events, oldest first, until the ring holds at most `events` and its byte bound.
    fn trim_to(&self, s: &mut State, events: usize) {
        while s.ring.len() > events || s.ring_bytes > self.config.ring_bytes {
            match s.ring.front() {
                Some((id, event)) if *id <= s.flushed => {
                    s.covered = *id;
                    s.ring_bytes = s.ring_bytes.saturating_sub(event.weight());
                    s.ring.pop_front();
                }
                _ => break,
            }
        }
    }

    /// Whether a part's or a message's latest state, or the session's totals, are not yet written.
    pub(super) fn has_dirty_parts(&self) -> bool {
        let s = lock(&self.state);
        !s.heads.is_empty() || s.session.is_some() || s.parts.iter().any(|t| t.dirty)
    }

    /// Holds the session record's new totals for the next write (replacing totals not yet written, whose expected
    /// bytes it keeps: Redis still has those) and opens a window if none is, so they are written within it.
    pub(super) fn stage_session(&self, mut totals: Box<SessionTotals>, fence: &Fence) {
        {
            let mut s = lock(&self.state);
            hold_fence(&mut s, fence);
            if let Some(older) = s.session.take() {
                totals.expected = older.expected;
                totals.charge = totals.charge.saturating_add(older.charge);
            }
            s.session = Some(totals);
            if s.window_start.is_some() {
                return;
            }
            s.window_start = Some(Instant::now());
        }
        self.timer.notify_one();
    }

    /// Writes every event not yet handed to a write as one entry, with the parts and message heads not yet written
    /// in their latest state, in one script. Writes are serialised and each takes the parts as they are when it takes its events,
    /// so a part in Redis never goes back to older text and never holds text the log does not.
    pub(super) async fn flush(&self) -> Result<(), StoreError> {
        let _serial = self.flushing.lock().await;
        let started = Instant::now();
        let Taken {
            batch,
            parts,
            heads,
            fence,
            listed,
            renew,
            session,
            ends_run,
            release,
        } = self.take_unwritten();
        if batch.is_empty() && parts.is_empty() && heads.is_empty() && session.is_none() {
            return Ok(());
        }
        let last = batch.last().map(|(id, _)| *id);
        let encoded = last.map(|last| (last, crate::event_wire::encode_batch(&batch)));
        drop(batch);
        let record = session.as_ref().map(|t| t.record.encode_to_vec());
        let writes = FlushWrites {
            parts: &parts,
            heads: &heads,
            listed: &listed,
            ends_run,
            release,
            session: session
                .as_ref()
                .zip(record.as_deref())
                .map(|(t, new)| SessionCas {
                    expected: &t.expected,
                    new,
                }),
        };
        // Boxed, like every Redis call on the loop's path: a store future is kilobytes, and inline it would make every
        // future that awaits a write (the loop's, a step's, each publish's) that much bigger for its whole life.
        let result = Box::pin(self.store.event_log().flush_events(
            &self.session_id,
            encoded,
            fence.as_ref(),
            renew,
            writes,
        ))
        .await;
        match result {
            Ok(mut flushed) => {
                let written = flushed.session.take();
                let parts_result = self.written(last, started, &parts, &heads, flushed);
                match (session, written) {
                    (Some(totals), Some(outcome)) => {
                        Box::pin(self.settled(totals, outcome, fence.as_ref())).await?;
                    }
                    (Some(totals), None) => self.not_written(Vec::new(), Vec::new(), Some(totals)),
                    _ => {}
                }
                parts_result
            }
            Err(e) => {
                self.not_written(parts, heads, session);
                Err(e)
            }
        }
    }

    /// After a write that carried the session's totals: when the record had changed meanwhile (another writer, the
    /// title), the totals are applied to it as it is now; once they are in Redis, the tenant is charged (never
    /// before, so a replica dying in between leaves the step uncounted rather than counted twice).
    async fn settled(
        &self,
        totals: SessionTotals,
        outcome: SessionWritten,
        fence: Option<&Fence>,
    ) -> Result<(), StoreError> {
        match outcome {
            SessionWritten::Written => {}
            SessionWritten::Refused(e) => return Err(e),
            SessionWritten::Changed => {
                let record = &totals.record;
                let updated = self
                    .store
                    .sessions()
                    .update_session_from(&self.session_id, fence, None, |s| {
                        s.cost_nano_usd = record.cost_nano_usd;
                        s.tokens = record.tokens;
                        s.updated_at = record.updated_at;
                    })
                    .await;
                if let Err(e) = updated {
                    self.not_written(Vec::new(), Vec::new(), Some(totals));
                    return Err(e);
                }
            }
        }
        if totals.charge > 0 && !totals.record.tenant.is_empty() {
            let tenant = &totals.record.tenant;
            if let Err(e) = self
                .store
                .spend()
                .add_tenant_spend(tenant, totals.charge)
                .await
            {
                tracing::warn!(message = "cannot add to the tenant's spend", session_id = %self.session_id, tenant = %tenant, error = %e);
            }
        }
        Ok(())
    }

    /// Hands every event not yet handed to a write, and the dirty parts and heads, to the write starting now.
    fn take_unwritten(&self) -> Taken {
        let mut s = lock(&self.state);
        s.pending_events = 0;
        s.pending_bytes = 0;
        s.window_start = None;
        s.asap = false;
        let handed = s.handed;
        let start = first_after(&s.ring, handed);
        let batch: Vec<_> = s.ring.range(start..).cloned().collect();
        if let Some((last, _)) = batch.last() {
            s.handed = *last;
        }
        // Written parts that no delta extends any more are done with: those move to the write; the open ones are
        // copied (their deltas go on extending them).
        let mut parts = Vec::new();
        s.parts.retain_mut(|t| {
            if !t.dirty {
                return t.open;
            }
            t.dirty = false;
            if t.open {
                parts.push((*t.part).clone());
            } else {
                parts.push(std::mem::take(&mut *t.part));
            }
            t.open
        });
        let heads = std::mem::take(&mut s.heads);
        // Of the messages this write names, those a write already found listed (the script checks the others).
        let listed: IdSet<String> = parts
            .iter()
            .map(|p| &p.message_id)
            .chain(heads.iter().map(|h| &h.id))
            .filter(|id| s.listed.contains(*id))
            .cloned()
            .collect();
        let session = s.session.take().map(|totals| *totals);
        let ends_run = s
            .hold
            .is_some_and(|hold| batch.last().is_some_and(|(id, _)| *id >= hold));
        // The lease is extended with a write when the loop's own renewal would be due before the next window.
        let renew = s.lease_ttl.filter(|ttl| {
            s.fence.is_some()
                && s.renewed_at
                    .is_none_or(|at| self.config.renews(s.watched, *ttl, at.elapsed()))
        });
        Taken {
            batch,
            parts,
            heads,
            fence: s.fence.clone(),
            listed,
            renew,
            session,
            ends_run,
            release: ends_run && s.release_at_end,
        }
    }

    /// Records a write Redis took: the log's position, the lease renewal, the messages now listed.
    fn written(
        &self,
        last: Option<EventId>,
        started: Instant,
        parts: &[pb::Part],
        heads: &[pb::Message],
        flushed: Flushed,
    ) -> Result<(), StoreError> {
        let mut s = lock(&self.state);
        if let (Some(last), Some(actual)) = (last, flushed.entry) {
            s.flushed = s.flushed.max(last);
            // The log moved past our ids (a foreign write): carry on after it.
            s.last = s.last.max(actual);
        }
        s.watched = flushed.watched;
        s.released |= flushed.released;
        if flushed.renewed {
            s.renewed_at = Some(s.renewed_at.map_or(started, |at| at.max(started)));
        }
        self.trim(&mut s);
        if flushed.parts.is_ok() {
            for id in parts
                .iter()
                .map(|p| &p.message_id)
                .chain(heads.iter().map(|h| &h.id))
            {
                if !s.listed.contains(id) {
                    s.listed.insert(id.clone());
                }
            }
        }
        flushed.parts
    }

    /// A write Redis refused: the next write takes these events again, these parts (in their latest state) and
    /// these totals (unless newer ones came meanwhile: those stay, compared with what Redis still holds).
    fn not_written(
        &self,
        parts: Vec<pb::Part>,
        heads: Vec<pb::Message>,
        session: Option<SessionTotals>,
    ) {
        let mut s = lock(&self.state);
        if let Some(totals) = session {
            match s.session.as_mut() {
                Some(newer) => {
                    newer.expected = totals.expected;
                    newer.charge = newer.charge.saturating_add(totals.charge);
                }
                None => s.session = Some(Box::new(totals)),
            }
        }
        s.handed = s.flushed;
        let flushed = s.flushed;
        let start = first_after(&s.ring, flushed);
        s.pending_events = s.ring.len() - start;
        for p in parts {
            match s.parts.iter_mut().find(|t| t.part.id == p.id) {
                Some(t) => t.dirty = true,
                None => s.parts.push(Tracked {
                    part: Box::new(p),
                    dirty: true,
                    open: false,
                    deltas: None,
                }),
            }
        }
        // Heads handed to this write go back unless a newer state came meanwhile.
        for h in heads {
            if !s.heads.iter().any(|n| n.id == h.id) {
                s.heads.reserve_exact(1);
                s.heads.push(h);
            }
        }
        if s.window_start.is_none() {
            s.window_start = Some(Instant::now());
        }
    }

    /// When the current window ends, if one is open: its start plus the window for the last known audience.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let s = lock(&self.state);
        if s.asap && s.window_start.is_some() {
            return Some(Instant::now());
        }
        s.window_start.map(|t| t + self.config.window(s.watched))
    }

    /// Writes a window's events when it ends. Runs until the channel closes.
    pub(super) async fn run_timer(self: Arc<Self>) {
        loop {
            if lock(&self.state).closed {
                return;
            }
            match self.deadline() {
                None => self.timer.notified().await,
                Some(deadline) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(deadline) => {
                            // Another write may have ended that window meanwhile and a new one started: write
                            // only when the current one is over.
                            if self.deadline().is_some_and(|d| d > Instant::now()) {
                                continue;
                            }
                            // Boxed: once per window, while the task waits far longer; unboxed, every open
                            // session's timer would keep room for the write.
                            if let Err(e) = Box::pin(self.flush()).await {
                                tracing::warn!(message = "cannot write session events", session_id = %self.session_id, error = %e);
                                lock(&self.state).failure = Some(e);
                            }
                        }
                        _ = self.timer.notified() => {}
                    }
                }
            }
        }
    }

    /// Writes what is left and closes: followers move on to Redis, publishes go there directly.
    pub(super) async fn close(&self) -> Result<(), StoreError> {
        let result = loop {
            if let Err(e) = self.flush().await {
                break Err(e);
            }
            let mut s = lock(&self.state);
            if s.handed == s.last {
                s.closed = true;
                break Ok(());
            }
        };
        {
            let mut s = lock(&self.state);
            s.closed = true;
            wake_followers(&mut s.waiting);
        }
        self.timer.notify_one();
        result
    }

    /// Copies up to `max` events after `after` into `buf`. `position` is how far the follower has read (it may be
    /// past `after` when the log had nothing new for it), which decides whether the ring still covers it. Pending,
    /// with the follower's waker registered under the same lock the publishers take, while there is nothing to
    /// read and the channel is open: the next event or the close wakes it.
    pub(super) fn poll_read(
        &self,
        (after, position): (EventId, EventId),
        buf: &mut VecDeque<Buffered>,
        max: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Ring> {
        let mut s = lock(&self.state);
        if position < s.covered {
            return Poll::Ready(Ring::Behind);
        }
        let start = first_after(&s.ring, after);
        let end = match s.hold {
            Some(hold) if !s.closed => s.ring.partition_point(|(id, _)| *id < hold),
            _ => s.ring.len(),
        };
        if start >= end {
            if s.closed {
                return Poll::Ready(Ring::Closed);
            }
            if !s.waiting.iter().any(|w| w.will_wake(cx.waker())) {
                s.waiting.push(cx.waker().clone());
            }
            return Poll::Pending;
        }
        // Shared, not copied: a follower makes the event it sends when it sends it.
        buf.extend(
            s.ring
                .range(start..end)
                .take(max)
                .map(|(id, event)| Buffered::Ring(*id, event.clone())),
        );
        Poll::Ready(Ring::Read)
    }

    /// Whether the ring holds everything after `position`, and whether the channel is closed.
    pub(super) fn covers(&self, position: EventId) -> (bool, bool) {
        let s = lock(&self.state);
        (position >= s.covered, s.closed)
    }
}

/// What one write takes from the channel's state.
struct Taken {
    batch: Vec<(EventId, Stored)>,
    parts: Vec<pb::Part>,
    heads: Vec<pb::Message>,
    fence: Option<Fence>,
    listed: IdSet<String>,
    renew: Option<Duration>,
    session: Option<SessionTotals>,
    /// The batch holds the run's end (see [`super::LoopLease::hold_from_here`]).
    ends_run: bool,
    /// And the write releases the lease with it when it can.
    release: bool,
}

/// The fence the channel's writes carry from now on; the same one is not copied again (most publishes carry it).
fn hold_fence(s: &mut State, fence: &Fence) {
    if s.fence.as_ref() != Some(fence) {
        s.fence = Some(fence.clone());
    }
}

/// Tracks the part or message head a publish hands over, in its latest state, for the next write.
fn track(s: &mut State, write: Write<'_>) {
    match write {
        Write::Part(part, fence) | Write::PartLater(part, fence) => {
            hold_fence(s, fence);
            let tracked = Tracked {
                open: open_text(&part),
                part,
                dirty: true,
                deltas: None,
            };
            match s.parts.iter_mut().find(|t| t.part.id == tracked.part.id) {
                Some(t) => *t = tracked,
                None => s.parts.push(tracked),
            }
        }
        Write::Message(head, fence) => {
            hold_fence(s, fence);
            match s.heads.iter_mut().find(|h| h.id == head.id) {
                Some(h) => *h = *head,
                None => {
                    // Room for exactly one more: a session has one or two heads pending, and a message is hundreds
                    // of bytes, so the vector's usual room for four would cost a kilobyte per open session.
                    s.heads.reserve_exact(1);
                    s.heads.push(*head);
                }
            }
        }
    }
}
