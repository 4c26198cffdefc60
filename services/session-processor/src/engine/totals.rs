//! Session totals: each assistant message's share (its cost, its steps' tokens), their exact integer sums on the
//! session record, and what a running loop carries between steps so a step boundary reads nothing back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use llm_proto::sessions as pb;

use prost::Message as _;

use super::{LoopError, now};
use crate::events::{Publisher, SessionTotals};
use crate::maps::IdMap;
use crate::store::{Fence, Messages, Sessions, Spend};

/// What a running loop carries between steps instead of reading it back from Redis: the session record as last
/// read or written (for the budget check), and each assistant message's share of the session's totals, seeded from
/// the history the loop reads at the top of every iteration (the stored truth) and updated as it settles steps.
#[derive(Debug, Default)]
pub(super) struct RunCache {
    /// The session record as last read or written by this loop.
    pub session: Option<pb::Session>,
    /// Its stored bytes, when known: the next `settle_session` updates from them without reading the record.
    pub session_bytes: Option<Vec<u8>>,
    /// Cost and tokens per assistant message id; `None` until the loop has read the history.
    pub totals: Option<HashMap<String, (i64, pb::Tokens)>>,
    /// This run may have stored a retry status under its fence (set before trying to store one, cleared once it
    /// is cleared): only then does the run's end have one to clear, since a retry status counts only under the
    /// lease that stored it.
    pub retry_status: bool,
}

/// An assistant message's share of the session's totals: its cost, and the tokens of its step-finish parts.
pub(super) fn message_totals(message: &pb::Message, parts: &[pb::Part]) -> (i64, pb::Tokens) {
    let mut tokens = pb::Tokens::default();
    for p in parts {
        if let Some(pb::part::Kind::StepFinish(f)) = &p.kind {
            add(&mut tokens, &f.tokens.unwrap_or_default());
        }
    }
    (message.cost_nano_usd, tokens)
}

/// Every assistant message's share of the totals in a history as stored.
pub(super) fn history_totals(history: &[pb::Message]) -> HashMap<String, (i64, pb::Tokens)> {
    history
        .iter()
        .filter(|m| m.role() == pb::Role::Assistant)
        .map(|m| (m.id.clone(), message_totals(m, &m.parts)))
        .collect()
}

/// The session's totals: the sum of its assistant messages' shares.
fn sum_totals(shares: &HashMap<String, (i64, pb::Tokens)>) -> (i64, pb::Tokens) {
    let mut cost = 0i64;
    let mut tokens = pb::Tokens::default();
    for (c, t) in shares.values() {
        cost += c;
        add(&mut tokens, t);
    }
    (cost, tokens)
}

fn add(sum: &mut pb::Tokens, t: &pb::Tokens) {
    sum.input += t.input;
    sum.output += t.output;
    sum.reasoning += t.reasoning;
    sum.cache_read += t.cache_read;
    sum.cache_write += t.cache_write;
}

/// What each running loop of this replica knows of its session, so a step does not re-read it (see [`RunCache`]).
/// Boxed: a map's empty slots are the size of its entries, and a cache is half a kilobyte.
#[derive(Default)]
pub(super) struct RunCaches(Mutex<IdMap<String, Box<RunCache>>>);

impl RunCaches {
    /// The run cache of a session, changed by `f` under the lock.
    pub(super) fn with<T>(&self, session_id: &str, f: impl FnOnce(&mut RunCache) -> T) -> T {
        let mut caches = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up first: the loop's own session is nearly always there, and an entry would copy the id each time.
        if let Some(cache) = caches.get_mut(session_id) {
            return f(cache);
        }
        f(caches.entry(session_id.to_string()).or_default())
    }

    /// Forgets what the loop of a session carried (its run is over) and returns it.
    pub(super) fn forget(&self, session_id: &str) -> RunCache {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id)
            .map(|cache| *cache)
            .unwrap_or_default()
    }
}

/// Settles the session's totals after each step and charges its tenant.
pub(super) struct Totals {
    pub(super) publisher: Publisher,
    pub(super) sessions: Sessions,
    pub(super) messages: Messages,
    pub(super) spend: Spend,
    pub(super) caches: Arc<RunCaches>,
}

impl Totals {
    /// Writes the session's totals (cost and tokens, the sum over its assistant messages) after `message` (with its
    /// `parts`) changed, and charges `charge` (nano-USD) to the session's tenant once they are written. The other
    /// messages' shares come from the history the loop read at the top of this iteration, so the history is not read
    /// again; a loop that has not read it reads it here.
    ///
    /// With the session's event channel open here, the new record goes with the channel's next write (the same
    /// script as the step's last parts and events: see [`Publisher::stage_session`]); otherwise it is written now.
    pub(super) async fn settle_session(
        &self,
        session: &pb::Session,
        message: &pb::Message,
        parts: &[pb::Part],
        fence: &Fence,
        charge: i64,
    ) -> Result<(), LoopError> {
        let session_id = &session.id;
        let share = message_totals(message, parts);
        let known = self.caches.with(session_id, |s| {
            s.totals.as_mut().map(|t| {
                t.insert(message.id.clone(), share);
                sum_totals(t)
            })
        });
        let (cost, tokens) = match known {
            Some(totals) => totals,
            None => {
                let history =
                    super::stored_messages(&self.publisher, &self.messages, session_id).await?;
                let mut shares = history_totals(&history);
                shares.insert(message.id.clone(), share);
                let totals = sum_totals(&shares);
                self.caches.with(session_id, |s| s.totals = Some(shares));
                totals
            }
        };
        let change = |s: &mut pb::Session| {
            s.cost_nano_usd = cost;
            s.tokens = Some(tokens);
            s.updated_at = Some(now());
        };
        // A compare-and-set, so the title task's write (it may land at any moment) is never overwritten. It starts
        // from the record as this loop last read or wrote it; anything written since makes it read and retry.
        let known = self.caches.with(session_id, |s| s.session_bytes.take());
        let known =
            match known.map(|bytes| self.stage_totals(session_id, fence, bytes, change, charge)) {
                Some(Ok(())) => return Ok(()),
                Some(Err(bytes)) => Some(bytes),
                None => None,
            };
        let written = self
            .sessions
            .update_session_from(session_id, Some(fence), known, change)
            .await?;
        // The record as written is the freshest view of it: the next budget check reads it from here.
        self.caches.with(session_id, |s| {
            let (session, bytes) = written.unzip();
            s.session = session;
            s.session_bytes = bytes;
        });
        self.charge_tenant(session, charge).await;
        Ok(())
    }

    /// Hands the new totals (`change` applied to the record `expected` holds) to the session's event channel, and
    /// carries the record as it will be written; gives `expected` back when no channel is open here (or it does
    /// not decode: the direct write then reads the record afresh).
    fn stage_totals(
        &self,
        session_id: &str,
        fence: &Fence,
        expected: Vec<u8>,
        change: impl FnOnce(&mut pb::Session),
        charge: i64,
    ) -> Result<(), Vec<u8>> {
        let Ok(mut record) = pb::Session::decode(expected.as_slice()) else {
            return Err(expected);
        };
        change(&mut record);
        record.status = None;
        let bytes = record.encode_to_vec();
        // Carried as it will be written: the next budget check reads it, the next settle compares with it.
        let cached = record.clone();
        let totals = Box::new(SessionTotals {
            expected,
            record,
            charge,
        });
        if let Err(totals) = self.publisher.stage_session(session_id, fence, totals) {
            return Err(totals.expected);
        }
        self.caches.with(session_id, |s| {
            s.session = Some(cached);
            s.session_bytes = Some(bytes);
        });
        Ok(())
    }

    /// Adds a call's cost to the session's tenant. A failure is logged, not fatal: the step already happened and
    /// its cost is stored on the session either way.
    async fn charge_tenant(&self, session: &pb::Session, nano_usd: i64) {
        if session.tenant.is_empty() || nano_usd <= 0 {
            return;
        }
        if let Err(e) = self.spend.add_tenant_spend(&session.tenant, nano_usd).await {
            tracing::warn!(message = "cannot add to the tenant's spend", session_id = %session.id, tenant = %session.tenant, error = %e);
        }
    }
}
