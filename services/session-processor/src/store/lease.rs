//! The session lease with fencing tokens: acquire, renew, release (alone, or with a look at the prompt queue), look
//! up the holder.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Script;

use super::db::Db;
use super::script_call::ScriptCall;
use super::{Fence, StoreError, ceil_millis, scripts};

/// KEYS: lease, queue. ARGV: `<owner>:<token>`. Gives the lease up if it is still this one, and returns how many
/// prompts are queued (so a loop that just ended knows in the same round trip whether it must run again).
static RELEASE_AND_PEEK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return redis.call('LLEN', KEYS[2])
",
    )
});

/// Sessions' leases (see the module docs).
#[derive(Clone)]
pub struct Leases {
    pub(super) db: Arc<Db>,
}

impl Leases {
    /// Takes the session's lease for `ttl` with a fresh fencing token (lease and token in one atomic step). `None`
    /// while anyone holds it, the same owner included: a second loop of the same replica must queue, not take over;
    /// [`StoreError::NotFound`] when the session does not exist.
    pub async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Fence>, StoreError> {
        self.db
            .write_session(session_id, async {
                if owner.is_empty() {
                    return Err(StoreError::InvalidArgument(
                        "lease owner must not be empty".into(),
                    ));
                }
                let keys = self.db.keys(session_id)?;
                let code: i64 = ScriptCall::new(
                    &self.db.scripts.acquire,
                    [keys.session(), keys.lease(), keys.fence()],
                )
                .arg(owner)
                .arg(ceil_millis(ttl))
                .invoke(&mut self.db.conn.clone())
                .await?;
                match code {
                    scripts::FENCED => Ok(None),
                    scripts::NO_SESSION => {
                        Err(StoreError::NotFound(format!("session {session_id}")))
                    }
                    token if token > 0 => Ok(Some(Fence {
                        owner: owner.to_string(),
                        token: token.unsigned_abs(),
                    })),
                    other => Err(StoreError::Unexpected(format!("acquire status {other}"))),
                }
            })
            .await
    }

    /// Extends the lease to `ttl` from now if `fence` still holds it; false when it was lost (expired, taken over,
    /// or the session deleted), and the caller must stop writing.
    pub async fn renew_lease(
        &self,
        session_id: &str,
        fence: &Fence,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                let renewed: i64 = ScriptCall::new(&self.db.scripts.renew, [keys.lease()])
                    .arg(fence.lease_value())
                    .arg(ceil_millis(ttl))
                    .invoke(&mut self.db.conn.clone())
                    .await?;
                Ok(renewed == 1)
            })
            .await
    }

    /// Gives the lease up if `fence` still holds it; a lease that already moved on is left to its new owner.
    pub async fn release_lease(&self, session_id: &str, fence: &Fence) -> Result<(), StoreError> {
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                let _: i64 = ScriptCall::new(&self.db.scripts.release, [keys.lease()])
                    .arg(fence.lease_value())
                    .invoke(&mut self.db.conn.clone())
                    .await?;
                Ok(())
            })
            .await
    }

    /// Who holds the lease and with which token; `None` when nobody does (the session is idle or its runner died).
    pub async fn lease_holder(
        &self,
        session_id: &str,
    ) -> Result<Option<(String, u64)>, StoreError> {
        let keys = self.db.keys(session_id)?;
        let value: Option<String> = redis::cmd("GET")
            .arg(keys.lease())
            .query_async(&mut self.db.conn.clone())
            .await?;
        let Some(value) = value else { return Ok(None) };
        // The owner may itself contain `:`; the token is after the last one.
        value
            .rsplit_once(':')
            .and_then(|(owner, token)| Some((owner.to_string(), token.parse().ok()?)))
            .map(Some)
            .ok_or_else(|| StoreError::Unexpected(format!("lease value {value:?}")))
    }

    /// Gives the lease up if `fence` still holds it (a lease that moved on is left to its new owner) and tells
    /// whether prompts wait in the session's queue, in one round trip.
    pub async fn release_lease_and_peek(
        &self,
        session_id: &str,
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                let queued: i64 = ScriptCall::new(&RELEASE_AND_PEEK, [keys.lease(), keys.queue()])
                    .arg(fence.lease_value())
                    .invoke(&mut self.db.conn.clone())
                    .await?;
                Ok(queued > 0)
            })
            .await
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
