use super::*;
use crate::ids;
use crate::store::Store;
use crate::store::test_support::{cleanup, redis_url, store};

async fn new_session(store: &Store) -> pb::Session {
    let s = pb::Session {
        id: ids::new("ses"),
        agent: "default".into(),
        ..Default::default()
    };
    store.sessions().create_session(&s).await.unwrap();
    s
}

fn message(s: &pb::Session) -> pb::Message {
    pb::Message {
        id: ids::new("msg"),
        session_id: s.id.clone(),
        role: pb::Role::User as i32,
        ..Default::default()
    }
}

/// The kind of the session's live status.
async fn live_kind(store: &Store, session_id: &str) -> pb::session_status::Kind {
    store
        .statuses()
        .live_status(session_id)
        .await
        .unwrap()
        .kind()
}

/// Takes the session's loop lease for `owner`; it must be free.
async fn lease(store: &Store, session_id: &str, owner: &str) -> Fence {
    store
        .leases()
        .acquire_lease(session_id, owner, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the lease is free")
}

fn retry(attempt: u32, message: &str) -> pb::SessionStatus {
    pb::SessionStatus {
        kind: pb::session_status::Kind::Retry as i32,
        attempt,
        next_attempt_at: Some(prost_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 0,
        }),
        message: message.into(),
    }
}

#[test]
fn credentials_are_removed_from_failure_messages() {
    assert_eq!(
        redact("cannot connect to redis://:s3cret@redis.internal:6379/0: refused"),
        "cannot connect to redis://***@redis.internal:6379/0: refused"
    );
    assert_eq!(
        redact("redis://user:pw@h and https://a:b@c/x"),
        "redis://***@h and https://***@c/x"
    );
    assert_eq!(redact("broken pipe // no url"), "broken pipe // no url");
    let long = "x".repeat(2 * MAX_MESSAGE);
    assert_eq!(redact(&long).chars().count(), MAX_MESSAGE + 1);
}

#[test]
fn tallies_merge_counts_and_keep_the_newest_failure() {
    let t = Tallies::default();
    assert!(!t.has("a"));
    t.record("a", 10, "first");
    t.record("a", 30, "third");
    t.record("a", 20, "second");
    t.record("b", 5, "other");
    assert!(t.has("a"));
    assert_eq!(
        t.peek("a"),
        WriteFailures {
            count: 3,
            last_at_ms: 30,
            last_message: "third".into()
        }
    );
    assert_eq!(t.take("a").map(|w| w.count), Some(3));
    assert!(!t.has("a") && t.has("b"));
    let _ = t.take("b");
    assert_eq!(t.pending.load(Ordering::Relaxed), 0);
}

#[test]
fn the_live_status_believes_a_retry_status_only_under_the_lease_that_stored_it() {
    let bytes = retry(2, "overloaded").encode_to_vec();
    let idle = live(None, Some("rep:1"), Some(&bytes));
    assert_eq!(idle.kind(), pb::session_status::Kind::Idle);
    let retrying = live(Some("rep:1"), Some("rep:1"), Some(&bytes));
    assert_eq!(retrying, retry(2, "overloaded"));
    let successor = live(Some("rep:2"), Some("rep:1"), Some(&bytes));
    assert_eq!(successor.kind(), pb::session_status::Kind::Busy);
    assert_eq!(successor.attempt, 0);
    let busy = live(Some("rep:1"), None, None);
    assert_eq!(busy.kind(), pb::session_status::Kind::Busy);
}

#[tokio::test]
async fn a_retry_status_is_reported_while_its_lease_holds_and_cleared_by_it_only() {
    let (store, prefix) = store().await;
    let s = new_session(&store).await;
    assert_eq!(
        live_kind(&store, &s.id).await,
        pb::session_status::Kind::Idle
    );
    let fence = lease(&store, &s.id, "rep").await;
    assert_eq!(
        live_kind(&store, &s.id).await,
        pb::session_status::Kind::Busy
    );
    store
        .statuses()
        .set_retry_status(
            &s.id,
            &retry(1, "rate limited"),
            &fence,
            Duration::from_secs(1),
        )
        .await
        .unwrap();
    assert_eq!(
        store.statuses().live_status(&s.id).await.unwrap(),
        retry(1, "rate limited")
    );
    let listed = store
        .statuses()
        .live_statuses(&[&s.id, "ses_missing"])
        .await
        .unwrap();
    assert_eq!(listed[0], retry(1, "rate limited"));
    assert_eq!(listed[1].kind(), pb::session_status::Kind::Idle);

    // Another lease's clear leaves it; its own clears it.
    let stale = Fence {
        owner: "rep".into(),
        token: fence.token + 7,
    };
    store
        .statuses()
        .clear_retry_status(&s.id, &stale)
        .await
        .unwrap();
    assert_eq!(
        store.statuses().live_status(&s.id).await.unwrap().attempt,
        1
    );
    store
        .statuses()
        .clear_retry_status(&s.id, &fence)
        .await
        .unwrap();
    assert_eq!(
        live_kind(&store, &s.id).await,
        pb::session_status::Kind::Busy
    );

    // A stale fence cannot store one, and a status left by a loop that lost its lease is not believed.
    assert!(matches!(
        store
            .statuses()
            .set_retry_status(&s.id, &retry(1, "x"), &stale, Duration::from_secs(1))
            .await,
        Err(StoreError::Fenced { .. })
    ));
    store
        .statuses()
        .set_retry_status(
            &s.id,
            &retry(3, "left behind"),
            &fence,
            Duration::from_secs(1),
        )
        .await
        .unwrap();
    store.leases().release_lease(&s.id, &fence).await.unwrap();
    assert_eq!(
        live_kind(&store, &s.id).await,
        pb::session_status::Kind::Idle
    );
    let next = lease(&store, &s.id, "rep2").await;
    assert_eq!(
        live_kind(&store, &s.id).await,
        pb::session_status::Kind::Busy
    );
    store.leases().release_lease(&s.id, &next).await.unwrap();
    assert!(store.sessions().delete_session(&s.id).await.unwrap());
    assert!(
        !store.active().is_active(&s.id).await.unwrap(),
        "never marked active"
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn write_failures_are_tallied_per_session_and_flushed_once_writes_succeed() {
    let (store, prefix) = store().await;
    let s = new_session(&store).await;
    let other = new_session(&store).await;
    // A real Redis error: the messages index is made a string, so the message script's ZADD fails (WRONGTYPE).
    let keys = store.db.keys(&s.id).unwrap();
    let _: () = redis::cmd("SET")
        .arg(keys.messages())
        .arg("not a sorted set")
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    for _ in 0..2 {
        let err = store
            .messages()
            .put_message(&message(&s), None)
            .await
            .unwrap_err();
        assert!(err.is_transport(), "{err}");
    }
    assert_eq!(store.write_failures(), 2);
    let seen = store
        .statuses()
        .session_write_failures(&s.id)
        .await
        .unwrap();
    assert_eq!(seen.count, 2);
    assert!(
        seen.last_message.contains("WRONGTYPE"),
        "{}",
        seen.last_message
    );
    assert!(seen.last_at_ms > 0);
    assert_eq!(
        store
            .statuses()
            .session_write_failures(&other.id)
            .await
            .unwrap()
            .count,
        0
    );

    // Another replica sees nothing until a write of the session succeeds and flushes the tally.
    let replica = Store::connect(&redis_url(), &prefix).await.unwrap();
    assert_eq!(
        replica
            .statuses()
            .session_write_failures(&s.id)
            .await
            .unwrap()
            .count,
        0
    );
    let _: () = redis::cmd("DEL")
        .arg(keys.messages())
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    store
        .messages()
        .put_message(&message(&s), None)
        .await
        .unwrap();
    assert!(!store.db.tallies.has(&s.id));
    let flushed = replica
        .statuses()
        .session_write_failures(&s.id)
        .await
        .unwrap();
    assert_eq!(flushed, seen, "flushed as recorded");
    assert_eq!(
        store
            .statuses()
            .session_write_failures(&s.id)
            .await
            .unwrap(),
        seen,
        "not counted twice"
    );

    assert!(store.sessions().delete_session(&s.id).await.unwrap());
    assert!(store.sessions().delete_session(&other.id).await.unwrap());
    cleanup(&store, &prefix).await;
}
