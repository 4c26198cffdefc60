//! Lua scripts. Each one touches only keys of a single session (all in the session's hash slot, all declared in KEYS
//! except the history the begin script reads, whose key names it builds from the session's own: same hash tag, same
//! slot), so they run unchanged on Redis Cluster, and each one is atomic: a check and the write it guards can never
//! be split by another client.
//!
//! Status codes returned by the write scripts: [`OK`], [`FENCED`], [`NO_SESSION`], [`NO_MESSAGE`].

use redis::Script;

/// The write happened.
pub(super) const OK: i64 = 1;
/// The lease is not (or no longer) the caller's fence; nothing was written. For `acquire`: the lease is held.
pub(super) const FENCED: i64 = -1;
/// The session's `:session` key is missing (never created, or deleted); nothing was written.
pub(super) const NO_SESSION: i64 = -2;
/// A part names a message the session does not list; nothing was written.
pub(super) const NO_MESSAGE: i64 = -3;
/// A compare-and-set found the record changed since it was read; nothing was written.
pub(super) const CONFLICT: i64 = -4;
/// The prompt a message was to be delivered from is no longer at the queue's head; nothing was written.
pub(super) const NOT_QUEUED: i64 = -6;
/// The session's queue is full; nothing was written.
pub(super) const QUEUE_FULL: i64 = -7;

// `lua/gate.lua`, prepended to every write script, is the shared gate: the session must exist (so a loop racing
// `delete_session` cannot recreate keys that nothing would ever delete) and, when a fence is given, the lease must
// still hold exactly that fence (so a replica whose lease expired cannot overwrite its successor's data). A fenced
// gate reads both keys with one MGET.
//
// `lua/append.lua`, prepended to the scripts that append, defines `append(events key, cap, entry id, batch)`: it
// writes at the given id, or, when the stream is already at or past it, after the newest entry (an auto id), so it
// never fails on ids; a batch whose id is already the newest entry (a retried write that landed) is not written
// again. Returns the entry id.

/// Every script the store runs, hashed once so calls go out as EVALSHA (a [`super::script_call::ScriptCall`] sends
/// the body when the server answers NOSCRIPT, e.g. after a restart or a failover).
pub(super) struct Scripts {
    /// KEYS: session, lease. ARGV: fence, session bytes.
    pub(super) put_session: Script,
    /// KEYS: session, lease. ARGV: fence, expected session bytes, new session bytes. CONFLICT when the stored bytes
    /// are not the expected ones.
    pub(super) cas_session: Script,
    /// KEYS: session, lease, messages, msg, parts, prompt model, queue, delivered. ARGV: fence, message id, message
    /// bytes, `1` when the session already lists the message (no ZADD) else `0`, the prompt model to record (a user
    /// message's resolved model; empty: none), the queued prompt the message delivers (the bytes that identify it
    /// at the queue's head; empty: none), that prompt's tag (empty: none), (part id, part bytes)*. With a queued
    /// prompt: NOT_QUEUED when it is not at the queue's head, else it is removed from the queue and its tag
    /// recorded as this message, in the same step as the message.
    pub(super) put_message: Script,
    /// KEYS: session, lease, messages, parts key per distinct message. ARGV: fence, n messages, the n message ids
    /// (aligned with the parts keys), then (1-based message index, part id, part bytes)*.
    pub(super) put_parts: Script,
    /// KEYS: session, events. ARGV: cap, event bytes. Returns the entry id, or nil when the session is missing.
    pub(super) publish: Script,
    /// KEYS: session, events. ARGV: cap, entry id, batch bytes. Writes the batch as one entry (field `b`) at the
    /// given id, or, when the stream is already at or past it, after the stream's newest entry (an auto id), so the
    /// write never fails on ids; a batch whose id is already the newest entry (a retried write that landed) is not
    /// written again. Returns the entry's id, or nil when the session is missing.
    pub(super) append_events: Script,
    /// A running loop's event channel writing one window: its batch of events and the parts and message heads it
    /// persists, in one round trip. KEYS: session, lease, watched, events, messages, then the message key and the
    /// parts key of each message (aligned). ARGV: cap, entry id, batch bytes (empty: no entry), fence (empty:
    /// unfenced, only without parts or heads), lease ttl ms (empty: no renewal), n messages, then per message: its
    /// id, `1` when the session may not list it yet (the script checks it, or lists it along with a head), its head
    /// bytes (empty: none), its part count k, and k (part id, part bytes) pairs.
    ///
    /// Parts are written only while the lease holds the fence (one HSET per message, all or nothing); the batch is
    /// appended either way (events are a log, unfenced), like `append_events`. A lease that holds the fence also
    /// stands for the session's existence: `delete_session` removes `:session` first and the lease, the log and the
    /// message list in one DEL after it, so what a fenced write lands in between is deleted with the rest (the
    /// parts keys of listed messages included); without the fence, `:session` is checked. With a ttl, a lease that
    /// holds the fence is also renewed (PEXPIRE), as the `renew` script would. Returns nil when the session is
    /// missing, else {entry id or '', 1 when the session's watched mark exists else 0, parts status: OK, FENCED or
    /// NO_MESSAGE, 1 when the lease was renewed else 0}.
    pub(super) flush: Script,
    /// KEYS: events. Returns {seconds, microseconds, newest entry id or `0-0`}: Redis's clock and where the log ends.
    pub(super) open_events: Script,
    /// KEYS: session, lease, fence. ARGV: owner, ttl ms. Returns the new token, FENCED when held, NO_SESSION.
    pub(super) acquire: Script,
    /// KEYS: lease. ARGV: `<owner>:<token>`, ttl ms. Returns 1 when renewed.
    pub(super) renew: Script,
    /// KEYS: lease. ARGV: `<owner>:<token>`. Returns 1 when released.
    pub(super) release: Script,
    /// KEYS: session, queue, delivered. ARGV: entry bytes, most entries, the entry's tag (recorded as queued: an
    /// empty value). Returns OK, NO_SESSION or QUEUE_FULL.
    pub(super) enqueue: Script,
    /// KEYS: session, watched. ARGV: ttl ms. Sets the watched mark and returns 1; 0 (nothing written) when the
    /// session does not exist.
    pub(super) watch: Script,
    /// KEYS: session, awaiting. ARGV: member. Adds the member; NO_SESSION when the session is missing.
    pub(super) expect: Script,
    /// KEYS: session, records hash, mailbox list, aux, awaiting. ARGV: id, answer bytes, awaiting member. Returns 1
    /// when stored, 0 when the id was already answered (first answer wins), NO_MESSAGE when nobody asked it (the
    /// member is not in the awaiting set; nothing is written), NO_SESSION.
    pub(super) submit: Script,
    /// KEYS: session, idempotency key, aux. ARGV: message id, ttl ms. Returns {1, ''} when claimed now,
    /// {0, existing message id} when already claimed, {NO_SESSION, ''}.
    pub(super) claim: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self {
            put_session: Script::new(concat!(
                include_str!("lua/gate.lua"),
                include_str!("lua/put_session.lua")
            )),
            cas_session: Script::new(include_str!("lua/cas_session.lua")),
            put_message: Script::new(concat!(
                include_str!("lua/gate.lua"),
                include_str!("lua/put_message.lua")
            )),
            put_parts: Script::new(concat!(
                include_str!("lua/gate.lua"),
                include_str!("lua/put_parts.lua")
            )),
            publish: Script::new(include_str!("lua/publish.lua")),
            append_events: Script::new(concat!(
                include_str!("lua/append.lua"),
                include_str!("lua/append_events.lua")
            )),
            flush: Script::new(concat!(
                include_str!("lua/append.lua"),
                include_str!("lua/flush.lua")
            )),
            open_events: Script::new(include_str!("lua/open_events.lua")),
            acquire: Script::new(include_str!("lua/acquire.lua")),
            renew: Script::new(include_str!("lua/renew.lua")),
            release: Script::new(include_str!("lua/release.lua")),
            enqueue: Script::new(include_str!("lua/enqueue.lua")),
            watch: Script::new(include_str!("lua/watch.lua")),
            expect: Script::new(include_str!("lua/expect.lua")),
            submit: Script::new(include_str!("lua/submit.lua")),
            claim: Script::new(include_str!("lua/claim.lua")),
        }
    }
}
