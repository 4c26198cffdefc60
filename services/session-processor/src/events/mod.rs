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
//! The same script writes the loop's parts ([`Publisher::put_part`]): an open text or reasoning part is kept current by
//! its deltas and written with the window that logs them (so the stored text is never behind an older write and
//! never ahead of the log), a part that ends something is written at once with the events before it. Parts are
//! fenced; the log is not. The script also renews the loop's lease on the way when it is due
//! ([`LoopLease::renew_lease`]).
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
mod lease;
mod publish;
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
pub use lease::LoopLease;
pub use publish::{DeltaSink, Publisher};

use channel::Channel;

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
/// [`Publisher::stage_session`]).
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
    /// Shared with every channel (one pointer each).
    store: Store,
    config: EventsConfig,
    channels: Mutex<IdMap<String, Arc<Channel>>>,
    /// Redis's clock minus this replica's, in ms, and when it was measured.
    clock: Mutex<Option<(i64, Instant)>>,
    /// Followers on this replica waiting on the log of a session whose loop does not run here: woken when its
    /// channel opens, so they attach to it at once instead of waiting for its first write.
    waiting: Mutex<IdMap<String, Weak<Notify>>>,
}

impl HubInner {
    fn channel(&self, session_id: &str) -> Option<Arc<Channel>> {
        lock(&self.channels).get(session_id).cloned()
    }
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

    /// What the loops of this replica publish and persist through the hub.
    pub fn publisher(&self) -> Publisher {
        Publisher {
            inner: Arc::clone(&self.inner),
        }
    }

    /// The leases of the loops of this replica, as their channels see them.
    pub fn loop_lease(&self) -> LoopLease {
        LoopLease {
            inner: Arc::clone(&self.inner),
        }
    }

    fn channel(&self, session_id: &str) -> Option<Arc<Channel>> {
        self.inner.channel(session_id)
    }

    /// Opens the session's channel on this replica (the caller holds the session's lease and runs its loop); a
    /// no-op when it is already open. Reads the stream's last id and Redis's clock, so the channel's ids follow
    /// everything already logged.
    pub async fn open(&self, session_id: &str) -> Result<(), StoreError> {
        self.open_inner(session_id, None).await
    }

    /// [`Hub::open`] for the loop holding `fence`: the channel's writes check the lease with it from the first one
    /// (parts handed to [`Publisher::put_part`] need it anyway). Sets the fence of a channel already open.
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
            self.inner.store.clone(),
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

#[cfg(test)]
mod tests;
