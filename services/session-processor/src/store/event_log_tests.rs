#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use tokio::sync::oneshot;

use crate::ids;
use crate::maps::IdSet;

use super::super::test_support::{
    cleanup, delta, delta_text, keys_under, leased_session, message, new_session, store, text_of,
    text_part,
};
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
    let log = store.event_log();
    let write = |id: EventId, batch: &'static [u8]| {
        log.flush_events(
            &sid,
            Some((id, batch.to_vec())),
            Some(&fence),
            None,
            the_end(&listed),
        )
    };
    let first = write(end, b"the end").await.unwrap();
    assert!(first.released);
    assert!(store.leases().lease_holder(&sid).await.unwrap().is_none());
    // The reply never reached the replica, which sends the same write again: it already happened, whole.
    let again = write(end, b"the end").await.unwrap();
    assert!(again.released);
    assert_eq!(again.entry, Some(end));
    again.parts.unwrap();
    let entries: i64 = redis::cmd("XLEN")
        .arg(store.db.keys(&sid).unwrap().events())
        .query_async(&mut store.db.conn.clone())
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
            .event_log()
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
                        .event_log()
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
            .event_log()
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

#[tokio::test]
async fn events_resume_after_an_id() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    assert_eq!(store.event_log().last_event_id(&sid).await.unwrap(), "0-0");
    let mut published = Vec::new();
    for text in ["a", "b", "c"] {
        published.push(store.event_log().publish(&sid, delta(text)).await.unwrap());
    }
    assert_eq!(
        store.event_log().last_event_id(&sid).await.unwrap(),
        published[2]
    );

    let all = store
        .event_log()
        .read_events(&sid, "0", None, 100)
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(delta_text).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    assert_eq!(
        all.iter().map(|e| e.event_id.clone()).collect::<Vec<_>>(),
        published
    );
    assert!(all.iter().all(|e| e.session_id == sid));

    let rest = store
        .event_log()
        .read_events(&sid, &published[0], None, 100)
        .await
        .unwrap();
    assert_eq!(rest.iter().map(delta_text).collect::<Vec<_>>(), ["b", "c"]);
    let first_two = store
        .event_log()
        .read_events(&sid, "0-0", None, 2)
        .await
        .unwrap();
    assert_eq!(first_two.len(), 2);
    assert!(
        store
            .event_log()
            .read_events(&sid, &published[2], None, 100)
            .await
            .unwrap()
            .is_empty()
    );
    // A zero block means "don't wait" (Redis would read BLOCK 0 as "forever").
    assert_eq!(
        store
            .event_log()
            .read_events(&sid, "0-0", Some(Duration::ZERO), 1)
            .await
            .unwrap()
            .len(),
        1
    );

    for bad in ["$", "", "abc", "1-", "-1"] {
        let err = store
            .event_log()
            .read_events(&sid, bad, None, 10)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidArgument(_)),
            "{bad:?}: {err}"
        );
    }
    let err = store
        .event_log()
        .publish("ses_missing", delta("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn blocking_read_wakes_when_an_event_is_published() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let before = store.event_log().publish(&sid, delta("old")).await.unwrap();

    let (started_tx, started_rx) = oneshot::channel();
    let reader = {
        let (store, sid, before) = (store.clone(), sid.clone(), before.clone());
        tokio::spawn(async move {
            let _ = started_tx.send(());
            let t = Instant::now();
            let events = store
                .event_log()
                .read_events(&sid, &before, Some(Duration::from_secs(20)), 10)
                .await;
            (events, t.elapsed())
        })
    };
    started_rx.await.unwrap();
    // Whether the publish lands before or after XREAD parks, reading after `before` must return it, and long
    // before the 20 s block runs out.
    let id = store.event_log().publish(&sid, delta("new")).await.unwrap();
    let (events, waited) = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .unwrap()
        .unwrap();
    let events = events.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event_id, id);
    assert_eq!(delta_text(&events[0]), "new");
    assert!(waited < Duration::from_secs(10), "{waited:?}");

    // Nothing new: the block times out empty.
    let t = Instant::now();
    let none = store
        .event_log()
        .read_events(&sid, &id, Some(Duration::from_millis(100)), 10)
        .await
        .unwrap();
    assert!(none.is_empty());
    assert!(
        t.elapsed() >= Duration::from_millis(90),
        "{:?}",
        t.elapsed()
    );

    // A blocked reader does not stall other users of the store.
    let parked = {
        let (store, sid, id) = (store.clone(), sid.clone(), id.clone());
        tokio::spawn(async move {
            store
                .event_log()
                .read_events(&sid, &id, Some(Duration::from_secs(3)), 10)
                .await
        })
    };
    tokio::task::yield_now().await;
    store.sessions().get_session(&sid).await.unwrap().unwrap();
    // The read answered while the blocked one was still parked (it ends only after its 3 s block).
    assert!(
        !parked.is_finished(),
        "the read waited for the blocked reader"
    );
    assert!(parked.await.unwrap().unwrap().is_empty());
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn event_stream_is_capped_approximately() {
    let (store, prefix) = store().await;
    let store = store.with_event_cap(20);
    let sid = new_session(&store).await;
    let mut first = String::new();
    for i in 0..600 {
        let id = store
            .event_log()
            .publish(&sid, delta(&i.to_string()))
            .await
            .unwrap();
        if i == 0 {
            first = id;
        }
    }
    let len: usize = redis::cmd("XLEN")
        .arg(store.db.keys(&sid).unwrap().events())
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    // `MAXLEN ~` trims whole stream nodes (100 entries by default), so the length lands between the cap and the
    // cap plus one node.
    assert!((20..=120).contains(&len), "len {len}");
    let oldest = store
        .event_log()
        .read_events(&sid, "0", None, 1)
        .await
        .unwrap();
    assert_ne!(oldest[0].event_id, first);
    assert_eq!(
        delta_text(
            &store
                .event_log()
                .read_events(&sid, "0", None, len)
                .await
                .unwrap()[len - 1]
        ),
        "599"
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_flush_writes_its_batch_and_the_fenced_parts_in_one_script() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let fence = store
        .leases()
        .acquire_lease(&sid, "replica-a", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let m = ids::new("msg");
    store
        .messages()
        .put_message(&message(&sid, &m, pb::Role::Assistant), Some(&fence))
        .await
        .unwrap();
    let (p1, p2) = (ids::new("prt"), ids::new("prt"));
    let id = |ms: u64| crate::events::EventId { ms, seq: 0 };
    let before = store.event_log().commands();
    let flushed = store
        .event_log()
        .flush_events(
            &sid,
            Some((id(1_000), b"batch one".to_vec())),
            Some(&fence),
            Some(Duration::from_secs(60)),
            FlushWrites {
                parts: &[
                    text_part(&sid, &m, &p1, "hello"),
                    text_part(&sid, &m, &p2, "world"),
                ],
                heads: &[],
                listed: &IdSet::default(),
                session: None,
                ends_run: false,
                release: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(store.event_log().commands() - before, 1, "one round trip");
    assert_eq!(flushed.entry, Some(id(1_000)));
    assert!(!flushed.watched);
    flushed.parts.unwrap();
    // The lease (taken for 30 s) was renewed to the 60 s asked for.
    assert!(flushed.renewed);
    let pttl: i64 = redis::cmd("PTTL")
        .arg(store.db.keys(&sid).unwrap().lease())
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    assert!(pttl > 30_000, "{pttl}");
    let stored = store
        .messages()
        .get_message(&sid, &m)
        .await
        .unwrap()
        .unwrap();
    let texts: Vec<&str> = stored.parts.iter().map(text_of).collect();
    assert_eq!(texts, ["hello", "world"]);

    // The watched mark is reported; parts alone write no entry.
    store
        .event_log()
        .mark_watched(&sid, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(store.event_log().is_watched(&sid).await.unwrap());
    let listed: IdSet<String> = [m.clone()].into_iter().collect();
    let flushed = store
        .event_log()
        .flush_events(
            &sid,
            None,
            Some(&fence),
            None,
            FlushWrites {
                parts: &[text_part(&sid, &m, &p1, "hello again")],
                heads: &[],
                listed: &listed,
                session: None,
                ends_run: false,
                release: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(flushed.entry, None);
    assert!(flushed.watched);
    flushed.parts.unwrap();
    assert_eq!(
        text_of(
            &store
                .messages()
                .get_message(&sid, &m)
                .await
                .unwrap()
                .unwrap()
                .parts[0]
        ),
        "hello again"
    );

    // A part of a message the session does not list is refused (the batch still lands).
    let flushed = store
        .event_log()
        .flush_events(
            &sid,
            Some((id(2_000), b"batch two".to_vec())),
            Some(&fence),
            None,
            FlushWrites {
                parts: &[text_part(&sid, "msg_unlisted", &ids::new("prt"), "x")],
                heads: &[],
                listed: &IdSet::default(),
                session: None,
                ends_run: false,
                release: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(flushed.entry, Some(id(2_000)));
    let err = flushed.parts.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert!(
        keys_under(&store, &prefix)
            .await
            .iter()
            .all(|k| !k.ends_with(":parts:msg_unlisted"))
    );

    // A stale fence: the batch is appended (the log is unfenced), the parts are not written.
    store.leases().release_lease(&sid, &fence).await.unwrap();
    let fresh = store
        .leases()
        .acquire_lease(&sid, "replica-b", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    store
        .messages()
        .put_part(&text_part(&sid, &m, &p1, "the new owner's"), Some(&fresh))
        .await
        .unwrap();
    let flushed = store
        .event_log()
        .flush_events(
            &sid,
            Some((id(3_000), b"batch three".to_vec())),
            Some(&fence),
            Some(Duration::from_secs(60)),
            FlushWrites {
                parts: &[text_part(&sid, &m, &p1, "stale text")],
                heads: &[],
                listed: &listed,
                session: None,
                ends_run: false,
                release: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(flushed.entry, Some(id(3_000)));
    assert!(!flushed.renewed, "never someone else's lease");
    let err = flushed.parts.unwrap_err();
    assert!(
        matches!(&err, StoreError::Fenced { owner, token, .. } if owner == "replica-a" && *token == fence.token),
        "{err}"
    );
    assert_eq!(
        text_of(
            &store
                .messages()
                .get_message(&sid, &m)
                .await
                .unwrap()
                .unwrap()
                .parts[0]
        ),
        "the new owner's"
    );
    // Parts without a fence are a caller bug.
    let err = store
        .event_log()
        .flush_events(
            &sid,
            None,
            None,
            None,
            FlushWrites {
                parts: &[text_part(&sid, &m, &p1, "x")],
                heads: &[],
                listed: &IdSet::default(),
                session: None,
                ends_run: false,
                release: false,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");
    assert_eq!(store.write_failures(), 0);
    cleanup(&store, &prefix).await;
}
