//! Prompts accepted (the loop starts at once, or the prompt waits in the queue for the loop that holds the
//! session), sessions resumed after their replica stopped, and the recovery sweep that finds them.

use std::sync::Arc;
use std::time::Duration;

use llm_proto::sessions as pb;
use tokio_util::sync::CancellationToken;

use super::inputs::RunInputs;
use super::{Engine, LoopError};
use crate::store::Fence;

impl Engine {
    /// Accepts a prompt: persists the user message and starts the loop, or queues the prompt when another loop
    /// holds the session. Returns the event id after which the caller's stream starts.
    pub async fn prompt(
        self: &Arc<Self>,
        req: pb::PromptRequest,
        trace: Vec<(String, String)>,
    ) -> Result<String, LoopError> {
        let (session, bytes) = self
            .store
            .get_session_record(&req.session_id)
            .await?
            .ok_or_else(|| LoopError::NotFound(req.session_id.clone()))?;
        let carried = Some((session.clone(), Some(bytes)));
        let start = match self
            .store
            .acquire_lease(&session.id, &self.owner, self.config.lease_ttl)
            .await?
        {
            Some(fence) => {
                self.open_events(&session.id, &fence).await;
                // Taken from the channel just opened (no Redis read) and before the user message is published, so
                // the caller's stream starts with it.
                let persisted = match self.events.last_event_id(&session.id).await {
                    Ok(start) => self
                        .persist_user_message(&session, &req, Some(&fence))
                        .await
                        .map(|_| start),
                    Err(e) => Err(e),
                };
                let start = match persisted {
                    Ok(start) => start,
                    Err(e) => {
                        self.close_events(&session.id).await;
                        return Err(e.into());
                    }
                };
                let inputs = RunInputs::from_prompt(&req, trace);
                self.spawn_loop(session.id.clone(), carried.clone(), fence, inputs);
                start
            }
            None => {
                let start = self.events.last_event_id(&session.id).await?;
                // Busy: the running loop delivers it at its next step boundary (see `deliver_queued`).
                self.store.enqueue_prompt(&session.id, &req).await?;
                // The loop may have made its last queue check and released the lease between our failed acquire
                // and the enqueue; then nobody would deliver the prompt. Trying again closes that window: whoever
                // holds the lease next (that loop re-checking after its release, or us) delivers the queue.
                if let Some(fence) = self
                    .store
                    .acquire_lease(&session.id, &self.owner, self.config.lease_ttl)
                    .await?
                {
                    self.open_events(&session.id, &fence).await;
                    // The queued prompt is delivered by the loop, which takes its inputs then.
                    let inputs = RunInputs {
                        trace,
                        ..RunInputs::default()
                    };
                    self.spawn_loop(session.id.clone(), carried.clone(), fence, inputs);
                }
                start
            }
        };
        Ok(start)
    }

    /// Opens the session's event channel on this replica for the loop holding `fence` (its loop runs here from now
    /// on). On failure the loop's events go straight to Redis, one command each, and its parts are written by
    /// `put_part` (streamed text at the part's end), which is slower but loses nothing.
    pub(super) async fn open_events(&self, session_id: &str, fence: &Fence) {
        if let Err(e) = self.events.open_fenced(session_id, fence).await {
            tracing::warn!(message = "cannot open the session's event channel; publishing directly", session_id = %session_id, error = %e);
        }
    }

    /// Writes the session's remaining events and closes its channel (the loop is over and its lease released).
    pub(super) async fn close_events(&self, session_id: &str) {
        if let Err(e) = self.events.close(session_id).await {
            tracing::warn!(message = "cannot write the session's last events", session_id = %session_id, error = %e);
        }
    }

    /// Resumes a session whose lease is free but whose loop never finished (its replica died mid-step): the new
    /// loop closes the orphaned parts and carries on. Returns whether this replica took it.
    pub async fn resume(self: &Arc<Self>, session_id: &str) -> Result<bool, LoopError> {
        let Some(fence) = self
            .store
            .acquire_lease(session_id, &self.owner, self.config.lease_ttl)
            .await?
        else {
            return Ok(false);
        };
        let Some((session, bytes)) = self.store.get_session_record(session_id).await? else {
            self.store.clear_active(session_id).await?;
            return Ok(false);
        };
        tracing::info!(message = "resuming a session whose replica stopped mid-loop", session_id = %session_id);
        // The run's client tools, system text and model survive the replica: a pending client tool call is still
        // the caller's to answer, and the next step offers the same tools.
        let mut inputs = RunInputs::default();
        match self.store.run_inputs(session_id).await {
            Ok(Some(stored)) => {
                inputs.absorb(&stored);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(message = "cannot read the run's inputs; resuming without them", session_id = %session_id, error = %e);
            }
        }
        self.spawn_loop(
            session_id.to_string(),
            Some((session, Some(bytes))),
            fence,
            inputs,
        );
        Ok(true)
    }

    /// Every `interval`, looks for sessions marked active with no lease holder and resumes them. Runs until
    /// `stop` is cancelled. Sessions whose lease is still held are left alone, so a live owner never loses them.
    pub async fn recover(self: Arc<Self>, interval: Duration, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let ids = match self.store.active_sessions().await {
                Ok(ids) => ids,
                Err(e) => {
                    tracing::warn!(message = "recovery scan failed", error = %e);
                    continue;
                }
            };
            for id in ids {
                if self
                    .running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains_key(&id)
                {
                    continue;
                }
                if matches!(self.store.lease_holder(&id).await, Ok(None))
                    && let Err(e) = self.resume(&id).await
                {
                    tracing::warn!(message = "resume failed", session_id = %id, error = %e);
                }
            }
        }
    }
}
