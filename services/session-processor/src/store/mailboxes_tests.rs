//! Tests against a real Redis (`REDIS_URL`): each works under its own random key prefix (`test_support`).

use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::super::test_support::{cleanup, new_session, store};
use super::*;

#[tokio::test]
async fn tool_result_mailbox_is_durable() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    // Only asked calls can be answered: an answer to another is refused and stores nothing.
    let err = store
        .mailboxes()
        .submit_tool_result(&sid, "call_1", "42", false)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotAwaited("call_id")), "{err}");
    assert_eq!(
        store
            .mailboxes()
            .wait_tool_result(&sid, "call_1", Duration::ZERO)
            .await
            .unwrap(),
        None
    );
    for call in ["call_1", "call_2", "call_3"] {
        store
            .mailboxes()
            .expect_answer(&sid, Asked::ToolResult(call))
            .await
            .unwrap();
    }
    // A permission request of the same id is another question.
    let err = store
        .mailboxes()
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
                .mailboxes()
                .wait_tool_result(&sid, "call_1", Duration::from_secs(20))
                .await
        })
    };
    started_rx.await.unwrap();
    store
        .mailboxes()
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
        .mailboxes()
        .submit_tool_result(&sid, "call_2", "boom", true)
        .await
        .unwrap();
    let t = Instant::now();
    let got = store
        .mailboxes()
        .wait_tool_result(&sid, "call_2", Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(got, Some(("boom".to_string(), true)));
    assert!(t.elapsed() < Duration::from_secs(5));

    // Durable: a second waiter (a successor replica after a crash) still gets the answer; the first answer wins.
    store
        .mailboxes()
        .submit_tool_result(&sid, "call_1", "retry with another answer", true)
        .await
        .unwrap();
    assert_eq!(
        store
            .mailboxes()
            .wait_tool_result(&sid, "call_1", Duration::ZERO)
            .await
            .unwrap(),
        Some(("42".to_string(), false))
    );

    // Nobody answers: None after the timeout.
    let t = Instant::now();
    assert_eq!(
        store
            .mailboxes()
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
            .mailboxes()
            .wait_tool_result(&sid, "call_3", Duration::ZERO)
            .await
            .unwrap(),
        None
    );

    let err = store
        .mailboxes()
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
            .mailboxes()
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
                .mailboxes()
                .wait_permission(&sid, "per_1", Duration::from_secs(20))
                .await
        })
    };
    started_rx.await.unwrap();
    store
        .mailboxes()
        .reply_permission(&sid, "per_1", true)
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got, Some(true));

    store
        .mailboxes()
        .reply_permission(&sid, "per_2", false)
        .await
        .unwrap();
    assert_eq!(
        store
            .mailboxes()
            .wait_permission(&sid, "per_2", Duration::from_secs(20))
            .await
            .unwrap(),
        Some(false)
    );
    // First reply wins; the record outlives the first waiter.
    store
        .mailboxes()
        .reply_permission(&sid, "per_2", true)
        .await
        .unwrap();
    assert_eq!(
        store
            .mailboxes()
            .wait_permission(&sid, "per_2", Duration::from_secs(20))
            .await
            .unwrap(),
        Some(false)
    );

    assert_eq!(
        store
            .mailboxes()
            .wait_permission(&sid, "per_3", Duration::from_millis(100))
            .await
            .unwrap(),
        None
    );
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn the_permission_request_a_loop_waits_on_is_kept_until_cleared() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let mailboxes = store.mailboxes();
    assert_eq!(mailboxes.asking(&sid).await.unwrap(), None);
    let asked = pb::PermissionAsked {
        permission_id: "per_1".into(),
        tool: "bash".into(),
        input_json: "{}".into(),
        reason: "rule".into(),
        deadline: None,
    };
    mailboxes
        .set_asking(&sid, &asked, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(mailboxes.asking(&sid).await.unwrap(), Some(asked));
    mailboxes.clear_asking(&sid).await.unwrap();
    assert_eq!(mailboxes.asking(&sid).await.unwrap(), None);
    cleanup(&store, &prefix).await;
}
