//! The session lease with fencing tokens: acquire, renew, release, look up the holder.

use std::time::Duration;

use super::script_call::ScriptCall;
use super::{Fence, Store, StoreError, ceil_millis, scripts};

impl Store {
    /// Takes the session's lease for `ttl` with a fresh fencing token (lease and token in one atomic step). `None`
    /// while anyone holds it, the same owner included: a second loop of the same replica must queue, not take over;
    /// [`StoreError::NotFound`] when the session does not exist.
    pub async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Fence>, StoreError> {
        self.write_session(session_id, async {
            if owner.is_empty() {
                return Err(StoreError::InvalidArgument(
                    "lease owner must not be empty".into(),
                ));
            }
            let keys = self.keys(session_id)?;
            let code: i64 = ScriptCall::new(
                &self.scripts.acquire,
                [keys.session(), keys.lease(), keys.fence()],
            )
            .arg(owner)
            .arg(ceil_millis(ttl))
            .invoke(&mut self.conn.clone())
            .await?;
            match code {
                scripts::FENCED => Ok(None),
                scripts::NO_SESSION => Err(StoreError::NotFound(format!("session {session_id}"))),
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
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let renewed: i64 = ScriptCall::new(&self.scripts.renew, [keys.lease()])
                .arg(fence.lease_value())
                .arg(ceil_millis(ttl))
                .invoke(&mut self.conn.clone())
                .await?;
            Ok(renewed == 1)
        })
        .await
    }

    /// Gives the lease up if `fence` still holds it; a lease that already moved on is left to its new owner.
    pub async fn release_lease(&self, session_id: &str, fence: &Fence) -> Result<(), StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let _: i64 = ScriptCall::new(&self.scripts.release, [keys.lease()])
                .arg(fence.lease_value())
                .invoke(&mut self.conn.clone())
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
        let keys = self.keys(session_id)?;
        let value: Option<String> = redis::cmd("GET")
            .arg(keys.lease())
            .query_async(&mut self.conn.clone())
            .await?;
        let Some(value) = value else { return Ok(None) };
        // The owner may itself contain `:`; the token is after the last one.
        value
            .rsplit_once(':')
            .and_then(|(owner, token)| Some((owner.to_string(), token.parse().ok()?)))
            .map(Some)
            .ok_or_else(|| StoreError::Unexpected(format!("lease value {value:?}")))
    }
}
