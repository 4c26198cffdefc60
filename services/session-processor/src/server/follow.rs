//! The streams of `Prompt`, `Subscribe` and `Compact`: a session's events followed from this replica's hub or from
//! the event log, ended as the call's [`Until`] says; storage failures ridden out for the lease's time.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use llm_proto::sessions as pb;
use tonic::{Response, Status};

use crate::api::status;
use crate::api::stream_end::{StreamEnd, Until, Verdict};
use crate::api::stream_slots::StreamSlot;
use crate::engine::Engine;
use crate::event_wire::Outgoing;

pub(super) type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// A followed session's events as the routes send them.
pub(super) type OutgoingStream = EventStream<Outgoing>;

/// The same stream as whole messages, each in its call's response (`wrap`): what the generated service returns.
pub(super) fn whole<T: Send + 'static>(
    response: Response<OutgoingStream>,
    wrap: fn(pb::SessionEvent) -> T,
) -> Response<EventStream<T>> {
    use futures::StreamExt as _;
    response.map(|events| -> EventStream<T> {
        Box::pin(events.map(move |e| e.map(|e| wrap(e.into_event()))))
    })
}

/// Follows the session's events after `after` (from this replica's event hub while the loop runs here, otherwise
/// from the event log in Redis), ending as `until` says ([`crate::api::stream_end`]). `after` must be an event id (callers
/// validate what a client sent).
pub(super) fn follow(
    engine: Arc<Engine>,
    slot: StreamSlot,
    session_id: String,
    after: String,
    until: Until,
) -> OutgoingStream {
    let follower = match engine.events().follow(&session_id, &after) {
        Ok(f) => f,
        Err(e) => {
            let refused = status::invalid("after_event_id", &e.to_string());
            return Box::pin(futures::stream::once(async move { Err(refused) }));
        }
    };
    let state = Following {
        patience: engine.config().lease_ttl,
        engine,
        follower,
        end: StreamEnd::new(until),
        _slot: slot,
        finished: false,
    };
    Box::pin(futures::stream::unfold(state, move |mut st| async move {
        if st.finished {
            return None;
        }
        let ev = match next_event(&mut st.follower, st.patience).await {
            Ok(ev) => ev,
            Err(Ended::Gone) => {
                st.finished = true;
                return Some((Err(status::session_not_found()), st));
            }
            Err(Ended::Unreadable) => {
                // Storage stayed unreadable: end with a terminal event that says so, never silence.
                let ev = pb::SessionEvent {
                    event_id: String::new(),
                    session_id: st.follower.session_id().to_string(),
                    event: Some(pb::session_event::Event::Done(pb::Done {
                        stopped_by: pb::StopReason::StorageUnavailable as i32,
                        ..Default::default()
                    })),
                };
                st.finished = true;
                return Some((Ok(Outgoing::Event(Box::new(ev))), st));
            }
        };
        st.finished = match st.end.observe(&ev) {
            Verdict::Go => false,
            Verdict::End => true,
            Verdict::Ask(tag) => {
                answered(
                    &st.engine,
                    &st.end,
                    st.follower.session_id(),
                    &tag,
                    st.patience,
                )
                .await
            }
        };
        Some((Ok(ev), st))
    }))
}

/// What a stream that follows a session carries from one event to the next.
struct Following {
    engine: Arc<Engine>,
    follower: crate::events::Follower,
    end: StreamEnd,
    /// Its place in its tenant's count of open streams, freed with the stream (when it ends or the caller leaves).
    _slot: StreamSlot,
    patience: Duration,
    finished: bool,
}

/// Whether the `done` a queued prompt's stream just saw ends it (see [`crate::api::stream_end`]). A failed read is
/// retried like the stream's own ([`Patience`]): the first request after a Redis restart can fail on a connection
/// nothing used since. When Redis still cannot say, the stream ends there: a stream that ends early can be resumed
/// with `Subscribe`, one that never ends cannot.
async fn answered(
    engine: &Engine,
    end: &StreamEnd,
    session_id: &str,
    tag: &str,
    patience: Duration,
) -> bool {
    let mut patience = Patience::new(patience);
    let queue = engine.store().queue();
    loop {
        let e = match queue.prompt_delivery(session_id, tag).await {
            Ok(delivery) => return end.answered(&delivery),
            Err(e @ crate::store::StoreError::NotFound(_)) => e,
            Err(e) => match patience.retry(e).await {
                Ok(()) => continue,
                Err(e) => e,
            },
        };
        tracing::warn!(message = "cannot tell whether a queued prompt was answered; ending its stream", session_id = %session_id, error = %e);
        return true;
    }
}

/// How long a stream keeps retrying a failed read of storage (the lease time: a Redis restart shorter than that is
/// invisible to the caller), with backoff between tries.
struct Patience {
    limit: Duration,
    failing_since: Option<std::time::Instant>,
    delay: Duration,
}

impl Patience {
    fn new(limit: Duration) -> Patience {
        Patience {
            limit,
            failing_since: None,
            delay: Duration::from_millis(50),
        }
    }

    /// After a failure: waits before the next try, or hands the failure back when that try would come past the
    /// limit.
    async fn retry<E>(&mut self, failure: E) -> Result<(), E> {
        let since = *self
            .failing_since
            .get_or_insert_with(std::time::Instant::now);
        if since.elapsed() + self.delay > self.limit {
            return Err(failure);
        }
        tokio::time::sleep(self.delay).await;
        self.delay = (self.delay * 2).min(Duration::from_millis(500));
        Ok(())
    }
}

/// Why a stream ends without a next event.
enum Ended {
    /// The session no longer exists (deleted while the stream followed it).
    Gone,
    /// Storage stayed unreadable for the whole patience.
    Unreadable,
}

/// The follower's next event. Storage errors are retried (with backoff) for up to `patience`, the lease time: a
/// Redis restart shorter than that is invisible to the caller.
async fn next_event(
    follower: &mut crate::events::Follower,
    patience: Duration,
) -> Result<Outgoing, Ended> {
    let mut patience = Patience::new(patience);
    loop {
        match follower.next_outgoing().await {
            Ok(ev) => return Ok(ev),
            Err(crate::store::StoreError::NotFound(_)) => return Err(Ended::Gone),
            Err(e) => {
                tracing::debug!(message = "reading the session's events failed; retrying", session_id = %follower.session_id(), error = %e);
                // Boxed: rare, and the stream's future (one per open stream) would otherwise keep room for it.
                if let Err(e) = Box::pin(patience.retry(e)).await {
                    tracing::warn!(message = "cannot read the session's events; ending the stream", session_id = %follower.session_id(), error = %e);
                    return Err(Ended::Unreadable);
                }
            }
        }
    }
}
