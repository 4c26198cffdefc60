//! The Processor's effects, persisted and published: messages and parts through the session's channel (written with
//! its windows, or at once when they end something), text deltas published as they come.

use std::sync::Arc;
use std::time::Instant;

use super::LoopError;
use super::now;
use crate::events::{DeltaSink, Publisher};
use crate::metrics::Metrics;
use crate::processor::{Effect, Processor};
use crate::step_event::StepEvent;
use crate::store::{Fence, Messages};

/// Applies the Processor's effects for a step, a compaction or a tool call.
pub(super) struct Effects {
    pub(super) publisher: Publisher,
    /// For a part persisted without being published (the step-finish part waiting for its end snapshot).
    pub(super) messages: Messages,
    pub(super) metrics: Arc<Metrics>,
}

impl Effects {
    /// Hands `event` to the Processor and applies what it produced (through the channel: see `apply_later`; deltas
    /// through `sink`, the session's channel as the stream found it). The event is consumed before anything is
    /// awaited, so the step's future keeps no room for it meanwhile.
    pub(super) fn feed<'a>(
        &'a self,
        processor: &'a mut Processor,
        event: StepEvent,
        fence: &'a Fence,
        out: &'a mut Vec<Effect>,
        sink: &'a DeltaSink,
    ) -> impl std::future::Future<Output = Result<(), LoopError>> + Send + 'a {
        out.clear();
        processor.handle_event(event, now, out);
        self.apply_fed(out, fence, processor, sink)
    }

    /// What [`Effects::feed`] applies. Deltas alone (most events make nothing else) are published here; anything
    /// else goes through a boxed [`Effects::apply_with`], whose future (a few hundred bytes) the stream's future would
    /// otherwise keep room for, per open session, for as long as the step streams.
    async fn apply_fed(
        &self,
        out: &mut Vec<Effect>,
        fence: &Fence,
        processor: &Processor,
        sink: &DeltaSink,
    ) -> Result<(), LoopError> {
        if !out.iter().all(|e| matches!(e, Effect::Delta { .. })) {
            return Box::pin(self.apply_with(out, fence, processor, true, sink)).await;
        }
        let session_id = &processor.message().session_id;
        // Published in the closure: no effect (96 bytes) is held across the rare await of a write.
        let mut deltas = out.drain(..);
        while let Some(rest) = deltas.by_ref().find_map(|effect| match effect {
            Effect::Delta { ids, delta } => {
                self.publisher.publish_delta(sink, session_id, ids, delta)
            }
            _ => None,
        }) {
            rest.await?;
        }
        Ok(())
    }

    /// Persists and publishes effects. Deltas are published at once; the event channel writes their part's text
    /// with its next window, and a part that ends something at once (see [`Publisher::put_part`]).
    pub(super) async fn apply(
        &self,
        effects: &mut Vec<Effect>,
        fence: &Fence,
        processor: &Processor,
    ) -> Result<(), LoopError> {
        self.apply_with(effects, fence, processor, false, &DeltaSink::LOOK_UP)
            .await
    }

    /// [`Effects::apply`] for a step's stream and its cleanup: every part waits for the channel's next write (the
    /// window, the step's tools, the run's `done`: see [`Publisher::put_part_later`]).
    pub(super) async fn apply_later(
        &self,
        effects: &mut Vec<Effect>,
        fence: &Fence,
        processor: &Processor,
    ) -> Result<(), LoopError> {
        self.apply_with(effects, fence, processor, true, &DeltaSink::LOOK_UP)
            .await
    }

    async fn apply_with(
        &self,
        effects: &mut Vec<Effect>,
        fence: &Fence,
        processor: &Processor,
        later: bool,
        sink: &DeltaSink,
    ) -> Result<(), LoopError> {
        let session_id = &processor.message().session_id;
        // Drained, so a delta's strings move into its event instead of being copied.
        for effect in effects.drain(..) {
            match effect {
                Effect::Message(m) => {
                    let t = Instant::now();
                    Box::pin(self.publisher.put_message(m, fence)).await?;
                    self.metrics.redis("put_message", t.elapsed());
                }
                Effect::Part(p) => {
                    let t = Instant::now();
                    if later {
                        Box::pin(self.publisher.put_part_later(p, fence)).await?;
                    } else {
                        Box::pin(self.publisher.put_part(p, fence)).await?;
                    }
                    self.metrics.redis("put_part", t.elapsed());
                }
                Effect::Persist(p) => {
                    let t = Instant::now();
                    // Its message may still wait in the channel: the part needs it listed.
                    Box::pin(self.publisher.flush(session_id)).await?;
                    Box::pin(self.messages.put_part(&p, Some(fence))).await?;
                    self.metrics.redis("put_part", t.elapsed());
                }
                Effect::Delta { ids, delta } => {
                    // Queued without an await in the common case; a write it needs now is boxed.
                    if let Some(rest) = self.publisher.publish_delta(sink, session_id, ids, delta) {
                        rest.await?;
                    }
                }
                Effect::ToolCall { .. } => {}
            }
        }
        Ok(())
    }
}
