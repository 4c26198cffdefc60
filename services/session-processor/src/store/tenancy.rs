//! Sessions by tenant: the per-tenant indexes `ListSessions` reads, and the copy of sessions created before those
//! indexes existed (or by replicas of a version without them) into them.
//!
//! Every session is in the global index (`<P>sessions`, what an operator lists) and in its tenant's index
//! (`<P>tenant:<name>:sessions`; the unnamed tenant's name is empty). Both are written in creation's first round
//! trip and removed by deletion's last one, so a tenant's listing costs what it lists, never a pass over other
//! tenants' sessions.

use llm_proto::sessions as pb;

use super::{Store, StoreError, keys};

/// Entries read per round trip while copying sessions into their tenants' indexes.
const INDEX_BATCH: usize = 256;
/// How far before the stored mark a start-up copy looks again: creations by replicas whose clocks run behind, or
/// that were in flight when the mark was written, are not missed.
const INDEX_MARGIN_MS: i64 = 60_000;

/// Which sessions a listing covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every tenant's (operators).
    All,
    /// One tenant's; `""` is the unnamed tenant.
    Tenant(&'a str),
}

impl Scope<'_> {
    /// The index the listing reads.
    pub(super) fn index(&self, prefix: &str) -> String {
        match self {
            Scope::All => keys::index(prefix),
            Scope::Tenant(t) => keys::tenant_sessions(prefix, t),
        }
    }

    /// Whether a session belongs in this listing.
    pub(super) fn holds(&self, session: &pb::Session) -> bool {
        match self {
            Scope::All => true,
            Scope::Tenant(t) => session.tenant == *t,
        }
    }
}

/// One listed session and the cursor that resumes the listing right after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// Pass as `after` to list what comes after this session.
    pub cursor: String,
    /// The session, without live status.
    pub session: pb::Session,
}

impl Store {
    /// Copies every session of the global index created since the last copy (less [`INDEX_MARGIN_MS`]; all of them
    /// the first time) into its tenant's index, and moves the mark (`<P>tenants:indexed`) forward. Returns how
    /// many entries it looked at. Safe to run on several replicas at once and to repeat: an entry already there
    /// is left alone (ZADD NX).
    pub async fn index_tenants(&self) -> Result<usize, StoreError> {
        let global = keys::index(&self.prefix);
        let mark_key = keys::tenants_indexed(&self.prefix);
        let mut conn = self.conn.clone();
        let mark: Option<i64> = redis::cmd("GET")
            .arg(&mark_key)
            .query_async(&mut conn)
            .await?;
        let mut min = mark.map(|m| m.saturating_sub(INDEX_MARGIN_MS));
        let mut done_at_min: Option<String> = None;
        let mut offset = 0usize;
        let mut seen = 0usize;
        let mut highest = mark;
        loop {
            let entries: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
                .arg(&global)
                .arg(min.map_or_else(|| "-inf".to_string(), |m| m.to_string()))
                .arg("+inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(offset)
                .arg(INDEX_BATCH)
                .query_async(&mut conn)
                .await?;
            let exhausted = entries.len() < INDEX_BATCH;
            let read = entries.len();
            // Ascending (score, id): skip what the previous batch already copied.
            let fresh: Vec<(i64, String)> = entries
                .into_iter()
                .map(|(id, score)| (score as i64, id))
                .filter(|(score, id)| {
                    !(Some(*score) == min && done_at_min.as_ref().is_some_and(|d| id <= d))
                })
                .collect();
            if fresh.is_empty() {
                if exhausted {
                    break;
                }
                // A whole batch tied with the position already copied: step over it.
                offset += read;
                continue;
            }
            self.copy_to_tenant_indexes(&fresh).await?;
            seen += fresh.len();
            if let Some((score, id)) = fresh.last() {
                highest = Some(highest.map_or(*score, |h| h.max(*score)));
                min = Some(*score);
                done_at_min = Some(id.clone());
            }
            offset = 0;
            if exhausted {
                break;
            }
        }
        if let Some(h) = highest {
            let _: () = redis::cmd("SET")
                .arg(&mark_key)
                .arg(h)
                .query_async(&mut conn)
                .await?;
        }
        Ok(seen)
    }

    /// Adds each existing session of `entries` (score, id) to its tenant's index, in one round trip of reads and
    /// one of writes.
    async fn copy_to_tenant_indexes(&self, entries: &[(i64, String)]) -> Result<(), StoreError> {
        let sessions = self.fetch_sessions(entries).await?;
        let mut pipe = redis::pipe();
        for ((score, id), session) in entries.iter().zip(sessions) {
            if let Some(s) = session {
                pipe.cmd("ZADD")
                    .arg(keys::tenant_sessions(&self.prefix, &s.tenant))
                    .arg("NX")
                    .arg(*score)
                    .arg(id)
                    .ignore();
            }
        }
        let _: () = pipe.query_async(&mut self.conn.clone()).await?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "tenancy_tests.rs"]
mod tests;
