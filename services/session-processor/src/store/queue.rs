//! The prompt queue of a busy session.
//!
//! A queued prompt is stored as its `PromptRequest` encoding preceded by one field the request does not define
//! (number 1000, reserved for this in the proto): the prompt's *tag*, a fresh id. Any protobuf reader
//! still decodes the entry as the request (unknown fields are skipped), so a replica that predates tags delivers
//! it as before. The tag is what makes delivery exactly-once and traceable: the loop reads the queue without
//! taking anything out, and the script that stores a prompt's user message also removes that prompt from the
//! queue's head (only if it is still there) and records which message the tag became (the record, written empty
//! at enqueue, lives in `…:delivered` for a day after the session's last queue write) (see
//! [`super::Messages::deliver_prompt_message`] and [`PromptQueue::prompt_delivery`]). A failure between the read and
//! that script leaves the prompt queued for the next delivery; nothing is lost or stored twice.

use std::sync::Arc;

use llm_proto::sessions as pb;
use prost::Message as _;

use super::db::Db;
use super::script_call::ScriptCall;
use super::{StoreError, scripts};
use crate::ids;

/// Prompts one session may have queued; one more is refused ([`StoreError::QueueFull`]).
pub const MAX_QUEUED_PROMPTS: usize = 64;

/// Queued prompts read (and delivered) at once; the rest wait for the next step boundary or run.
pub const DELIVERY_BATCH: usize = 8;

/// The tag alone (field 1000, which `PromptRequest` reserves): decoding an entry as this skips the request's fields.
#[derive(Clone, PartialEq, prost::Message)]
struct QueueTag {
    #[prost(string, tag = "1000")]
    tag: String,
}

/// A prompt waiting in the queue, as the loop read it (still queued).
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    /// Its tag; empty for an entry an older replica queued.
    pub tag: String,
    /// The bytes that identify it at the queue's head: the tag's field, or the whole entry when it has no tag.
    pub(super) head: Vec<u8>,
    /// The prompt.
    pub request: pb::PromptRequest,
}

/// Where a queued prompt is, as a stream waiting for its answer asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Still waiting in the queue.
    Queued,
    /// Delivered as this user message.
    Delivered(String),
    /// Neither (the session was deleted, or a replica that predates tags delivered it).
    Unknown,
}

/// An entry: the tag's field, then the request.
fn entry(tag: &str, request: &pb::PromptRequest) -> Vec<u8> {
    let head = QueueTag {
        tag: tag.to_string(),
    };
    let mut bytes = Vec::with_capacity(head.encoded_len() + request.encoded_len());
    head.encode_raw(&mut bytes);
    request.encode_raw(&mut bytes);
    bytes
}

/// The bytes of `entry` that identify it at the queue's head.
fn head_of(tag: &str, entry: &[u8]) -> Vec<u8> {
    if tag.is_empty() {
        return entry.to_vec();
    }
    let head = QueueTag {
        tag: tag.to_string(),
    };
    head.encode_to_vec()
}

/// Busy sessions' prompt queues (see the module docs).
#[derive(Clone)]
pub struct PromptQueue {
    pub(super) db: Arc<Db>,
}

impl PromptQueue {
    /// Queues a prompt that arrived while the session was busy and returns its tag; [`StoreError::NotFound`] when
    /// the session does not exist, [`StoreError::QueueFull`] when [`MAX_QUEUED_PROMPTS`] already wait.
    pub async fn enqueue_prompt(
        &self,
        session_id: &str,
        prompt: &pb::PromptRequest,
    ) -> Result<String, StoreError> {
        self.db
            .write_session(session_id, async {
                let keys = self.db.keys(session_id)?;
                let tag = ids::new("qp");
                let mut script = ScriptCall::new(
                    &self.db.scripts.enqueue,
                    [keys.session(), keys.queue(), keys.delivered()],
                );
                script
                    .arg(entry(&tag, prompt))
                    .arg(MAX_QUEUED_PROMPTS)
                    .arg(&tag);
                let code: i64 = self.db.invoke_acked(&script).await?;
                if code == scripts::QUEUE_FULL {
                    return Err(StoreError::QueueFull(MAX_QUEUED_PROMPTS));
                }
                Db::status(code, session_id, None, String::new)?;
                Ok(tag)
            })
            .await
    }

    /// Whether prompts are waiting in the queue (a loop about to go idle checks this after releasing its lease, so
    /// a prompt queued in between is not stranded).
    pub async fn has_queued_prompts(&self, session_id: &str) -> Result<bool, StoreError> {
        let keys = self.db.keys(session_id)?;
        let len: u64 = redis::cmd("LLEN")
            .arg(keys.queue())
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(len > 0)
    }

    /// The prompts waiting in the queue, still queued (as [`PromptQueue::queued_prompts`]): one LLEN when there are
    /// none (the usual case at a loop's step boundary), one LRANGE otherwise.
    pub async fn waiting(&self, session_id: &str) -> Result<Vec<Queued>, StoreError> {
        if !self.has_queued_prompts(session_id).await? {
            return Ok(Vec::new());
        }
        self.queued_prompts(session_id).await
    }

    /// The queued prompts, oldest first, at most [`DELIVERY_BATCH`] of them (a prompt can be megabytes), left in the
    /// queue: each leaves it only in the script that stores its user message
    /// ([`super::Messages::deliver_prompt_message`]).
    pub async fn queued_prompts(&self, session_id: &str) -> Result<Vec<Queued>, StoreError> {
        let keys = self.db.keys(session_id)?;
        let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(keys.queue())
            .arg(0)
            .arg(DELIVERY_BATCH - 1)
            .query_async(&mut self.db.conn.clone())
            .await?;
        items
            .into_iter()
            .map(|bytes| {
                let decode = |e| StoreError::decode(keys.queue(), e);
                let tag = QueueTag::decode(bytes.as_slice()).map_err(decode)?.tag;
                let request = pb::PromptRequest::decode(bytes.as_slice()).map_err(decode)?;
                Ok(Queued {
                    head: head_of(&tag, &bytes),
                    tag,
                    request,
                })
            })
            .collect()
    }

    /// Where the prompt queued with `tag` is: still queued, delivered (as which message), or neither. One `HGET`:
    /// the tag's record is written empty when the prompt is queued and set to its message when it is delivered
    /// (never the queue itself, whose entries are whole prompts).
    pub async fn prompt_delivery(
        &self,
        session_id: &str,
        tag: &str,
    ) -> Result<Delivery, StoreError> {
        if tag.is_empty() {
            return Ok(Delivery::Unknown);
        }
        let keys = self.db.keys(session_id)?;
        let message: Option<String> = redis::cmd("HGET")
            .arg(keys.delivered())
            .arg(tag)
            .query_async(&mut self.db.conn.clone())
            .await?;
        Ok(match message {
            None => Delivery::Unknown,
            Some(m) if m.is_empty() => Delivery::Queued,
            Some(m) => Delivery::Delivered(m),
        })
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
