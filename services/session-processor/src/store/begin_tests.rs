#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::test_support::{cleanup, store};
use super::*;
use crate::ids;

fn user(session_id: &str, text: &str) -> pb::Message {
    let id = ids::new("msg");
    pb::Message {
        id: id.clone(),
        session_id: session_id.into(),
        role: pb::Role::User as i32,
        model: "openai/gpt-4o".into(),
        parts: vec![pb::Part {
            id: ids::new("prt"),
            message_id: id,
            session_id: session_id.into(),
            kind: Some(pb::part::Kind::Text(pb::TextPart {
                text: text.into(),
                ..Default::default()
            })),
        }],
        ..Default::default()
    }
}

#[tokio::test]
async fn a_prompt_begins_in_one_script_and_a_busy_session_is_left_untouched() {
    let (store, prefix) = store().await;
    let sid = ids::new("ses");
    store
        .create_session(&pb::Session {
            id: sid.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let ttl = Duration::from_secs(30);
    let queued = pb::PromptRequest {
        session_id: sid.clone(),
        system: "queued".into(),
        ..Default::default()
    };
    store.enqueue_prompt(&sid, &queued).await.unwrap();
    let first = user(&sid, "one");
    let Begin::Begun(b) = store
        .begin_prompt(&first, "rep_a", ttl, None)
        .await
        .unwrap()
    else {
        panic!("the lease was free")
    };
    assert_eq!(b.fence.owner, "rep_a");
    assert_eq!(b.queued.len(), 1, "the queue is drained");
    assert_eq!(b.queued[0].system, "queued");
    assert_eq!(
        b.history,
        std::slice::from_ref(&first),
        "the new message, with its parts"
    );
    assert!(!store.has_queued_prompts(&sid).await.unwrap());
    assert_eq!(
        store.prompt_model(&sid).await.unwrap().as_deref(),
        Some("openai/gpt-4o")
    );
    assert!(store.active_sessions().await.unwrap().contains(&sid));
    assert_eq!(store.lease_holder(&sid).await.unwrap().unwrap().0, "rep_a");

    let second = user(&sid, "two");
    assert!(matches!(
        store
            .begin_prompt(&second, "rep_b", ttl, None)
            .await
            .unwrap(),
        Begin::Busy
    ));
    let (stored, _) = store.list_messages(&sid, None, 100).await.unwrap();
    assert_eq!(stored.len(), 1, "a busy session gets nothing written");

    store.enqueue_prompt(&sid, &queued).await.unwrap();
    assert!(
        store.release_lease_and_peek(&sid, &b.fence).await.unwrap(),
        "the release sees the queued prompt"
    );
    assert!(store.lease_holder(&sid).await.unwrap().is_none());
    let Begin::Begun(again) = store
        .begin_prompt(&second, "rep_b", ttl, None)
        .await
        .unwrap()
    else {
        panic!("released")
    };
    assert!(
        again.fence.token > b.fence.token,
        "fencing tokens only grow"
    );
    assert_eq!(
        again
            .history
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        [first.id.as_str(), second.id.as_str()],
        "the history before the new message is read with it"
    );
    assert!(matches!(
        store
            .begin_prompt(&user("ses_missing", "x"), "rep_a", ttl, None)
            .await,
        Err(StoreError::NotFound(_))
    ));
    cleanup(&store, &prefix).await;
}
