//! Tests against a real Redis (`REDIS_URL`): each works under its own random key prefix (`test_support`).

use crate::ids;
use crate::maps::IdSet;
use llm_proto::sessions as pb;
use std::time::Duration;

use super::super::test_support::{
    cleanup, delta, keys_under, message, new_session, prompt, store, text_part,
};
use super::*;
use crate::store::Asked;
use crate::store::FlushWrites;

#[tokio::test]
async fn delete_session_removes_every_key() {
    let (store, prefix) = store().await;
    let keep = new_session(&store).await;
    let keep_keys = keys_under(&store, &prefix).await;
    let sid = new_session(&store).await;
    let m = ids::new("msg");
    let mut user = message(&sid, &m, pb::Role::User);
    user.parts = vec![text_part(&sid, &m, &ids::new("prt"), "hi")];
    store.messages().put_message(&user, None).await.unwrap();
    let m2 = ids::new("msg");
    store
        .messages()
        .put_message(&message(&sid, &m2, pb::Role::Assistant), None)
        .await
        .unwrap();
    store
        .messages()
        .put_part(&text_part(&sid, &m2, &ids::new("prt"), "hello"), None)
        .await
        .unwrap();
    store.event_log().publish(&sid, delta("x")).await.unwrap();
    let fence = store
        .leases()
        .acquire_lease(&sid, "replica-a", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    store
        .queue()
        .enqueue_prompt(&sid, &prompt(&sid, "later"))
        .await
        .unwrap();
    // Answers nobody waited for leave doorbells behind; answered ones are cleaned by the waiter.
    for asked in [
        Asked::ToolResult("call_unwaited"),
        Asked::Permission("per_unwaited"),
        Asked::ToolResult("call_waited"),
    ] {
        store.mailboxes().expect_answer(&sid, asked).await.unwrap();
    }
    store
        .mailboxes()
        .submit_tool_result(&sid, "call_unwaited", "out", false)
        .await
        .unwrap();
    store
        .mailboxes()
        .reply_permission(&sid, "per_unwaited", true)
        .await
        .unwrap();
    store
        .mailboxes()
        .submit_tool_result(&sid, "call_waited", "out", false)
        .await
        .unwrap();
    store
        .mailboxes()
        .wait_tool_result(&sid, "call_waited", Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    store
        .prompts()
        .claim_idempotency_key(&sid, "idem", &m, Duration::from_secs(60))
        .await
        .unwrap();
    store
        .event_log()
        .mark_watched(&sid, Duration::from_secs(60))
        .await
        .unwrap();
    let populated = keys_under(&store, &prefix).await;
    assert!(populated.len() > keep_keys.len() + 10, "{populated:#?}");

    assert!(store.sessions().delete_session(&sid).await.unwrap());
    assert_eq!(keys_under(&store, &prefix).await, keep_keys);
    // Nothing written after the delete resurrects keys.
    let err = store
        .messages()
        .put_message(&message(&sid, &m, pb::Role::User), Some(&fence))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert!(
        store
            .event_log()
            .publish(&sid, delta("late"))
            .await
            .is_err()
    );
    assert!(
        store
            .mailboxes()
            .submit_tool_result(&sid, "call_late", "x", false)
            .await
            .is_err()
    );
    assert!(
        !store
            .leases()
            .renew_lease(&sid, &fence, Duration::from_secs(30))
            .await
            .unwrap()
    );
    // The event channel's flush with the (deleted) lease's fence: the lease is gone, so `:session` decides.
    let err = store
        .event_log()
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

    assert!(store.sessions().delete_session(&keep).await.unwrap());
    assert_eq!(keys_under(&store, &prefix).await, Vec::<String>::new());
    cleanup(&store, &prefix).await;
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
                .sessions()
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
    let s = store.sessions().get_session(&sid).await.unwrap().unwrap();
    assert_eq!((s.title.as_str(), s.cost_nano_usd), ("a title", 50));
    assert!(
        store
            .sessions()
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
    let fence = store
        .leases()
        .acquire_lease(&sid, "a", ttl)
        .await
        .unwrap()
        .unwrap();
    store
        .sessions()
        .update_session(&sid, Some(&fence), |s| s.cost_nano_usd = 1)
        .await
        .unwrap();
    store.leases().release_lease(&sid, &fence).await.unwrap();
    let _newer = store
        .leases()
        .acquire_lease(&sid, "b", ttl)
        .await
        .unwrap()
        .unwrap();
    let stale = store
        .sessions()
        .update_session(&sid, Some(&fence), |s| s.cost_nano_usd = 2)
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert_eq!(
        store
            .sessions()
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
    let (_, known) = store
        .sessions()
        .get_session_record(&sid)
        .await
        .unwrap()
        .unwrap();
    // From the bytes just read: one attempt, the change lands, and the result carries the bytes now stored.
    let (written, bytes) = store
        .sessions()
        .update_session_from(&sid, None, Some(known.clone()), |s| s.cost_nano_usd = 7)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(written.cost_nano_usd, 7);
    let (stored, stored_bytes) = store
        .sessions()
        .get_session_record(&sid)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((stored.cost_nano_usd, &stored_bytes), (7, &bytes));
    // Someone else writes (the title task); an update from the now stale bytes must not undo it: the
    // compare-and-set refuses them, the update reads the record again and applies its change on top.
    store
        .sessions()
        .update_session(&sid, None, |s| s.title = "a title".into())
        .await
        .unwrap()
        .unwrap();
    let (written, _) = store
        .sessions()
        .update_session_from(&sid, None, Some(bytes), |s| s.cost_nano_usd += 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (written.title.as_str(), written.cost_nano_usd),
        ("a title", 8)
    );
    let stored = store.sessions().get_session(&sid).await.unwrap().unwrap();
    assert_eq!(
        (stored.title.as_str(), stored.cost_nano_usd),
        ("a title", 8)
    );
    // A fence that lost the lease is refused even on the known-bytes attempt.
    let ttl = Duration::from_secs(5);
    let fence = store
        .leases()
        .acquire_lease(&sid, "a", ttl)
        .await
        .unwrap()
        .unwrap();
    store.leases().release_lease(&sid, &fence).await.unwrap();
    let (_, current) = store
        .sessions()
        .get_session_record(&sid)
        .await
        .unwrap()
        .unwrap();
    let stale = store
        .sessions()
        .update_session_from(&sid, Some(&fence), Some(current), |s| s.cost_nano_usd = 0)
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert!(
        store
            .sessions()
            .update_session_from("ses_missing", None, Some(known), |_| {})
            .await
            .unwrap()
            .is_none()
    );
    cleanup(&store, &prefix).await;
}
