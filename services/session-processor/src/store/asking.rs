//! The permission request a running loop waits on, kept so Diagnose can say what the loop waits for from the
//! caller. Advisory (the loop's own wait is the truth): it lives in `…{sess:<id>}:asking` with the request's
//! timeout as its ttl, is removed when the reply comes, and expires by itself when a loop dies waiting. A loop asks
//! one question at a time (tools run one after another), so one key per session holds it.

use std::time::Duration;

use llm_proto::sessions as pb;
use prost::Message as _;

use super::{Mailboxes, StoreError};

impl Mailboxes {
    /// Records the permission request the loop now waits on, for `ttl`.
    pub async fn set_asking(
        &self,
        session_id: &str,
        asked: &pb::PermissionAsked,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let keys = self.db.keys(session_id)?;
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let () = redis::cmd("SET")
            .arg(keys.asking())
            .arg(asked.encode_to_vec())
            .arg("PX")
            .arg(ms)
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(())
    }

    /// Forgets the recorded permission request (answered, or the wait ended).
    pub async fn clear_asking(&self, session_id: &str) -> Result<(), StoreError> {
        let keys = self.db.keys(session_id)?;
        let _: i64 = redis::cmd("DEL")
            .arg(keys.asking())
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(())
    }

    /// The permission request a loop waits on, if one is recorded.
    pub async fn asking(
        &self,
        session_id: &str,
    ) -> Result<Option<pb::PermissionAsked>, StoreError> {
        let keys = self.db.keys(session_id)?;
        let bytes: Option<Vec<u8>> = redis::cmd("GET")
            .arg(keys.asking())
            .query_async(&mut self.db.conn.clone())
            .await?;
        bytes
            .map(|b| {
                pb::PermissionAsked::decode(b.as_slice())
                    .map_err(|e| StoreError::decode(keys.asking(), e))
            })
            .transpose()
    }
}
