#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use super::super::test_support::{cleanup, leased_session, store};
use super::*;

/// The run's end, as the event channel writes it: the batch up to `done`, releasing the lease.
fn the_end(listed: &HashSet<String>) -> FlushWrites<'_> {
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
    let listed = HashSet::new();
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
