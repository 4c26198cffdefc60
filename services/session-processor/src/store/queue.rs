//! The prompt queue of a busy session.

use llm_proto::sessions as pb;
use prost::Message as _;

use super::{Store, StoreError};

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
