//! Session records: create (within a tenant's quota), read, optimistic update, the run inputs a resumed loop needs,
//! and deletion. Listing is the index's (`index.rs`).

use std::sync::Arc;

use llm_proto::sessions as pb;
use prost::Message as _;

use super::db::Db;
use super::script_call::ScriptCall;
use super::{
    DELETE_CHUNK, Fence, StoreError, UPDATE_ATTEMPTS, fence_arg, keys, now_millis, records,
    scripts, timestamp_millis,
};

/// Session records (see the module docs).
#[derive(Clone)]
pub struct Sessions {
    pub(super) db: Arc<Db>,
}

impl Sessions {
    /// Creates a session; [`StoreError::Exists`] when the id is taken. The live `status` is not stored.
    pub async fn create_session(&self, s: &pb::Session) -> Result<(), StoreError> {
        self.create_session_within(s, None).await
    }

    /// [`Sessions::create_session`] within a quota: [`StoreError::TooManySessions`] (nothing kept) when the session's
    /// tenant would hold more than `quota` sessions. The tenant's index is counted right after the session's entry
    /// is added, in the same pipeline, and a count over the quota takes the session back out: an accepted session
    /// was at most the `quota`-th when it looked, so creations racing each other never pass the quota together
    /// (near it, one of them may be refused although it would have fit). One command more than without a quota,
    /// no round trip more.
    pub async fn create_session_within(
        &self,
        s: &pb::Session,
        quota: Option<u64>,
    ) -> Result<(), StoreError> {
        self.db
            .write_session(&s.id, async {
                let keys = self.db.keys(&s.id)?;
                let mut stored = s.clone();
                stored.status = None;
                let score = timestamp_millis(s.created_at.as_ref()).unwrap_or_else(now_millis);
                let bytes = stored.encode_to_vec();
                let index = keys::index(&self.db.prefix);
                let tenant_index = keys::tenant_sessions(&self.db.prefix, &s.tenant);
                // Indexes first (ZADD NX leaves an existing entry alone): a crash in between leaves an index entry that
                // listing skips, never a session that listing cannot find.
                let mut pipe = redis::pipe();
                for index in [&index, &tenant_index] {
                    pipe.cmd("ZADD")
                        .arg(index)
                        .arg("NX")
                        .arg(score)
                        .arg(&s.id)
                        .ignore();
                }
                if quota.is_some() {
                    pipe.cmd("ZCARD").arg(&tenant_index);
                }
                pipe.cmd("SET").arg(keys.session()).arg(&bytes).arg("NX");
                let mut conn = self.db.conn.clone();
                let (count, set): (u64, redis::Value) = if quota.is_some() {
                    pipe.query_async(&mut conn).await?
                } else {
                    let (set,) = pipe.query_async(&mut conn).await?;
                    (0, set)
                };
                if matches!(set, redis::Value::Nil) {
                    return Err(StoreError::Exists(format!("session {}", s.id)));
                }
                if let Some(quota) = quota.filter(|q| count > *q) {
                    let _: () = redis::pipe()
                        .cmd("DEL")
                        .arg(keys.session())
                        .ignore()
                        .cmd("ZREM")
                        .arg(&tenant_index)
                        .arg(&s.id)
                        .ignore()
                        .cmd("ZREM")
                        .arg(&index)
                        .arg(&s.id)
                        .ignore()
                        .query_async(&mut self.db.conn.clone())
                        .await?;
                    return Err(StoreError::TooManySessions(quota));
                }
                self.db
                    .records
                    .put(&s.id, records::Known { bytes, model: None });
                Ok(())
            })
            .await
    }

    /// The session, without live status (`status` is `None`: the caller knows it from the lease); `None` when
    /// missing.
    pub async fn get_session(&self, id: &str) -> Result<Option<pb::Session>, StoreError> {
        Ok(self.get_session_record(id).await?.map(|(s, _)| s))
    }

    /// The session as [`Sessions::get_session`] reads it, with the stored bytes it was decoded from (what
    /// [`Sessions::update_session_from`] compares against).
    pub async fn get_session_record(
        &self,
        id: &str,
    ) -> Result<Option<(pb::Session, Vec<u8>)>, StoreError> {
        let keys = self.db.keys(id)?;
        let bytes: Option<Vec<u8>> = redis::cmd("GET")
            .arg(keys.session())
            .query_async(&mut self.db.conn.clone())
            .await?;
        bytes.map(|b| decode_record(&keys, b)).transpose()
    }

    /// [`Sessions::get_session_record`] and the model the session's latest prompt ran with
    /// ([`super::Messages::prompt_model`]), in one round trip (one MGET: both keys are in the session's slot). What a
    /// `Prompt` reads before it begins.
    pub async fn get_session_for_prompt(
        &self,
        id: &str,
    ) -> Result<Option<(pb::Session, Vec<u8>, Option<String>)>, StoreError> {
        let keys = self.db.keys(id)?;
        let (bytes, model): (Option<Vec<u8>>, Option<String>) = redis::cmd("MGET")
            .arg(keys.session())
            .arg(keys.prompt_model())
            .query_async(&mut self.db.conn.clone())
            .await?;
        let Some(bytes) = bytes else {
            self.db.records.forget(id);
            return Ok(None);
        };
        let model = model.filter(|m| !m.is_empty());
        self.db.records.put(
            id,
            records::Known {
                bytes: bytes.clone(),
                model: model.clone(),
            },
        );
        let (session, bytes) = decode_record(&keys, bytes)?;
        Ok(Some((session, bytes, model)))
    }

    /// What [`Sessions::get_session_for_prompt`] would read, as this replica last knew it, without Redis; `None` when
    /// it knows nothing of the session. The begin script checks it is still current ([`Begin::Stale`] otherwise).
    ///
    /// [`Begin::Stale`]: super::Begin::Stale
    pub fn known_session_for_prompt(
        &self,
        id: &str,
    ) -> Option<(pb::Session, Vec<u8>, Option<String>)> {
        let keys = self.db.keys(id).ok()?;
        let known = self.db.records.get(id)?;
        let (session, bytes) = decode_record(&keys, known.bytes).ok()?;
        Some((session, bytes, known.model))
    }

    /// Replaces an existing session (title, totals, ...); [`StoreError::NotFound`] when it does not exist. Does not
    /// move it in the index: the index orders by creation.
    pub async fn put_session(
        &self,
        s: &pb::Session,
        fence: Option<&Fence>,
    ) -> Result<(), StoreError> {
        self.db
            .write_session(&s.id, async {
                let keys = self.db.keys(&s.id)?;
                let mut stored = s.clone();
                stored.status = None;
                let bytes = stored.encode_to_vec();
                let code: i64 =
                    ScriptCall::new(&self.db.scripts.put_session, [keys.session(), keys.lease()])
                        .arg(fence_arg(fence))
                        .arg(&bytes)
                        .invoke(&mut self.db.conn.clone())
                        .await?;
                Db::status(code, &s.id, fence, String::new)?;
                self.db.records.record_written(&s.id, &bytes);
                Ok(())
            })
            .await
    }

    /// Changes a session with `change` and writes it back only if nobody wrote it in between (a compare-and-set on
    /// the stored bytes, retried on conflict), so two writers of different fields (the loop's totals, the title)
    /// never undo each other. Returns the session as written; `None` when it does not exist. With a fence, the
    /// write also requires the lease ([`StoreError::Fenced`]).
    pub async fn update_session(
        &self,
        id: &str,
        fence: Option<&Fence>,
        change: impl FnMut(&mut pb::Session),
    ) -> Result<Option<pb::Session>, StoreError> {
        Ok(self
            .update_session_from(id, fence, None, change)
            .await?
            .map(|(s, _)| s))
    }

    /// [`Sessions::update_session`] starting from `known`, the stored bytes the caller last read or wrote
    /// ([`Sessions::get_session_record`], or a previous call's result): the first attempt changes that record without
    /// reading it, and the compare-and-set catches anything written since (then it reads and retries as usual).
    /// Returns the session as written and its stored bytes.
    pub async fn update_session_from(
        &self,
        id: &str,
        fence: Option<&Fence>,
        known: Option<Vec<u8>>,
        mut change: impl FnMut(&mut pb::Session),
    ) -> Result<Option<(pb::Session, Vec<u8>)>, StoreError> {
        self.db
            .write_session(id, async {
                let keys = self.db.keys(id)?;
                let mut known = known;
                for _ in 0..UPDATE_ATTEMPTS {
                    let bytes: Option<Vec<u8>> = match known.take() {
                        Some(bytes) => Some(bytes),
                        None => {
                            redis::cmd("GET")
                                .arg(keys.session())
                                .query_async(&mut self.db.conn.clone())
                                .await?
                        }
                    };
                    let Some(bytes) = bytes else { return Ok(None) };
                    let mut session = pb::Session::decode(bytes.as_slice())
                        .map_err(|e| StoreError::decode(keys.session(), e))?;
                    change(&mut session);
                    session.status = None;
                    let written = session.encode_to_vec();
                    let code: i64 = ScriptCall::new(
                        &self.db.scripts.cas_session,
                        [keys.session(), keys.lease()],
                    )
                    .arg(fence_arg(fence))
                    .arg(bytes)
                    .arg(&written)
                    .invoke(&mut self.db.conn.clone())
                    .await?;
                    match code {
                        scripts::CONFLICT => continue,
                        scripts::NO_SESSION => return Ok(None),
                        code => {
                            Db::status(code, id, fence, String::new)?;
                            self.db.records.record_written(id, &written);
                            return Ok(Some((session, written)));
                        }
                    }
                }
                Err(StoreError::Unexpected(format!(
                    "session {id} kept changing during {UPDATE_ATTEMPTS} update attempts"
                )))
            })
            .await
    }

    /// Stores the inputs of the session's current run (only `model`, `client_tools` and `system` of `inputs` are
    /// kept), so a loop resumed after a crash, on any replica, runs with them.
    pub async fn put_run_inputs(
        &self,
        session_id: &str,
        inputs: &pb::PromptRequest,
    ) -> Result<(), StoreError> {
        let kept = pb::PromptRequest {
            model: inputs.model.clone(),
            client_tools: inputs.client_tools.clone(),
            system: inputs.system.clone(),
            ..Default::default()
        };
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                let _: () = redis::cmd("SET")
                    .arg(keys.run_inputs())
                    .arg(kept.encode_to_vec())
                    .query_async(&mut self.db.conn.clone())
                    .await?;
                Ok(())
            })
            .await
    }

    /// The inputs [`put_run_inputs`](Sessions::put_run_inputs) stored last, if any.
    pub async fn run_inputs(
        &self,
        session_id: &str,
    ) -> Result<Option<pb::PromptRequest>, StoreError> {
        let keys = self.db.keys(session_id)?;
        let bytes: Option<Vec<u8>> = redis::cmd("GET")
            .arg(keys.run_inputs())
            .query_async(&mut self.db.conn.clone())
            .await?;
        bytes
            .map(|b| {
                pb::PromptRequest::decode(b.as_slice())
                    .map_err(|e| StoreError::decode(format!("run inputs of {session_id}"), e))
            })
            .transpose()
    }

    /// Deletes every key of a session; true when the session existed. Safe to repeat: a retry after a failure
    /// finishes the cleanup even though the session is already gone.
    pub async fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        self.db
            .write_session(id, async {
                let keys = self.db.keys(id)?;
                let mut conn = self.db.conn.clone();
                // `:session` goes first: from then on every write script refuses this session, so the key set read
                // next cannot grow behind our back. Read just before, for its tenant (which never changes).
                self.db.records.forget(id);
                let (stored, existed): (Option<Vec<u8>>, i64) = redis::pipe()
                    .cmd("GET")
                    .arg(keys.session())
                    .cmd("DEL")
                    .arg(keys.session())
                    .query_async(&mut conn)
                    .await?;
                let tenant = stored
                    .and_then(|b| pb::Session::decode(b.as_slice()).ok())
                    .map(|s| s.tenant);
                let (message_ids, aux): (Vec<String>, Vec<String>) = redis::pipe()
                    .cmd("ZRANGE")
                    .arg(keys.messages())
                    .arg(0)
                    .arg(-1)
                    .cmd("SMEMBERS")
                    .arg(keys.aux())
                    .query_async(&mut conn)
                    .await?;
                let mut all = keys.fixed();
                for m in &message_ids {
                    all.push(keys.message(m));
                    all.push(keys.parts(m));
                }
                all.extend(aux);
                let mut pipe = redis::pipe();
                for chunk in all.chunks(DELETE_CHUNK) {
                    pipe.cmd("DEL").arg(chunk).ignore();
                }
                // The index entries go last (see the module docs). A retry after the session was already gone no longer
                // knows its tenant: that index keeps an entry listing skips.
                pipe.cmd("ZREM")
                    .arg(keys::index(&self.db.prefix))
                    .arg(id)
                    .ignore();
                if let Some(tenant) = &tenant {
                    pipe.cmd("ZREM")
                        .arg(keys::tenant_sessions(&self.db.prefix, tenant))
                        .arg(id)
                        .ignore();
                }
                let _: () = pipe.query_async(&mut conn).await?;
                Ok(existed > 0)
            })
            .await
    }
}

/// A stored session record, decoded, with its bytes.
fn decode_record(
    keys: &super::keys::SessionKeys,
    bytes: Vec<u8>,
) -> Result<(pb::Session, Vec<u8>), StoreError> {
    pb::Session::decode(bytes.as_slice())
        .map(|s| (s, bytes))
        .map_err(|e| StoreError::decode(keys.session(), e))
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
