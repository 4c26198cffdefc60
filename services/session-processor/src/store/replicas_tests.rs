//! Tests against a real Redis (`REDIS_URL`): each works under its own random key prefix (`test_support`).

use std::time::Duration;
use std::time::Instant;

use super::super::test_support::{cleanup, new_session, prompt, queued_texts, store};
use super::*;
use crate::store::Store;
use crate::store::replicas;

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
        .queue()
        .enqueue_prompt(&sid, &prompt(&sid, "zero"))
        .await
        .unwrap();
    let store = store.with_replica_wait(Some(wait));
    let waits_before = wait_calls(&store).await;
    let requests = store.traffic().counts().requests;
    let started = Instant::now();
    store
        .queue()
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
        .queue()
        .enqueue_prompt(&sid, &prompt(&sid, "two"))
        .await
        .unwrap();
    assert_eq!(store.traffic().counts().skipped, 1);
    // After the suspension it waits again, and a node that lost its scripts (a restart, a failover) is given the
    // script and asked again, WAIT included.
    tokio::time::sleep(replicas::SUSPEND).await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    store
        .queue()
        .enqueue_prompt(&sid, &prompt(&sid, "three"))
        .await
        .unwrap();
    assert_eq!(store.traffic().counts().short, 2);
    assert!(wait_calls(&store).await >= waits_before + 3);
    // That probe came back short too: suspended again.
    store
        .queue()
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
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|v| v.split(',').next()?.parse().ok())
        .unwrap_or(0)
}
