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
mod tests {
    use super::super::test_support::{cleanup, store};
    use super::*;
    use crate::ids;
    use prost::Message as _;

    fn session(tenant: &str, ms: i64) -> pb::Session {
        pb::Session {
            id: ids::new("ses"),
            tenant: tenant.into(),
            created_at: Some(prost_types::Timestamp {
                seconds: ms / 1000,
                nanos: 0,
            }),
            ..Default::default()
        }
    }

    async fn ids(store: &Store, scope: Scope<'_>) -> Vec<String> {
        let (page, next) = store.list_sessions(scope, 1000, None).await.unwrap();
        assert_eq!(next, None);
        page.into_iter().map(|l| l.session.id).collect()
    }

    /// What a version without tenant indexes wrote: the global index entry and the session.
    async fn create_old_style(store: &Store, prefix: &str, s: &pb::Session, score: i64) {
        let _: () = redis::pipe()
            .cmd("ZADD")
            .arg(keys::index(prefix))
            .arg(score)
            .arg(&s.id)
            .ignore()
            .cmd("SET")
            .arg(keys::SessionKeys::new(prefix, &s.id).unwrap().session())
            .arg(s.encode_to_vec())
            .ignore()
            .query_async(&mut store.conn.clone())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn each_tenant_lists_its_own_sessions_and_an_operator_all() {
        let (store, prefix) = store().await;
        let acme = session("acme", 1_000_000);
        let evil = session("evil", 2_000_000);
        let plain = session("", 3_000_000);
        for s in [&acme, &evil, &plain] {
            store.create_session(s).await.unwrap();
        }
        assert_eq!(
            ids(&store, Scope::Tenant("acme")).await,
            std::slice::from_ref(&acme.id)
        );
        assert_eq!(
            ids(&store, Scope::Tenant("evil")).await,
            std::slice::from_ref(&evil.id)
        );
        assert_eq!(
            ids(&store, Scope::Tenant("")).await,
            std::slice::from_ref(&plain.id)
        );
        assert!(ids(&store, Scope::Tenant("nobody")).await.is_empty());
        assert_eq!(
            ids(&store, Scope::All).await,
            [plain.id.clone(), evil.id.clone(), acme.id.clone()]
        );
        // A foreign entry in a tenant's index (never written by the store) is still not listed there.
        let _: i64 = redis::cmd("ZADD")
            .arg(keys::tenant_sessions(&prefix, "acme"))
            .arg(5_000_000)
            .arg(&evil.id)
            .query_async(&mut store.conn.clone())
            .await
            .unwrap();
        assert_eq!(
            ids(&store, Scope::Tenant("acme")).await,
            std::slice::from_ref(&acme.id)
        );

        assert!(store.delete_session(&acme.id).await.unwrap());
        let left: i64 = redis::cmd("ZCARD")
            .arg(keys::tenant_sessions(&prefix, "acme"))
            .query_async(&mut store.conn.clone())
            .await
            .unwrap();
        assert_eq!(left, 1, "deletion removes the session's own entry");
        cleanup(&store, &prefix).await;
    }

    #[tokio::test]
    async fn sessions_from_before_the_tenant_indexes_are_copied_into_them_once() {
        let (store, prefix) = store().await;
        // More than one batch, every entry with the same score (a tie across the batch boundary).
        let mut old = Vec::new();
        for i in 0..(INDEX_BATCH + 40) {
            let tenant = if i % 2 == 0 { "" } else { "acme" };
            let s = session(tenant, 0);
            create_old_style(&store, &prefix, &s, 1_000).await;
            old.push(s);
        }
        assert!(ids(&store, Scope::Tenant("acme")).await.is_empty());
        assert_eq!(store.index_tenants().await.unwrap(), old.len());
        let mut acme = ids(&store, Scope::Tenant("acme")).await;
        let mut plain = ids(&store, Scope::Tenant("")).await;
        acme.sort();
        plain.sort();
        let want = |t: &str| {
            let mut v: Vec<String> = old
                .iter()
                .filter(|s| s.tenant == t)
                .map(|s| s.id.clone())
                .collect();
            v.sort();
            v
        };
        assert_eq!(acme, want("acme"));
        assert_eq!(plain, want(""));

        // The mark moved: later starts look again only at entries within the margin of it.
        let late = session("acme", 0);
        create_old_style(&store, &prefix, &late, 1_000_000).await;
        assert_eq!(store.index_tenants().await.unwrap(), old.len() + 1);
        let later = session("", 0);
        create_old_style(&store, &prefix, &later, 2_000_000).await;
        assert_eq!(
            store.index_tenants().await.unwrap(),
            2,
            "the mark bounds the work"
        );
        assert!(ids(&store, Scope::Tenant("acme")).await.contains(&late.id));
        assert!(ids(&store, Scope::Tenant("")).await.contains(&later.id));
        cleanup(&store, &prefix).await;
    }
}
