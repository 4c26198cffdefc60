//! Messages and parts: upserts under a fence, reads assembled from a head and its parts hash, paging.

use std::collections::HashMap;
use std::sync::Arc;

use llm_proto::sessions as pb;
use prost::Message as _;

use super::db::Db;
use super::keys::SessionKeys;
use super::keys::check_id;
use super::script_call::ScriptCall;
use super::{Fence, MAX_LIMIT, Queued, StoreError, fence_arg};

/// Messages and parts (see the module docs).
#[derive(Clone)]
pub struct Messages {
    pub(super) db: Arc<Db>,
}

impl Messages {
    /// Creates or replaces a message and lists it in the session. Parts carried in `m.parts` are upserted in the
    /// same atomic step (so a user message lands with its content at once); parts not carried are left alone. A
    /// user message's model becomes the session's prompt model ([`Messages::prompt_model`]) in the same step.
    pub async fn put_message(
        &self,
        m: &pb::Message,
        fence: Option<&Fence>,
    ) -> Result<(), StoreError> {
        self.put_message_listed(m, fence, false).await
    }

    /// [`Messages::put_message`] for the user message a queued prompt becomes: in the same atomic step, the prompt
    /// leaves the queue's head and its tag is recorded as this message. `Ok(false)` when the prompt is no longer
    /// at the queue's head (another delivery took it); nothing was written then.
    pub async fn deliver_prompt_message(
        &self,
        m: &pb::Message,
        fence: Option<&Fence>,
        prompt: &Queued,
    ) -> Result<bool, StoreError> {
        self.write_message(m, fence, false, Some(prompt)).await
    }

    /// [`Messages::put_message`] for a message the caller already wrote successfully (`listed`): the session lists it
    /// from then on (only `delete_session` unlists it, and it removes `:session` first, which every write checks),
    /// so the script does not add it to the list again. With `listed` false this is exactly `put_message`.
    pub async fn put_message_listed(
        &self,
        m: &pb::Message,
        fence: Option<&Fence>,
        listed: bool,
    ) -> Result<(), StoreError> {
        self.write_message(m, fence, listed, None).await.map(drop)
    }

    /// The message write behind [`Messages::put_message_listed`] and [`Messages::deliver_prompt_message`]; `false` when
    /// `prompt` was not at the queue's head.
    async fn write_message(
        &self,
        m: &pb::Message,
        fence: Option<&Fence>,
        listed: bool,
        prompt: Option<&Queued>,
    ) -> Result<bool, StoreError> {
        self.db
            .write_session(&m.session_id, async {
                check_id("message id", &m.id)?;
                let keys = self.db.keys(&m.session_id)?;
                let mut head = m.clone();
                let parts = std::mem::take(&mut head.parts);
                let mut script = ScriptCall::new(
                    &self.db.scripts.put_message,
                    [
                        keys.session(),
                        keys.lease(),
                        keys.messages(),
                        keys.message(&m.id),
                        keys.parts(&m.id),
                        keys.prompt_model(),
                        keys.queue(),
                        keys.delivered(),
                    ],
                );
                script
                    .arg(fence_arg(fence))
                    .arg(&m.id)
                    .message(&head)
                    .arg(if listed { "1" } else { "0" })
                    .arg(if head.role() == pb::Role::User {
                        head.model.as_str()
                    } else {
                        ""
                    })
                    .arg(prompt.map_or(&[][..], |p| p.head.as_slice()))
                    .arg(prompt.map_or("", |p| p.tag.as_str()));
                for mut part in parts {
                    check_id("part id", &part.id)?;
                    // Parts inside a message may leave their back-references empty; they must not point elsewhere.
                    if part.message_id.is_empty() {
                        part.message_id = m.id.clone();
                    }
                    if part.session_id.is_empty() {
                        part.session_id = m.session_id.clone();
                    }
                    if part.message_id != m.id || part.session_id != m.session_id {
                        return Err(StoreError::InvalidArgument(format!(
                            "part {} belongs to {}/{}, not to message {}/{}",
                            part.id, part.session_id, part.message_id, m.session_id, m.id
                        )));
                    }
                    script.arg(&part.id).message(&part);
                }
                let code: i64 = script.invoke(&mut self.db.conn.clone()).await?;
                if code == super::scripts::NOT_QUEUED {
                    return Ok(false);
                }
                Db::status(code, &m.session_id, fence, String::new)?;
                if head.role() == pb::Role::User && !head.model.is_empty() {
                    self.db.records.model_written(&m.session_id, &head.model);
                }
                Ok(true)
            })
            .await
    }

    /// The model the session's latest user message runs with (see [`Messages::put_message`]); `None` before any
    /// prompt that recorded one.
    pub async fn prompt_model(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let keys = self.db.keys(session_id)?;
        let model: Option<String> = redis::cmd("GET")
            .arg(keys.prompt_model())
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(model.filter(|m| !m.is_empty()))
    }

    /// Creates or replaces one part. Its message must already be listed in the session ([`StoreError::NotFound`]
    /// otherwise): a part under an unlisted message would escape `delete_session`.
    pub async fn put_part(&self, p: &pb::Part, fence: Option<&Fence>) -> Result<(), StoreError> {
        self.put_parts(std::slice::from_ref(p), fence).await
    }

    /// Creates or replaces several parts of one session (possibly of several messages) in one round trip and one
    /// atomic step: either all are written or none.
    pub async fn put_parts(
        &self,
        parts: &[pb::Part],
        fence: Option<&Fence>,
    ) -> Result<(), StoreError> {
        let Some((first, _)) = parts.split_first() else {
            return Ok(());
        };
        self.db
            .write_session(&first.session_id, async {
                let session_id = &first.session_id;
                let keys = self.db.keys(session_id)?;
                let mut messages: Vec<&str> = Vec::new();
                let mut slot: HashMap<&str, usize> = HashMap::new();
                for p in parts {
                    check_id("part id", &p.id)?;
                    check_id("message id", &p.message_id)?;
                    if &p.session_id != session_id {
                        // One script runs in one slot: parts of two sessions cannot be written together.
                        return Err(StoreError::InvalidArgument(format!(
                            "put_parts mixes sessions {session_id} and {}",
                            p.session_id
                        )));
                    }
                    if !slot.contains_key(p.message_id.as_str()) {
                        messages.push(&p.message_id);
                        slot.insert(&p.message_id, messages.len());
                    }
                }
                let fixed = [keys.session(), keys.lease(), keys.messages()];
                let parts_keys = messages.iter().map(|m| keys.parts(m));
                let mut script = ScriptCall::new(
                    &self.db.scripts.put_parts,
                    fixed.into_iter().chain(parts_keys).collect::<Vec<_>>(),
                );
                script.arg(fence_arg(fence)).arg(messages.len());
                for m in &messages {
                    script.arg(*m);
                }
                for p in parts {
                    let index = slot.get(p.message_id.as_str()).copied().unwrap_or_default();
                    script.arg(index).arg(&p.id).message(p);
                }
                let code: i64 = script.invoke(&mut self.db.conn.clone()).await?;
                Db::status(code, session_id, fence, || {
                    format!("message {} of session {session_id}", messages.join(" or "))
                })
            })
            .await
    }

    /// One message with its parts sorted by id; `None` when missing.
    pub async fn get_message(
        &self,
        session_id: &str,
        message_id: &str,
    ) -> Result<Option<pb::Message>, StoreError> {
        check_id("message id", message_id)?;
        let keys = self.db.keys(session_id)?;
        let (head, parts): (Option<Vec<u8>>, StoredParts) = redis::pipe()
            .cmd("GET")
            .arg(keys.message(message_id))
            .cmd("HGETALL")
            .arg(keys.parts(message_id))
            .query_async(&mut self.db.conn.clone())
            .await?;
        head.map(|head| assemble(&keys, message_id, &head, parts))
            .transpose()
    }

    /// One page of messages, oldest first, each with its parts sorted by id, and the cursor of the next page (the
    /// last message id; `None` on the last page). `after` is exclusive. A `limit` of 0 is taken as 1; `usize::MAX`
    /// reads the whole history in one round trip of commands.
    pub async fn list_messages(
        &self,
        session_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<pb::Message>, Option<String>), StoreError> {
        let keys = self.db.keys(session_id)?;
        // Redis counts are signed 64-bit; callers may pass usize::MAX for "everything".
        let limit = limit.clamp(1, MAX_LIMIT);
        let mut conn = self.db.conn.clone();
        let min = after.map_or_else(|| "-".to_string(), |a| format!("({a}"));
        // One extra id tells whether another page follows without a second query.
        let mut ids: Vec<String> = redis::cmd("ZRANGEBYLEX")
            .arg(keys.messages())
            .arg(min)
            .arg("+")
            .arg("LIMIT")
            .arg(0)
            .arg(limit + 1)
            .query_async(&mut conn)
            .await?;
        let more = ids.len() > limit;
        ids.truncate(limit);
        let messages = self.messages_by_id(&keys, &ids).await?;
        let next = if more { ids.last().cloned() } else { None };
        Ok((messages, next))
    }

    /// The messages with these ids (in this order), with their parts, in one round trip; ids whose message is
    /// gone are skipped.
    async fn messages_by_id(
        &self,
        keys: &SessionKeys,
        ids: &[String],
    ) -> Result<Vec<pb::Message>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.db.conn.clone();
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("GET")
                .arg(keys.message(id))
                .cmd("HGETALL")
                .arg(keys.parts(id));
        }
        let values: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        let mut values = values.into_iter();
        let mut messages = Vec::with_capacity(ids.len());
        for id in ids {
            let (Some(head), Some(parts)) = (values.next(), values.next()) else {
                return Err(StoreError::Unexpected("short pipeline reply".into()));
            };
            let head: Option<Vec<u8>> =
                redis::from_redis_value(head).map_err(|e| StoreError::Unexpected(e.to_string()))?;
            let parts: StoredParts = redis::from_redis_value(parts)
                .map_err(|e| StoreError::Unexpected(e.to_string()))?;
            if let Some(head) = head {
                messages.push(assemble(keys, id, &head, parts)?);
            }
        }
        Ok(messages)
    }
}

/// A message's parts hash as read: (part id, encoded part).
type StoredParts = Vec<(String, Vec<u8>)>;

/// Rebuilds a message from its stored head and its parts hash, parts sorted by id (ids are sortable, so this is
/// their creation order).
pub(super) fn assemble(
    keys: &SessionKeys,
    message_id: &str,
    head: &[u8],
    mut parts: StoredParts,
) -> Result<pb::Message, StoreError> {
    let mut message =
        pb::Message::decode(head).map_err(|e| StoreError::decode(keys.message(message_id), e))?;
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    // Sized exactly: collecting through a `Result` starts from no size hint and grows to room for four parts, and a
    // part is hundreds of bytes; the history stays in memory for the whole run.
    let mut decoded = Vec::with_capacity(parts.len());
    for (id, bytes) in parts {
        decoded.push(pb::Part::decode(bytes.as_slice()).map_err(|e| {
            StoreError::decode(format!("part {id} of {}", keys.parts(message_id)), e)
        })?);
    }
    message.parts = decoded;
    Ok(message)
}

#[cfg(test)]
#[path = "messages_tests.rs"]
mod tests;
