#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::test_support::{cleanup, store};
use super::*;

#[tokio::test]
async fn a_run_removes_its_own_mark_and_never_a_successors() {
    let (store, prefix) = store().await;
    let sid = "ses_a*[b]";
    let other = "ses_a";
    store.active().mark_active(sid, "run_1").await.unwrap();
    // The next run of the same session marks itself before the first one has removed its mark.
    store.active().mark_active(sid, "run_2").await.unwrap();
    store
        .active()
        .clear_active(&ActiveMark::of(sid, "run_1"))
        .await
        .unwrap();
    assert!(
        store.active().is_active(sid).await.unwrap(),
        "the successor's mark stays"
    );
    assert!(
        store
            .active()
            .is_marked(&ActiveMark::of(sid, "run_2"))
            .await
            .unwrap()
    );
    assert!(
        !store.active().is_active(other).await.unwrap(),
        "a session whose id the other's starts with (or matches as a pattern) is not marked"
    );
    assert_eq!(
        store.active().active_sessions().await.unwrap(),
        [ActiveMark::of(sid, "run_2")]
    );
    store
        .active()
        .clear_active(&ActiveMark::of(sid, "run_2"))
        .await
        .unwrap();
    assert!(!store.active().is_active(sid).await.unwrap());
    cleanup(&store, &prefix).await;
}

#[test]
fn a_mark_without_a_run_marks_its_session() {
    assert_eq!(
        ActiveMark::parse("ses_1".into()),
        ActiveMark {
            session_id: "ses_1".into(),
            member: "ses_1".into()
        }
    );
    assert_eq!(
        ActiveMark::parse("ses_1 run_9".into()),
        ActiveMark::of("ses_1", "run_9")
    );
}
