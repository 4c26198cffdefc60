//! Tests against a real Redis (`REDIS_URL`, default `redis://127.0.0.1:6379`). Each test works under its own random
//! key prefix, so tests run in parallel without seeing each other's keys, and removes its keys at the end.

use crate::maps::IdSet;
use std::time::{Duration, Instant};

use llm_proto::sessions as pb;
use tokio::sync::oneshot;

use super::sessions::parse_session_cursor;
use super::test_support::{cleanup, keys_under, prompt, queued_texts, redis_url, store};
use super::*;
use crate::ids;

fn ts(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms / 1000,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

fn session(id: &str, created_ms: i64) -> pb::Session {
    pb::Session {
        id: id.to_string(),
        agent: "default".into(),
        default_model: "fake/model".into(),
        created_at: Some(ts(created_ms)),
        updated_at: Some(ts(created_ms)),
        ..Default::default()
    }
}

async fn new_session(store: &Store) -> String {
    let id = ids::new("ses");
    store
        .create_session(&session(&id, 1_700_000_000_000))
        .await
        .unwrap();
    id
}

fn message(session_id: &str, id: &str, role: pb::Role) -> pb::Message {
    pb::Message {
        id: id.to_string(),
        session_id: session_id.to_string(),
        role: role as i32,
        model: "fake/model".into(),
        ..Default::default()
    }
}

fn text_part(session_id: &str, message_id: &str, id: &str, text: &str) -> pb::Part {
    pb::Part {
        id: id.to_string(),
        message_id: message_id.to_string(),
        session_id: session_id.to_string(),
        kind: Some(pb::part::Kind::Text(pb::TextPart {
            text: text.to_string(),
            ..Default::default()
        })),
    }
}

fn text_of(p: &pb::Part) -> &str {
    match &p.kind {
        Some(pb::part::Kind::Text(t)) => &t.text,
        other => panic!("not a text part: {other:?}"),
    }
}

fn delta(text: &str) -> pb::session_event::Event {
    pb::session_event::Event::PartDelta(pb::PartDelta {
        part_id: "prt_x".into(),
        message_id: "msg_x".into(),
        delta: text.to_string(),
    })
}

fn delta_text(e: &pb::SessionEvent) -> &str {
    match &e.event {
        Some(pb::session_event::Event::PartDelta(d)) => &d.delta,
        other => panic!("not a delta: {other:?}"),
    }
}

/// Polls `lease_holder` until nobody holds the lease, for at most 2 s: waiting on the explicit signal that the
/// lease expired rather than sleeping for the TTL and hoping.
async fn until_lease_free(store: &Store, session_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while store.lease_holder(session_id).await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "lease of {session_id} did not expire"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn connect_rejects_a_prefix_with_a_hash_tag_and_pings() {
    let err = Store::connect(&redis_url(), "app:{x}:").await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");
    let (store, _) = store().await;
    store.ping().await.unwrap();
}

#[tokio::test]
async fn session_crud_and_paging_newest_first() {
    let (store, prefix) = store().await;
    // Ascending ids; s3 and s4 share a millisecond so paging must break the tie by id.
    let ids: Vec<String> = (0..5).map(|_| ids::new("ses")).collect();
    let created = [1_000, 2_000, 3_000, 3_000, 4_000];
    for (id, ms) in ids.iter().zip(created) {
        store.create_session(&session(id, ms)).await.unwrap();
    }
    let err = store
        .create_session(&session(&ids[0], 9_000))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Exists(_)), "{err}");

    // Status is live data: never stored, even when the caller passes one.
    let mut s = store.get_session(&ids[0]).await.unwrap().unwrap();
    assert_eq!(s.created_at, Some(ts(1_000)));
    s.title = "Renamed".into();
    s.status = Some(pb::SessionStatus {
        kind: pb::session_status::Kind::Busy as i32,
        ..Default::default()
    });
    store.put_session(&s, None).await.unwrap();
    let got = store.get_session(&ids[0]).await.unwrap().unwrap();
    assert_eq!(got.title, "Renamed");
    assert_eq!(got.status, None);
    assert_eq!(store.get_session("ses_missing").await.unwrap(), None);
    let err = store
        .put_session(&session("ses_missing", 1), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");

    // An index entry without a session (a creation cut short) is skipped, not listed.
    let _: i64 = redis::cmd("ZADD")
        .arg(keys::index(&prefix))
        .arg(3_500)
        .arg("ses_dangling")
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();

    let newest_first: Vec<&String> = vec![&ids[4], &ids[3], &ids[2], &ids[1], &ids[0]];
    for page_size in [1, 2, 3, 5, 10] {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let (page, next) = store
                .list_sessions(Scope::All, page_size, after.as_deref())
                .await
                .unwrap();
            assert!(!page.is_empty(), "no empty pages");
            assert!(page.len() <= page_size);
            seen.extend(page.into_iter().map(|l| l.session.id));
            pages += 1;
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(
            seen.iter().collect::<Vec<_>>(),
            newest_first,
            "page size {page_size}"
        );
        assert_eq!(pages, 5usize.div_ceil(page_size), "page size {page_size}");
    }
    let (page, next) = store
        .list_sessions(Scope::All, usize::MAX, None)
        .await
        .unwrap();
    assert_eq!((page.len(), next), (5, None));
    // Each session's own cursor resumes right after it.
    for (i, listed) in page.iter().enumerate() {
        let (rest, _) = store
            .list_sessions(Scope::All, 1, Some(&listed.cursor))
            .await
            .unwrap();
        assert_eq!(
            rest.first().map(|l| &l.session.id),
            newest_first.get(i + 1).copied()
        );
    }
    let err = store
        .list_sessions(Scope::All, 2, Some("garbage"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");

    assert!(store.delete_session(&ids[2]).await.unwrap());
    assert!(!store.delete_session(&ids[2]).await.unwrap());
    assert_eq!(store.get_session(&ids[2]).await.unwrap(), None);
    let (page, next) = store
        .list_sessions(Scope::Tenant(""), 10, None)
        .await
        .unwrap();
    assert_eq!(page.len(), 4);
    assert_eq!(next, None);
    assert_eq!(store.write_failures(), 0);
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn messages_and_parts_come_back_ordered_by_id() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let (m1, m2, m3) = (ids::new("msg"), ids::new("msg"), ids::new("msg"));
    let p: Vec<String> = (0..4).map(|_| ids::new("prt")).collect();

    // Written out of order: m3 before m1, parts newest first. Reads must be sorted by id regardless.
    store
        .put_message(&message(&sid, &m3, pb::Role::Assistant), None)
        .await
        .unwrap();
    let mut user = message(&sid, &m1, pb::Role::User);
    // Parts carried by the message land with it; empty back-references are filled in.
    user.parts = vec![
        text_part(&sid, &m1, &p[1], "second"),
        pb::Part {
            message_id: String::new(),
            session_id: String::new(),
            ..text_part(&sid, &m1, &p[0], "first")
        },
    ];
    store.put_message(&user, None).await.unwrap();
    store
        .put_message(&message(&sid, &m2, pb::Role::Assistant), None)
        .await
        .unwrap();
    store
        .put_part(&text_part(&sid, &m3, &p[3], "m3 b"), None)
        .await
        .unwrap();
    store
        .put_part(&text_part(&sid, &m3, &p[2], "m3 a"), None)
        .await
        .unwrap();
    // Upsert replaces.
    store
        .put_part(&text_part(&sid, &m3, &p[3], "m3 b v2"), None)
        .await
        .unwrap();

    let (all, next) = store.list_messages(&sid, None, 10).await.unwrap();
    assert_eq!(next, None);
    assert_eq!(
        all.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        [&m1, &m2, &m3]
    );
    assert_eq!(
        all[0].parts.iter().map(text_of).collect::<Vec<_>>(),
        ["first", "second"]
    );
    assert_eq!(all[0].parts[0].message_id, m1);
    assert_eq!(all[0].parts[0].session_id, sid);
    assert!(all[1].parts.is_empty());
    assert_eq!(
        all[2].parts.iter().map(text_of).collect::<Vec<_>>(),
        ["m3 a", "m3 b v2"]
    );

    // The whole history at once, as the loop reads it.
    let (everything, next) = store.list_messages(&sid, None, usize::MAX).await.unwrap();
    assert_eq!(everything, all);
    assert_eq!(next, None);

    // Paging by one: oldest first, cursor = last id, no empty last page.
    let (page, next) = store.list_messages(&sid, None, 1).await.unwrap();
    assert_eq!(page[0].id, m1);
    let (page, next) = store.list_messages(&sid, next.as_deref(), 1).await.unwrap();
    assert_eq!(page[0].id, m2);
    let (page, next) = store.list_messages(&sid, next.as_deref(), 1).await.unwrap();
    assert_eq!(page[0].id, m3);
    assert_eq!(next, None);

    let got = store.get_message(&sid, &m3).await.unwrap().unwrap();
    assert_eq!(got, all[2]);
    assert_eq!(store.get_message(&sid, "msg_missing").await.unwrap(), None);

    // A part under an unlisted message would escape deletion: refused.
    let err = store
        .put_part(&text_part(&sid, "msg_unknown", &p[0], "x"), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    // A part carried by a message must belong to it.
    let mut wrong = message(&sid, &m2, pb::Role::User);
    wrong.parts = vec![text_part(&sid, &m1, &p[0], "x")];
    let err = store.put_message(&wrong, None).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");
    // Writes to a missing session are refused.
    let err = store
        .put_message(&message("ses_missing", &m1, pb::Role::User), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn put_parts_writes_a_batch_across_messages_at_once() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let (m1, m2) = (ids::new("msg"), ids::new("msg"));
    store
        .put_message(&message(&sid, &m1, pb::Role::User), None)
        .await
        .unwrap();
    store
        .put_message(&message(&sid, &m2, pb::Role::Assistant), None)
        .await
        .unwrap();
    let p: Vec<String> = (0..5).map(|_| ids::new("prt")).collect();
    let batch = vec![
        text_part(&sid, &m2, &p[4], "m2 c"),
        text_part(&sid, &m1, &p[0], "m1 a"),
        text_part(&sid, &m2, &p[2], "m2 a"),
        text_part(&sid, &m2, &p[3], "m2 b"),
        text_part(&sid, &m1, &p[1], "m1 b"),
    ];
    store.put_parts(&batch, None).await.unwrap();
    store.put_parts(&[], None).await.unwrap();
    let (all, _) = store.list_messages(&sid, None, 10).await.unwrap();
    assert_eq!(
        all[0].parts.iter().map(text_of).collect::<Vec<_>>(),
        ["m1 a", "m1 b"]
    );
    assert_eq!(
        all[1].parts.iter().map(text_of).collect::<Vec<_>>(),
        ["m2 a", "m2 b", "m2 c"]
    );

    // All or nothing: one part under an unknown message keeps the whole batch out.
    let p5 = ids::new("prt");
    let bad = vec![
        text_part(&sid, &m1, &p5, "never"),
        text_part(&sid, "msg_unknown", &ids::new("prt"), "x"),
    ];
    let err = store.put_parts(&bad, None).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert_eq!(
        store
            .get_message(&sid, &m1)
            .await
            .unwrap()
            .unwrap()
            .parts
            .len(),
        2
    );

    // One script runs in one slot: two sessions cannot share a batch.
    let mixed = vec![
        text_part(&sid, &m1, &p5, "x"),
        text_part("ses_other", &m1, &p5, "y"),
    ];
    let err = store.put_parts(&mixed, None).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn events_resume_after_an_id() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    assert_eq!(store.last_event_id(&sid).await.unwrap(), "0-0");
    let mut published = Vec::new();
    for text in ["a", "b", "c"] {
        published.push(store.publish(&sid, delta(text)).await.unwrap());
    }
    assert_eq!(store.last_event_id(&sid).await.unwrap(), published[2]);

    let all = store.read_events(&sid, "0", None, 100).await.unwrap();
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
        .read_events(&sid, &published[0], None, 100)
        .await
        .unwrap();
    assert_eq!(rest.iter().map(delta_text).collect::<Vec<_>>(), ["b", "c"]);
    let first_two = store.read_events(&sid, "0-0", None, 2).await.unwrap();
    assert_eq!(first_two.len(), 2);
    assert!(
        store
            .read_events(&sid, &published[2], None, 100)
            .await
            .unwrap()
            .is_empty()
    );
    // A zero block means "don't wait" (Redis would read BLOCK 0 as "forever").
    assert_eq!(
        store
            .read_events(&sid, "0-0", Some(Duration::ZERO), 1)
            .await
            .unwrap()
            .len(),
        1
    );

    for bad in ["$", "", "abc", "1-", "-1"] {
        let err = store.read_events(&sid, bad, None, 10).await.unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidArgument(_)),
            "{bad:?}: {err}"
        );
    }
    let err = store.publish("ses_missing", delta("x")).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn blocking_read_wakes_when_an_event_is_published() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let before = store.publish(&sid, delta("old")).await.unwrap();

    let (started_tx, started_rx) = oneshot::channel();
    let reader = {
        let (store, sid, before) = (store.clone(), sid.clone(), before.clone());
        tokio::spawn(async move {
            let _ = started_tx.send(());
            let t = Instant::now();
            let events = store
                .read_events(&sid, &before, Some(Duration::from_secs(20)), 10)
                .await;
            (events, t.elapsed())
        })
    };
    started_rx.await.unwrap();
    // Whether the publish lands before or after XREAD parks, reading after `before` must return it, and long
    // before the 20 s block runs out.
    let id = store.publish(&sid, delta("new")).await.unwrap();
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
                .read_events(&sid, &id, Some(Duration::from_secs(3)), 10)
                .await
        })
    };
    tokio::task::yield_now().await;
    store.get_session(&sid).await.unwrap().unwrap();
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
        let id = store.publish(&sid, delta(&i.to_string())).await.unwrap();
        if i == 0 {
            first = id;
        }
    }
    let len: usize = redis::cmd("XLEN")
        .arg(store.keys(&sid).unwrap().events())
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();
    // `MAXLEN ~` trims whole stream nodes (100 entries by default), so the length lands between the cap and the
    // cap plus one node.
    assert!((20..=120).contains(&len), "len {len}");
    let oldest = store.read_events(&sid, "0", None, 1).await.unwrap();
    assert_ne!(oldest[0].event_id, first);
    assert_eq!(
        delta_text(&store.read_events(&sid, "0", None, len).await.unwrap()[len - 1]),
        "599"
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn lease_acquire_renew_release_and_fencing() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let ttl = Duration::from_secs(30);

    let a = store
        .acquire_lease(&sid, "replica-a", ttl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.owner, "replica-a");
    assert!(
        store
            .acquire_lease(&sid, "replica-b", ttl)
            .await
            .unwrap()
            .is_none()
    );
    // The holder itself is refused too: a second prompt on the same replica must queue, not take over.
    assert!(
        store
            .acquire_lease(&sid, "replica-a", ttl)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store.lease_holder(&sid).await.unwrap(),
        Some(("replica-a".to_string(), a.token))
    );
    assert!(store.renew_lease(&sid, &a, ttl).await.unwrap());
    let forged = Fence {
        owner: "replica-a".into(),
        token: a.token + 1,
    };
    assert!(!store.renew_lease(&sid, &forged, ttl).await.unwrap());
    store.release_lease(&sid, &forged).await.unwrap();
    assert!(
        store.lease_holder(&sid).await.unwrap().is_some(),
        "a wrong fence must not release"
    );
    store
        .put_session(&session(&sid, 1), Some(&a))
        .await
        .unwrap();
    store.release_lease(&sid, &a).await.unwrap();
    assert_eq!(store.lease_holder(&sid).await.unwrap(), None);

    // Tokens grow with every acquisition.
    let b = store
        .acquire_lease(&sid, "host:with:colons", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(b.token > a.token);
    assert_eq!(
        store.lease_holder(&sid).await.unwrap(),
        Some(("host:with:colons".to_string(), b.token))
    );
    store.release_lease(&sid, &b).await.unwrap();

    // A holder whose lease expires is fenced out once someone else takes over.
    let stale = store
        .acquire_lease(&sid, "replica-a", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    assert!(stale.token > b.token);
    let m = ids::new("msg");
    store
        .put_message(&message(&sid, &m, pb::Role::Assistant), Some(&stale))
        .await
        .unwrap();
    until_lease_free(&store, &sid).await;
    // Expired but not yet taken: the stale fence no longer matches either.
    let err = store
        .put_part(&text_part(&sid, &m, &ids::new("prt"), "late"), Some(&stale))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    let fresh = store
        .acquire_lease(&sid, "replica-b", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(fresh.token > stale.token);
    assert!(!store.renew_lease(&sid, &stale, ttl).await.unwrap());

    let mut overwritten = session(&sid, 1);
    overwritten.title = "stale".into();
    for result in [
        store.put_session(&overwritten, Some(&stale)).await,
        store
            .put_message(&message(&sid, &m, pb::Role::User), Some(&stale))
            .await,
        store
            .put_part(&text_part(&sid, &m, &ids::new("prt"), "late"), Some(&stale))
            .await,
        store
            .put_parts(
                &[text_part(&sid, &m, &ids::new("prt"), "late")],
                Some(&stale),
            )
            .await,
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, StoreError::Fenced { owner, token, .. } if owner == "replica-a" && *token == stale.token),
            "{err}"
        );
    }
    assert_ne!(
        store.get_session(&sid).await.unwrap().unwrap().title,
        "stale"
    );
    assert_eq!(
        store.get_message(&sid, &m).await.unwrap().unwrap().role,
        pb::Role::Assistant as i32
    );
    assert!(
        store
            .get_message(&sid, &m)
            .await
            .unwrap()
            .unwrap()
            .parts
            .is_empty()
    );
    // The new holder writes fine; the stale holder's release leaves the new lease alone.
    store
        .put_part(&text_part(&sid, &m, &ids::new("prt"), "ok"), Some(&fresh))
        .await
        .unwrap();
    store.release_lease(&sid, &stale).await.unwrap();
    assert_eq!(
        store.lease_holder(&sid).await.unwrap(),
        Some(("replica-b".to_string(), fresh.token))
    );

    let err = store
        .acquire_lease("ses_missing", "replica-a", ttl)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    // Refusals are outcomes, not Redis failures.
    assert_eq!(store.write_failures(), 0);
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_replica_wait_follows_acknowledged_writes_and_a_short_one_suspends_it() {
    // The test Redis has no replicas: every WAIT comes back short after its timeout, and the write stands.
    let (store, prefix) = store().await;
    let wait = ReplicaWait {
        replicas: 1,
        timeout: Duration::from_millis(20),
    };
    let sid = new_session(&store).await;
    // Loaded once without waiting, so the first pipeline below is not a NOSCRIPT one.
    store
        .enqueue_prompt(&sid, &prompt(&sid, "zero"))
        .await
        .unwrap();
    let store = store.with_replica_wait(Some(wait));
    let waits_before = wait_calls(&store).await;
    let requests = store.traffic().counts().requests;
    let started = Instant::now();
    store
        .enqueue_prompt(&sid, &prompt(&sid, "one"))
        .await
        .unwrap();
    assert!(
        started.elapsed() >= wait.timeout,
        "Redis waited for the replica"
    );
    let counts = store.traffic().counts();
    assert_eq!((counts.short, counts.skipped), (1, 0));
    assert_eq!(
        counts.requests,
        requests + 1,
        "script and WAIT in one pipeline"
    );
    // Suspended: the next write does not wait.
    store
        .enqueue_prompt(&sid, &prompt(&sid, "two"))
        .await
        .unwrap();
    assert_eq!(store.traffic().counts().skipped, 1);
    // After the suspension it waits again, and a node that lost its scripts (a restart, a failover) is given the
    // script and asked again, WAIT included.
    tokio::time::sleep(replicas::SUSPEND).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();
    store
        .enqueue_prompt(&sid, &prompt(&sid, "three"))
        .await
        .unwrap();
    assert_eq!(store.traffic().counts().short, 2);
    assert!(wait_calls(&store).await >= waits_before + 3);
    // That probe came back short too: suspended again.
    store
        .enqueue_prompt(&sid, &prompt(&sid, "four"))
        .await
        .unwrap();
    assert_eq!(store.traffic().counts().skipped, 2);
    assert_eq!(
        queued_texts(&store, &sid).await,
        ["zero", "one", "two", "three", "four"]
    );
    cleanup(&store, &prefix).await;
}

/// `WAIT` calls the server has counted (`INFO commandstats`).
async fn wait_calls(store: &Store) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|v| v.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn tool_result_mailbox_is_durable() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    // Only asked calls can be answered: an answer to another is refused and stores nothing.
    let err = store
        .submit_tool_result(&sid, "call_1", "42", false)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotAwaited("call_id")), "{err}");
    assert_eq!(
        store
            .wait_tool_result(&sid, "call_1", Duration::ZERO)
            .await
            .unwrap(),
        None
    );
    for call in ["call_1", "call_2", "call_3"] {
        store
            .expect_answer(&sid, Asked::ToolResult(call))
            .await
            .unwrap();
    }
    // A permission request of the same id is another question.
    let err = store
        .reply_permission(&sid, "call_1", true)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::NotAwaited("permission_id")),
        "{err}"
    );

    // Wait first, then submit.
    let (started_tx, started_rx) = oneshot::channel();
    let waiter = {
        let (store, sid) = (store.clone(), sid.clone());
        tokio::spawn(async move {
            let _ = started_tx.send(());
            store
                .wait_tool_result(&sid, "call_1", Duration::from_secs(20))
                .await
        })
    };
    started_rx.await.unwrap();
    store
        .submit_tool_result(&sid, "call_1", "42", false)
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got, Some(("42".to_string(), false)));

    // Submit first, then wait: delivered at once.
    store
        .submit_tool_result(&sid, "call_2", "boom", true)
        .await
        .unwrap();
    let t = Instant::now();
    let got = store
        .wait_tool_result(&sid, "call_2", Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(got, Some(("boom".to_string(), true)));
    assert!(t.elapsed() < Duration::from_secs(5));

    // Durable: a second waiter (a successor replica after a crash) still gets the answer; the first answer wins.
    store
        .submit_tool_result(&sid, "call_1", "retry with another answer", true)
        .await
        .unwrap();
    assert_eq!(
        store
            .wait_tool_result(&sid, "call_1", Duration::ZERO)
            .await
            .unwrap(),
        Some(("42".to_string(), false))
    );

    // Nobody answers: None after the timeout.
    let t = Instant::now();
    assert_eq!(
        store
            .wait_tool_result(&sid, "call_3", Duration::from_millis(100))
            .await
            .unwrap(),
        None
    );
    assert!(
        t.elapsed() >= Duration::from_millis(90),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(
        store
            .wait_tool_result(&sid, "call_3", Duration::ZERO)
            .await
            .unwrap(),
        None
    );

    let err = store
        .submit_tool_result("ses_missing", "call_1", "x", false)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn permission_mailbox_is_durable() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    for asked in ["per_1", "per_2"] {
        store
            .expect_answer(&sid, Asked::Permission(asked))
            .await
            .unwrap();
    }

    let (started_tx, started_rx) = oneshot::channel();
    let waiter = {
        let (store, sid) = (store.clone(), sid.clone());
        tokio::spawn(async move {
            let _ = started_tx.send(());
            store
                .wait_permission(&sid, "per_1", Duration::from_secs(20))
                .await
        })
    };
    started_rx.await.unwrap();
    store.reply_permission(&sid, "per_1", true).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got, Some(true));

    store.reply_permission(&sid, "per_2", false).await.unwrap();
    assert_eq!(
        store
            .wait_permission(&sid, "per_2", Duration::from_secs(20))
            .await
            .unwrap(),
        Some(false)
    );
    // First reply wins; the record outlives the first waiter.
    store.reply_permission(&sid, "per_2", true).await.unwrap();
    assert_eq!(
        store
            .wait_permission(&sid, "per_2", Duration::from_secs(20))
            .await
            .unwrap(),
        Some(false)
    );

    assert_eq!(
        store
            .wait_permission(&sid, "per_3", Duration::from_millis(100))
            .await
            .unwrap(),
        None
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn idempotency_key_is_claimed_once() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        store
            .claim_idempotency_key(&sid, "key-1", "msg_a", ttl)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .claim_idempotency_key(&sid, "key-1", "msg_b", ttl)
            .await
            .unwrap(),
        Some("msg_a".to_string())
    );
    assert_eq!(
        store
            .claim_idempotency_key(&sid, "key-2", "msg_b", ttl)
            .await
            .unwrap(),
        None
    );
    // Any bytes, any length: the key is hashed into the key name.
    let long = "k{}:\u{1F600}".repeat(500);
    assert_eq!(
        store
            .claim_idempotency_key(&sid, &long, "msg_c", ttl)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .claim_idempotency_key(&sid, &long, "msg_d", ttl)
            .await
            .unwrap(),
        Some("msg_c".into())
    );

    // Claims expire.
    assert_eq!(
        store
            .claim_idempotency_key(&sid, "short", "msg_e", Duration::from_millis(50))
            .await
            .unwrap(),
        None
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match store
            .claim_idempotency_key(&sid, "short", "msg_f", Duration::from_millis(50))
            .await
            .unwrap()
        {
            None => break,
            Some(existing) => assert_eq!(existing, "msg_e"),
        }
        assert!(Instant::now() < deadline, "claim did not expire");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn delete_session_removes_every_key() {
    let (store, prefix) = store().await;
    let keep = new_session(&store).await;
    let keep_keys = keys_under(&store, &prefix).await;
    let sid = new_session(&store).await;
    let m = ids::new("msg");
    let mut user = message(&sid, &m, pb::Role::User);
    user.parts = vec![text_part(&sid, &m, &ids::new("prt"), "hi")];
    store.put_message(&user, None).await.unwrap();
    let m2 = ids::new("msg");
    store
        .put_message(&message(&sid, &m2, pb::Role::Assistant), None)
        .await
        .unwrap();
    store
        .put_part(&text_part(&sid, &m2, &ids::new("prt"), "hello"), None)
        .await
        .unwrap();
    store.publish(&sid, delta("x")).await.unwrap();
    let fence = store
        .acquire_lease(&sid, "replica-a", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    store
        .enqueue_prompt(&sid, &prompt(&sid, "later"))
        .await
        .unwrap();
    // Answers nobody waited for leave doorbells behind; answered ones are cleaned by the waiter.
    for asked in [
        Asked::ToolResult("call_unwaited"),
        Asked::Permission("per_unwaited"),
        Asked::ToolResult("call_waited"),
    ] {
        store.expect_answer(&sid, asked).await.unwrap();
    }
    store
        .submit_tool_result(&sid, "call_unwaited", "out", false)
        .await
        .unwrap();
    store
        .reply_permission(&sid, "per_unwaited", true)
        .await
        .unwrap();
    store
        .submit_tool_result(&sid, "call_waited", "out", false)
        .await
        .unwrap();
    store
        .wait_tool_result(&sid, "call_waited", Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    store
        .claim_idempotency_key(&sid, "idem", &m, Duration::from_secs(60))
        .await
        .unwrap();
    store
        .mark_watched(&sid, Duration::from_secs(60))
        .await
        .unwrap();
    let populated = keys_under(&store, &prefix).await;
    assert!(populated.len() > keep_keys.len() + 10, "{populated:#?}");

    assert!(store.delete_session(&sid).await.unwrap());
    assert_eq!(keys_under(&store, &prefix).await, keep_keys);
    // Nothing written after the delete resurrects keys.
    let err = store
        .put_message(&message(&sid, &m, pb::Role::User), Some(&fence))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert!(store.publish(&sid, delta("late")).await.is_err());
    assert!(
        store
            .submit_tool_result(&sid, "call_late", "x", false)
            .await
            .is_err()
    );
    assert!(
        !store
            .renew_lease(&sid, &fence, Duration::from_secs(30))
            .await
            .unwrap()
    );
    // The event channel's flush with the (deleted) lease's fence: the lease is gone, so `:session` decides.
    let err = store
        .flush_events(
            &sid,
            Some(("9999999999999-0".parse().unwrap(), b"late".to_vec())),
            Some(&fence),
            None,
            FlushWrites {
                parts: &[text_part(&sid, &m2, &ids::new("prt"), "late")],
                heads: &[],
                listed: &IdSet::default(),
                session: None,
                ends_run: false,
                release: false,
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert_eq!(keys_under(&store, &prefix).await, keep_keys);

    assert!(store.delete_session(&keep).await.unwrap());
    assert_eq!(keys_under(&store, &prefix).await, Vec::<String>::new());
    cleanup(&store, &prefix).await;
}

#[test]
fn stream_ids_and_cursors_parse() {
    assert!(is_stream_id("0"));
    assert!(is_stream_id("0-0"));
    assert!(is_stream_id("1712345678901-3"));
    for bad in ["", "$", ">", "1-", "-1", "1-2-3", "a-1", "+"] {
        assert!(!is_stream_id(bad), "{bad:?}");
    }
    assert_eq!(
        parse_session_cursor("123:ses_a:b").unwrap(),
        (123, "ses_a:b".to_string())
    );
    assert!(parse_session_cursor("123:").is_err());
    assert!(parse_session_cursor("x:ses").is_err());
    assert_eq!(ceil_millis(Duration::from_micros(1)), 1);
    assert_eq!(ceil_millis(Duration::from_micros(1500)), 2);
    assert_eq!(ceil_millis(Duration::ZERO), 1);
}

#[tokio::test]
async fn concurrent_updates_of_different_fields_never_undo_each_other() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    // Many writers race: half set the title, half add to the cost. A whole-object write would lose some of them.
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = store.clone();
        let sid = sid.clone();
        tasks.push(tokio::spawn(async move {
            store
                .update_session(&sid, None, |s| {
                    if i % 2 == 0 {
                        s.title = "a title".into();
                    } else {
                        s.cost_nano_usd += 5;
                    }
                })
                .await
                .unwrap()
                .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let s = store.get_session(&sid).await.unwrap().unwrap();
    assert_eq!((s.title.as_str(), s.cost_nano_usd), ("a title", 50));
    assert!(
        store
            .update_session("ses_missing", None, |_| {})
            .await
            .unwrap()
            .is_none()
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_fenced_update_needs_the_lease() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let ttl = Duration::from_secs(5);
    let fence = store.acquire_lease(&sid, "a", ttl).await.unwrap().unwrap();
    store
        .update_session(&sid, Some(&fence), |s| s.cost_nano_usd = 1)
        .await
        .unwrap();
    store.release_lease(&sid, &fence).await.unwrap();
    let _newer = store.acquire_lease(&sid, "b", ttl).await.unwrap().unwrap();
    let stale = store
        .update_session(&sid, Some(&fence), |s| s.cost_nano_usd = 2)
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert_eq!(
        store
            .get_session(&sid)
            .await
            .unwrap()
            .unwrap()
            .cost_nano_usd,
        1
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn an_update_from_known_bytes_skips_the_read_and_a_stale_one_still_wins_nothing() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let (_, known) = store.get_session_record(&sid).await.unwrap().unwrap();
    // From the bytes just read: one attempt, the change lands, and the result carries the bytes now stored.
    let (written, bytes) = store
        .update_session_from(&sid, None, Some(known.clone()), |s| s.cost_nano_usd = 7)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(written.cost_nano_usd, 7);
    let (stored, stored_bytes) = store.get_session_record(&sid).await.unwrap().unwrap();
    assert_eq!((stored.cost_nano_usd, &stored_bytes), (7, &bytes));
    // Someone else writes (the title task); an update from the now stale bytes must not undo it: the
    // compare-and-set refuses them, the update reads the record again and applies its change on top.
    store
        .update_session(&sid, None, |s| s.title = "a title".into())
        .await
        .unwrap()
        .unwrap();
    let (written, _) = store
        .update_session_from(&sid, None, Some(bytes), |s| s.cost_nano_usd += 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (written.title.as_str(), written.cost_nano_usd),
        ("a title", 8)
    );
    let stored = store.get_session(&sid).await.unwrap().unwrap();
    assert_eq!(
        (stored.title.as_str(), stored.cost_nano_usd),
        ("a title", 8)
    );
    // A fence that lost the lease is refused even on the known-bytes attempt.
    let ttl = Duration::from_secs(5);
    let fence = store.acquire_lease(&sid, "a", ttl).await.unwrap().unwrap();
    store.release_lease(&sid, &fence).await.unwrap();
    let (_, current) = store.get_session_record(&sid).await.unwrap().unwrap();
    let stale = store
        .update_session_from(&sid, Some(&fence), Some(current), |s| s.cost_nano_usd = 0)
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert!(
        store
            .update_session_from("ses_missing", None, Some(known), |_| {})
            .await
            .unwrap()
            .is_none()
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_listed_rewrite_keeps_the_message_listed_and_is_fenced_and_gated() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let ttl = Duration::from_secs(5);
    let fence = store.acquire_lease(&sid, "a", ttl).await.unwrap().unwrap();
    let mut m = message(&sid, "msg_01", pb::Role::Assistant);
    store.put_message(&m, Some(&fence)).await.unwrap();
    m.finish = "stop".into();
    m.parts = vec![text_part(&sid, "msg_01", "prt_01", "hello")];
    store
        .put_message_listed(&m, Some(&fence), true)
        .await
        .unwrap();
    let (listed, _) = store.list_messages(&sid, None, usize::MAX).await.unwrap();
    assert_eq!(listed.len(), 1, "listed once: {listed:?}");
    assert_eq!(listed[0].finish, "stop");
    assert_eq!(text_of(&listed[0].parts[0]), "hello");
    // The skipped listing skips nothing else: a lost lease and a deleted session still refuse the write.
    store.release_lease(&sid, &fence).await.unwrap();
    let _newer = store.acquire_lease(&sid, "b", ttl).await.unwrap().unwrap();
    m.finish = "length".into();
    let stale = store.put_message_listed(&m, Some(&fence), true).await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert!(store.delete_session(&sid).await.unwrap());
    let gone = store.put_message_listed(&m, None, true).await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
    assert!(keys_under(&store, &prefix).await.is_empty());
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn tenant_spend_adds_up() {
    let (store, prefix) = store().await;
    assert_eq!(store.tenant_spend("acme").await.unwrap(), 0);
    assert_eq!(store.add_tenant_spend("acme", 7).await.unwrap(), 7);
    assert_eq!(store.add_tenant_spend("acme", 5).await.unwrap(), 12);
    assert_eq!(store.tenant_spend("acme").await.unwrap(), 12);
    assert_eq!(store.tenant_spend("other").await.unwrap(), 0);
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_flush_writes_its_batch_and_the_fenced_parts_in_one_script() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let fence = store
        .acquire_lease(&sid, "replica-a", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let m = ids::new("msg");
    store
        .put_message(&message(&sid, &m, pb::Role::Assistant), Some(&fence))
        .await
        .unwrap();
    let (p1, p2) = (ids::new("prt"), ids::new("prt"));
    let id = |ms: u64| crate::events::EventId { ms, seq: 0 };
    let before = store.event_log_commands();
    let flushed = store
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
    assert_eq!(store.event_log_commands() - before, 1, "one round trip");
    assert_eq!(flushed.entry, Some(id(1_000)));
    assert!(!flushed.watched);
    flushed.parts.unwrap();
    // The lease (taken for 30 s) was renewed to the 60 s asked for.
    assert!(flushed.renewed);
    let pttl: i64 = redis::cmd("PTTL")
        .arg(store.keys(&sid).unwrap().lease())
        .query_async(&mut store.conn.clone())
        .await
        .unwrap();
    assert!(pttl > 30_000, "{pttl}");
    let stored = store.get_message(&sid, &m).await.unwrap().unwrap();
    let texts: Vec<&str> = stored.parts.iter().map(text_of).collect();
    assert_eq!(texts, ["hello", "world"]);

    // The watched mark is reported; parts alone write no entry.
    store
        .mark_watched(&sid, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(store.is_watched(&sid).await.unwrap());
    let listed: IdSet<String> = [m.clone()].into_iter().collect();
    let flushed = store
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
        text_of(&store.get_message(&sid, &m).await.unwrap().unwrap().parts[0]),
        "hello again"
    );

    // A part of a message the session does not list is refused (the batch still lands).
    let flushed = store
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
    store.release_lease(&sid, &fence).await.unwrap();
    let fresh = store
        .acquire_lease(&sid, "replica-b", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    store
        .put_part(&text_part(&sid, &m, &p1, "the new owner's"), Some(&fresh))
        .await
        .unwrap();
    let flushed = store
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
        text_of(&store.get_message(&sid, &m).await.unwrap().unwrap().parts[0]),
        "the new owner's"
    );
    // Parts without a fence are a caller bug.
    let err = store
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
