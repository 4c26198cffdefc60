//! The prompt queue of a busy session and the set of sessions with a running loop.

use llm_proto::sessions as pb;
use prost::Message as _;

use super::{Store, StoreError, keys};

impl Store {
    /// Queues a prompt that arrived while the session was busy; [`StoreError::NotFound`] when the session does not
    /// exist.
    pub async fn enqueue_prompt(
        &self,
        session_id: &str,
        prompt: &pb::PromptRequest,
    ) -> Result<(), StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let mut script = self.scripts.enqueue.prepare_invoke();
            script
                .key(keys.session())
                .key(keys.queue())
                .arg(prompt.encode_to_vec());
            let code: i64 = self.invoke_acked(&script).await?;
            Self::status(code, session_id, None, String::new)
        })
        .await
    }

    /// Records that a loop runs for this session (until [`Store::clear_active`]), so a replica that finds it here
    /// without a lease knows the owner died mid-loop.
    pub async fn mark_active(&self, session_id: &str) -> Result<(), StoreError> {
        keys::check_id("session id", session_id)?;
        let _: i64 = redis::cmd("SADD")
            .arg(keys::active(&self.prefix))
            .arg(session_id)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// The loop for this session finished normally.
    pub async fn clear_active(&self, session_id: &str) -> Result<(), StoreError> {
        let _: i64 = redis::cmd("SREM")
            .arg(keys::active(&self.prefix))
            .arg(session_id)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// Sessions marked active (a loop was running, or its owner died before clearing the mark).
    pub async fn active_sessions(&self) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys::active(&self.prefix))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(ids)
    }

    /// Whether prompts are waiting in the queue (a loop about to go idle checks this after releasing its lease, so
    /// a prompt queued in between is not stranded).
    pub async fn has_queued_prompts(&self, session_id: &str) -> Result<bool, StoreError> {
        let keys = self.keys(session_id)?;
        let len: u64 = redis::cmd("LLEN")
            .arg(keys.queue())
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(len > 0)
    }

    /// Takes every queued prompt, oldest first, and empties the queue in the same atomic step, so two takers never
    /// both receive a prompt and a prompt queued concurrently is either taken now or left for the next call.
    pub async fn take_queued_prompts(
        &self,
        session_id: &str,
    ) -> Result<Vec<pb::PromptRequest>, StoreError> {
        self.write_session(session_id, async {
            let keys = self.keys(session_id)?;
            let items: Vec<Vec<u8>> = self
                .scripts
                .drain
                .key(keys.queue())
                .invoke_async(&mut self.conn.clone())
                .await?;
            items
                .iter()
                .map(|b| {
                    pb::PromptRequest::decode(b.as_slice())
                        .map_err(|e| StoreError::decode(keys.queue(), e))
                })
                .collect()
        })
        .await
    }
}
