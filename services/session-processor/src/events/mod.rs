//! Session events: an in-process hub per replica that delivers a running loop's events at once to the streams
//! attached on the same replica, and writes them to the session's Redis Stream coalesced.
//!
//! # Who writes the log
//!
//! While a replica runs a session's loop it holds a [`Channel`] for it (opened after the lease is acquired, closed
//! before it is released). Every event published for that session on this replica goes through the channel:
//!
//! 1. it gets an id `<ms>-<seq>`: `max(now, last)` plus a sequence, on Redis's clock (the offset to it is measured
//!    when the channel opens) and after the stream's last entry, so ids keep increasing across replicas, lease
//!    changes and clock steps;
//! 2. it goes into the channel's ring and wakes the local followers, which read it from there (no Redis);
//! 3. it is written to the stream later, with the events before it, as one entry ([`codec`]): when the flush
//!    window since the first unwritten event ends, when the unwritten events reach a size bound, at once for
//!    events somebody must act on or that end a run (`tool_call_awaiting`, `permission_asked`, `error`, `done`),
//!    for the first event after the channel opens (so streams waiting on Redis wake and attach), and when the
//!    channel closes. An entry's id is its last event's id.
//!
//! The same script writes the loop's parts ([`Hub::put_part`]): an open text or reasoning part is kept current by
//! its deltas and written with the window that logs them (so the stored text is never behind an older write and
//! never ahead of the log), a part that ends something is written at once with the events before it. Parts are
//! fenced; the log is not. The script also renews the loop's lease on the way when it is due
//! ([`Hub::renew_lease`]).
//!
//! The window adapts to who is watching: streams on this replica get every event at once whatever it is, so while
//! no stream on another replica follows the session the channel uses the long window
//! (`events.unwatched_flush_interval_ms`); a remote follower marks the session as watched
//! ([`crate::store::EventLog::mark_watched`], refreshed about once a second), the script reports the mark, and the
//! channel uses the short window (`events.flush_interval_ms`) while it exists.
//!
//! A `done` is written at once like the other urgent events, but the channel's own followers get it only when the
//! channel closes, which the loop does after releasing its lease: `done` means "idle", and a caller on the loop's
//! replica that asks for the session right after it must not find it busy.
//!
//! A session with no channel on this replica is published straight to Redis with an auto id (one entry per
//! event). The flush script writes an entry at `max(requested, last + 1)` and never fails on ids: if the log moved
//! past the channel's ids (only a write from outside: a replica that lost its lease still flushing, or an auto-id
//! publish racing the owner), the entry is written after it, its events keep the ids they were delivered with, and
//! the channel continues after the entry's id. Readers drop events whose id is not above the last one they
//! delivered, so such an entry never produces a duplicate; what it can cost is order across that one foreign write.
//!
//! # Following
//!
//! A [`Follower`] (the Prompt, Subscribe and Compact streams) delivers every event after its start id exactly once
//! and in order: from the local channel's ring while there is one that still holds everything after its position,
//! and otherwise from Redis (XREAD, blocking while nothing is running here). A follower that falls behind the ring
//! (bounded) reads Redis until it catches up: a slow caller never grows the hub.

mod channel;
mod follow;
mod reading;

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use llm_proto::sessions as pb;
use pb::session_event::Event;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::maps::IdMap;
use crate::store::{Fence, Store, StoreError};

use crate::event_wire::Stored;
pub use crate::event_wire::{BadEventId, EventId, PartIds};
pub use follow::Follower;

use channel::{Channel, Published, Write};

/// Default flush window: how long after the first unwritten event a channel writes its batch. Measured on the
/// end-to-end path (see docs/architecture.md, "Session events"): at typical model speeds (30–100 deltas/s) 200 ms
/// carries 6–20 deltas per entry, while a stream on another replica still sees text within a fifth of a second.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// Default flush window while no stream on another replica follows the session: streams on the loop's replica get
/// every event at once anyway, so a longer window costs nothing visible; what it risks is a crash losing up to this
/// much of the text shown live (see docs/architecture.md, "Crash recovery").
pub const DEFAULT_UNWATCHED_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// How long a remote follower's watched mark lives; followers refresh it at most every [`WATCH_REFRESH`].
pub const WATCH_TTL: Duration = Duration::from_secs(5);

/// How often a remote follower refreshes its watched mark at most.
pub const WATCH_REFRESH: Duration = Duration::from_secs(1);

/// How long a measured offset to Redis's clock is used before a channel that opens measures it again. Channel ids
/// must stay after every id a dead predecessor handed out (docs/architecture.md, "Session events"): the lease ttl
/// (at least 500 ms) separates the two, and a clock slewing at NTP's maximum rate (500 ppm) drifts 5 ms in ten
/// seconds, a hundredth of that. (Ten seconds rather than one: a replica serving a prompt every few seconds would
/// otherwise read the clock with every one.)
pub const CLOCK_FRESH: Duration = Duration::from_secs(10);

/// How long after its last renewal a running loop's lease is renewed: half its ttl, so a renewal that fails (Redis
/// restarting, a failover) has the other half to be retried before the lease expires. The channel's writes take the
/// renewal along before it is due (see [`EventsConfig::renews`]).
pub fn renew_after(ttl: Duration) -> Duration {
    ttl / 2
}

/// The session record's new totals after a step, written with the loop's next write of its events (see
/// [`Hub::stage_session`]).
#[derive(Debug, Clone)]
pub struct SessionTotals {
    /// The record's bytes as the loop last read or wrote them: the write is a compare-and-set against them.
    pub expected: Vec<u8>,
    /// The record with the new totals (`cost_nano_usd`, `tokens`, `updated_at`).
    pub record: pb::Session,
    /// What the step cost, added to the session's tenant's spend once the record is written.
    pub charge: i64,
}

/// Tuning of the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventsConfig {
    /// Longest time an event waits before it is written to the stream while a stream on another replica follows
    /// the session.
    pub flush_interval: Duration,
    /// The same while nobody on another replica follows the session (never shorter than `flush_interval`).
    pub unwatched_flush_interval: Duration,
    /// Unwritten events that force a write.
    pub max_batch_events: usize,
    /// Unwritten bytes (delta text, other events' encoded size) that force a write.
    pub max_batch_bytes: usize,
    /// Events a channel keeps for followers (never dropping an unwritten one), so memory per session is bounded.
    pub ring_events: usize,
    /// Bytes (as counted for `max_batch_bytes`) a channel keeps for followers beyond the unwritten ones.
    pub ring_bytes: usize,
}

impl EventsConfig {
    /// The flush window for a session followed (`watched`) or not from another replica.
    fn window(&self, watched: bool) -> Duration {
        if watched {
            self.flush_interval
        } else {
            self.unwatched_flush_interval.max(self.flush_interval)
        }
    }

    /// Whether a write of the channel extends the loop's lease (of `ttl`, last renewed `since` ago) on the way: when
    /// the loop's own renewal ([`renew_after`]) would be due before the next window could take it along (a quarter
    /// of the ttl ahead at most). A prompt that ends before then renews nothing; a step that streams longer renews
    /// with its windows, one `PEXPIRE` each time, and the loop's renewal script does not run.
    pub(crate) fn renews(&self, watched: bool, ttl: Duration, since: Duration) -> bool {
        since + self.window(watched).min(ttl / 4) >= renew_after(ttl)
    }
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            flush_interval: DEFAULT_FLUSH_INTERVAL,
            unwatched_flush_interval: DEFAULT_UNWATCHED_FLUSH_INTERVAL,
            max_batch_events: 512,
            max_batch_bytes: 64 * 1024,
            // A live stream on this replica reads each event as it is published, so a short tail is enough; one
            // that falls further behind reads Redis. A delta is kept as its own three strings, any other event at
            // the event enum's full size plus its strings (`event_wire::Stored`).
            ring_events: 64,
            ring_bytes: 32 * 1024,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn local_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The replica's hub: the open channels by session. Cheap to clone.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<HubInner>,
}

struct HubInner {
    /// Shared with every channel (one pointer each, not a copy of the store's dozen handles).
    store: Arc<Store>,
    config: EventsConfig,
    channels: Mutex<IdMap<String, Arc<Channel>>>,
    /// Redis's clock minus this replica's, in ms, and when it was measured.
    clock: Mutex<Option<(i64, Instant)>>,
    /// Followers on this replica waiting on the log of a session whose loop does not run here: woken when its
    /// channel opens, so they attach to it at once instead of waiting for its first write.
    waiting: Mutex<IdMap<String, Weak<Notify>>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("config", &self.inner.config)
            .field("channels", &lock(&self.inner.channels).len())
            .finish()
    }
}

impl Hub {
    /// A hub writing through `store`.
    pub fn new(store: Store, config: EventsConfig) -> Hub {
        Hub {
            inner: Arc::new(HubInner {
                store: Arc::new(store),
                config,
                channels: Mutex::new(IdMap::default()),
                clock: Mutex::new(None),
                waiting: Mutex::new(IdMap::default()),
            }),
        }
    }

    /// The store the hub writes to and followers read from.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    fn channel(&self, session_id: &str) -> Option<Arc<Channel>> {
        lock(&self.inner.channels).get(session_id).cloned()
    }

    /// Opens the session's channel on this replica (the caller holds the session's lease and runs its loop); a
    /// no-op when it is already open. Reads the stream's last id and Redis's clock, so the channel's ids follow
    /// everything already logged.
    pub async fn open(&self, session_id: &str) -> Result<(), StoreError> {
        self.open_inner(session_id, None).await
    }

    /// [`Hub::open`] for the loop holding `fence`: the channel's writes check the lease with it from the first one
    /// (parts handed to [`Hub::put_part`] need it anyway). Sets the fence of a channel already open.
    pub async fn open_fenced(&self, session_id: &str, fence: &Fence) -> Result<(), StoreError> {
        self.open_inner(session_id, Some(fence)).await
    }

    /// Whether the replica's offset to Redis's clock was measured recently enough ([`CLOCK_FRESH`]) for a channel to
    /// open without reading the clock again.
    pub fn clock_fresh(&self) -> bool {
        lock(&self.inner.clock).is_some_and(|(_, at)| at.elapsed() < CLOCK_FRESH)
    }

    /// Records Redis's clock as read just now (`redis_ms`) and returns the offset to it.
    fn measured(&self, redis_ms: i64) -> i64 {
        let offset = redis_ms.saturating_sub(local_millis());
        *lock(&self.inner.clock) = Some((offset, Instant::now()));
        offset
    }

    /// [`Hub::open_fenced`] with the log's position (and Redis's clock, unless [`Hub::clock_fresh`] said it need not
    /// be read) already read by the script that took the lease, and whether a stream on another replica follows
    /// the session: no round trip.
    pub fn open_at(
        &self,
        session_id: &str,
        fence: &Fence,
        last: EventId,
        redis_ms: Option<i64>,
        watched: bool,
    ) {
        let offset = match redis_ms {
            Some(ms) => self.measured(ms),
            None => lock(&self.inner.clock).map_or(0, |(offset, _)| offset),
        };
        self.install(
            session_id,
            Some(fence),
            last,
            offset,
            watched,
            Instant::now(),
        );
    }

    async fn open_inner(&self, session_id: &str, fence: Option<&Fence>) -> Result<(), StoreError> {
        // The caller has just taken the lease: it counts as renewed now, so short runs renew nothing.
        let acquired = Instant::now();
        if let Some(channel) = self.channel(session_id) {
            channel.set_fence(fence, acquired);
            return Ok(());
        }
        let (last, redis_ms) = self.inner.store.event_log().open_events(session_id).await?;
        let offset = self.measured(redis_ms);
        // Not known here: the first write goes out at once, as for a watched session.
        self.install(session_id, fence, last, offset, true, acquired);
        Ok(())
    }

    /// Opens the session's channel after the log's `last` entry, with the offset to Redis's clock; a no-op when one
    /// is open already (then only its fence is set). Followers on this replica waiting on the session's log are
    /// woken to attach to it.
    fn install(
        &self,
        session_id: &str,
        fence: Option<&Fence>,
        last: EventId,
        offset_ms: i64,
        watched: bool,
        acquired: Instant,
    ) {
        if let Some(channel) = self.channel(session_id) {
            channel.set_fence(fence, acquired);
            return;
        }
        let channel = Arc::new(Channel::new(
            session_id.to_string(),
            Arc::clone(&self.inner.store),
            self.inner.config,
            last,
            offset_ms,
            watched,
        ));
        channel.set_fence(fence, acquired);
        {
            let mut channels = lock(&self.inner.channels);
            if channels.contains_key(session_id) {
                return;
            }
            channels.insert(session_id.to_string(), channel.clone());
        }
        tokio::spawn(channel.run_timer());
        if let Some(waiting) = lock(&self.inner.waiting)
            .remove(session_id)
            .and_then(|w| w.upgrade())
        {
            waiting.notify_waiters();
        }
    }

    /// Wakes this replica's followers waiting on the session's log, so they look again: the session was deleted
    /// here (they learn it at once instead of after their blocking read).
    pub fn wake_followers(&self, session_id: &str) {
        if let Some(waiting) = lock(&self.inner.waiting)
            .get(session_id)
            .and_then(Weak::upgrade)
        {
            waiting.notify_waiters();
        }
    }

    /// What a follower about to wait on the session's log waits on besides it: notified when a channel for the
    /// session opens on this replica (see [`Hub::install`]) or the session is deleted here.
    fn waiter(&self, session_id: &str) -> Arc<Notify> {
        let mut waiting = lock(&self.inner.waiting);
        if let Some(notify) = waiting.get(session_id).and_then(Weak::upgrade) {
            return notify;
        }
        let notify = Arc::new(Notify::new());
        waiting.insert(session_id.to_string(), Arc::downgrade(&notify));
        notify
    }

    /// A follower stopped waiting on the session's log: its entry goes once nobody else waits.
    fn done_waiting(&self, session_id: &str, notify: Arc<Notify>) {
        let mut waiting = lock(&self.inner.waiting);
        let last = Arc::strong_count(&notify) == 1;
        if last
            && waiting
                .get(session_id)
                .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&notify)))
        {
            waiting.remove(session_id);
        }
    }

    /// Writes everything the session's channel still holds and closes it; later publishes go straight to Redis.
    /// A no-op when no channel is open.
    pub async fn close(&self, session_id: &str) -> Result<(), StoreError> {
        let Some(channel) = self.channel(session_id) else {
            return Ok(());
        };
        let result = channel.close().await;
        let mut channels = lock(&self.inner.channels);
        if channels
            .get(session_id)
            .is_some_and(|c| Arc::ptr_eq(c, &channel))
        {
            channels.remove(session_id);
        }
        result
    }

    /// The session's channel on this replica as it is now, for a step's stream to publish its deltas to without
    /// looking it up for each ([`Hub::publish_delta`]).
    pub fn delta_sink(&self, session_id: &str) -> DeltaSink {
        DeltaSink(self.channel(session_id))
    }

    /// Publishes a text delta, the loop's per-delta path: through `sink`'s channel (through the session's channel
    /// looked up now when it holds none), otherwise straight to the stream (see [`Hub::publish`]). When the channel
    /// takes it without a write (the common case) nothing is awaited, so the caller's future keeps no room for a
    /// publish; otherwise the rest (the channel's write, or a publish without a channel) is returned to await. A
    /// channel closed since the sink was made sends the delta to the stream, as no channel would.
    pub fn publish_delta(
        &self,
        sink: &DeltaSink,
        session_id: &str,
        ids: Arc<PartIds>,
        text: compact_str::CompactString,
    ) -> Option<impl std::future::Future<Output = Result<(), StoreError>> + Send + '_> {
        let stored = Stored::delta(ids, text);
        let rest = match &sink.0 {
            Some(channel) => Self::enqueue_in(channel, stored),
            None => self.enqueue(session_id, stored),
        }?;
        Some(Box::pin(self.finish(session_id.to_owned(), rest)))
    }

    /// Publishes `event`: through the session's channel when this replica runs its loop (delivered to local
    /// followers at once, written coalesced), otherwise straight to the stream (see [`Hub`]). Errors of a background
    /// write are reported by the next publish.
    pub async fn publish(&self, session_id: &str, event: Event) -> Result<(), StoreError> {
        self.publish_kept(session_id, Stored::new(event)).await
    }

    /// [`Hub::publish`] of an event already in the form the channel keeps it (see [`Stored::part_updated`]).
    pub(crate) async fn publish_kept(
        &self,
        session_id: &str,
        stored: Stored,
    ) -> Result<(), StoreError> {
        match self.enqueue(session_id, stored) {
            None => Ok(()),
            // Boxed: the store's futures are kilobytes, and this is the rare path.
            Some(rest) => Box::pin(self.finish(session_id.to_owned(), rest)).await,
        }
    }

    /// Queues `stored` in this replica's channel of the session; what is left to do when queuing was not all.
    fn enqueue(&self, session_id: &str, stored: Stored) -> Option<Rest> {
        match self.channel(session_id) {
            Some(channel) => Self::enqueue_in(&channel, stored),
            None => Some(Rest::Elsewhere(Box::new(stored.to_event()))),
        }
    }

    /// [`Hub::enqueue`] in a channel at hand.
    fn enqueue_in(channel: &Arc<Channel>, stored: Stored) -> Option<Rest> {
        match channel.queue(stored, None) {
            channel::Queued::Done => None,
            channel::Queued::Flush => Some(Rest::Flush(Arc::clone(channel))),
            channel::Queued::Closed(event, _) => Some(Rest::Elsewhere(event)),
        }
    }

    /// Does what [`Hub::enqueue`] left: the channel's write, or a publish through the store.
    async fn finish(&self, session_id: String, rest: Rest) -> Result<(), StoreError> {
        match rest {
            Rest::Flush(channel) => channel.flush().await,
            Rest::Elsewhere(event) => self
                .inner
                .store
                .event_log()
                .publish(&session_id, *event)
                .await
                .map(drop),
        }
    }

    /// Persists a part of the loop holding `fence` and publishes its `part_updated`. Through the session's channel
    /// when this replica runs the loop: the part is written by the channel's flush, in the same script as the
    /// events, under the fence. A part that ends something (an ended text or reasoning part, a tool, a step's
    /// finish, anything but an open text or reasoning part or a step start) is written at once, with everything
    /// published before it; an open text or reasoning part is written with the next window and then kept current
    /// by its `part_delta`s, so its text reaches Redis once per window, never behind what the log holds. Without a
    /// channel: `put_part` and a direct publish. [`StoreError::Fenced`] when the lease moved on (a background
    /// window's refusal is reported by the next publish).
    pub async fn put_part(&self, mut part: Box<pb::Part>, fence: &Fence) -> Result<(), StoreError> {
        if let Some(channel) = self.channel(&part.session_id) {
            let event = Stored::part_updated(&part);
            match channel.publish(event, Some(Write::Part(part, fence))).await {
                Published::Done(result) => return result,
                Published::Closed(write) => part = handed_back_part(write)?,
            }
        }
        Box::pin(self.inner.store.messages().put_part(&part, Some(fence))).await?;
        let session_id = part.session_id.clone();
        Box::pin(
            self.inner
                .store
                .event_log()
                .publish(&session_id, Event::PartUpdated(*part)),
        )
        .await
        .map(drop)
    }

    /// [`Hub::put_part`] for a part that may wait for the channel's next write whatever it is: a step's parts while
    /// its stream runs and when it is cleaned up. They are written with the window, with the write of an event
    /// somebody must act on, or when the loop asks ([`Hub::flush_parts`] before a step's tools run, the `done`
    /// that ends the run): at most one window after they changed, and never after the events that show them.
    pub async fn put_part_later(
        &self,
        mut part: Box<pb::Part>,
        fence: &Fence,
    ) -> Result<(), StoreError> {
        if let Some(channel) = self.channel(&part.session_id) {
            let event = Stored::part_updated(&part);
            match channel
                .publish(event, Some(Write::PartLater(part, fence)))
                .await
            {
                Published::Done(result) => return result,
                Published::Closed(write) => part = handed_back_part(write)?,
            }
        }
        Box::pin(self.put_part(part, fence)).await
    }

    /// Holds a step's new session totals for the channel's next write (the same script as the step's last parts
    /// and events, compared with the record as the loop last knew it; the tenant is charged once they are in). Hands
    /// them back when no channel is open here: the caller writes them itself.
    pub fn stage_session(
        &self,
        session_id: &str,
        fence: &Fence,
        totals: Box<SessionTotals>,
    ) -> Result<(), Box<SessionTotals>> {
        match self.channel(session_id) {
            Some(channel) if !lock(&channel.state).closed => {
                channel.stage_session(totals, fence);
                Ok(())
            }
            _ => Err(totals),
        }
    }

    /// Persists an assistant message's head (its parts are written on their own) for the loop holding `fence`, and
    /// publishes its `message_updated`. Through the session's channel: written with the channel's next write, in
    /// the same script as the events and parts (which it precedes), under the fence; a message changes with the
    /// parts and events around it (its step's start, finish and end), so it rides their writes instead of costing
    /// one of its own. Without a channel: `put_message` and a direct publish.
    pub async fn put_message(
        &self,
        mut head: Box<pb::Message>,
        fence: &Fence,
    ) -> Result<(), StoreError> {
        if let Some(channel) = self.channel(&head.session_id) {
            let event = Stored::message_updated(&head);
            match channel
                .publish(event, Some(Write::Message(head, fence)))
                .await
            {
                Published::Done(result) => return result,
                Published::Closed(write) => head = handed_back_message(write)?,
            }
        }
        Box::pin(self.inner.store.messages().put_message(&head, Some(fence))).await?;
        let session_id = head.session_id.clone();
        Box::pin(
            self.inner
                .store
                .event_log()
                .publish(&session_id, Event::MessageUpdated(*head)),
        )
        .await
        .map(drop)
    }

    /// How long until the lease of the loop holding the session here needs renewing: [`renew_after`] its last
    /// renewal, counting the ones the channel's writes did on the way (see [`Hub::renew_lease`]); [`renew_after`]
    /// when there is no channel or no renewal yet. Tells the channel the ttl, so its writes renew from then on.
    pub fn lease_renewal_due(&self, session_id: &str, ttl: Duration) -> Duration {
        let Some(channel) = self.channel(session_id) else {
            return renew_after(ttl);
        };
        let mut s = lock(&channel.state);
        s.lease_ttl = Some(ttl);
        match s.renewed_at {
            Some(at) => renew_after(ttl).saturating_sub(at.elapsed()),
            None => renew_after(ttl),
        }
    }

    /// Renews the lease of the loop holding `fence` (see [`crate::store::Leases::renew_lease`]), unless a write of the
    /// session's channel renewed it less than [`renew_after`] ago: while a step streams, the window's script extends
    /// the lease as it checks it (one PEXPIRE instead of a renewal script). False when the lease was lost.
    pub async fn renew_lease(
        &self,
        session_id: &str,
        fence: &Fence,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let channel = self.channel(session_id);
        if let Some(channel) = &channel {
            let mut s = lock(&channel.state);
            s.lease_ttl = Some(ttl);
            if s.fence.as_ref() == Some(fence)
                && s.renewed_at
                    .is_some_and(|at| at.elapsed() < renew_after(ttl))
            {
                return Ok(true);
            }
        }
        let started = Instant::now();
        let renewed = self
            .inner
            .store
            .leases()
            .renew_lease(session_id, fence, ttl)
            .await?;
        if renewed && let Some(channel) = channel {
            let mut s = lock(&channel.state);
            if s.fence.as_ref() == Some(fence) {
                s.renewed_at = Some(s.renewed_at.map_or(started, |at| at.max(started)));
            }
        }
        Ok(renewed)
    }

    /// Writes the session's channel now if it holds parts whose latest text is not yet in Redis (with every event
    /// published so far); a no-op otherwise. The loop calls it when a step's stream ends.
    pub async fn flush_parts(&self, session_id: &str) -> Result<(), StoreError> {
        match self.channel(session_id) {
            Some(channel) if channel.has_dirty_parts() => channel.flush().await,
            _ => Ok(()),
        }
    }

    /// Writes everything the session's channel holds that is not in Redis yet (events and parts); a no-op without
    /// a channel. A loop calls it after storage came back, before it reads the history again.
    pub async fn flush(&self, session_id: &str) -> Result<(), StoreError> {
        match self.channel(session_id) {
            Some(channel) => channel.flush().await,
            None => Ok(()),
        }
    }

    /// How long ago the lease of the loop holding the session here was last renewed (by the loop or by a write of
    /// the channel); `None` without a channel or a renewal.
    pub fn lease_age(&self, session_id: &str) -> Option<std::time::Duration> {
        let channel = self.channel(session_id)?;
        let s = lock(&channel.state);
        s.renewed_at.map(|at| at.elapsed())
    }

    /// Ends the session's channel without writing anything more: `event` (a `done`) goes to this replica's
    /// followers at once, after everything they were delivered, and what was not yet written is dropped. For a
    /// loop that can no longer prove its lease (storage failed for longer than it lasts, or another replica holds
    /// it): its writes would be refused or would race the new owner, and its callers must not wait for ever.
    pub fn abandon(&self, session_id: &str, event: Event) {
        let Some(channel) = lock(&self.inner.channels).remove(session_id) else {
            return;
        };
        {
            let mut s = lock(&channel.state);
            // A run's end that was not written (the write that carried it was refused) never reached the followers
            // here, and never will: it goes, and this `done` takes its place.
            if let Some(hold) = s.hold.take() {
                let flushed = s.flushed;
                while s
                    .ring
                    .back()
                    .is_some_and(|(id, _)| *id >= hold && *id > flushed)
                {
                    if let Some((_, dropped)) = s.ring.pop_back() {
                        s.ring_bytes = s.ring_bytes.saturating_sub(dropped.weight());
                    }
                }
            }
            let now = u64::try_from(local_millis().saturating_add(s.offset_ms)).unwrap_or(0);
            let id = s.last.next_at(now);
            s.last = id;
            s.ring.push_back((id, Stored::new(event)));
            s.closed = true;
            reading::wake_followers(&mut s.waiting);
        }
        channel.timer.notify_one();
    }

    /// The run's end begins: the events published from now on (the answer's stop reason, the idle status, `done`)
    /// reach this replica's followers only when the channel closes, after the lease is released, or never, when the
    /// write that carries them is refused (the lease moved on: see [`Hub::abandon`]). The write that logs them
    /// releases the lease too when no prompt waits and all of it succeeded ([`Hub::lease_released`]).
    pub fn hold_from_here(&self, session_id: &str) {
        if let Some(channel) = self.channel(session_id) {
            let mut s = lock(&channel.state);
            if s.hold.is_none() {
                s.hold = Some(s.last.next_at(0));
            }
            s.release_at_end = true;
        }
    }

    /// Whether a write of the session's channel logged the run's end and released the lease with it (no prompt
    /// was queued); otherwise the loop releases the lease itself and looks at the queue.
    pub fn lease_released(&self, session_id: &str) -> bool {
        self.channel(session_id)
            .is_some_and(|channel| lock(&channel.state).released)
    }

    /// The id of the session's newest event (including events not yet written when this replica runs its loop);
    /// `"0-0"` when it has none. Where a stream that wants only new events starts.
    pub async fn last_event_id(&self, session_id: &str) -> Result<String, StoreError> {
        if let Some(last) = self.channel(session_id).and_then(|c| c.last_id()) {
            return Ok(last.to_string());
        }
        self.inner.store.event_log().last_event_id(session_id).await
    }

    /// A follower of the session's events after `after` (an event id; `"0"` for the beginning).
    pub fn follow(&self, session_id: &str, after: &str) -> Result<Follower, BadEventId> {
        let after: EventId = after.parse()?;
        Ok(Follower::new(self.clone(), session_id, after))
    }
}

/// A session's channel as a step's stream found it (see [`Hub::delta_sink`]).
pub struct DeltaSink(Option<Arc<Channel>>);

impl DeltaSink {
    /// No channel at hand: each delta looks the session's up.
    pub const LOOK_UP: DeltaSink = DeltaSink(None);
}

/// What is left of a publish that queuing alone did not finish.
enum Rest {
    /// The channel must write now.
    Flush(Arc<Channel>),
    /// No channel took it: publish through the store.
    Elsewhere(Box<Event>),
}

/// The part a closed channel handed back (it hands back exactly the write it was given).
fn handed_back_part(write: Option<Write<'_>>) -> Result<Box<pb::Part>, StoreError> {
    match write {
        Some(Write::Part(p, _) | Write::PartLater(p, _)) => Ok(p),
        _ => Err(not_handed_back()),
    }
}

/// The message head a closed channel handed back.
fn handed_back_message(write: Option<Write<'_>>) -> Result<Box<pb::Message>, StoreError> {
    match write {
        Some(Write::Message(m, _)) => Ok(m),
        _ => Err(not_handed_back()),
    }
}

fn not_handed_back() -> StoreError {
    StoreError::Unexpected("a closed event channel did not hand its write back".into())
}

#[cfg(test)]
mod tests;
