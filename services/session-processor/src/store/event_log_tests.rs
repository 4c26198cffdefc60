#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::maps::IdSet;

use super::super::test_support::{cleanup, leased_session, new_session, store};
use super::*;

/// The run's end, as the event channel writes it: the batch up to `done`, releasing the lease.
fn the_end(listed: &IdSet<String>) -> FlushWrites<'_> {
    FlushWrites {
        parts: &[],
        heads: &[],
        listed,
        session: None,
        ends_run: true,
        release: true,
    }
}

#[tokio::test]
async fn a_run_end_sent_again_after_its_reply_was_lost_is_taken_as_written() {
    let (store, prefix) = store().await;
    let (sid, fence) = leased_session(&store, "replica-a").await;
    let listed = IdSet::default();
    let end: EventId = "1000-3".parse().unwrap();
    let write = |id: EventId, batch: &'static [u8]| {
        store.flush_events(
            &sid,
            Some((id, batch.to_vec())),
            Some(&fence),
            None,
            the_end(&listed),
        )
    };
    let first = write(end, b"the end").await.unwrap();
    assert!(first.released);
    assert!(store.lease_holder(&sid).await.unwrap().is_none());
    // The reply never reached the replica, which sends the same write again: it already happened, whole.
    let again = write(end, b"the end").await.unwrap();
    assert!(again.released);
    assert_eq!(again.entry, Some(end));
    again.parts.unwrap();
    let entries: i64 = redis::cmd("XLEN")
        .arg(store.keys(&sid).unwrap().events())
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();
    assert_eq!(entries, 1, "logged once");
    // A different end from the lost lease is not logged, as before.
    let later: EventId = "1000-4".parse().unwrap();
    let stale = write(later, b"more").await.unwrap();
    assert_eq!(stale.entry, None);
    assert!(!stale.released);
    assert!(matches!(stale.parts, Err(StoreError::Fenced { .. })));
    cleanup(&store, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_beyond_the_bound_on_blocking_reads_poll_and_still_get_every_event() {
    let (store, prefix) = store().await;
    let store = store.with_log_waits(1);
    let mut sessions = Vec::new();
    for _ in 0..4 {
        let id = new_session(&store).await;
        let after: EventId = store
            .publish(
                &id,
                pb::session_event::Event::Status(pb::SessionStatus::default()),
            )
            .await
            .unwrap()
            .parse()
            .unwrap();
        sessions.push((id, after));
    }
    // Four followers waiting at once on idle sessions, with room for one blocking read.
    let waiting: Vec<_> = sessions
        .iter()
        .map(|(id, after)| {
            let (store, id, after) = (store.clone(), id.clone(), *after);
            tokio::spawn(async move {
                loop {
                    let page = store
                        .read_event_page(&id, after, Some(Duration::from_secs(2)), 16)
                        .await
                        .unwrap();
                    if !page.events.is_empty() {
                        return page.events;
                    }
                }
            })
        })
        .collect();
    // The three beyond the bound poll (and none of them holds a Redis connection of its own).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.traffic().counts().log_polls < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the waits beyond the bound never polled"
        );
        tokio::task::yield_now().await;
    }
    for (id, _) in &sessions {
        store
            .publish(id, pb::session_event::Event::Done(pb::Done::default()))
            .await
            .unwrap();
    }
    for waiter in waiting {
        let events = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("every follower gets its event")
            .unwrap();
        assert!(matches!(
            events.as_slice(),
            [pb::SessionEvent {
                event: Some(pb::session_event::Event::Done(_)),
                ..
            }]
        ));
    }
    assert!(
        store.traffic().counts().log_polls > 0,
        "the followers beyond the bound polled"
    );
    cleanup(&store, &prefix).await;
}
