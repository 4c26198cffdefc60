//! The hub against a real Redis (`REDIS_URL`, default `redis://127.0.0.1:6379`), each test under its own prefix.

use std::time::Duration;

use llm_proto::sessions as pb;
use pb::session_event::Event;

use super::*;
use crate::ids;
use crate::store::test_support::{self, redis_url};

/// A store under a fresh prefix and a session in it.
async fn session() -> (Store, String) {
    let (store, _prefix) = test_support::store().await;
    let id = test_support::new_session(&store).await;
    (store, id)
}

/// A session and a hub with an open channel whose ring keeps 16 events and whose writes happen every
/// `max_batch_events` events (no window: an hour).
async fn small_ring(max_batch_events: usize) -> (Store, String, Hub) {
    ring_of(16, max_batch_events).await
}

/// A session and a hub with an open channel whose ring keeps `ring_events` events and whose writes happen every
/// `max_batch_events` events (no window: an hour).
async fn ring_of(ring_events: usize, max_batch_events: usize) -> (Store, String, Hub) {
    let (store, sid) = session().await;
    let config = EventsConfig {
        flush_interval: Duration::from_secs(3600),
        max_batch_events,
        ring_events,
        ..Default::default()
    };
    let hub = Hub::new(store.clone(), config);
    hub.open(&sid).await.unwrap();
    (store, sid, hub)
}

/// The texts of events that are all deltas.
fn delta_texts(events: &[pb::SessionEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match &e.event {
            Some(Event::PartDelta(d)) => d.delta.clone(),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn delta(text: &str) -> Event {
    Event::PartDelta(pb::PartDelta {
        part_id: "prt_1".into(),
        message_id: "msg_1".into(),
        delta: text.into(),
    })
}

fn status() -> Event {
    Event::Status(pb::SessionStatus {
        kind: pb::session_status::Kind::Busy as i32,
        ..Default::default()
    })
}

fn done() -> Event {
    Event::Done(pb::Done::default())
}

/// A config whose window never ends during a test: only size, urgency and close write.
fn no_timer() -> EventsConfig {
    EventsConfig {
        flush_interval: Duration::from_secs(3600),
        ..Default::default()
    }
}

/// Events of a follower up to and including the next `done`, each within 10 s.
async fn until_done(f: &mut Follower) -> Vec<pb::SessionEvent> {
    let mut out = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), f.next())
            .await
            .expect("an event within 10 s")
            .unwrap();
        let end = matches!(ev.event, Some(Event::Done(_)));
        out.push(ev);
        if end {
            return out;
        }
    }
}

fn ids_of(events: &[pb::SessionEvent]) -> Vec<EventId> {
    events.iter().map(|e| e.event_id.parse().unwrap()).collect()
}

#[tokio::test]
async fn local_followers_get_events_at_once_and_the_log_gets_them_in_few_entries() {
    let (store, sid) = session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open(&sid).await.unwrap();
    let mut live = hub.follow(&sid, "0").unwrap();
    // The first event after open is written promptly by the channel's timer; writing it here makes the order
    // deterministic.
    hub.publisher().publish(&sid, status()).await.unwrap();
    hub.publisher().flush(&sid).await.unwrap();
    assert!(matches!(
        live.next().await.unwrap().event,
        Some(Event::Status(_))
    ));
    let before = store.event_log().commands();
    for i in 0..1000 {
        hub.publisher()
            .publish(&sid, delta(&format!("{i} ")))
            .await
            .unwrap();
        // Delivered from the ring before any write: the window is an hour long.
        let ev = live.next().await.unwrap();
        assert!(
            matches!(&ev.event, Some(Event::PartDelta(d)) if d.delta == format!("{i} ")),
            "{ev:?}"
        );
    }
    assert_eq!(
        store.event_log().commands() - before,
        1000 / 512,
        "only the size bound wrote so far"
    );
    hub.publisher().publish(&sid, done()).await.unwrap();
    hub.close(&sid).await.unwrap();
    assert!(store.event_log().commands() - before <= 3);

    // The log holds the same events with the same ids.
    let logged = store
        .event_log()
        .read_events(&sid, "0", None, 10_000)
        .await
        .unwrap();
    assert_eq!(logged.len(), 1002);
    let mut replay = hub.follow(&sid, "0").unwrap();
    let replayed = until_done(&mut replay).await;
    assert_eq!(replayed, logged);
    let ids = ids_of(&logged);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase");
    assert_eq!(
        logged_text(&store, &sid).await,
        (0..1000).map(|i| format!("{i} ")).collect::<String>()
    );
    store.sessions().delete_session(&sid).await.unwrap();
}

/// Publishes a delta of `prt_1` through `sink` (see [`Publisher::publish_delta`]).
async fn sink_delta(hub: &Hub, sink: &DeltaSink, sid: &str, text: &str) {
    let ids = Arc::new(PartIds {
        part_id: "prt_1".into(),
        message_id: "msg_1".into(),
    });
    if let Some(rest) = hub.publisher().publish_delta(sink, sid, ids, text.into()) {
        rest.await.unwrap();
    }
}

#[tokio::test]
async fn a_steps_deltas_go_through_the_channel_it_found_or_to_the_log_once_that_closed() {
    let (store, sid) = session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open(&sid).await.unwrap();
    let sink = hub.publisher().delta_sink(&sid);
    let mut live = hub.follow(&sid, "0").unwrap();
    sink_delta(&hub, &sink, &sid, "a").await;
    let ev = live.next().await.unwrap();
    assert!(
        matches!(&ev.event, Some(Event::PartDelta(d)) if d.delta == "a"),
        "{ev:?}"
    );
    hub.close(&sid).await.unwrap();
    // The channel it holds is closed: the delta is logged, as with no channel at all, and so is one without a sink.
    sink_delta(&hub, &sink, &sid, "b").await;
    sink_delta(&hub, &DeltaSink::LOOK_UP, &sid, "c").await;
    assert_eq!(logged_text(&store, &sid).await, "abc");
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_on_other_threads_miss_no_wake_up() {
    // Ping-pong: each event is published only once every follower has the one before, so no later event can wake a
    // follower that missed its wake-up. A follower that looked at the ring just before an event came must still be
    // woken by it (it registers, looks again, then waits), or this test times out.
    let (store, sid) = session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open(&sid).await.unwrap();
    let (acks, mut acked) = tokio::sync::mpsc::unbounded_channel::<()>();
    let followers = 2;
    let readers: Vec<_> = (0..followers)
        .map(|_| {
            let mut f = hub.follow(&sid, "0").unwrap();
            let acks = acks.clone();
            tokio::spawn(async move {
                loop {
                    let ev = f.next().await.unwrap();
                    if matches!(ev.event, Some(Event::Done(_))) {
                        return;
                    }
                    acks.send(()).unwrap();
                }
            })
        })
        .collect();
    for i in 0..2000 {
        hub.publisher()
            .publish(&sid, delta(&format!("{i},")))
            .await
            .unwrap();
        for _ in 0..followers {
            tokio::time::timeout(Duration::from_secs(10), acked.recv())
                .await
                .unwrap_or_else(|_| panic!("event {i} did not wake every follower within 10 s"));
        }
    }
    hub.publisher().publish(&sid, done()).await.unwrap();
    hub.close(&sid).await.unwrap();
    for r in readers {
        r.await.unwrap();
    }
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_follower_after_any_event_gets_exactly_the_rest_live_and_from_the_log() {
    let (store, sid, hub) = small_ring(7).await;
    let mut all = hub.follow(&sid, "0").unwrap();
    for i in 0..40 {
        let event = if i % 9 == 4 {
            status()
        } else {
            delta(&i.to_string())
        };
        hub.publisher().publish(&sid, event).await.unwrap();
    }
    let mut seen = Vec::new();
    for _ in 0..40 {
        seen.push(all.next().await.unwrap());
    }
    // While the loop runs: a follower after each id (from the ring, or the log for ids the ring dropped).
    for (k, ev) in seen.iter().enumerate() {
        let mut f = hub.follow(&sid, &ev.event_id).unwrap();
        let mut rest = Vec::new();
        for _ in k + 1..40 {
            rest.push(f.next().await.unwrap());
        }
        assert_eq!(rest, seen[k + 1..], "after {}", ev.event_id);
    }
    hub.publisher().publish(&sid, done()).await.unwrap();
    // `done` is in the log at once, but local followers get it only when the channel closes (the loop closes it
    // after releasing its lease), so `done` means the session is idle.
    assert!(
        futures::FutureExt::now_or_never(all.next()).is_none(),
        "done is held until the channel closes"
    );
    assert!(matches!(
        store
            .event_log()
            .read_events(&sid, &seen[39].event_id, None, 10)
            .await
            .unwrap()[..],
        [pb::SessionEvent {
            event: Some(Event::Done(_)),
            ..
        }]
    ));
    hub.close(&sid).await.unwrap();
    seen.push(all.next().await.unwrap());
    assert!(matches!(seen[40].event, Some(Event::Done(_))));
    // After the loop: the same from the log alone.
    for (k, ev) in seen.iter().enumerate().take(40) {
        let mut f = hub.follow(&sid, &ev.event_id).unwrap();
        assert_eq!(
            until_done(&mut f).await,
            seen[k + 1..],
            "after {}",
            ev.event_id
        );
    }
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_lagging_follower_reads_the_log_and_the_ring_stays_bounded() {
    let (store, sid, hub) = small_ring(8).await;
    let mut slow = hub.follow(&sid, "0").unwrap();
    let first = slow.next_after_publish(&hub, &sid).await;
    for i in 0..500 {
        hub.publisher()
            .publish(&sid, delta(&i.to_string()))
            .await
            .unwrap();
    }
    let ring = hub
        .channel(&sid)
        .map(|c| lock(&c.state).ring.len())
        .unwrap();
    assert!(ring <= 16 + 8, "ring bounded: {ring}");
    let mut got = vec![first];
    for _ in 0..500 {
        got.push(slow.next().await.unwrap());
    }
    assert_eq!(
        delta_texts(&got[1..]),
        (0..500).map(|i| i.to_string()).collect::<Vec<_>>()
    );
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
}

/// Publishes a delta for each number of `texts` (its text) and checks that `f` reads them all, in order.
async fn publish_and_follow(hub: &Hub, sid: &str, f: &mut Follower, texts: std::ops::Range<u32>) {
    for i in texts.clone() {
        hub.publisher()
            .publish(sid, delta(&i.to_string()))
            .await
            .unwrap();
    }
    let mut got = Vec::new();
    for _ in texts.clone() {
        got.push(f.next().await.unwrap());
    }
    assert_eq!(
        delta_texts(&got),
        texts.map(|i| i.to_string()).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_follower_far_behind_keeps_a_small_buffer_from_the_ring_and_after_the_log() {
    let (store, sid, hub) = ring_of(64, 8).await;
    let mut far = hub.follow(&sid, "0").unwrap();
    let first = far.next_after_publish(&hub, &sid).await;
    // Behind by most of the ring: read in visits of a few events, every one in order.
    publish_and_follow(&hub, &sid, &mut far, 0..60).await;
    assert!(
        far.buffered_room() <= follow::RING_BATCH,
        "{}",
        far.buffered_room()
    );
    // Behind the ring: pages from the log, then back on the ring with the pages' room given back.
    publish_and_follow(&hub, &sid, &mut far, 60..400).await;
    let last = far.next_after_publish(&hub, &sid).await;
    assert!(last.event_id > first.event_id);
    assert!(
        far.buffered_room() <= follow::RING_BATCH,
        "{}",
        far.buffered_room()
    );
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_ring_whose_events_are_written_never_grows_past_its_bound() {
    // Each event written as it comes: the ring can always drop its oldest, so its room stays at its bound instead of
    // doubling when a full ring takes one more (memory per open session).
    let (store, sid, hub) = small_ring(1).await;
    for i in 0..100 {
        hub.publisher()
            .publish(&sid, delta(&i.to_string()))
            .await
            .unwrap();
        let (len, room) = hub
            .channel(&sid)
            .map(|c| {
                let s = lock(&c.state);
                (s.ring.len(), s.ring.capacity())
            })
            .unwrap();
        assert!(len <= 16, "event {i}: {len} kept");
        assert!(room < 32, "event {i}: room for {room}");
    }
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_ring_grown_by_a_long_window_gets_its_room_back_once_written() {
    // Writes every 100 events: the ring keeps all of them meanwhile (they are not in Redis yet), four times its bound.
    let (store, sid, hub) = small_ring(100).await;
    let room = |hub: &Hub| {
        hub.channel(&sid)
            .map(|c| {
                let s = lock(&c.state);
                (s.ring.len(), s.ring.capacity())
            })
            .unwrap()
    };
    for round in 0..3 {
        for i in 0..99 {
            hub.publisher()
                .publish(&sid, delta(&i.to_string()))
                .await
                .unwrap();
        }
        let (len, grown) = room(&hub);
        assert_eq!(len, 99, "round {round}: every unwritten event kept");
        assert!(grown >= 99, "round {round}: room for {grown}");
        // The hundredth writes the window.
        hub.publisher().publish(&sid, delta("x")).await.unwrap();
        let (len, back) = room(&hub);
        assert!(len <= 16, "round {round}: {len} kept");
        assert!(back < 32, "round {round}: room for {back} after the write");
    }
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
}

impl Follower {
    /// Publishes a status and returns it as this follower receives it.
    async fn next_after_publish(&mut self, hub: &Hub, sid: &str) -> pb::SessionEvent {
        hub.publisher().publish(sid, status()).await.unwrap();
        self.next().await.unwrap()
    }
}

#[tokio::test]
async fn the_window_writes_pending_deltas_and_remote_followers_wake() {
    let (store, sid) = session().await;
    let hub = Hub::new(
        store.clone(),
        EventsConfig {
            flush_interval: Duration::from_millis(50),
            ..Default::default()
        },
    );
    // Another replica: no channel, reads Redis only.
    let remote = Hub::new(store.clone(), EventsConfig::default());
    hub.open(&sid).await.unwrap();
    hub.publisher().publish(&sid, status()).await.unwrap();
    let mut far = remote.follow(&sid, "0").unwrap();
    assert!(matches!(
        far.next().await.unwrap().event,
        Some(Event::Status(_))
    ));
    hub.publisher().publish(&sid, delta("a")).await.unwrap();
    hub.publisher().publish(&sid, delta("b")).await.unwrap();
    // No further publish: only the window's timer can write these.
    let a = tokio::time::timeout(Duration::from_secs(5), far.next())
        .await
        .expect("the timer wrote the window")
        .unwrap();
    let b = far.next().await.unwrap();
    assert!(matches!(&a.event, Some(Event::PartDelta(d)) if d.delta == "a"));
    assert!(matches!(&b.event, Some(Event::PartDelta(d)) if d.delta == "b"));
    let ids = ids_of(&[a, b]);
    assert!(ids[0] < ids[1]);
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn ids_follow_the_log_and_a_foreign_write_never_fails_a_flush() {
    let (store, sid) = session().await;
    // Something already logged, with a Redis-assigned id.
    let first: EventId = store
        .event_log()
        .publish(&sid, status())
        .await
        .unwrap()
        .parse()
        .unwrap();
    let hub = Hub::new(store.clone(), no_timer());
    hub.open(&sid).await.unwrap();
    assert_eq!(hub.last_event_id(&sid).await.unwrap(), first.to_string());
    hub.publisher().publish(&sid, status()).await.unwrap();
    hub.publisher().publish(&sid, delta("x")).await.unwrap();
    // A write from outside the channel lands after the channel's pending ids.
    let foreign = EventId {
        ms: first.ms + 60_000,
        seq: 0,
    };
    let got = store
        .event_log()
        .append_events(
            &sid,
            foreign,
            crate::event_wire::encode_batch(&[(foreign, crate::event_wire::Stored::new(status()))]),
        )
        .await
        .unwrap();
    assert_eq!(got, foreign);
    // The channel's next write is placed after it, and its later ids follow it.
    hub.publisher().publish(&sid, done()).await.unwrap();
    let next: EventId = hub.last_event_id(&sid).await.unwrap().parse().unwrap();
    assert!(next >= foreign, "{next} after {foreign}");
    hub.publisher().publish(&sid, delta("y")).await.unwrap();
    let after: EventId = hub.last_event_id(&sid).await.unwrap().parse().unwrap();
    assert!(after > foreign);
    hub.close(&sid).await.unwrap();
    // A retried write whose entry already landed is not logged twice.
    let again = store
        .event_log()
        .append_events(
            &sid,
            foreign,
            crate::event_wire::encode_batch(&[(foreign, crate::event_wire::Stored::new(status()))]),
        )
        .await
        .unwrap();
    assert!(
        again > foreign,
        "not the newest entry any more: written after it"
    );
    let top: EventId = store
        .event_log()
        .last_event_id(&sid)
        .await
        .unwrap()
        .parse()
        .unwrap();
    let same = store
        .event_log()
        .append_events(
            &sid,
            top,
            crate::event_wire::encode_batch(&[(top, crate::event_wire::Stored::new(status()))]),
        )
        .await
        .unwrap();
    assert_eq!(same, top);
    assert_eq!(
        store.event_log().last_event_id(&sid).await.unwrap(),
        top.to_string()
    );
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn publishing_for_a_deleted_session_fails() {
    let (store, sid) = session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open(&sid).await.unwrap();
    hub.publisher().publish(&sid, status()).await.unwrap();
    hub.publisher().flush(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
    hub.publisher()
        .publish(&sid, delta("buffered"))
        .await
        .unwrap();
    let err = hub.publisher().publish(&sid, done()).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert!(hub.close(&sid).await.is_err());
    // Closed: later publishes go straight to Redis, which refuses them too.
    assert!(matches!(
        hub.publisher().publish(&sid, status()).await,
        Err(StoreError::NotFound(_))
    ));
}

/// A session with a lease (its fence) and an assistant message listed, as a running loop has them.
async fn running_session() -> (Store, String, String, Fence, String) {
    let (store, prefix) = test_support::store().await;
    let (sid, fence) = test_support::leased_session(&store, "replica-a").await;
    let mid = ids::new("msg");
    store
        .messages()
        .put_message(
            &pb::Message {
                id: mid.clone(),
                session_id: sid.clone(),
                role: pb::Role::Assistant as i32,
                ..Default::default()
            },
            Some(&fence),
        )
        .await
        .unwrap();
    (store, prefix, sid, fence, mid)
}

fn text_part(sid: &str, mid: &str, id: &str, text: &str, ended: bool) -> pb::Part {
    pb::Part {
        id: id.into(),
        message_id: mid.into(),
        session_id: sid.into(),
        kind: Some(pb::part::Kind::Text(pb::TextPart {
            text: text.into(),
            ended_at: ended.then(|| prost_types::Timestamp::from(SystemTime::now())),
            ..Default::default()
        })),
    }
}

fn part_delta(mid: &str, part_id: &str, text: &str) -> Event {
    Event::PartDelta(pb::PartDelta {
        part_id: part_id.into(),
        message_id: mid.into(),
        delta: text.into(),
    })
}

/// The stored text of a part, `None` when it is not stored.
async fn stored_text(store: &Store, sid: &str, mid: &str, part_id: &str) -> Option<String> {
    let message = store.messages().get_message(sid, mid).await.unwrap()?;
    message
        .parts
        .into_iter()
        .find(|p| p.id == part_id)
        .map(|p| match p.kind {
            Some(pb::part::Kind::Text(t)) => t.text,
            other => panic!("{other:?}"),
        })
}

/// The text of every delta in the log.
async fn logged_text(store: &Store, sid: &str) -> String {
    store
        .event_log()
        .read_events(sid, "0", None, 10_000)
        .await
        .unwrap()
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::PartDelta(d)) => Some(d.delta.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_streamed_part_is_written_by_the_window_that_logs_its_deltas() {
    let (store, _prefix, sid, fence, mid) = running_session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open_fenced(&sid, &fence).await.unwrap();
    // The first event after open is written promptly by the channel's timer; writing it here makes the order
    // deterministic.
    hub.publisher().publish(&sid, status()).await.unwrap();
    hub.publisher().flush(&sid).await.unwrap();
    let pid = ids::new("prt");
    // An open text part waits for the window, like its deltas.
    hub.publisher()
        .put_part(Box::new(text_part(&sid, &mid, &pid, "", false)), &fence)
        .await
        .unwrap();
    hub.publisher()
        .publish(&sid, part_delta(&mid, &pid, "Hello"))
        .await
        .unwrap();
    hub.publisher()
        .publish(&sid, part_delta(&mid, &pid, ", wor"))
        .await
        .unwrap();
    assert_eq!(stored_text(&store, &sid, &mid, &pid).await, None);
    let before = store.event_log().commands();
    hub.publisher().flush_parts(&sid).await.unwrap();
    assert_eq!(
        store.event_log().commands() - before,
        1,
        "one write for both"
    );
    // Mid-stream, after a write: the part holds exactly the text the log holds.
    assert_eq!(
        stored_text(&store, &sid, &mid, &pid).await.as_deref(),
        Some("Hello, wor")
    );
    assert_eq!(logged_text(&store, &sid).await, "Hello, wor");
    // Nothing new: no write.
    let before = store.event_log().commands();
    hub.publisher().flush_parts(&sid).await.unwrap();
    assert_eq!(store.event_log().commands() - before, 0);
    // A write for any other reason (here an urgent event) carries the part's latest text too.
    hub.publisher()
        .publish(&sid, part_delta(&mid, &pid, "ld"))
        .await
        .unwrap();
    hub.publisher()
        .publish(&sid, Event::Error(pb::MessageError::default()))
        .await
        .unwrap();
    assert_eq!(
        stored_text(&store, &sid, &mid, &pid).await.as_deref(),
        Some("Hello, world")
    );
    assert_eq!(logged_text(&store, &sid).await, "Hello, world");
    // The part's end is written at once, with the deltas before it, in one write.
    hub.publisher()
        .publish(&sid, part_delta(&mid, &pid, "!"))
        .await
        .unwrap();
    let before = store.event_log().commands();
    hub.publisher()
        .put_part(
            Box::new(text_part(&sid, &mid, &pid, "Hello, world!", true)),
            &fence,
        )
        .await
        .unwrap();
    assert_eq!(store.event_log().commands() - before, 1);
    let stored = store
        .messages()
        .get_message(&sid, &mid)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        &stored.parts[0].kind,
        Some(pb::part::Kind::Text(t)) if t.text == "Hello, world!" && t.ended_at.is_some()
    ));
    assert_eq!(logged_text(&store, &sid).await, "Hello, world!");
    // An ended part is not tracked any more: later deltas naming it do not rewrite it.
    hub.publisher()
        .publish(&sid, part_delta(&mid, &pid, "??"))
        .await
        .unwrap();
    assert!(!hub.channel(&sid).unwrap().has_dirty_parts());
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_channel_whose_lease_moved_on_cannot_overwrite_a_part() {
    let (store, _prefix, sid, fence, mid) = running_session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open_fenced(&sid, &fence).await.unwrap();
    hub.publisher().publish(&sid, status()).await.unwrap();
    let pid = ids::new("prt");
    hub.publisher()
        .put_part(Box::new(text_part(&sid, &mid, &pid, "", false)), &fence)
        .await
        .unwrap();
    hub.publisher()
        .publish(&sid, part_delta(&mid, &pid, "old"))
        .await
        .unwrap();
    hub.publisher().flush_parts(&sid).await.unwrap();
    // The lease moves to another replica, which writes the part.
    store.leases().release_lease(&sid, &fence).await.unwrap();
    let successor = store
        .leases()
        .acquire_lease(&sid, "replica-b", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    store
        .messages()
        .put_part(&text_part(&sid, &mid, &pid, "new", true), Some(&successor))
        .await
        .unwrap();
    // The stale channel's next window: its deltas are logged (the log is unfenced), its part is refused.
    hub.publisher()
        .publish(&sid, part_delta(&mid, &pid, " stale"))
        .await
        .unwrap();
    let err = hub.publisher().flush_parts(&sid).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Fenced { owner, token, .. } if owner == "replica-a" && *token == fence.token),
        "{err}"
    );
    assert_eq!(
        stored_text(&store, &sid, &mid, &pid).await.as_deref(),
        Some("new")
    );
    assert_eq!(logged_text(&store, &sid).await, "old stale");
    // So is a part's end handed over afterwards.
    let err = hub
        .publisher()
        .put_part(
            Box::new(text_part(&sid, &mid, &pid, "old stale", true)),
            &fence,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    assert_eq!(
        stored_text(&store, &sid, &mid, &pid).await.as_deref(),
        Some("new")
    );
    let _ = hub.close(&sid).await;
    store.sessions().delete_session(&sid).await.unwrap();
}

/// Deletes the session's watched mark (as its expiry would).
async fn unwatch(prefix: &str, sid: &str) {
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{prefix}{{sess:{sid}}}:watched"))
        .query_async(&mut conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_window_is_short_while_a_remote_stream_watches_and_long_otherwise() {
    let (store, prefix, sid, fence, _mid) = running_session().await;
    let config = EventsConfig {
        flush_interval: Duration::from_millis(50),
        unwatched_flush_interval: Duration::from_secs(3600),
        ..Default::default()
    };
    let hub = Hub::new(store.clone(), config);
    hub.open_fenced(&sid, &fence).await.unwrap();
    let channel = hub.channel(&sid).unwrap();
    let window = || {
        let s = lock(&channel.state);
        s.window_start
            .map(|start| (s.watched, config.window(s.watched), start))
    };
    // The first event is written promptly by the channel's timer (not by the publisher); writing it here makes
    // the order deterministic.
    hub.publisher().publish(&sid, status()).await.unwrap();
    hub.publisher().flush(&sid).await.unwrap();
    hub.publisher().publish(&sid, delta("a")).await.unwrap();
    let (watched, length, _) = window().expect("a window is open");
    assert!(!watched);
    assert_eq!(length, Duration::from_secs(3600));

    // A remote follower: its first blocking read does not mark (a stream that only needs what is logged), its
    // second one does.
    let remote = Hub::new(store.clone(), EventsConfig::default());
    let mut far = remote.follow(&sid, "0").unwrap();
    assert!(matches!(
        far.next().await.unwrap().event,
        Some(Event::Status(_))
    ));
    assert!(!store.event_log().is_watched(&sid).await.unwrap());
    let reader = tokio::spawn(async move {
        let ev = far.next().await.unwrap();
        (far, ev)
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !store.event_log().is_watched(&sid).await.unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the remote follower marks the session"
        );
        tokio::task::yield_now().await;
    }
    // The next write learns it; from then on the window is the short one.
    hub.publisher()
        .publish(&sid, Event::Error(pb::MessageError::default()))
        .await
        .unwrap();
    let (far, ev) = reader.await.unwrap();
    assert!(
        matches!(&ev.event, Some(Event::PartDelta(d)) if d.delta == "a"),
        "{ev:?}"
    );
    hub.publisher().publish(&sid, delta("b")).await.unwrap();
    let (watched, length, _) = window().expect("a window is open");
    assert!(watched);
    assert_eq!(length, Duration::from_millis(50));
    // Only the short window's timer can write `b` now (the long one is an hour).
    let mut far = far;
    let _error = far.next().await.unwrap();
    let b = tokio::time::timeout(Duration::from_secs(5), far.next())
        .await
        .expect("the short window wrote b")
        .unwrap();
    assert!(matches!(&b.event, Some(Event::PartDelta(d)) if d.delta == "b"));

    // The mark gone (expired): the next write learns it, and the window is long again.
    unwatch(&prefix, &sid).await;
    hub.publisher()
        .publish(&sid, Event::Error(pb::MessageError::default()))
        .await
        .unwrap();
    hub.publisher().publish(&sid, delta("c")).await.unwrap();
    let (watched, length, _) = window().expect("a window is open");
    assert!(!watched);
    assert_eq!(length, Duration::from_secs(3600));
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
}

/// The lease's remaining time, in ms.
async fn lease_pttl(prefix: &str, sid: &str) -> i64 {
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("PTTL")
        .arg(format!("{prefix}{{sess:{sid}}}:lease"))
        .query_async(&mut conn)
        .await
        .unwrap()
}

#[test]
fn a_write_renews_the_lease_when_the_loops_renewal_would_come_before_the_next_window() {
    let ttl = Duration::from_secs(5);
    let ms = Duration::from_millis;
    let config = EventsConfig {
        flush_interval: ms(200),
        unwatched_flush_interval: ms(1000),
        ..Default::default()
    };
    // The loop renews half the ttl after the last renewal (2.5 s); a write renews when the next window (1 s
    // unwatched, 200 ms watched) would come after that.
    assert_eq!(super::renew_after(ttl), ms(2500));
    assert!(!config.renews(false, ttl, ms(1000)));
    assert!(!config.renews(false, ttl, ms(1499)));
    assert!(config.renews(false, ttl, ms(1500)));
    assert!(!config.renews(true, ttl, ms(2299)));
    assert!(config.renews(true, ttl, ms(2300)));
    // A window longer than a quarter of the ttl looks a quarter ahead only.
    let long = EventsConfig {
        flush_interval: Duration::from_secs(60),
        ..config
    };
    assert!(!long.renews(true, ttl, ms(1249)));
    assert!(long.renews(true, ttl, ms(1250)));
}

#[tokio::test]
async fn the_windows_renew_the_lease_on_the_way() {
    // The lease was taken for 30 s; the loop renews it to 60 s.
    let (store, prefix, sid, fence, _mid) = running_session().await;
    let ttl = Duration::from_secs(60);
    let hub = Hub::new(store.clone(), no_timer());
    // Without a channel: half the ttl.
    assert_eq!(hub.loop_lease().lease_renewal_due(&sid, ttl), ttl / 2);
    // Opened right after the lease was taken: that counts as a renewal, and a write right away renews nothing.
    hub.open_fenced(&sid, &fence).await.unwrap();
    let due = hub.loop_lease().lease_renewal_due(&sid, ttl);
    assert!(due > ttl / 3 && due <= ttl / 2, "{due:?}");
    hub.publisher().publish(&sid, status()).await.unwrap();
    assert!(lease_pttl(&prefix, &sid).await <= 30_000);
    // A write once the loop's renewal would be due before the next window (this hub's window is an hour, so a
    // quarter of the ttl ahead) renews the lease as it checks it, and the loop's renewal is then due half the ttl
    // later.
    let channel = hub.channel(&sid).unwrap();
    lock(&channel.state).renewed_at = Some(Instant::now() - ttl / 4);
    hub.publisher()
        .publish(&sid, Event::Error(pb::MessageError::default()))
        .await
        .unwrap();
    assert!(lease_pttl(&prefix, &sid).await > 30_000);
    let due = hub.loop_lease().lease_renewal_due(&sid, ttl);
    assert!(due > ttl / 3 && due <= ttl / 2, "{due:?}");
    // Renewing now costs nothing; a write soon after does not renew again.
    assert!(
        hub.loop_lease()
            .renew_lease(&sid, &fence, ttl)
            .await
            .unwrap()
    );
    let renewed = lock(&channel.state).renewed_at;
    hub.publisher()
        .publish(&sid, Event::Error(pb::MessageError::default()))
        .await
        .unwrap();
    assert_eq!(lock(&channel.state).renewed_at, renewed);
    // A write whose fence lost the lease renews nothing, and the loop's renewal then finds the loss.
    store.leases().release_lease(&sid, &fence).await.unwrap();
    let successor = store
        .leases()
        .acquire_lease(&sid, "replica-b", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    lock(&channel.state).renewed_at = None;
    hub.publisher()
        .publish(&sid, Event::Error(pb::MessageError::default()))
        .await
        .unwrap();
    assert_eq!(lock(&channel.state).renewed_at, None);
    assert!(
        lease_pttl(&prefix, &sid).await <= 10_000,
        "the successor's lease is left alone"
    );
    assert!(
        !hub.loop_lease()
            .renew_lease(&sid, &fence, ttl)
            .await
            .unwrap()
    );
    assert!(
        hub.loop_lease()
            .renew_lease(&sid, &successor, ttl)
            .await
            .unwrap()
    );
    let _ = hub.close(&sid).await;
    store.sessions().delete_session(&sid).await.unwrap();
}

/// A hub whose windows never end during a test, with the session's channel opened as a prompt opens it (the log's
/// position and Redis's clock read by the prompt's script).
async fn opened_by_a_prompt(store: &Store, sid: &str, fence: &Fence, watched: bool) -> Hub {
    let hub = Hub::new(store.clone(), no_timer());
    let (last, redis_ms) = store.event_log().open_events(sid).await.unwrap();
    hub.open_at(sid, fence, last, Some(redis_ms), watched);
    hub
}

#[tokio::test]
async fn a_channel_a_prompt_opens_writes_its_first_event_at_once_only_while_watched() {
    let (store, _prefix, sid, fence, _mid) = running_session().await;
    for watched in [false, true] {
        let hub = opened_by_a_prompt(&store, &sid, &fence, watched).await;
        hub.publisher().publish(&sid, status()).await.unwrap();
        let deadline = hub.channel(&sid).unwrap().deadline().unwrap();
        if watched {
            assert!(deadline <= Instant::now(), "written at once");
        } else {
            assert!(
                deadline > Instant::now() + Duration::from_secs(600),
                "written with the (hour-long) window"
            );
        }
        hub.close(&sid).await.unwrap();
    }
    assert!(hub_clock_is_kept(&store, &sid, &fence).await);
    store.sessions().delete_session(&sid).await.unwrap();
}

/// A hub that measured Redis's clock reports it fresh, and a channel opened without reading it again uses it.
async fn hub_clock_is_kept(store: &Store, sid: &str, fence: &Fence) -> bool {
    let hub = Hub::new(store.clone(), no_timer());
    assert!(!hub.clock_fresh());
    let (last, redis_ms) = store.event_log().open_events(sid).await.unwrap();
    hub.open_at(sid, fence, last, Some(redis_ms), false);
    hub.close(sid).await.unwrap();
    let fresh = hub.clock_fresh();
    hub.open_at(sid, fence, last, None, false);
    let offset = lock(&hub.channel(sid).unwrap().state).offset_ms;
    hub.close(sid).await.unwrap();
    fresh && (offset - (redis_ms - local_millis())).abs() < 1000
}

#[tokio::test]
async fn a_follower_waiting_on_the_log_attaches_when_a_channel_opens_here() {
    let (store, _prefix, sid, fence, _mid) = running_session().await;
    let hub = Hub::new(store.clone(), no_timer());
    let mut waiting = hub.follow(&sid, "0").unwrap();
    // It would wait on the log for ten minutes: only the channel's opening can wake it sooner.
    waiting.block = Duration::from_secs(600);
    let follower = tokio::spawn(async move { waiting.next().await.map(|e| e.event) });
    // Give it time to start waiting (the test passes either way: attached at once or woken).
    tokio::task::yield_now().await;
    let (last, redis_ms) = store.event_log().open_events(&sid).await.unwrap();
    hub.open_at(&sid, &fence, last, Some(redis_ms), false);
    hub.publisher().publish(&sid, status()).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), follower)
        .await
        .expect("the follower attached to the channel")
        .unwrap()
        .unwrap();
    assert!(matches!(got, Some(Event::Status(_))), "{got:?}");
    assert!(
        store
            .event_log()
            .read_events(&sid, "0", None, 10)
            .await
            .unwrap()
            .is_empty(),
        "nothing was written: the follower read the channel"
    );
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_steps_last_parts_and_totals_wait_for_the_next_write_and_the_tenant_is_charged_after() {
    let (store, prefix, sid, fence, mid) = running_session().await;
    let hub = opened_by_a_prompt(&store, &sid, &fence, false).await;
    let pid = ids::new("prt");
    hub.publisher()
        .put_part_later(
            Box::new(text_part(&sid, &mid, &pid, "all of it", true)),
            &fence,
        )
        .await
        .unwrap();
    let (record, bytes) = store
        .sessions()
        .get_session_record(&sid)
        .await
        .unwrap()
        .unwrap();
    let tenant = format!("t{:x}", rand::random::<u32>());
    let totals = |cost: i64, expected: Vec<u8>| {
        let mut record = record.clone();
        record.cost_nano_usd = cost;
        record.tenant = tenant.clone();
        SessionTotals {
            expected,
            record,
            charge: 5,
        }
    };
    assert!(
        hub.publisher()
            .stage_session(&sid, &fence, Box::new(totals(5, bytes.clone())))
            .is_ok()
    );
    assert_eq!(stored_text(&store, &sid, &mid, &pid).await, None);
    assert_eq!(charged(&store, &sid, &tenant).await, (0, 0));
    hub.publisher().flush_parts(&sid).await.unwrap();
    assert_eq!(
        stored_text(&store, &sid, &mid, &pid).await.as_deref(),
        Some("all of it")
    );
    assert_eq!(charged(&store, &sid, &tenant).await, (5, 5));
    // Another writer (the title) changed the record since: the totals go onto the record as it is now.
    let mut titled = store.sessions().get_session(&sid).await.unwrap().unwrap();
    titled.title = "a title".into();
    store.sessions().put_session(&titled, None).await.unwrap();
    assert!(
        hub.publisher()
            .stage_session(&sid, &fence, Box::new(totals(8, bytes)))
            .is_ok()
    );
    hub.publisher().flush_parts(&sid).await.unwrap();
    let now = store.sessions().get_session(&sid).await.unwrap().unwrap();
    assert_eq!((now.title.as_str(), now.cost_nano_usd), ("a title", 8));
    assert_eq!(store.spend().tenant_spend(&tenant).await.unwrap(), 10);
    hub.close(&sid).await.unwrap();
    store.sessions().delete_session(&sid).await.unwrap();
    let _ = prefix;
}

#[tokio::test]
async fn a_run_end_is_neither_logged_nor_shown_when_the_lease_moved_on() {
    let (store, _prefix, sid, fence, mid) = running_session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open_fenced(&sid, &fence).await.unwrap();
    let mut live = hub.follow(&sid, "0").unwrap();
    hub.publisher()
        .publish(&sid, part_delta(&mid, "prt_1", "seen"))
        .await
        .unwrap();
    hub.publisher().flush(&sid).await.unwrap();
    // The follower reads the channel (as a Prompt stream on the loop's replica does).
    let first = live.next().await.unwrap().event;
    assert_eq!(first, Some(part_delta(&mid, "prt_1", "seen")));
    store.leases().release_lease(&sid, &fence).await.unwrap();
    store
        .leases()
        .acquire_lease(&sid, "replica-b", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    hub.loop_lease().hold_from_here(&sid);
    hub.publisher().publish(&sid, status()).await.unwrap();
    let err = hub.publisher().publish(&sid, done()).await.unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    assert_eq!(
        logged_text(&store, &sid).await,
        "seen",
        "the stale end is not logged"
    );
    assert!(
        !store
            .event_log()
            .read_events(&sid, "0", None, 100)
            .await
            .unwrap()
            .iter()
            .any(|e| matches!(e.event, Some(Event::Done(_)) | Some(Event::Status(_)))),
        "neither its status nor its done"
    );
    let handed_off = Event::Done(pb::Done {
        stopped_by: pb::StopReason::HandedOff as i32,
        ..Default::default()
    });
    hub.abandon(&sid, handed_off.clone());
    let events: Vec<_> = until_done(&mut live)
        .await
        .into_iter()
        .filter_map(|e| e.event)
        .collect();
    assert_eq!(
        events,
        [handed_off],
        "this replica's followers get the hand-off, not the stale end"
    );
    store.sessions().delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_run_end_releases_the_lease_in_its_write_unless_a_prompt_waits() {
    // A prompt waits: the end is logged and the lease kept, for the loop to run again.
    let (store, _prefix, sid, fence, _mid) = running_session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open_fenced(&sid, &fence).await.unwrap();
    store
        .queue()
        .enqueue_prompt(&sid, &pb::PromptRequest::default())
        .await
        .unwrap();
    hub.loop_lease().hold_from_here(&sid);
    hub.publisher().publish(&sid, done()).await.unwrap();
    assert!(!hub.loop_lease().lease_released(&sid));
    assert_eq!(
        store.leases().lease_holder(&sid).await.unwrap().unwrap().1,
        fence.token
    );
    assert!(
        store
            .event_log()
            .read_events(&sid, "0", None, 100)
            .await
            .unwrap()
            .iter()
            .any(|e| matches!(e.event, Some(Event::Done(_)))),
        "the end is logged"
    );
    store.sessions().delete_session(&sid).await.unwrap();

    // None waits: the same write releases it.
    let (store, _prefix, sid, fence, _mid) = running_session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open_fenced(&sid, &fence).await.unwrap();
    hub.publisher().publish(&sid, status()).await.unwrap();
    assert!(
        !hub.loop_lease().lease_released(&sid),
        "only the run's end releases"
    );
    hub.loop_lease().hold_from_here(&sid);
    hub.publisher().publish(&sid, done()).await.unwrap();
    assert!(hub.loop_lease().lease_released(&sid));
    assert!(store.leases().lease_holder(&sid).await.unwrap().is_none());
    store.sessions().delete_session(&sid).await.unwrap();
}

/// The session's recorded cost and its tenant's spend.
async fn charged(store: &Store, sid: &str, tenant: &str) -> (i64, i64) {
    let cost = store
        .sessions()
        .get_session(sid)
        .await
        .unwrap()
        .unwrap()
        .cost_nano_usd;
    (cost, store.spend().tenant_spend(tenant).await.unwrap())
}

#[test]
fn the_first_event_after_an_id_is_found_wherever_it_is_in_the_ring() {
    let ids = Arc::new(PartIds {
        part_id: "prt_1".into(),
        message_id: "msg_1".into(),
    });
    for len in 0..24u64 {
        // Ids 10, 20, ..., with gaps, so the ids looked up fall between events as well as on them.
        let ring: std::collections::VecDeque<(EventId, Stored)> = (1..=len)
            .map(|i| {
                let id = EventId { ms: 7, seq: i * 10 };
                (id, Stored::delta(Arc::clone(&ids), "x"))
            })
            .collect();
        for seq in 0..=(len * 10 + 11) {
            let id = EventId { ms: 7, seq };
            assert_eq!(
                reading::first_after(&ring, id),
                ring.partition_point(|(e, _)| *e <= id),
                "{len} events, after 7-{seq}"
            );
        }
    }
}
