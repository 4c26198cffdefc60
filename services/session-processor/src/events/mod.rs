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
//! ([`Store::mark_watched`], refreshed about once a second), the script reports the mark, and the channel uses the
//! short window (`events.flush_interval_ms`) while it exists.
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

mod codec;
mod id;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use llm_proto::sessions as pb;
use pb::session_event::Event;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::store::{Fence, Store, StoreError};

pub(crate) use codec::{BatchError, decode_batch};
pub use id::{BadEventId, EventId};

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

/// An event's weight for the size bounds: a delta's text, otherwise its encoded size.
fn weight(event: &Event) -> usize {
    match event {
        Event::PartDelta(d) => d.delta.len(),
        other => other.encoded_len(),
    }
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
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            flush_interval: DEFAULT_FLUSH_INTERVAL,
            unwatched_flush_interval: DEFAULT_UNWATCHED_FLUSH_INTERVAL,
            max_batch_events: 512,
            max_batch_bytes: 64 * 1024,
            ring_events: 1024,
            ring_bytes: 1024 * 1024,
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
    store: Store,
    config: EventsConfig,
    channels: Mutex<HashMap<String, Arc<Channel>>>,
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
                store,
                config,
                channels: Mutex::new(HashMap::new()),
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

    /// [`Hub::open_fenced`] with the log's position and Redis's clock already read (by the script that took the
    /// lease): no round trip.
    pub fn open_at(&self, session_id: &str, fence: &Fence, last: EventId, redis_ms: i64) {
        self.install(session_id, Some(fence), last, redis_ms, Instant::now());
    }

    async fn open_inner(&self, session_id: &str, fence: Option<&Fence>) -> Result<(), StoreError> {
        // The caller has just taken the lease: it counts as renewed now, so short runs renew nothing.
        let acquired = Instant::now();
        if let Some(channel) = self.channel(session_id) {
            channel.set_fence(fence, acquired);
            return Ok(());
        }
        let (last, redis_ms) = self.inner.store.open_events(session_id).await?;
        self.install(session_id, fence, last, redis_ms, acquired);
        Ok(())
    }

    /// Opens the session's channel after the log's `last` entry, with Redis's clock `redis_ms`; a no-op when one is
    /// open already (then only its fence is set).
    fn install(
        &self,
        session_id: &str,
        fence: Option<&Fence>,
        last: EventId,
        redis_ms: i64,
        acquired: Instant,
    ) {
        if let Some(channel) = self.channel(session_id) {
            channel.set_fence(fence, acquired);
            return;
        }
        let offset_ms = redis_ms.saturating_sub(local_millis());
        let channel = Arc::new(Channel::new(
            session_id.to_string(),
            self.inner.store.clone(),
            self.inner.config,
            last,
            offset_ms,
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

    /// Publishes an event: through the session's channel when this replica runs its loop (delivered to local
    /// followers at once, written coalesced), otherwise straight to the stream. Errors of a background write are
    /// reported by the next publish.
    pub async fn publish(&self, session_id: &str, event: Event) -> Result<(), StoreError> {
        let event = match self.channel(session_id) {
            Some(channel) => match channel.publish(event, None).await {
                Published::Done(result) => return result,
                Published::Closed(event) => *event,
            },
            None => event,
        };
        self.inner.store.publish(session_id, event).await.map(drop)
    }

    /// Persists a part of the loop holding `fence` and publishes its `part_updated`. Through the session's channel
    /// when this replica runs the loop: the part is written by the channel's flush, in the same script as the
    /// events, under the fence. A part that ends something (an ended text or reasoning part, a tool, a step's
    /// finish, anything but an open text or reasoning part or a step start) is written at once, with everything
    /// published before it; an open text or reasoning part is written with the next window and then kept current
    /// by its `part_delta`s, so its text reaches Redis once per window, never behind what the log holds. Without a
    /// channel: `put_part` and a direct publish. [`StoreError::Fenced`] when the lease moved on (a background
    /// window's refusal is reported by the next publish).
    pub async fn put_part(&self, part: &pb::Part, fence: &Fence) -> Result<(), StoreError> {
        let session_id = &part.session_id;
        if let Some(channel) = self.channel(session_id) {
            let event = Event::PartUpdated(part.clone());
            match channel.publish(event, Some((part, fence))).await {
                Published::Done(result) => return result,
                Published::Closed(_) => {}
            }
        }
        self.inner.store.put_part(part, Some(fence)).await?;
        self.inner
            .store
            .publish(session_id, Event::PartUpdated(part.clone()))
            .await
            .map(drop)
    }

    /// How long until the lease of the loop holding the session here needs renewing: `ttl / 3` after its last
    /// renewal, counting the ones the channel's writes did on the way (see [`Hub::renew_lease`]); `ttl / 3` when
    /// there is no channel or no renewal yet. Tells the channel the ttl, so its writes renew from then on.
    pub fn lease_renewal_due(&self, session_id: &str, ttl: Duration) -> Duration {
        let Some(channel) = self.channel(session_id) else {
            return ttl / 3;
        };
        let mut s = lock(&channel.state);
        s.lease_ttl = Some(ttl);
        match s.renewed_at {
            Some(at) => (ttl / 3).saturating_sub(at.elapsed()),
            None => ttl / 3,
        }
    }

    /// Renews the lease of the loop holding `fence` (see [`Store::renew_lease`]), unless a write of the session's
    /// channel renewed it less than `ttl / 3` ago: while a step streams, the window's script extends the lease as
    /// it checks it (one PEXPIRE instead of a renewal script). False when the lease was lost.
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
                && s.renewed_at.is_some_and(|at| at.elapsed() < ttl / 3)
            {
                return Ok(true);
            }
        }
        let started = Instant::now();
        let renewed = self.inner.store.renew_lease(session_id, fence, ttl).await?;
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
            let now = u64::try_from(local_millis().saturating_add(s.offset_ms)).unwrap_or(0);
            let id = s.last.next_at(now);
            s.last = id;
            s.ring.push_back((id, Arc::new(event)));
            // Delivered now, not held: nobody will close this channel after a release.
            s.hold = None;
            s.closed = true;
        }
        channel.live.send_replace(true);
        channel.timer.notify_one();
    }

    /// The id of the session's newest event (including events not yet written when this replica runs its loop);
    /// `"0-0"` when it has none. Where a stream that wants only new events starts.
    pub async fn last_event_id(&self, session_id: &str) -> Result<String, StoreError> {
        if let Some(last) = self.channel(session_id).and_then(|c| c.last_id()) {
            return Ok(last.to_string());
        }
        self.inner.store.last_event_id(session_id).await
    }

    /// A follower of the session's events after `after` (an event id; `"0"` for the beginning).
    pub fn follow(&self, session_id: &str, after: &str) -> Result<Follower, BadEventId> {
        let after: EventId = after.parse()?;
        Ok(Follower {
            hub: self.clone(),
            session_id: session_id.to_string(),
            after,
            cursor: after,
            buf: VecDeque::new(),
            live: None,
            block: Duration::from_secs(5),
            remote_reads: 0,
            marked: None,
        })
    }
}

/// What followers watch: bumped on every event, and `true` once the channel closed.
type Signal = bool;

/// One session's live events on the replica that runs its loop.
struct Channel {
    session_id: String,
    store: Store,
    config: EventsConfig,
    state: Mutex<State>,
    /// Serialises writes, so entries land in id order.
    flushing: tokio::sync::Mutex<()>,
    /// Wakes followers.
    live: watch::Sender<Signal>,
    /// Wakes the timer when a window starts, and on close.
    timer: Notify,
}

struct State {
    /// The last id handed out.
    last: EventId,
    /// Redis clock minus local clock, in ms.
    offset_ms: i64,
    /// Recent events, ids increasing; holds every event after `covered` and every unwritten one.
    ring: VecDeque<(EventId, Arc<Event>)>,
    /// Their weight.
    ring_bytes: usize,
    /// Every event of this channel after this id is in the ring.
    covered: EventId,
    /// Events up to here are handed to a write (in flight or done).
    handed: EventId,
    /// Events up to here are in Redis.
    flushed: EventId,
    /// Events and bytes not yet handed to a write, and when the first of them came.
    pending_events: usize,
    pending_bytes: usize,
    window_start: Option<Instant>,
    /// The next publish writes at once.
    first: bool,
    /// The timer writes at once, on its own task (the channel's first event: written promptly, so streams waiting
    /// on Redis wake and attach, without the publisher waiting for the write).
    asap: bool,
    /// The first `done`: local followers get it (and what follows) only when the channel closes, which the loop
    /// does once its lease is released, so `done` still means "idle" to a caller that asks right away.
    hold: Option<EventId>,
    /// A background write failed; the next publish reports it.
    failure: Option<StoreError>,
    closed: bool,
    /// The fence of the loop this channel writes for: its writes check the lease with it, and parts need it.
    fence: Option<Fence>,
    /// The loop's parts this channel persists (see [`Hub::put_part`]), few at a time.
    parts: Vec<Tracked>,
    /// Messages a write already found listed in the session (the script checks each message once).
    listed: HashSet<String>,
    /// Whether a stream on another replica followed the session at the last write: picks the window.
    watched: bool,
    /// The loop's lease ttl, once the loop told it ([`Hub::lease_renewal_due`]): writes then renew the lease.
    lease_ttl: Option<Duration>,
    /// When the lease was last renewed (by a write, or by the loop through [`Hub::renew_lease`]): the time the
    /// renewal was sent, so the lease lives at least `lease_ttl` after it.
    renewed_at: Option<Instant>,
}

/// A part the channel persists.
struct Tracked {
    /// Its latest state: as handed over, plus the text of its deltas published since.
    part: pb::Part,
    /// Not yet written (or not in its latest state).
    dirty: bool,
    /// An open text or reasoning part: its deltas extend it; kept after a write.
    open: bool,
}

/// A text or reasoning part not yet ended: its text grows with its deltas.
fn open_text(part: &pb::Part) -> bool {
    match &part.kind {
        Some(pb::part::Kind::Text(t)) => t.ended_at.is_none(),
        Some(pb::part::Kind::Reasoning(r)) => r.ended_at.is_none(),
        _ => false,
    }
}

/// A part that may wait for the window: an open text or reasoning part, or a step start. Everything else ends
/// something and is written at once.
fn lazy(part: &pb::Part) -> bool {
    open_text(part) || matches!(part.kind, Some(pb::part::Kind::StepStart(_)))
}

/// Appends a delta to a text or reasoning part.
fn extend(part: &mut pb::Part, delta: &str) {
    match part.kind.as_mut() {
        Some(pb::part::Kind::Text(t)) => t.text.push_str(delta),
        Some(pb::part::Kind::Reasoning(r)) => r.text.push_str(delta),
        _ => {}
    }
}

enum Published {
    Done(Result<(), StoreError>),
    /// The channel closed in between: publish elsewhere.
    Closed(Box<Event>),
}

/// What a follower found in a channel's ring.
enum Ring {
    /// Events were added to the follower's buffer.
    Read,
    /// The ring no longer holds everything after the follower's position.
    Behind,
    /// Nothing new; `true` when the channel is closed.
    Empty(bool),
}

impl Channel {
    fn new(
        session_id: String,
        store: Store,
        config: EventsConfig,
        last: EventId,
        offset_ms: i64,
    ) -> Channel {
        Channel {
            session_id,
            store,
            config,
            state: Mutex::new(State {
                last,
                offset_ms,
                ring: VecDeque::with_capacity(64),
                ring_bytes: 0,
                covered: last,
                handed: last,
                flushed: last,
                pending_events: 0,
                pending_bytes: 0,
                window_start: None,
                first: true,
                asap: false,
                hold: None,
                failure: None,
                closed: false,
                fence: None,
                parts: Vec::new(),
                listed: HashSet::new(),
                watched: false,
                lease_ttl: None,
                renewed_at: None,
            }),
            flushing: tokio::sync::Mutex::new(()),
            live: watch::Sender::new(false),
            timer: Notify::new(),
        }
    }

    /// The fence of the loop this channel now writes for (taken at `acquired`), when it changed.
    fn set_fence(&self, fence: Option<&Fence>, acquired: Instant) {
        if let Some(fence) = fence {
            let mut s = lock(&self.state);
            if s.fence.as_ref() != Some(fence) {
                s.fence = Some(fence.clone());
                s.renewed_at = Some(acquired);
            }
        }
    }

    fn last_id(&self) -> Option<EventId> {
        let s = lock(&self.state);
        (!s.closed).then_some(s.last)
    }

    /// Assigns the id, delivers to local followers, and writes now only when the event, the part handed with it
    /// (see [`Hub::put_part`]) or the batch asks for it.
    async fn publish(&self, event: Event, part: Option<(&pb::Part, &Fence)>) -> Published {
        let urgent = matches!(
            event,
            Event::ToolCallAwaiting(_)
                | Event::PermissionAsked(_)
                | Event::Error(_)
                | Event::Done(_)
        ) || part.is_some_and(|(p, _)| !lazy(p));
        let bytes = weight(&event);
        let (write_now, window_started) = {
            let mut s = lock(&self.state);
            if s.closed {
                return Published::Closed(Box::new(event));
            }
            // A background write failed: this publish writes at once, with everything that write held, and
            // reports the failure only if Redis still refuses it (the event itself is never dropped).
            let retry_failed = s.failure.take().is_some();
            let now = u64::try_from(local_millis().saturating_add(s.offset_ms)).unwrap_or(0);
            let id = s.last.next_at(now);
            s.last = id;
            if matches!(event, Event::Done(_)) && s.hold.is_none() {
                s.hold = Some(id);
            }
            if let Event::PartDelta(d) = &event
                && let Some(t) = s
                    .parts
                    .iter_mut()
                    .find(|t| t.open && t.part.id == d.part_id)
            {
                extend(&mut t.part, &d.delta);
                t.dirty = true;
            }
            if let Some((part, fence)) = part {
                s.fence = Some(fence.clone());
                let tracked = Tracked {
                    part: part.clone(),
                    dirty: true,
                    open: open_text(part),
                };
                match s.parts.iter_mut().find(|t| t.part.id == part.id) {
                    Some(t) => *t = tracked,
                    None => s.parts.push(tracked),
                }
            }
            s.ring.push_back((id, Arc::new(event)));
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
            (write_now, window_started || first)
        };
        self.live.send_replace(false);
        if write_now {
            Published::Done(self.flush().await)
        } else {
            if window_started {
                self.timer.notify_one();
            }
            Published::Done(Ok(()))
        }
    }

    /// Drops written events beyond the ring's bounds, oldest first.
    fn trim(&self, s: &mut State) {
        while s.ring.len() > self.config.ring_events || s.ring_bytes > self.config.ring_bytes {
            match s.ring.front() {
                Some((id, event)) if *id <= s.flushed => {
                    s.covered = *id;
                    s.ring_bytes = s.ring_bytes.saturating_sub(weight(event));
                    s.ring.pop_front();
                }
                _ => break,
            }
        }
    }

    /// Whether a part's latest state is not yet written.
    fn has_dirty_parts(&self) -> bool {
        lock(&self.state).parts.iter().any(|t| t.dirty)
    }

    /// Writes every event not yet handed to a write as one entry, with the parts not yet written in their latest
    /// state, in one script. Writes are serialised and each takes the parts as they are when it takes its events,
    /// so a part in Redis never goes back to older text and never holds text the log does not.
    async fn flush(&self) -> Result<(), StoreError> {
        let _serial = self.flushing.lock().await;
        let started = Instant::now();
        let (batch, parts, fence, listed, renew) = {
            let mut s = lock(&self.state);
            s.pending_events = 0;
            s.pending_bytes = 0;
            s.window_start = None;
            s.asap = false;
            let handed = s.handed;
            let start = s.ring.partition_point(|(id, _)| *id <= handed);
            let batch: Vec<_> = s.ring.range(start..).cloned().collect();
            if let Some((last, _)) = batch.last() {
                s.handed = *last;
            }
            let mut parts = Vec::new();
            for t in s.parts.iter_mut().filter(|t| t.dirty) {
                t.dirty = false;
                parts.push(t.part.clone());
            }
            // Written parts that no delta extends any more are done with.
            s.parts.retain(|t| t.open || t.dirty);
            let listed = if parts.is_empty() {
                HashSet::new()
            } else {
                s.listed.clone()
            };
            // The lease is extended with a write when its last renewal is a sixth of its ttl old: every write of
            // the long window while a step streams, so the loop's own renewal (due a third of the ttl after the
            // last one) finds it done.
            let renew = s.lease_ttl.filter(|ttl| {
                s.fence.is_some() && s.renewed_at.is_none_or(|at| at.elapsed() >= *ttl / 6)
            });
            (batch, parts, s.fence.clone(), listed, renew)
        };
        if batch.is_empty() && parts.is_empty() {
            return Ok(());
        }
        let last = batch.last().map(|(id, _)| *id);
        let encoded = last.map(|last| (last, codec::encode_batch(&batch)));
        drop(batch);
        match self
            .store
            .flush_events(
                &self.session_id,
                encoded,
                fence.as_ref(),
                renew,
                &parts,
                &listed,
            )
            .await
        {
            Ok(flushed) => {
                let mut s = lock(&self.state);
                if let (Some(last), Some(actual)) = (last, flushed.entry) {
                    s.flushed = s.flushed.max(last);
                    // The log moved past our ids (a foreign write): carry on after it.
                    s.last = s.last.max(actual);
                }
                s.watched = flushed.watched;
                if flushed.renewed {
                    s.renewed_at = Some(s.renewed_at.map_or(started, |at| at.max(started)));
                }
                self.trim(&mut s);
                if flushed.parts.is_ok() {
                    for p in &parts {
                        if !s.listed.contains(&p.message_id) {
                            s.listed.insert(p.message_id.clone());
                        }
                    }
                }
                flushed.parts
            }
            Err(e) => {
                let mut s = lock(&self.state);
                // Not written: the next write takes these events again, and these parts (in their latest state).
                s.handed = s.flushed;
                let flushed = s.flushed;
                let start = s.ring.partition_point(|(id, _)| *id <= flushed);
                s.pending_events = s.ring.len() - start;
                for p in parts {
                    match s.parts.iter_mut().find(|t| t.part.id == p.id) {
                        Some(t) => t.dirty = true,
                        None => s.parts.push(Tracked {
                            part: p,
                            dirty: true,
                            open: false,
                        }),
                    }
                }
                if s.window_start.is_none() {
                    s.window_start = Some(Instant::now());
                }
                Err(e)
            }
        }
    }

    /// When the current window ends, if one is open: its start plus the window for the last known audience.
    fn deadline(&self) -> Option<Instant> {
        let s = lock(&self.state);
        if s.asap && s.window_start.is_some() {
            return Some(Instant::now());
        }
        s.window_start.map(|t| t + self.config.window(s.watched))
    }

    /// Writes a window's events when it ends. Runs until the channel closes.
    async fn run_timer(self: Arc<Self>) {
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
                            if let Err(e) = self.flush().await {
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
    async fn close(&self) -> Result<(), StoreError> {
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
        lock(&self.state).closed = true;
        self.live.send_replace(true);
        self.timer.notify_one();
        result
    }

    /// Copies up to `max` events after `after` into `buf`. `position` is how far the follower has read (it may be
    /// past `after` when the log had nothing new for it), which decides whether the ring still covers it.
    fn read(
        &self,
        after: EventId,
        position: EventId,
        buf: &mut VecDeque<pb::SessionEvent>,
        max: usize,
    ) -> Ring {
        let s = lock(&self.state);
        if position < s.covered {
            return Ring::Behind;
        }
        let start = s.ring.partition_point(|(id, _)| *id <= after);
        let end = match s.hold {
            Some(hold) if !s.closed => s.ring.partition_point(|(id, _)| *id < hold),
            _ => s.ring.len(),
        };
        if start >= end {
            return Ring::Empty(s.closed);
        }
        for (id, event) in s.ring.range(start..end).take(max) {
            buf.push_back(pb::SessionEvent {
                event_id: id.to_string(),
                session_id: self.session_id.clone(),
                event: Some((**event).clone()),
            });
        }
        Ring::Read
    }

    /// Whether the ring holds everything after `position`, and whether the channel is closed.
    fn covers(&self, position: EventId) -> (bool, bool) {
        let s = lock(&self.state);
        (position >= s.covered, s.closed)
    }
}

/// Events read per Redis call or ring visit.
const READ_BATCH: usize = 256;

/// Follows a session's events after a start id: every event exactly once, in order (see the module docs).
pub struct Follower {
    hub: Hub,
    session_id: String,
    /// The last event delivered (or the start).
    after: EventId,
    /// How far the log was read (entry ids).
    cursor: EventId,
    buf: VecDeque<pb::SessionEvent>,
    live: Option<(Arc<Channel>, watch::Receiver<Signal>)>,
    /// How long one blocking read of Redis waits.
    block: Duration,
    /// Blocking reads of Redis since the follower started or last read a local channel.
    remote_reads: u32,
    /// When this follower last set the session's watched mark.
    marked: Option<Instant>,
}

impl Follower {
    /// The session it follows.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The next event; waits for one as long as it takes.
    pub async fn next(&mut self) -> Result<pb::SessionEvent, StoreError> {
        loop {
            while let Some(event) = self.buf.pop_front() {
                let Ok(id) = event.event_id.parse::<EventId>() else {
                    continue;
                };
                if id <= self.after {
                    continue;
                }
                self.after = id;
                return Ok(event);
            }
            if let Some((channel, rx)) = &mut self.live {
                // Marked seen before reading, so an event published after the read still wakes us.
                rx.borrow_and_update();
                let position = self.after.max(self.cursor);
                match channel.read(self.after, position, &mut self.buf, READ_BATCH) {
                    Ring::Read => {}
                    Ring::Behind => {
                        self.live = None;
                        self.cursor = self.after;
                    }
                    Ring::Empty(true) => {
                        // Closed: everything it had is in Redis.
                        self.live = None;
                        self.cursor = self.after;
                    }
                    Ring::Empty(false) => {
                        if rx.changed().await.is_err() {
                            self.live = None;
                            self.cursor = self.after;
                        }
                    }
                }
                continue;
            }
            let position = self.after.max(self.cursor);
            if let Some(channel) = self.hub.channel(&self.session_id) {
                let (covered, closed) = channel.covers(position);
                if !closed {
                    if covered {
                        let rx = channel.live.subscribe();
                        self.live = Some((channel, rx));
                        self.remote_reads = 0;
                        continue;
                    }
                    // Behind the ring: catch up from the log without waiting.
                    let read = self.read_log(None).await?;
                    if !read {
                        // Nothing in the log between us and the ring (cannot happen: the ring drops only written
                        // events); attach rather than spin.
                        tracing::warn!(message = "event ring ahead of the log", session_id = %self.session_id);
                        self.cursor = self.cursor.max(channel_covered(&channel));
                    }
                    continue;
                }
            }
            self.mark_watched().await;
            self.read_log(Some(self.block)).await?;
        }
    }

    /// Before a blocking read of Redis (no loop runs here): marks the session as followed from another replica,
    /// so its loop writes with the short window, at most every [`WATCH_REFRESH`]. Not on the first such read: a
    /// stream on the loop's replica reads the log once when the channel closes (to get `done`), and a stream that
    /// needs only what is already logged should not shorten anybody's window. Best effort: the mark only tunes
    /// freshness.
    async fn mark_watched(&mut self) {
        self.remote_reads = self.remote_reads.saturating_add(1);
        if self.remote_reads < 2 || self.marked.is_some_and(|t| t.elapsed() < WATCH_REFRESH) {
            return;
        }
        self.marked = Some(Instant::now());
        if let Err(e) = self
            .hub
            .store()
            .mark_watched(&self.session_id, WATCH_TTL)
            .await
        {
            tracing::debug!(message = "cannot mark the session watched", session_id = %self.session_id, error = %e);
        }
    }

    /// Reads the log after the cursor into the buffer; true when it returned any entry.
    async fn read_log(&mut self, block: Option<Duration>) -> Result<bool, StoreError> {
        let page = self
            .hub
            .store()
            .read_event_page(&self.session_id, self.cursor, block, READ_BATCH)
            .await?;
        self.buf.extend(page.events);
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

#[cfg(test)]
mod tests;
