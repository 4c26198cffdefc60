//! The session indexes: listing by scope (every tenant's, or one tenant's), and the copy of sessions created before
//! the per-tenant indexes existed (or by replicas of a version without them) into them.
//!
//! Every session is in the global index (`<P>sessions`, what an operator lists) and in its tenant's index
//! (`<P>tenant:<name>:sessions`; the unnamed tenant's name is empty). Both are written in creation's first round
//! trip and removed by deletion's last one, so a tenant's listing costs what it lists, never a pass over other
//! tenants' sessions.

use std::sync::Arc;

use llm_proto::sessions as pb;
use prost::Message as _;

use super::db::Db;
use super::{StoreError, keys, now_millis};

/// Age after which an index entry without a session is a failed creation, not one in progress (see
/// `SessionIndex::prune_index`).
const STALE_INDEX_ENTRY_MS: i64 = 60_000;
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

/// The session indexes (see the module docs).
#[derive(Clone)]
pub struct SessionIndex {
    pub(super) db: Arc<Db>,
}

impl SessionIndex {
    /// One page of the sessions in `scope`, newest first, each with its own cursor, and the cursor of the next
    /// page (`None` on the last page). `after` is a cursor returned with an earlier page; it stays valid when
    /// sessions are created or deleted meanwhile. A `page_size` of 0 is taken as 1. A tenant's listing reads that
    /// tenant's index, never the others' sessions.
    pub async fn list_sessions(
        &self,
        scope: Scope<'_>,
        page_size: usize,
        after: Option<&str>,
    ) -> Result<(Vec<Listed>, Option<String>), StoreError> {
        let page_size = page_size.max(1);
        let index = scope.index(&self.db.prefix);
        let batch = page_size.saturating_add(1).clamp(16, 512);
        let mut conn = self.db.conn.clone();
        // Keyset paging on (score, id) rather than ranks, so concurrent inserts and deletes neither repeat nor skip
        // sessions. Equal scores come in descending id order, so "after the cursor" is: lower score, or the same
        // score and a smaller id.
        let mut cursor = after.map(parse_session_cursor).transpose()?;
        let mut offset = 0usize;
        let mut page: Vec<Listed> = Vec::new();
        let mut last: Option<(i64, String)> = None;
        // Entries left by creations that failed half-way (see `prune_index`).
        let mut stale = Vec::new();
        let listed = 'pages: loop {
            let max = cursor
                .as_ref()
                .map_or_else(|| "+inf".to_string(), |(score, _)| score.to_string());
            let entries: Vec<(String, f64)> = redis::cmd("ZREVRANGEBYSCORE")
                .arg(&index)
                .arg(max)
                .arg("-inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(offset)
                .arg(batch)
                .query_async(&mut conn)
                .await?;
            let exhausted = entries.len() < batch;
            let seen = entries.len();
            let fresh: Vec<(i64, String)> = entries
                .into_iter()
                .map(|(id, score)| (score as i64, id))
                .filter(|(score, id)| match &cursor {
                    Some((cursor_score, cursor_id)) => !(score == cursor_score && id >= cursor_id),
                    None => true,
                })
                .collect();
            if fresh.is_empty() {
                if exhausted {
                    break 'pages (page, None);
                }
                // The whole batch tied with the cursor and was already listed: step over it.
                offset += seen;
                continue;
            }
            let sessions = self.fetch_sessions(&fresh).await?;
            for (position, session) in fresh.iter().zip(sessions) {
                // Index entries without a session are a creation in progress or a crashed one: not listed. Nor is
                // a session of another tenant (a tenant's index never holds one; this keeps it so).
                let Some(session) = session.filter(|s| scope.holds(s)) else {
                    stale.push(position.clone());
                    continue;
                };
                if page.len() == page_size {
                    // A next cursor only when another session really exists, so the last page is never empty.
                    let next = last.map(|(score, id)| format!("{score}:{id}"));
                    break 'pages (page, next);
                }
                page.push(Listed {
                    cursor: format!("{}:{}", position.0, position.1),
                    session,
                });
                last = Some(position.clone());
            }
            cursor = fresh.last().cloned();
            offset = 0;
            if exhausted {
                break 'pages (page, None);
            }
        };
        self.prune_index(&index, &stale).await;
        Ok(listed)
    }

    /// Removes from a session index the entries `listed` found without a session that are older than a minute: a
    /// creation that failed between its index entry and its record (Redis gone in between) leaves one, which would
    /// otherwise count against its tenant's quota for ever. Younger ones may be a creation in progress. Best
    /// effort: a failure leaves them for the next listing.
    async fn prune_index(&self, index: &str, listed: &[(i64, String)]) {
        let old = now_millis().saturating_sub(STALE_INDEX_ENTRY_MS);
        let stale: Vec<&str> = listed
            .iter()
            .filter(|(score, _)| *score < old)
            .map(|(_, id)| id.as_str())
            .collect();
        if stale.is_empty() {
            return;
        }
        let pruned: Result<i64, _> = redis::cmd("ZREM")
            .arg(index)
            .arg(&stale)
            .query_async(&mut self.db.conn.clone())
            .await;
        if let Err(e) = pruned {
            tracing::debug!(message = "cannot prune a session index", error = %e);
        }
    }

    /// Loads sessions by id in one round trip (a pipeline of GETs, not MGET: the keys live in different slots).
    async fn fetch_sessions(
        &self,
        ids: &[(i64, String)],
    ) -> Result<Vec<Option<pb::Session>>, StoreError> {
        let mut pipe = redis::pipe();
        let mut names = Vec::with_capacity(ids.len());
        for (_, id) in ids {
            let key = self.db.keys(id)?.session();
            pipe.cmd("GET").arg(&key);
            names.push(key);
        }
        let values: Vec<Option<Vec<u8>>> = pipe.query_async(&mut self.db.conn.clone()).await?;
        values
            .into_iter()
            .zip(names)
            .map(|(bytes, key)| {
                bytes
                    .map(|b| {
                        pb::Session::decode(b.as_slice()).map_err(|e| StoreError::decode(key, e))
                    })
                    .transpose()
            })
            .collect()
    }

    /// Copies every session of the global index created since the last copy (less [`INDEX_MARGIN_MS`]; all of them
    /// the first time) into its tenant's index, and moves the mark (`<P>tenants:indexed`) forward. Returns how
    /// many entries it looked at. Safe to run on several replicas at once and to repeat: an entry already there
    /// is left alone (ZADD NX).
    pub async fn index_tenants(&self) -> Result<usize, StoreError> {
        let global = keys::index(&self.db.prefix);
        let mark_key = keys::tenants_indexed(&self.db.prefix);
        let mut conn = self.db.conn.clone();
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
                    .arg(keys::tenant_sessions(&self.db.prefix, &s.tenant))
                    .arg("NX")
                    .arg(*score)
                    .arg(id)
                    .ignore();
            }
        }
        let _: () = pipe.query_async(&mut self.db.conn.clone()).await?;
        Ok(())
    }
}

/// Parses a `list_sessions` cursor, `<score>:<session id>`.
pub(super) fn parse_session_cursor(cursor: &str) -> Result<(i64, String), StoreError> {
    cursor
        .split_once(':')
        .and_then(|(score, id)| Some((score.parse().ok()?, id)))
        .filter(|(_, id)| !id.is_empty())
        .map(|(score, id)| (score, id.to_string()))
        .ok_or_else(|| StoreError::InvalidArgument(format!("page token {cursor:?}")))
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
