//! A prompt's fast path: what the loop needs before its first gateway call, in as few round trips as possible.
//!
//! One script (all keys in the session's slot) takes the lease, stores the user message with its parts and the
//! session's prompt model, drains the prompt queue, stores the run's inputs, and returns where the event log ends,
//! Redis's clock and the ids of every message. The bodies of the messages before the new one follow in one
//! pipelined round trip, only when there are any (a session's first prompt needs none: the new message is known).
//! The active mark (a key outside the slot) is set beside the script, concurrently.

use std::sync::LazyLock;
use std::time::Duration;

use llm_proto::sessions as pb;
use prost::Message as _;
use redis::Script;

use super::keys::SessionKeys;
use super::{Fence, Store, StoreError, ceil_millis, check_id, keys};
use crate::event_wire::EventId;

/// KEYS: session, lease, fence, messages, msg, parts, prompt model, events, queue, inputs. ARGV: owner, ttl ms,
/// message id, message bytes, prompt model (empty: none), inputs bytes (empty: none), then (part id, part bytes)*.
/// Returns {NO_SESSION} when the session is missing, {FENCED} when the lease is held (nothing written), else
/// {token, last event id, seconds, microseconds, n queued, queued bytes*, message ids*}.
static BEGIN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {-2} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {-1} end
local token = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[2], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
redis.call('ZADD', KEYS[4], 0, ARGV[3])
redis.call('SET', KEYS[5], ARGV[4])
if ARGV[5] ~= '' then redis.call('SET', KEYS[7], ARGV[5]) end
for i = 7, #ARGV, 2 do
  redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1])
end
if ARGV[6] ~= '' then redis.call('SET', KEYS[10], ARGV[6]) end
local queued = redis.call('LRANGE', KEYS[9], 0, -1)
if #queued > 0 then redis.call('DEL', KEYS[9]) end
local top = redis.call('XREVRANGE', KEYS[8], '+', '-', 'COUNT', 1)
local last = '0-0'
if top[1] then last = top[1][1] end
local t = redis.call('TIME')
local out = {token, last, tonumber(t[1]), tonumber(t[2]), #queued}
for _, q in ipairs(queued) do out[#out + 1] = q end
for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do out[#out + 1] = id end
return out
",
    )
});

/// KEYS: lease, queue. ARGV: `<owner>:<token>`. Gives the lease up if it is still this one, and returns how many
/// prompts are queued (so a loop that just ended knows in the same round trip whether it must run again).
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return redis.call('LLEN', KEYS[2])
",
    )
});

/// What [`Store::begin_prompt`] did.
#[derive(Debug)]
pub enum Begin {
    /// Another loop holds the lease; nothing was written.
    Busy,
    /// The lease is this caller's and the message is stored.
    Begun(Begun),
}

/// A prompt begun under a new lease.
#[derive(Debug)]
pub struct Begun {
    /// The lease.
    pub fence: Fence,
    /// The event log's newest entry id before this prompt.
    pub last_event: EventId,
    /// Redis's clock when the script ran, in ms since the epoch.
    pub redis_ms: i64,
    /// The prompts that were queued (taken out of the queue), oldest first.
    pub queued: Vec<pb::PromptRequest>,
    /// Every message of the session, oldest first, the new one included (as stored).
    pub history: Vec<pb::Message>,
}

/// The begin script's call: the session's keys, the lease request, the message head and its parts, the inputs.
fn begin_invocation(
    keys: &SessionKeys,
    message: &pb::Message,
    owner: &str,
    ttl: Duration,
    inputs: Option<&pb::PromptRequest>,
) -> Result<redis::ScriptInvocation<'static>, StoreError> {
    let mut head = message.clone();
    let parts = std::mem::take(&mut head.parts);
    let mut script = BEGIN.prepare_invoke();
    script
        .key(keys.session())
        .key(keys.lease())
        .key(keys.fence())
        .key(keys.messages())
        .key(keys.message(&message.id))
        .key(keys.parts(&message.id))
        .key(keys.prompt_model())
        .key(keys.events())
        .key(keys.queue())
        .key(keys.run_inputs())
        .arg(owner)
        .arg(ceil_millis(ttl))
        .arg(&message.id)
        .arg(head.encode_to_vec())
        .arg(head.model.as_str())
        .arg(inputs.map(|i| i.encode_to_vec()).unwrap_or_default());
    for part in &parts {
        check_id("part id", &part.id)?;
        script.arg(&part.id).arg(part.encode_to_vec());
    }
    Ok(script)
}

impl Store {
    /// Takes the lease for `owner` and stores `message` (a user message with its parts), the prompt model it
    /// carries, and `inputs` (the run's inputs, when given), then reads the rest of what the loop starts from (see
    /// the module docs). [`StoreError::NotFound`] when the session is missing.
    pub async fn begin_prompt(
        &self,
        message: &pb::Message,
        owner: &str,
        ttl: Duration,
        inputs: Option<&pb::PromptRequest>,
    ) -> Result<Begin, StoreError> {
        let session_id = &message.session_id;
        check_id("message id", &message.id)?;
        if owner.is_empty() {
            return Err(StoreError::InvalidArgument(
                "lease owner must not be empty".into(),
            ));
        }
        let keys = self.keys(session_id)?;
        let script = begin_invocation(&keys, message, owner, ttl, inputs)?;
        let mut conn = self.conn.clone();
        let mut active_conn = self.conn.clone();
        let mark = redis::cmd("SADD")
            .arg(keys::active(&self.prefix))
            .arg(session_id)
            .clone();
        let active = mark.query_async::<i64>(&mut active_conn);
        let (reply, marked) = tokio::join!(
            self.write_session(session_id, async {
                Ok(script.invoke_async::<Vec<redis::Value>>(&mut conn).await?)
            }),
            active
        );
        let reply = reply?;
        let code = reply
            .first()
            .map(|v| redis::from_redis_value::<i64>(v.clone()))
            .transpose()
            .map_err(|e| StoreError::Unexpected(e.to_string()))?;
        match code {
            Some(-2) => return Err(StoreError::NotFound(format!("session {session_id}"))),
            Some(-1) => return Ok(Begin::Busy),
            _ => {}
        }
        marked?;
        let begun = decode(reply)
            .map_err(|e| StoreError::Unexpected(format!("begin_prompt reply: {e}")))?;
        let (token, last_event, redis_ms, queued, ids) = begun;
        let queued = queued
            .iter()
            .map(|b| {
                pb::PromptRequest::decode(b.as_slice())
                    .map_err(|e| StoreError::decode(keys.queue(), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // The new message's id is the newest (ids ascend with time); what came before is read back.
        let earlier: Vec<String> = ids.into_iter().filter(|id| *id != message.id).collect();
        let mut history = self.messages_by_id(&keys, &earlier).await?;
        history.push(message.clone());
        history.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(Begin::Begun(Begun {
            fence: Fence {
                owner: owner.to_string(),
                token,
            },
            last_event,
            redis_ms,
            queued,
            history,
        }))
    }
}

impl Store {
    /// Gives the lease up if `fence` still holds it (a lease that moved on is left to its new owner) and tells
    /// whether prompts wait in the session's queue, in one round trip.
    pub async fn release_lease_and_peek(
        &self,
        session_id: &str,
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let queued: i64 = RELEASE
                .key(keys.lease())
                .key(keys.queue())
                .arg(fence.lease_value())
                .invoke_async(&mut self.conn.clone())
                .await?;
            Ok(queued > 0)
        })
        .await
    }
}

/// The script's reply: token, last event id, Redis time in ms, queued prompts' bytes, message ids.
type Reply = (u64, EventId, i64, Vec<Vec<u8>>, Vec<String>);

fn decode(reply: Vec<redis::Value>) -> Result<Reply, String> {
    let mut it = reply.into_iter();
    let mut next = || it.next().ok_or_else(|| "short reply".to_string());
    let token: u64 = redis::from_redis_value(next()?).map_err(|e| e.to_string())?;
    let last: String = redis::from_redis_value(next()?).map_err(|e| e.to_string())?;
    let secs: i64 = redis::from_redis_value(next()?).map_err(|e| e.to_string())?;
    let micros: i64 = redis::from_redis_value(next()?).map_err(|e| e.to_string())?;
    let n: usize = redis::from_redis_value(next()?).map_err(|e| e.to_string())?;
    let mut queued = Vec::with_capacity(n);
    for _ in 0..n {
        queued.push(redis::from_redis_value::<Vec<u8>>(next()?).map_err(|e| e.to_string())?);
    }
    let mut ids = Vec::new();
    while let Ok(v) = next() {
        ids.push(redis::from_redis_value::<String>(v).map_err(|e| e.to_string())?);
    }
    let last: EventId = last.parse().map_err(|_| format!("entry id {last:?}"))?;
    Ok((
        token,
        last,
        secs.saturating_mul(1000).saturating_add(micros / 1000),
        queued,
        ids,
    ))
}

#[cfg(test)]
#[path = "begin_tests.rs"]
mod tests;
