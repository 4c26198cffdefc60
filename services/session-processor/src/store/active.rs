//! The active set: one mark per running loop, so a replica that finds a marked session without a lease knows the
//! loop's replica died mid-run and resumes it (the recovery sweep).
//!
//! A mark names the session and the run (`<session id> <run id>`): a run removes its own mark when it ends, and only
//! its own. It removes it after its lease is released (the release rides on the run's last write), so a prompt that
//! takes the lease in between marks its own run beside, and the ending run can never unmark it. A mark without a run
//! id (written by an older version) marks its session all the same.

use std::sync::Arc;

use super::db::Db;
use super::{StoreError, keys};

/// A mark of the active set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveMark {
    /// The session it marks.
    pub session_id: String,
    /// The member itself (what removes it).
    pub member: String,
}

impl ActiveMark {
    /// The mark of `run` (a run id: no spaces) of `session_id`'s loop.
    pub fn of(session_id: &str, run: &str) -> ActiveMark {
        ActiveMark {
            session_id: session_id.to_string(),
            member: [session_id, " ", run].concat(),
        }
    }

    /// A member as read from the set.
    pub fn parse(member: String) -> ActiveMark {
        let session_id = member
            .rsplit_once(' ')
            .map_or(member.as_str(), |(session, _)| session)
            .to_string();
        ActiveMark { session_id, member }
    }
}

/// `text` with the glob characters of a `MATCH` pattern escaped.
fn glob_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The command that sets `mark` under `prefix` (sent alone by [`ActiveSet::mark_active`], beside the begin script by
/// a prompt).
pub(super) fn mark_cmd(prefix: &str, mark: &ActiveMark) -> redis::Cmd {
    redis::cmd("SADD")
        .arg(keys::active(prefix))
        .arg(&mark.member)
        .clone()
}

/// The active set (see the module docs).
#[derive(Clone)]
pub struct ActiveSet {
    pub(super) db: Arc<Db>,
}

impl ActiveSet {
    /// Marks `run` of the session's loop as running (until [`ActiveSet::clear_active`]).
    pub async fn mark_active(&self, session_id: &str, run: &str) -> Result<(), StoreError> {
        keys::check_id("session id", session_id)?;
        let _: i64 = mark_cmd(&self.db.prefix, &ActiveMark::of(session_id, run))
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(())
    }

    /// Removes a mark: its run ended, or a run resumed in its place.
    pub async fn clear_active(&self, mark: &ActiveMark) -> Result<(), StoreError> {
        let _: i64 = redis::cmd("SREM")
            .arg(keys::active(&self.db.prefix))
            .arg(&mark.member)
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(())
    }

    /// Whether `mark` is still in the set.
    pub async fn is_marked(&self, mark: &ActiveMark) -> Result<bool, StoreError> {
        let member: bool = redis::cmd("SISMEMBER")
            .arg(keys::active(&self.db.prefix))
            .arg(&mark.member)
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(member)
    }

    /// Every mark (loops running, or whose replica died before removing their mark).
    pub async fn active_sessions(&self) -> Result<Vec<ActiveMark>, StoreError> {
        let members: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys::active(&self.db.prefix))
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(members.into_iter().map(ActiveMark::parse).collect())
    }

    /// Whether any mark names the session. Scans the members that start with its id (`SSCAN MATCH`), so it costs
    /// time linear in the set's size: for Diagnose, not for a hot path.
    pub async fn is_active(&self, session_id: &str) -> Result<bool, StoreError> {
        keys::check_id("session id", session_id)?;
        let pattern = format!("{}*", glob_literal(session_id));
        let mut cursor = 0u64;
        loop {
            let (next, members): (u64, Vec<String>) = redis::cmd("SSCAN")
                .arg(keys::active(&self.db.prefix))
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut self.db.conn.clone())
                .await?;
            if members
                .into_iter()
                .any(|m| ActiveMark::parse(m).session_id == session_id)
            {
                return Ok(true);
            }
            if next == 0 {
                return Ok(false);
            }
            cursor = next;
        }
    }
}

#[cfg(test)]
#[path = "active_tests.rs"]
mod tests;
