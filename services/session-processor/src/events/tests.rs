//! The hub against a real Redis (`REDIS_URL`, default `redis://127.0.0.1:6379`), each test under its own prefix.

use std::time::Duration;

use llm_proto::sessions as pb;
use pb::session_event::Event;

use super::*;
use crate::ids;

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_string())
}

/// A store under a fresh prefix and a session in it.
async fn session() -> (Store, String) {
    let prefix = format!("test:{:016x}:", rand::random::<u64>());
    let store = Store::connect(&redis_url(), &prefix)
        .await
        .expect("a Redis server must answer at REDIS_URL");
    let id = ids::new("ses");
    store
        .create_session(&pb::Session {
            id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    (store, id)
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
    hub.publish(&sid, status()).await.unwrap(); // the first event after open is written at once
    assert!(matches!(
        live.next().await.unwrap().event,
        Some(Event::Status(_))
    ));
    let before = store.event_log_commands();
    for i in 0..1000 {
        hub.publish(&sid, delta(&format!("{i} "))).await.unwrap();
        // Delivered from the ring before any write: the window is an hour long.
        let ev = live.next().await.unwrap();
        assert!(
            matches!(&ev.event, Some(Event::PartDelta(d)) if d.delta == format!("{i} ")),
            "{ev:?}"
        );
    }
    assert_eq!(
        store.event_log_commands() - before,
        1000 / 512,
        "only the size bound wrote so far"
    );
    hub.publish(&sid, done()).await.unwrap();
    hub.close(&sid).await.unwrap();
    assert!(store.event_log_commands() - before <= 3);

    // The log holds the same events with the same ids.
    let logged = store.read_events(&sid, "0", None, 10_000).await.unwrap();
    assert_eq!(logged.len(), 1002);
    let mut replay = hub.follow(&sid, "0").unwrap();
    let replayed = until_done(&mut replay).await;
    assert_eq!(replayed, logged);
    let ids = ids_of(&logged);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase");
    let text: String = logged
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::PartDelta(d)) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, (0..1000).map(|i| format!("{i} ")).collect::<String>());
    store.delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_follower_after_any_event_gets_exactly_the_rest_live_and_from_the_log() {
    let (store, sid) = session().await;
    let config = EventsConfig {
        flush_interval: Duration::from_secs(3600),
        max_batch_events: 7,
        ring_events: 16,
        ..Default::default()
    };
    let hub = Hub::new(store.clone(), config);
    hub.open(&sid).await.unwrap();
    let mut all = hub.follow(&sid, "0").unwrap();
    for i in 0..40 {
        let event = if i % 9 == 4 {
            status()
        } else {
            delta(&i.to_string())
        };
        hub.publish(&sid, event).await.unwrap();
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
    hub.publish(&sid, done()).await.unwrap();
    // `done` is in the log at once, but local followers get it only when the channel closes (the loop closes it
    // after releasing its lease), so `done` means the session is idle.
    assert!(
        futures::FutureExt::now_or_never(all.next()).is_none(),
        "done is held until the channel closes"
    );
    assert!(matches!(
        store
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
    store.delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn a_lagging_follower_reads_the_log_and_the_ring_stays_bounded() {
    let (store, sid) = session().await;
    let config = EventsConfig {
        flush_interval: Duration::from_secs(3600),
        max_batch_events: 8,
        ring_events: 16,
        ..Default::default()
    };
    let hub = Hub::new(store.clone(), config);
    hub.open(&sid).await.unwrap();
    let mut slow = hub.follow(&sid, "0").unwrap();
    let first = slow.next_after_publish(&hub, &sid).await;
    for i in 0..500 {
        hub.publish(&sid, delta(&i.to_string())).await.unwrap();
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
    let text: Vec<String> = got[1..]
        .iter()
        .map(|e| match &e.event {
            Some(Event::PartDelta(d)) => d.delta.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(text, (0..500).map(|i| i.to_string()).collect::<Vec<_>>());
    hub.close(&sid).await.unwrap();
    store.delete_session(&sid).await.unwrap();
}

impl Follower {
    /// Publishes a status and returns it as this follower receives it.
    async fn next_after_publish(&mut self, hub: &Hub, sid: &str) -> pb::SessionEvent {
        hub.publish(sid, status()).await.unwrap();
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
    hub.publish(&sid, status()).await.unwrap();
    let mut far = remote.follow(&sid, "0").unwrap();
    assert!(matches!(
        far.next().await.unwrap().event,
        Some(Event::Status(_))
    ));
    hub.publish(&sid, delta("a")).await.unwrap();
    hub.publish(&sid, delta("b")).await.unwrap();
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
    store.delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn ids_follow_the_log_and_a_foreign_write_never_fails_a_flush() {
    let (store, sid) = session().await;
    // Something already logged, with a Redis-assigned id.
    let first: EventId = store
        .publish(&sid, status())
        .await
        .unwrap()
        .parse()
        .unwrap();
    let hub = Hub::new(store.clone(), no_timer());
    hub.open(&sid).await.unwrap();
    assert_eq!(hub.last_event_id(&sid).await.unwrap(), first.to_string());
    hub.publish(&sid, status()).await.unwrap();
    hub.publish(&sid, delta("x")).await.unwrap();
    // A write from outside the channel lands after the channel's pending ids.
    let foreign = EventId {
        ms: first.ms + 60_000,
        seq: 0,
    };
    let got = store
        .append_events(
            &sid,
            foreign,
            codec::encode_batch(&[(foreign, Arc::new(status()))]),
        )
        .await
        .unwrap();
    assert_eq!(got, foreign);
    // The channel's next write is placed after it, and its later ids follow it.
    hub.publish(&sid, done()).await.unwrap();
    let next: EventId = hub.last_event_id(&sid).await.unwrap().parse().unwrap();
    assert!(next >= foreign, "{next} after {foreign}");
    hub.publish(&sid, delta("y")).await.unwrap();
    let after: EventId = hub.last_event_id(&sid).await.unwrap().parse().unwrap();
    assert!(after > foreign);
    hub.close(&sid).await.unwrap();
    // A retried write whose entry already landed is not logged twice.
    let again = store
        .append_events(
            &sid,
            foreign,
            codec::encode_batch(&[(foreign, Arc::new(status()))]),
        )
        .await
        .unwrap();
    assert!(
        again > foreign,
        "not the newest entry any more: written after it"
    );
    let top: EventId = store.last_event_id(&sid).await.unwrap().parse().unwrap();
    let same = store
        .append_events(&sid, top, codec::encode_batch(&[(top, Arc::new(status()))]))
        .await
        .unwrap();
    assert_eq!(same, top);
    assert_eq!(store.last_event_id(&sid).await.unwrap(), top.to_string());
    store.delete_session(&sid).await.unwrap();
}

#[tokio::test]
async fn publishing_for_a_deleted_session_fails() {
    let (store, sid) = session().await;
    let hub = Hub::new(store.clone(), no_timer());
    hub.open(&sid).await.unwrap();
    hub.publish(&sid, status()).await.unwrap();
    store.delete_session(&sid).await.unwrap();
    hub.publish(&sid, delta("buffered")).await.unwrap();
    let err = hub.publish(&sid, done()).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert!(hub.close(&sid).await.is_err());
    // Closed: later publishes go straight to Redis, which refuses them too.
    assert!(matches!(
        hub.publish(&sid, status()).await,
        Err(StoreError::NotFound(_))
    ));
}
