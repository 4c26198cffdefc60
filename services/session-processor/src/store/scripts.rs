//! Lua scripts. Each one touches only keys of a single session (all declared in KEYS, all in the session's hash
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

/// Shared gate of every write: the session must exist (so a loop racing `delete_session` cannot recreate keys that
/// nothing would ever delete) and, when a fence is given, the lease must still hold exactly that fence (so a replica
/// whose lease expired cannot overwrite its successor's data).
macro_rules! gate {
    () => {
        r"
local function gate(session_key, lease_key, fence)
  if redis.call('EXISTS', session_key) == 0 then return -2 end
  if fence ~= '' and redis.call('GET', lease_key) ~= fence then return -1 end
  return 1
end
"
    };
}

/// Every script the store runs, hashed once so calls go out as EVALSHA (redis::Script falls back to loading the
/// body when the server answers NOSCRIPT, e.g. after a restart or a failover).
pub(super) struct Scripts {
    /// KEYS: session, lease. ARGV: fence, session bytes.
    pub(super) put_session: Script,
    /// KEYS: session, lease. ARGV: fence, expected session bytes, new session bytes. CONFLICT when the stored bytes
    /// are not the expected ones.
    pub(super) cas_session: Script,
    /// KEYS: session, lease, messages, msg, parts. ARGV: fence, message id, message bytes, (part id, part bytes)*.
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
    /// KEYS: events. Returns {seconds, microseconds, newest entry id or `0-0`}: Redis's clock and where the log ends.
    pub(super) open_events: Script,
    /// KEYS: session, lease, fence. ARGV: owner, ttl ms. Returns the new token, FENCED when held, NO_SESSION.
    pub(super) acquire: Script,
    /// KEYS: lease. ARGV: `<owner>:<token>`, ttl ms. Returns 1 when renewed.
    pub(super) renew: Script,
    /// KEYS: lease. ARGV: `<owner>:<token>`. Returns 1 when released.
    pub(super) release: Script,
    /// KEYS: session, queue. ARGV: prompt bytes.
    pub(super) enqueue: Script,
    /// KEYS: queue. Returns every queued prompt, oldest first, and empties the queue.
    pub(super) drain: Script,
    /// KEYS: session, records hash, mailbox list, aux. ARGV: id, answer bytes. Returns 1 when stored, 0 when the id
    /// was already answered (first answer wins), NO_SESSION.
    pub(super) submit: Script,
    /// KEYS: session, idempotency key, aux. ARGV: message id, ttl ms. Returns {1, ''} when claimed now,
    /// {0, existing message id} when already claimed, {NO_SESSION, ''}.
    pub(super) claim: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self {
            put_session: Script::new(concat!(
                gate!(),
                r"
local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"
            )),
            cas_session: Script::new(concat!(
                gate!(),
                r"
local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return -4 end
redis.call('SET', KEYS[1], ARGV[3])
return 1
"
            )),
            put_message: Script::new(concat!(
                gate!(),
                r"
local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
redis.call('ZADD', KEYS[3], 0, ARGV[2])
redis.call('SET', KEYS[4], ARGV[3])
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
end
return 1
"
            )),
            put_parts: Script::new(concat!(
                gate!(),
                r"
local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
local n = tonumber(ARGV[2])
for i = 1, n do
  if not redis.call('ZSCORE', KEYS[3], ARGV[2 + i]) then return -3 end
end
for i = 3 + n, #ARGV, 3 do
  redis.call('HSET', KEYS[3 + tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
return 1
"
            )),
            publish: Script::new(
                r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[2])
",
            ),
            append_events: Script::new(
                r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local written = redis.pcall('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], ARGV[2], 'b', ARGV[3])
if type(written) == 'string' then return written end
local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if top[1] and top[1][1] == ARGV[2] then return ARGV[2] end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'b', ARGV[3])
",
            ),
            open_events: Script::new(
                r"
local t = redis.call('TIME')
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local last = '0-0'
if top[1] then last = top[1][1] end
return {tonumber(t[1]), tonumber(t[2]), last}
",
            ),
            acquire: Script::new(
                r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local token = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[2], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
return token
",
            ),
            renew: Script::new(
                r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
",
            ),
            release: Script::new(
                r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
",
            ),
            enqueue: Script::new(
                r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
",
            ),
            drain: Script::new(
                r"
local items = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
return items
",
            ),
            submit: Script::new(
                r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('RPUSH', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[4], KEYS[3])
return 1
",
            ),
            claim: Script::new(
                r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {-2, ''} end
local existing = redis.call('GET', KEYS[2])
if existing then return {0, existing} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[3], KEYS[2])
return {1, ''}
",
            ),
        }
    }
}
