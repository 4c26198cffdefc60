//! A prompt's fast path: what the loop needs before its first gateway call, in one round trip.
//!
//! One script (all keys in the session's slot) checks the session and the lease, takes the lease, stores the user
//! message with its parts, the session's prompt model (when it changed) and the run's inputs, and returns where the
//! event log ends, whether a stream on another replica follows the session, Redis's clock when asked, and the whole
//! history before the new message (every head in one MGET, then each message's parts). The active mark (a key
//! outside the slot) is set beside the script, concurrently. Prompts waiting in the queue are not taken here: the
//! loop checks the queue at its step boundary (docs/architecture.md, "A prompt's critical path").

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use llm_proto::sessions as pb;
use redis::Script;

use super::active::{ActiveMark, ActiveSet, mark_cmd};
use super::db::Db;
use super::keys::SessionKeys;
use super::messages::assemble;
use super::script_call::ScriptCall;
use super::{Fence, StoreError, ceil_millis, check_id, records};
use crate::event_wire::EventId;

/// See `lua/begin.lua`. Returns {NO_SESSION} when the session is missing, {STALE} when the record or prompt model
/// is not what the caller validated, {FENCED} when the lease is held (nothing written in either case), else {token, last event id, seconds or -1, microseconds, watched 0/1, (message id, head, parts)*}.
static BEGIN: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/begin.lua")));

/// A prompt's first write and its idempotency key (`idempotency.rs`).
#[derive(Clone)]
pub struct Prompts {
    pub(super) db: Arc<Db>,
}

/// What [`Prompts::begin_prompt`] did.
#[derive(Debug)]
pub enum Begin {
    /// Another loop holds the lease; nothing was written.
    Busy,
    /// The session's record or prompt model is not what the caller validated the prompt against (it changed, or the
    /// caller started from what this replica knew: [`super::Sessions::known_session_for_prompt`]); nothing was written.
    Stale,
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
    /// Redis's clock when the script ran, in ms since the epoch, when it was asked for.
    pub redis_ms: Option<i64>,
    /// Whether a stream on another replica follows the session (its watched mark exists).
    pub watched: bool,
    /// Every message of the session, oldest first, the new one included (as stored).
    pub history: Vec<pb::Message>,
}

/// What a prompt's first write carries besides the message.
#[derive(Debug, Clone, Copy)]
pub struct BeginArgs<'a> {
    /// The lease's owner (this replica).
    pub owner: &'a str,
    /// The lease's ttl.
    pub ttl: Duration,
    /// The run's inputs to store, when there are any.
    pub inputs: Option<&'a pb::PromptRequest>,
    /// The id of the run this prompt starts: its active mark ([`ActiveMark`]) is set beside the script.
    pub run: &'a str,
    /// Read Redis's clock too (the replica's offset to it is stale).
    pub time: bool,
    /// The session record (stored bytes) and prompt model the caller validated the prompt against: the script
    /// begins only if Redis still holds exactly these ([`Begin::Stale`] otherwise).
    pub validated: Option<(&'a [u8], Option<&'a str>)>,
}

/// The begin script's call: the session's keys, the lease request, the message head and its parts, the inputs.
fn begin_invocation(
    keys: &SessionKeys,
    message: &mut pb::Message,
    args: &BeginArgs<'_>,
) -> Result<ScriptCall<'static>, StoreError> {
    // The head is the message without its parts: they are taken out while it is encoded, and put back.
    let parts = std::mem::take(&mut message.parts);
    let script = begin_call(keys, message, &parts, args);
    message.parts = parts;
    script
}

/// [`begin_invocation`]'s call, `head` without its parts.
fn begin_call(
    keys: &SessionKeys,
    head: &pb::Message,
    parts: &[pb::Part],
    args: &BeginArgs<'_>,
) -> Result<ScriptCall<'static>, StoreError> {
    let message = head;
    let mut script = ScriptCall::new(
        &BEGIN,
        [
            keys.session(),
            keys.lease(),
            keys.fence(),
            keys.messages(),
            keys.message(&message.id),
            keys.parts(&message.id),
            keys.prompt_model(),
            keys.events(),
            keys.watched(),
            keys.run_inputs(),
        ],
    );
    script
        .arg(args.owner)
        .arg(ceil_millis(args.ttl))
        .arg(&message.id)
        .message(head)
        .arg(head.model.as_str());
    match args.inputs {
        Some(inputs) => script.message(inputs),
        None => script.arg(""),
    };
    script
        .arg(if args.time { "1" } else { "0" })
        .arg(keys.message(""))
        .arg(keys.parts(""));
    match args.validated {
        Some((record, model)) => script.arg("1").arg(record).arg(model.unwrap_or_default()),
        None => script.arg("").arg("").arg(""),
    };
    for part in parts {
        check_id("part id", &part.id)?;
        script.arg(&part.id).message(part);
    }
    Ok(script)
}

impl Prompts {
    /// The begin script and, beside it, the run's active mark. On one node they go in one pipeline (one round trip);
    /// on a cluster, concurrently: the mark's key lives in another slot, and a replica `WAIT` must follow the script
    /// on the script's node.
    async fn begin_and_mark(
        &self,
        session_id: &str,
        script: ScriptCall<'_>,
        mark: &ActiveMark,
    ) -> (
        Result<Vec<redis::Value>, StoreError>,
        Result<i64, StoreError>,
    ) {
        let sadd = mark_cmd(&self.db.prefix, mark);
        if self.db.conn.one_node() {
            let both = self
                .db
                .write_session(session_id, self.db.invoke_acked_beside(script, sadd))
                .await;
            return match both {
                Ok((reply, marked)) => (Ok(reply), Ok(marked)),
                Err(e) => (Err(e), Ok(0)),
            };
        }
        let mut active_conn = self.db.conn.clone();
        let (reply, marked) = tokio::join!(
            self.db.write_session(session_id, async {
                self.db.invoke_acked::<Vec<redis::Value>>(&script).await
            }),
            sadd.query_async::<i64>(&mut active_conn)
        );
        (reply, marked.map_err(StoreError::from))
    }

    /// Takes the lease for `args.owner` and stores `message` (a user message with its parts), the prompt model it
    /// carries, and the run's inputs (when given), reading the rest of what the loop starts from in the same script
    /// (see the module docs); the message is the history's last. [`StoreError::NotFound`] when the session is
    /// missing.
    pub async fn begin_prompt(
        &self,
        mut message: pb::Message,
        args: BeginArgs<'_>,
    ) -> Result<Begin, StoreError> {
        check_id("message id", &message.id)?;
        if args.owner.is_empty() {
            return Err(StoreError::InvalidArgument(
                "lease owner must not be empty".into(),
            ));
        }
        let keys = self.db.keys(&message.session_id)?;
        let script = begin_invocation(&keys, &mut message, &args)?;
        let session_id = &message.session_id;
        let mark = ActiveMark::of(session_id, args.run);
        let (reply, marked) = self.begin_and_mark(session_id, script, &mark).await;
        let reply = reply?;
        let code = reply
            .first()
            .map(|v| redis::from_redis_value::<i64>(v.clone()))
            .transpose()
            .map_err(|e| StoreError::Unexpected(e.to_string()))?;
        if matches!(code, Some(-1 | -2 | -5)) {
            // No run starts: its mark, set beside the script, goes (it is this run's alone). A failure leaves a mark
            // the recovery sweep finds with nothing to do.
            let active = ActiveSet {
                db: self.db.clone(),
            };
            let _ = active.clear_active(&mark).await;
        }
        match code {
            Some(-2) => {
                self.db.records.forget(session_id);
                return Err(StoreError::NotFound(format!("session {session_id}")));
            }
            Some(-5) => {
                self.db.records.forget(session_id);
                return Ok(Begin::Stale);
            }
            Some(-1) => return Ok(Begin::Busy),
            _ => {}
        }
        marked?;
        if let Some(validated) = args.validated {
            self.remember_begun(&message, validated);
        }
        let reply = decode(reply)
            .map_err(|e| StoreError::Unexpected(format!("begin_prompt reply: {e}")))?;
        let mut history = Vec::with_capacity(reply.earlier.len() + 1);
        for m in reply.earlier {
            history.push(assemble(&keys, &m.id, &m.head, m.parts)?);
        }
        // The message itself ends the history the loop starts from.
        history.push(message);
        Ok(Begin::Begun(Begun {
            fence: Fence {
                owner: args.owner.to_string(),
                token: reply.token,
            },
            last_event: reply.last,
            redis_ms: reply.redis_ms,
            watched: reply.watched,
            history,
        }))
    }

    /// After a prompt began from `validated`: the record is as validated, and the prompt model is the message's
    /// when it carries one.
    fn remember_begun(&self, message: &pb::Message, (record, model): (&[u8], Option<&str>)) {
        let model = Some(message.model.as_str())
            .filter(|m| !m.is_empty())
            .or(model);
        self.db.records.put(
            &message.session_id,
            records::Known {
                bytes: record.to_vec(),
                model: model.map(String::from),
            },
        );
    }
}

/// The script's reply.
struct Reply {
    token: u64,
    last: EventId,
    redis_ms: Option<i64>,
    watched: bool,
    /// The messages before the new one, as stored.
    earlier: Vec<StoredMessage>,
}

/// A message as the script read it: its id, its head's bytes and its parts hash (part id, bytes).
struct StoredMessage {
    id: String,
    head: Vec<u8>,
    parts: Vec<(String, Vec<u8>)>,
}

fn decode(reply: Vec<redis::Value>) -> Result<Reply, String> {
    let mut it = reply.into_iter();
    let mut next = || it.next().ok_or_else(|| "short reply".to_string());
    let token: u64 = value(next()?)?;
    let last: String = value(next()?)?;
    let secs: i64 = value(next()?)?;
    let micros: i64 = value(next()?)?;
    let watched: i64 = value(next()?)?;
    let mut earlier = Vec::new();
    while let Ok(id) = next() {
        earlier.push(StoredMessage {
            id: value(id)?,
            head: value(next()?)?,
            parts: value(next()?)?,
        });
    }
    let last: EventId = last.parse().map_err(|_| format!("entry id {last:?}"))?;
    Ok(Reply {
        token,
        last,
        redis_ms: (secs >= 0).then(|| secs.saturating_mul(1000).saturating_add(micros / 1000)),
        watched: watched == 1,
        earlier,
    })
}

fn value<T: redis::FromRedisValue>(v: redis::Value) -> Result<T, String> {
    redis::from_redis_value(v).map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "begin_tests.rs"]
mod tests;
