//! A session's event log (a capped Redis stream): appends, the loop's coalesced flushes, reads and watched marks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use llm_proto::sessions as pb;
use prost::Message as _;
use redis::streams::{StreamRangeReply, StreamReadReply};

use super::db::Db;
use super::keys::{SessionKeys, check_id};
use super::script_call::ScriptCall;
use super::{BLOCKING_GRACE, Fence, StoreError, ceil_millis, fence_arg};
use crate::event_wire::EventId;
use crate::maps::IdSet;

/// Sessions' event logs (see the module docs).
#[derive(Clone)]
pub struct EventLog {
    pub(super) db: Arc<Db>,
}

impl EventLog {
    /// Redis commands the store issued for session event logs since start (appends and flushes, reads, last-id
    /// look-ups, watched marks), so tests and benchmarks can check what coalescing saves.
    pub fn commands(&self) -> u64 {
        self.db.event_commands.load(Ordering::Relaxed)
    }

    fn count_event_command(&self) {
        self.db.event_commands.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends one event to the session's stream as its own entry, with an id Redis assigns, and returns that id.
    /// The stream is capped at about `event_cap` entries. This is the path for sessions whose loop does not run on
    /// this replica; a running loop writes batches through [`crate::events::Hub`]. Unfenced by design (see the
    /// module docs); [`StoreError::NotFound`] when the session does not exist.
    pub async fn publish(
        &self,
        session_id: &str,
        event: pb::session_event::Event,
    ) -> Result<String, StoreError> {
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                // Both ids are implied by where the event is stored, so they are filled in on read instead.
                let stored = pb::SessionEvent {
                    event_id: String::new(),
                    session_id: String::new(),
                    event: Some(event),
                };
                self.count_event_command();
                let id: Option<String> =
                    ScriptCall::new(&self.db.scripts.publish, [keys.session(), keys.events()])
                        .arg(self.db.event_cap)
                        .arg(stored.encode_to_vec())
                        .invoke(&mut self.db.conn.clone())
                        .await?;
                id.ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))
            })
            .await
    }

    /// Appends a batch of events (encoded by [`crate::events`]) as one entry with the id `last`, its last event's
    /// id, and returns the id it got: `last`, or the next id after the stream's newest entry when the stream is
    /// already past `last` (a foreign write; never an error). A retry of a batch that already landed (its id is the
    /// newest) is not written twice. [`StoreError::NotFound`] when the session does not exist.
    pub async fn append_events(
        &self,
        session_id: &str,
        last: EventId,
        batch: Vec<u8>,
    ) -> Result<EventId, StoreError> {
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                self.count_event_command();
                let id: Option<String> = ScriptCall::new(
                    &self.db.scripts.append_events,
                    [keys.session(), keys.events()],
                )
                .arg(self.db.event_cap)
                .arg(last.to_string())
                .arg(batch)
                .invoke(&mut self.db.conn.clone())
                .await?;
                let id = id.ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
                id.parse()
                    .map_err(|_| StoreError::Unexpected(format!("entry id {id:?}")))
            })
            .await
    }

    /// Writes one window of a running loop's event channel in one round trip (one script): `batch` (its last event's id
    /// and the encoded batch, as for [`EventLog::append_events`]; `None` writes no entry) and `parts`, the loop's parts
    /// to persist, which need `fence`. Parts are written only while `fence` holds the lease, all or none; the batch is
    /// appended either way (the log is unfenced). The script checks that each part's message is listed in the session
    /// unless it is in `listed` (messages a previous write already checked: a message stays listed until the session is
    /// deleted, which also ends the lease). With `renew`, a lease that holds `fence` is extended to that ttl as
    /// [`super::Leases::renew_lease`] would ([`Flushed::renewed`]). Also reports whether a stream on another replica
    /// follows the session ([`EventLog::mark_watched`]), so the channel picks its flush window.
    ///
    /// [`StoreError::NotFound`] when the session does not exist; a refused part write (fenced, or an unlisted
    /// message) is [`Flushed::parts`], the batch having been appended.
    pub async fn flush_events(
        &self,
        session_id: &str,
        batch: Option<(EventId, Vec<u8>)>,
        fence: Option<&Fence>,
        renew: Option<Duration>,
        writes: FlushWrites<'_>,
    ) -> Result<Flushed, StoreError> {
        let FlushWrites {
            parts,
            heads,
            listed,
            session,
            ends_run,
            release,
        } = writes;
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                if (!parts.is_empty() || !heads.is_empty() || session.is_some()) && fence.is_none()
                {
                    return Err(StoreError::InvalidArgument(
                        "parts and messages are written only under a fence".into(),
                    ));
                }
                let messages = group_by_message(session_id, parts, heads)?;
                let written = session.map(|cas| cas.new);
                let script = self.flush_invocation(
                    &keys,
                    batch,
                    fence,
                    renew,
                    (&messages, listed),
                    (session, ends_run, release),
                );
                self.count_event_command();
                let reply: Option<(String, i64, i64, i64, i64, i64)> =
                    self.db.invoke_acked(&script).await?;
                let Some((entry, watched, code, renewed, session_code, released)) = reply else {
                    return Err(StoreError::NotFound(format!("session {session_id}")));
                };
                let entry = if entry.is_empty() {
                    None
                } else {
                    Some(
                        entry
                            .parse()
                            .map_err(|_| StoreError::Unexpected(format!("entry id {entry:?}")))?,
                    )
                };
                let parts = Db::status(code, session_id, fence, || {
                    let ids: Vec<&str> = messages.iter().map(|m| m.id).collect();
                    format!("message {} of session {session_id}", ids.join(" or "))
                });
                Ok(Flushed {
                    entry,
                    watched: watched == 1,
                    parts,
                    renewed: renewed == 1,
                    session: self.session_written(session_code, session_id, fence, written),
                    released: released == 1,
                })
            })
            .await
    }

    /// What became of a flush's compare-and-set of the session record (`code`, the script's status for it; 0 when
    /// the flush carried none); a record written is remembered as `written`.
    fn session_written(
        &self,
        code: i64,
        session_id: &str,
        fence: Option<&Fence>,
        written: Option<&[u8]>,
    ) -> Option<SessionWritten> {
        match code {
            0 => None,
            super::scripts::CONFLICT => Some(SessionWritten::Changed),
            _ => Some(
                match Db::status(code, session_id, fence, || format!("session {session_id}")) {
                    Ok(()) => {
                        if let Some(bytes) = written {
                            self.db.records.record_written(session_id, bytes);
                        }
                        SessionWritten::Written
                    }
                    Err(e) => SessionWritten::Refused(e),
                },
            ),
        }
    }

    /// The flush script's call: the batch, the fence and renewal, the session record's compare-and-set, and per
    /// message its head and parts.
    fn flush_invocation(
        &self,
        keys: &SessionKeys,
        batch: Option<(EventId, Vec<u8>)>,
        fence: Option<&Fence>,
        renew: Option<Duration>,
        (messages, listed): (&[MessageWrite<'_>], &IdSet<String>),
        (session, ends_run, release): (Option<SessionCas<'_>>, bool, bool),
    ) -> ScriptCall<'_> {
        let (last, bytes) = match batch {
            Some((last, bytes)) => (last.to_string(), bytes),
            None => (String::new(), Vec::new()),
        };
        let fixed = [
            keys.session(),
            keys.lease(),
            keys.watched(),
            keys.events(),
            keys.messages(),
        ];
        let per_message = messages
            .iter()
            .flat_map(|m| [keys.message(m.id), keys.parts(m.id)]);
        // The queue's key last, wherever the messages' keys end.
        let all: Vec<String> = fixed
            .into_iter()
            .chain(per_message)
            .chain([keys.queue()])
            .collect();
        let fence = fence_arg(fence);
        let renew_ms = renew
            .map(|ttl| ceil_millis(ttl).to_string())
            .unwrap_or_default();
        let (args, room) = flush_room(messages, session.as_ref());
        let room = room + last.len() + bytes.len() + fence.len() + renew_ms.len();
        let mut script = ScriptCall::with_room(&self.db.scripts.flush, &all, args, room);
        script
            .arg(self.db.event_cap)
            .arg(last)
            .arg(bytes)
            .arg(fence)
            .arg(renew_ms);
        match session {
            Some(cas) => script.arg("1").arg(cas.expected).arg(cas.new),
            None => script.arg("").arg("").arg(""),
        };
        script
            .arg(match (ends_run, release) {
                (false, _) => "",
                (true, false) => "1",
                (true, true) => "2",
            })
            .arg(messages.len());
        for m in messages {
            script
                .arg(m.id)
                .arg(if listed.contains(m.id) { "0" } else { "1" });
            match m.head {
                Some(head) => script.message(head),
                None => script.arg(""),
            };
            script.arg(m.parts.len());
            for p in &m.parts {
                script.arg(&p.id).message(*p);
            }
        }
        script
    }

    /// Marks the session as followed from a replica that does not run its loop, for `ttl`: while the mark exists,
    /// the loop's event channel writes with the short flush window (`events.flush_interval_ms`), so such streams
    /// stay fresh. One script; followers refresh it about once a second. [`StoreError::NotFound`] (nothing written)
    /// when the session does not exist, which is how a follower learns that its session was deleted.
    pub async fn mark_watched(&self, session_id: &str, ttl: Duration) -> Result<(), StoreError> {
        let keys = self.db.keys(session_id)?;
        self.count_event_command();
        let marked: i64 = ScriptCall::new(&self.db.scripts.watch, [keys.session(), keys.watched()])
            .arg(ceil_millis(ttl))
            .invoke(&mut self.db.conn.clone())
            .await?;
        if marked == 0 {
            return Err(StoreError::NotFound(format!("session {session_id}")));
        }
        Ok(())
    }

    /// Whether the session's watched mark ([`EventLog::mark_watched`]) exists.
    pub async fn is_watched(&self, session_id: &str) -> Result<bool, StoreError> {
        let keys = self.db.keys(session_id)?;
        let n: i64 = redis::cmd("EXISTS")
            .arg(keys.watched())
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(n > 0)
    }

    /// What a replica starting to write a session's events needs, in one command: the stream's newest entry id
    /// (`0-0` when empty) and Redis's clock in milliseconds.
    pub async fn open_events(&self, session_id: &str) -> Result<(EventId, i64), StoreError> {
        let keys = self.db.keys(session_id)?;
        self.count_event_command();
        let (secs, micros, id): (i64, i64, String) =
            ScriptCall::new(&self.db.scripts.open_events, [keys.events()])
                .invoke(&mut self.db.conn.clone())
                .await?;
        let last = id
            .parse()
            .map_err(|_| StoreError::Unexpected(format!("entry id {id:?}")))?;
        Ok((
            last,
            secs.saturating_mul(1000).saturating_add(micros / 1000),
        ))
    }

    /// Up to `count` entries' events after the event id `after` (`"0"` = from the start), with `event_id` and
    /// `session_id` filled in; only events after `after`, each id once. With `block` (non-zero), waits up to that
    /// long for the first entry and returns empty on timeout; the wait runs on a dedicated connection. `"$"` is
    /// refused: callers pass the last id they saw (or `last_event_id`), so nothing published between two calls is
    /// ever missed.
    pub async fn read_events(
        &self,
        session_id: &str,
        after: &str,
        block: Option<Duration>,
        count: usize,
    ) -> Result<Vec<pb::SessionEvent>, StoreError> {
        let after: EventId = after.parse().map_err(|e: crate::event_wire::BadEventId| {
            StoreError::InvalidArgument(e.to_string())
        })?;
        let page = self
            .read_event_page(session_id, after, block, count)
            .await?;
        let mut seen = after;
        Ok(page
            .events
            .into_iter()
            .filter(|e| match e.event_id.parse::<EventId>() {
                Ok(id) if id > seen => {
                    seen = id;
                    true
                }
                _ => false,
            })
            .collect())
    }

    /// Up to `count` entries after the entry id `cursor`, decoded into their events (every event of each entry,
    /// including any not after `cursor`: callers filter by the last id they delivered), and the id of the last
    /// entry read (`None` when none was). Blocking as in [`EventLog::read_events`].
    pub async fn read_event_page(
        &self,
        session_id: &str,
        cursor: EventId,
        block: Option<Duration>,
        count: usize,
    ) -> Result<EventPage, StoreError> {
        let keys = self.db.keys(session_id)?;
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(count.max(1));
        self.count_event_command();
        // BLOCK 0 means "forever" to Redis; a zero wait here means "don't wait". A wait beyond the bound on
        // blocking reads polls (see `Store::with_log_waits`).
        let wait = block.filter(|d| !d.is_zero());
        let permit = wait.and_then(|_| self.db.log_waits.clone().try_acquire_owned().ok());
        let reply: Option<StreamReadReply> = match (wait, permit) {
            (Some(wait), Some(_permit)) => {
                cmd.arg("BLOCK")
                    .arg(ceil_millis(wait))
                    .arg("STREAMS")
                    .arg(keys.events())
                    .arg(cursor.to_string());
                self.db
                    .blocking
                    .query(&cmd, wait.saturating_add(BLOCKING_GRACE))
                    .await?
            }
            (wait, _) => {
                cmd.arg("STREAMS")
                    .arg(keys.events())
                    .arg(cursor.to_string());
                let reply: Option<StreamReadReply> =
                    cmd.query_async(&mut self.db.conn.clone()).await?;
                if let Some(wait) = wait
                    && reply.is_none()
                {
                    self.db.traffic.log_poll();
                    tokio::time::sleep(wait.min(super::LOG_POLL)).await;
                }
                reply
            }
        };
        let mut page = EventPage::default();
        for stream in reply.map(|r| r.keys).unwrap_or_default() {
            for entry in stream.ids {
                let what = || format!("event entry {} of {}", entry.id, keys.events());
                if let Some(batch) = entry.get::<Vec<u8>>("b") {
                    crate::event_wire::decode_batch(&batch, session_id, &mut page.events).map_err(
                        |e| match e {
                            crate::event_wire::BatchError::Decode(e) => {
                                StoreError::decode(what(), e)
                            }
                            other => StoreError::Unexpected(format!("{}: {other}", what())),
                        },
                    )?;
                } else if let Some(bytes) = entry.get::<Vec<u8>>("e") {
                    // One event per entry, its id the entry's (written by `publish`).
                    let mut event = pb::SessionEvent::decode(bytes.as_slice())
                        .map_err(|e| StoreError::decode(what(), e))?;
                    event.event_id.clone_from(&entry.id);
                    event.session_id = session_id.to_string();
                    page.events.push(event);
                } else {
                    return Err(StoreError::Unexpected(format!(
                        "{} has neither field `b` nor `e`",
                        what()
                    )));
                }
                let id: EventId = entry
                    .id
                    .parse()
                    .map_err(|_| StoreError::Unexpected(what()))?;
                page.cursor = Some(page.cursor.map_or(id, |c: EventId| c.max(id)));
            }
        }
        Ok(page)
    }

    /// The id of the session's newest logged event, `"0-0"` when it has none: where a subscriber that wants only
    /// new events starts reading. (An entry's id is its last event's id.) A replica running the session's loop
    /// knows newer ones: see [`crate::events::Hub::last_event_id`].
    pub async fn last_event_id(&self, session_id: &str) -> Result<String, StoreError> {
        let keys = self.db.keys(session_id)?;
        self.count_event_command();
        let reply: StreamRangeReply = redis::cmd("XREVRANGE")
            .arg(keys.events())
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(reply
            .ids
            .into_iter()
            .next()
            .map_or_else(|| "0-0".to_string(), |e| e.id))
    }
}

/// Events read from a session's log: see [`EventLog::read_event_page`].
#[derive(Debug, Default)]
pub struct EventPage {
    /// The entries' events, in log order, ids filled in.
    pub events: Vec<pb::SessionEvent>,
    /// The id of the last entry read; `None` when there was none.
    pub cursor: Option<EventId>,
}

/// What [`EventLog::flush_events`] did.
#[derive(Debug)]
pub struct Flushed {
    /// The id the batch's entry got (see [`EventLog::append_events`]); `None` when no batch was given.
    pub entry: Option<EventId>,
    /// Whether a stream on another replica follows the session (its watched mark exists).
    pub watched: bool,
    /// The parts' outcome: written, or refused ([`StoreError::Fenced`], [`StoreError::NotFound`] for a message the
    /// session does not list) while the batch was still appended.
    pub parts: Result<(), StoreError>,
    /// The lease was renewed (a ttl was given and the lease holds the fence).
    pub renewed: bool,
    /// What became of the session record's compare-and-set, when one was given.
    pub session: Option<SessionWritten>,
    /// The run's end was logged and the lease released with it (see [`FlushWrites::release`]).
    pub released: bool,
}

/// The outcome of a flush's compare-and-set of the session record.
#[derive(Debug)]
pub enum SessionWritten {
    /// The record was the expected one and is replaced.
    Written,
    /// The record changed since the expected bytes were read (another writer, e.g. the title); nothing written.
    Changed,
    /// The lease does not hold the fence ([`StoreError::Fenced`]); nothing written.
    Refused(StoreError),
}

/// A compare-and-set of the session record a flush carries: written only if the stored bytes are `expected`.
#[derive(Debug, Clone, Copy)]
pub struct SessionCas<'a> {
    /// The record as last read or written.
    pub expected: &'a [u8],
    /// The record to write (encoded, without its live status).
    pub new: &'a [u8],
}

/// The parts and message heads a flush persists under its fence, and the messages the caller knows the session
/// lists already.
#[derive(Debug, Clone, Copy)]
pub struct FlushWrites<'a> {
    /// Parts in their latest state.
    pub parts: &'a [pb::Part],
    /// Message heads (no parts) in their latest state.
    pub heads: &'a [pb::Message],
    /// Messages already listed in the session.
    pub listed: &'a IdSet<String>,
    /// The session record, when its totals changed.
    pub session: Option<SessionCas<'a>>,
    /// The batch holds the end of the loop's run (`done`): it is appended only while the lease holds the fence, so
    /// a replica that lost its lease never tells followers a run ended that its successor goes on with.
    pub ends_run: bool,
    /// With `ends_run`: release the lease in the same script when no prompt is queued and every write of the batch
    /// succeeded ([`Flushed::released`]).
    pub release: bool,
}

/// What a flush writes of one message: its head (when it changed) and its parts.
struct MessageWrite<'a> {
    id: &'a str,
    head: Option<&'a pb::Message>,
    parts: Vec<&'a pb::Part>,
}

/// The flush call's arguments after its keys, and their bytes but for the batch's, the fence's and the renewal's
/// (numbers and flags counted at their widest).
fn flush_room(messages: &[MessageWrite<'_>], session: Option<&SessionCas<'_>>) -> (usize, usize) {
    // The event cap, the last id, the batch, the fence, the renewal, the record's three and the end flag; the
    // message count.
    const FIXED_ARGS: usize = 10;
    let mut args = FIXED_ARGS;
    let mut bytes = 20 + session.map_or(1, |cas| 1 + cas.expected.len() + cas.new.len()) + 1 + 20;
    for m in messages {
        args += 4 + 2 * m.parts.len();
        bytes += m.id.len() + 1 + m.head.map_or(0, |h| h.encoded_len()) + 20;
        bytes += m
            .parts
            .iter()
            .map(|p| p.id.len() + p.encoded_len())
            .sum::<usize>();
    }
    (args, bytes)
}

/// Parts and heads grouped by message, in order of first appearance (the script writes one HSET per message).
fn group_by_message<'a>(
    session_id: &str,
    parts: &'a [pb::Part],
    heads: &'a [pb::Message],
) -> Result<Vec<MessageWrite<'a>>, StoreError> {
    let mut messages: Vec<MessageWrite<'a>> = Vec::new();
    for h in heads {
        check_id("message id", &h.id)?;
        if h.session_id != session_id || !h.parts.is_empty() {
            return Err(StoreError::InvalidArgument(format!(
                "message {} of session {} is not a head of session {session_id}",
                h.id, h.session_id
            )));
        }
        messages.push(MessageWrite {
            id: &h.id,
            head: Some(h),
            parts: Vec::new(),
        });
    }
    for p in parts {
        check_id("part id", &p.id)?;
        check_id("message id", &p.message_id)?;
        if p.session_id != session_id {
            return Err(StoreError::InvalidArgument(format!(
                "part {} belongs to session {}, not {session_id}",
                p.id, p.session_id
            )));
        }
        match messages.iter_mut().find(|m| m.id == p.message_id) {
            Some(m) => m.parts.push(p),
            None => messages.push(MessageWrite {
                id: &p.message_id,
                head: None,
                parts: vec![p],
            }),
        }
    }
    Ok(messages)
}

#[cfg(test)]
#[path = "event_log_tests.rs"]
mod tests;
