//! Publishing a session's events and persisting the loop's parts and messages through this replica's channel of the
//! session (see the module docs of `events`), or straight to Redis when no channel is open here.

use std::sync::Arc;

use llm_proto::sessions as pb;
use pb::session_event::Event;

use super::channel::{self, Channel, Published, Write};
use super::{HubInner, PartIds, SessionTotals, lock};
use crate::event_wire::Stored;
use crate::store::{Fence, StoreError};

/// What the loop writes through the hub: events, and the parts, message heads and totals that ride the channel's
/// writes. Cheap to clone; every clone shares the hub's channels.
#[derive(Clone)]
pub struct Publisher {
    pub(super) inner: Arc<HubInner>,
}

impl Publisher {
    /// The session's channel on this replica as it is now, for a step's stream to publish its deltas to without
    /// looking it up for each ([`Publisher::publish_delta`]).
    pub fn delta_sink(&self, session_id: &str) -> DeltaSink {
        DeltaSink(self.inner.channel(session_id))
    }

    /// Publishes a text delta, the loop's per-delta path: through `sink`'s channel (through the session's channel
    /// looked up now when it holds none), otherwise straight to the stream (see [`Publisher::publish`]). When the
    /// channel takes it without a write (the common case) nothing is awaited, so the caller's future keeps no room for
    /// a publish; otherwise the rest (the channel's write, or a publish without a channel) is returned to await. A
    /// channel closed since the sink was made sends the delta to the stream, as no channel would.
    pub fn publish_delta(
        &self,
        sink: &DeltaSink,
        session_id: &str,
        ids: Arc<PartIds>,
        text: compact_str::CompactString,
    ) -> Option<impl std::future::Future<Output = Result<(), StoreError>> + Send + '_> {
        let stored = Stored::delta(ids, text);
        let rest = match &sink.0 {
            Some(channel) => Self::enqueue_in(channel, stored),
            None => self.enqueue(session_id, stored),
        }?;
        Some(Box::pin(self.finish(session_id.to_owned(), rest)))
    }

    /// Publishes `event`: through the session's channel when this replica runs its loop (delivered to local followers
    /// at once, written coalesced), otherwise straight to the stream (see [`super::Hub`]). Errors of a background write
    /// are reported by the next publish.
    pub async fn publish(&self, session_id: &str, event: Event) -> Result<(), StoreError> {
        self.publish_kept(session_id, Stored::new(event)).await
    }

    /// [`Publisher::publish`] of an event already in the form the channel keeps it (see [`Stored::part_updated`]).
    pub(crate) async fn publish_kept(
        &self,
        session_id: &str,
        stored: Stored,
    ) -> Result<(), StoreError> {
        match self.enqueue(session_id, stored) {
            None => Ok(()),
            // Boxed: the store's futures are kilobytes, and this is the rare path.
            Some(rest) => Box::pin(self.finish(session_id.to_owned(), rest)).await,
        }
    }

    /// Queues `stored` in this replica's channel of the session; what is left to do when queuing was not all.
    fn enqueue(&self, session_id: &str, stored: Stored) -> Option<Rest> {
        match self.inner.channel(session_id) {
            Some(channel) => Self::enqueue_in(&channel, stored),
            None => Some(Rest::Elsewhere(Box::new(stored.to_event()))),
        }
    }

    /// [`Publisher::enqueue`] in a channel at hand.
    fn enqueue_in(channel: &Arc<Channel>, stored: Stored) -> Option<Rest> {
        match channel.queue(stored, None) {
            channel::Queued::Done => None,
            channel::Queued::Flush => Some(Rest::Flush(Arc::clone(channel))),
            channel::Queued::Closed(event, _) => Some(Rest::Elsewhere(event)),
        }
    }

    /// Does what [`Publisher::enqueue`] left: the channel's write, or a publish through the store.
    async fn finish(&self, session_id: String, rest: Rest) -> Result<(), StoreError> {
        match rest {
            Rest::Flush(channel) => channel.flush().await,
            Rest::Elsewhere(event) => self
                .inner
                .store
                .event_log()
                .publish(&session_id, *event)
                .await
                .map(drop),
        }
    }

    /// Persists a part of the loop holding `fence` and publishes its `part_updated`. Through the session's channel
    /// when this replica runs the loop: the part is written by the channel's flush, in the same script as the
    /// events, under the fence. A part that ends something (an ended text or reasoning part, a tool, a step's
    /// finish, anything but an open text or reasoning part or a step start) is written at once, with everything
    /// published before it; an open text or reasoning part is written with the next window and then kept current
    /// by its `part_delta`s, so its text reaches Redis once per window, never behind what the log holds. Without a
    /// channel: `put_part` and a direct publish. [`StoreError::Fenced`] when the lease moved on (a background
    /// window's refusal is reported by the next publish).
    pub async fn put_part(&self, mut part: Box<pb::Part>, fence: &Fence) -> Result<(), StoreError> {
        if let Some(channel) = self.inner.channel(&part.session_id) {
            let event = Stored::part_updated(&part);
            match channel.publish(event, Some(Write::Part(part, fence))).await {
                Published::Done(result) => return result,
                Published::Closed(write) => part = handed_back_part(write)?,
            }
        }
        Box::pin(self.inner.store.messages().put_part(&part, Some(fence))).await?;
        let session_id = part.session_id.clone();
        Box::pin(
            self.inner
                .store
                .event_log()
                .publish(&session_id, Event::PartUpdated(*part)),
        )
        .await
        .map(drop)
    }

    /// [`Publisher::put_part`] for a part that may wait for the channel's next write whatever it is: a step's parts
    /// while its stream runs and when it is cleaned up. They are written with the window, with the write of an event
    /// somebody must act on, or when the loop asks ([`Publisher::flush_parts`] before a step's tools run, the `done`
    /// that ends the run): at most one window after they changed, and never after the events that show them.
    pub async fn put_part_later(
        &self,
        mut part: Box<pb::Part>,
        fence: &Fence,
    ) -> Result<(), StoreError> {
        if let Some(channel) = self.inner.channel(&part.session_id) {
            let event = Stored::part_updated(&part);
            match channel
                .publish(event, Some(Write::PartLater(part, fence)))
                .await
            {
                Published::Done(result) => return result,
                Published::Closed(write) => part = handed_back_part(write)?,
            }
        }
        Box::pin(self.put_part(part, fence)).await
    }

    /// Holds a step's new session totals for the channel's next write (the same script as the step's last parts
    /// and events, compared with the record as the loop last knew it; the tenant is charged once they are in). Hands
    /// them back when no channel is open here: the caller writes them itself.
    pub fn stage_session(
        &self,
        session_id: &str,
        fence: &Fence,
        totals: Box<SessionTotals>,
    ) -> Result<(), Box<SessionTotals>> {
        match self.inner.channel(session_id) {
            Some(channel) if !lock(&channel.state).closed => {
                channel.stage_session(totals, fence);
                Ok(())
            }
            _ => Err(totals),
        }
    }

    /// Persists an assistant message's head (its parts are written on their own) for the loop holding `fence`, and
    /// publishes its `message_updated`. Through the session's channel: written with the channel's next write, in
    /// the same script as the events and parts (which it precedes), under the fence; a message changes with the
    /// parts and events around it (its step's start, finish and end), so it rides their writes instead of costing
    /// one of its own. Without a channel: `put_message` and a direct publish.
    pub async fn put_message(
        &self,
        mut head: Box<pb::Message>,
        fence: &Fence,
    ) -> Result<(), StoreError> {
        if let Some(channel) = self.inner.channel(&head.session_id) {
            let event = Stored::message_updated(&head);
            match channel
                .publish(event, Some(Write::Message(head, fence)))
                .await
            {
                Published::Done(result) => return result,
                Published::Closed(write) => head = handed_back_message(write)?,
            }
        }
        Box::pin(self.inner.store.messages().put_message(&head, Some(fence))).await?;
        let session_id = head.session_id.clone();
        Box::pin(
            self.inner
                .store
                .event_log()
                .publish(&session_id, Event::MessageUpdated(*head)),
        )
        .await
        .map(drop)
    }

    /// Writes the session's channel now if it holds parts whose latest text is not yet in Redis (with every event
    /// published so far); a no-op otherwise. The loop calls it when a step's stream ends.
    pub async fn flush_parts(&self, session_id: &str) -> Result<(), StoreError> {
        match self.inner.channel(session_id) {
            Some(channel) if channel.has_dirty_parts() => channel.flush().await,
            _ => Ok(()),
        }
    }

    /// Writes everything the session's channel holds that is not in Redis yet (events and parts); a no-op without
    /// a channel. A loop calls it after storage came back, before it reads the history again.
    pub async fn flush(&self, session_id: &str) -> Result<(), StoreError> {
        match self.inner.channel(session_id) {
            Some(channel) => channel.flush().await,
            None => Ok(()),
        }
    }
}

/// A session's channel as a step's stream found it (see [`Publisher::delta_sink`]).
pub struct DeltaSink(Option<Arc<Channel>>);

impl DeltaSink {
    /// No channel at hand: each delta looks the session's up.
    pub const LOOK_UP: DeltaSink = DeltaSink(None);
}

/// What is left of a publish that queuing alone did not finish.
enum Rest {
    /// The channel must write now.
    Flush(Arc<Channel>),
    /// No channel took it: publish through the store.
    Elsewhere(Box<Event>),
}

/// The part a closed channel handed back (it hands back exactly the write it was given).
fn handed_back_part(write: Option<Write<'_>>) -> Result<Box<pb::Part>, StoreError> {
    match write {
        Some(Write::Part(p, _) | Write::PartLater(p, _)) => Ok(p),
        _ => Err(not_handed_back()),
    }
}

/// The message head a closed channel handed back.
fn handed_back_message(write: Option<Write<'_>>) -> Result<Box<pb::Message>, StoreError> {
    match write {
        Some(Write::Message(m, _)) => Ok(m),
        _ => Err(not_handed_back()),
    }
}

fn not_handed_back() -> StoreError {
    StoreError::Unexpected("a closed event channel did not hand its write back".into())
}
