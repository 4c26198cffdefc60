//! Prompt idempotency keys: the first call's message id, kept for a ttl.

use std::time::Duration;

use super::db::Db;
use super::keys::check_id;
use super::script_call::ScriptCall;
use super::{Prompts, StoreError, ceil_millis, scripts};

impl Prompts {
    /// Claims a prompt's idempotency key for `ttl`: `None` when claimed now for `message_id` (run the prompt),
    /// `Some(earlier message id)` when a previous call claimed it (stream that call's events instead).
    pub async fn claim_idempotency_key(
        &self,
        session_id: &str,
        key: &str,
        message_id: &str,
        ttl: Duration,
    ) -> Result<Option<String>, StoreError> {
        self.db
            .write_session(session_id, async {
                if key.is_empty() {
                    return Err(StoreError::InvalidArgument(
                        "idempotency key must not be empty".into(),
                    ));
                }
                check_id("message id", message_id)?;
                let keys = self.db.keys(session_id)?;
                let (code, existing): (i64, String) = ScriptCall::new(
                    &self.db.scripts.claim,
                    [keys.session(), keys.idempotency(key), keys.aux()],
                )
                .arg(message_id)
                .arg(ceil_millis(ttl))
                .invoke(&mut self.db.conn.clone())
                .await?;
                match code {
                    scripts::OK => Ok(None),
                    0 => Ok(Some(existing)),
                    other => Db::status(other, session_id, None, String::new).map(|()| None),
                }
            })
            .await
    }
}

#[cfg(test)]
#[path = "idempotency_tests.rs"]
mod tests;
