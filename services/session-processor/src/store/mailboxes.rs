//! Client tool results and permission replies: durable records plus a doorbell the waiting loop blocks on; and the
//! permission request the loop waits on, for Diagnose (`asking.rs`).

use std::sync::Arc;
use std::time::Duration;

use llm_proto::sessions as pb;
use prost::Message as _;

use super::db::Db;
use super::keys::SessionKeys;
use super::keys::check_id;
use super::script_call::ScriptCall;
use super::{BLOCKING_GRACE, StoreError, ceil_millis, scripts};

/// A question a loop asks the caller, and waits for the answer to.
#[derive(Debug, Clone, Copy)]
pub enum Asked<'a> {
    /// The result of the client tool call with this call id.
    ToolResult(&'a str),
    /// The reply to the permission request with this id.
    Permission(&'a str),
}

impl<'a> Asked<'a> {
    /// The id the question goes by.
    fn id(self) -> &'a str {
        match self {
            Asked::ToolResult(id) | Asked::Permission(id) => id,
        }
    }

    /// The request field an answer names it in.
    fn field(self) -> &'static str {
        match self {
            Asked::ToolResult(_) => "call_id",
            Asked::Permission(_) => "permission_id",
        }
    }

    /// Its member of the session's awaiting set.
    fn member(self) -> String {
        match self {
            Asked::ToolResult(id) => format!("tool:{id}"),
            Asked::Permission(id) => format!("permission:{id}"),
        }
    }
}

/// The answers to the questions a loop asks the caller, and the permission request it waits on (`asking.rs`).
#[derive(Clone)]
pub struct Mailboxes {
    pub(super) db: Arc<Db>,
}

impl Mailboxes {
    /// Records that the loop asks the caller `asked`: from now on (for the session's life) the caller may answer
    /// it. Written before the question is published. Nothing is written for a session that no longer exists.
    pub async fn expect_answer(
        &self,
        session_id: &str,
        asked: Asked<'_>,
    ) -> Result<(), StoreError> {
        check_id("asked id", asked.id())?;
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                let code: i64 =
                    ScriptCall::new(&self.db.scripts.expect, [keys.session(), keys.awaiting()])
                        .arg(asked.member())
                        .invoke(&mut self.db.conn.clone())
                        .await?;
                Db::status(code, session_id, None, String::new)
            })
            .await
    }

    /// Records the caller's result of a client tool call and wakes the loop waiting for it. The record is durable:
    /// a loop that starts waiting later (or a successor replica after a crash) still gets it. The first answer to a
    /// call wins; later ones are accepted and ignored, so a caller's retry is harmless. A call the loop never asked
    /// about ([`Mailboxes::expect_answer`]) is [`StoreError::NotAwaited`]: nothing is stored for it.
    pub async fn submit_tool_result(
        &self,
        session_id: &str,
        call_id: &str,
        output: &str,
        is_error: bool,
    ) -> Result<(), StoreError> {
        check_id("call id", call_id)?;
        let keys = self.db.keys(session_id)?;
        let answer = pb::SubmitToolResultRequest {
            session_id: session_id.to_string(),
            call_id: call_id.to_string(),
            output: output.to_string(),
            is_error,
        };
        self.answer(
            &keys,
            session_id,
            (keys.tool_results(), Asked::ToolResult(call_id)),
            keys.tool_mailbox(call_id),
            answer.encode_to_vec(),
        )
        .await
    }

    /// Waits up to `timeout` for the result of a client tool call: `Some((output, is_error))`, or `None` on timeout.
    /// Returns at once when the result was submitted before the wait began. A zero timeout only checks.
    pub async fn wait_tool_result(
        &self,
        session_id: &str,
        call_id: &str,
        timeout: Duration,
    ) -> Result<Option<(String, bool)>, StoreError> {
        check_id("call id", call_id)?;
        let keys = self.db.keys(session_id)?;
        let answer: Option<pb::SubmitToolResultRequest> = self
            .await_decoded(
                keys.tool_results(),
                call_id,
                keys.tool_mailbox(call_id),
                timeout,
                "tool result",
            )
            .await?;
        Ok(answer.map(|r| (r.output, r.is_error)))
    }

    /// Records the caller's reply to a permission request and wakes the loop waiting for it; durable,
    /// first-answer-wins and only for asked requests, like [`Mailboxes::submit_tool_result`].
    pub async fn reply_permission(
        &self,
        session_id: &str,
        permission_id: &str,
        allow: bool,
    ) -> Result<(), StoreError> {
        check_id("permission id", permission_id)?;
        let keys = self.db.keys(session_id)?;
        let answer = pb::ReplyPermissionRequest {
            session_id: session_id.to_string(),
            permission_id: permission_id.to_string(),
            allow,
        };
        self.answer(
            &keys,
            session_id,
            (keys.permissions(), Asked::Permission(permission_id)),
            keys.permission_mailbox(permission_id),
            answer.encode_to_vec(),
        )
        .await
    }

    /// Waits up to `timeout` for the reply to a permission request: `Some(allow)`, or `None` on timeout (the caller
    /// then denies). A zero timeout only checks.
    pub async fn wait_permission(
        &self,
        session_id: &str,
        permission_id: &str,
        timeout: Duration,
    ) -> Result<Option<bool>, StoreError> {
        check_id("permission id", permission_id)?;
        let keys = self.db.keys(session_id)?;
        let answer: Option<pb::ReplyPermissionRequest> = self
            .await_decoded(
                keys.permissions(),
                permission_id,
                keys.permission_mailbox(permission_id),
                timeout,
                "permission",
            )
            .await?;
        Ok(answer.map(|r| r.allow))
    }

    /// Stores an answer to `asked` in its record hash and rings the doorbell, atomically, if the question was asked.
    async fn answer(
        &self,
        keys: &SessionKeys,
        session_id: &str,
        (records, asked): (String, Asked<'_>),
        mailbox: String,
        bytes: Vec<u8>,
    ) -> Result<(), StoreError> {
        self.db
            .write_session(session_id, async {
                let mut script = ScriptCall::new(
                    &self.db.scripts.submit,
                    [
                        keys.session(),
                        records,
                        mailbox,
                        keys.aux(),
                        keys.awaiting(),
                    ],
                );
                script.arg(asked.id()).arg(&bytes).arg(asked.member());
                let code: i64 = self.db.invoke_acked(&script).await?;
                match code {
                    // 0: already answered; the first answer stands.
                    0 | scripts::OK => Ok(()),
                    scripts::NO_MESSAGE => Err(StoreError::NotAwaited(asked.field())),
                    other => Db::status(other, session_id, None, String::new),
                }
            })
            .await
    }

    /// [`Mailboxes::await_answer`], decoded; `what` names the record in a decode error.
    async fn await_decoded<M: prost::Message + Default>(
        &self,
        records: String,
        id: &str,
        mailbox: String,
        timeout: Duration,
        what: &str,
    ) -> Result<Option<M>, StoreError> {
        let bytes = self
            .await_answer(records.clone(), id, mailbox, timeout)
            .await?;
        bytes
            .map(|b| {
                M::decode(b.as_slice())
                    .map_err(|e| StoreError::decode(format!("{what} {id} of {records}"), e))
            })
            .transpose()
    }

    /// Waits for an answer. The record hash is the truth and the list only a doorbell: the record is checked
    /// first (an answer given before the wait, or already consumed by a waiter that then crashed, is still
    /// delivered), then BLPOP waits for the doorbell. The record and the doorbell are written in one script, so
    /// an answer cannot slip between the check and the wait. The record is checked once more on timeout in case
    /// another waiter took the doorbell.
    async fn await_answer(
        &self,
        records: String,
        id: &str,
        mailbox: String,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let mut conn = self.db.conn.clone();
        let record: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(&records)
            .arg(id)
            .query_async(&mut conn)
            .await?;
        if record.is_some() {
            self.clear_doorbell(&mailbox).await;
            return Ok(record);
        }
        if timeout.is_zero() {
            return Ok(None);
        }
        let mut blpop = redis::cmd("BLPOP");
        // BLPOP takes seconds; fractional seconds keep millisecond timeouts (Redis >= 6).
        blpop
            .arg(&mailbox)
            .arg(format!("{:.3}", ceil_millis(timeout) as f64 / 1000.0));
        let rung: Option<(String, Vec<u8>)> = self
            .db
            .blocking
            .query(&blpop, timeout.saturating_add(BLOCKING_GRACE))
            .await?;
        if let Some((_, bytes)) = rung {
            return Ok(Some(bytes));
        }
        let record: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(&records)
            .arg(id)
            .query_async(&mut conn)
            .await?;
        if record.is_some() {
            self.clear_doorbell(&mailbox).await;
        }
        Ok(record)
    }

    /// Drops a doorbell nobody will pop, so answered calls leave no list behind. Best effort: a leftover doorbell
    /// is harmless (the record decides) and is removed with the session anyway.
    async fn clear_doorbell(&self, mailbox: &str) {
        let result: Result<i64, _> = redis::cmd("DEL")
            .arg(mailbox)
            .query_async(&mut self.db.conn.clone())
            .await;
        if let Err(e) = result {
            tracing::debug!(key = mailbox, error = %e, "could not clear answered doorbell");
        }
    }
}

#[cfg(test)]
#[path = "mailboxes_tests.rs"]
mod tests;
