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
/// whose lease expired cannot overwrite its successor's data). A fenced gate reads both keys with one MGET.
macro_rules! gate {
    () => {
        r"
local function gate(session_key, lease_key, fence)
  if fence == '' then
    if redis.call('EXISTS', session_key) == 0 then return -2 end
    return 1
  end
  local v = redis.call('MGET', session_key, lease_key)
  if not v[1] then return -2 end
  if v[2] ~= fence then return -1 end
  return 1
end
"
    };
}

/// Appends a batch as one stream entry: `append(events key, cap, entry id, batch)`. Writes at the given id, or, when
/// the stream is already at or past it, after the newest entry (an auto id), so it never fails on ids; a batch
/// whose id is already the newest entry (a retried write that landed) is not written again. Returns the entry id.
macro_rules! append {
    () => {
        r"
local function append(events, cap, id, batch)
  local written = redis.pcall('XADD', events, 'MAXLEN', '~', cap, id, 'b', batch)
  if type(written) == 'string' then return written end
  local top = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
  if top[1] and top[1][1] == id then return id end
  return redis.call('XADD', events, 'MAXLEN', '~', cap, '*', 'b', batch)
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
    /// KEYS: session, lease, messages, msg, parts, prompt model. ARGV: fence, message id, message bytes, `1` when the
    /// session already lists the message (no ZADD) else `0`, the prompt model to record (a user message's resolved
    /// model; empty: none), (part id, part bytes)*.
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
            cas_session: Script::new(
                r"
local v = redis.call('MGET', KEYS[1], KEYS[2])
if not v[1] then return -2 end
if ARGV[1] ~= '' and v[2] ~= ARGV[1] then return -1 end
if v[1] ~= ARGV[2] then return -4 end
redis.call('SET', KEYS[1], ARGV[3])
return 1
",
            ),
            put_message: Script::new(concat!(
                gate!(),
                r"
local g = gate(KEYS[1], KEYS[2], ARGV[1])
if g ~= 1 then return g end
if ARGV[4] ~= '1' then redis.call('ZADD', KEYS[3], 0, ARGV[2]) end
redis.call('SET', KEYS[4], ARGV[3])
if ARGV[5] ~= '' then redis.call('SET', KEYS[6], ARGV[5]) end
for i = 6, #ARGV, 2 do
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
            append_events: Script::new(concat!(
                append!(),
                r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return append(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
"
            )),
            flush: Script::new(concat!(
                append!(),
                r"
local got = redis.call('MGET', KEYS[2], KEYS[3])
local owned = ARGV[4] ~= '' and got[1] == ARGV[4]
if not owned and redis.call('EXISTS', KEYS[1]) == 0 then return false end
local renewed = 0
if owned and ARGV[5] ~= '' then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  renewed = 1
end
local n = tonumber(ARGV[6])
local status = 1
if n > 0 then
  if not owned then
    status = -1
  else
    local i = 7
    for m = 1, n do
      if ARGV[i + 1] == '1' and ARGV[i + 2] == '' and not redis.call('ZSCORE', KEYS[5], ARGV[i]) then
        status = -3
      end
      i = i + 4 + 2 * tonumber(ARGV[i + 3])
    end
    if status == 1 then
      i = 7
      for m = 1, n do
        local k = tonumber(ARGV[i + 3])
        if ARGV[i + 2] ~= '' then
          if ARGV[i + 1] == '1' then redis.call('ZADD', KEYS[5], 0, ARGV[i]) end
          redis.call('SET', KEYS[4 + 2 * m], ARGV[i + 2])
        end
        if k > 0 then redis.call('HSET', KEYS[5 + 2 * m], unpack(ARGV, i + 4, i + 3 + 2 * k)) end
        i = i + 4 + 2 * k
      end
    end
  end
end
local entry = ''
if ARGV[3] ~= '' then entry = append(KEYS[4], ARGV[1], ARGV[2], ARGV[3]) end
local watched = 0
if got[2] then watched = 1 end
return {entry, watched, status, renewed}
"
            )),
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
if #items > 0 then redis.call('DEL', KEYS[1]) end
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
