//! Tests against a real Redis (`REDIS_URL`): each works under its own random key prefix (`test_support`).

use crate::ids;
use llm_proto::sessions as pb;
use std::time::Duration;

use super::super::test_support::{
    cleanup, keys_under, message, new_session, store, text_of, text_part,
};
use super::*;

#[tokio::test]
async fn messages_and_parts_come_back_ordered_by_id() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let (m1, m2, m3) = (ids::new("msg"), ids::new("msg"), ids::new("msg"));
    let p: Vec<String> = (0..4).map(|_| ids::new("prt")).collect();

    // Written out of order: m3 before m1, parts newest first. Reads must be sorted by id regardless.
    store
        .messages()
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
    store.messages().put_message(&user, None).await.unwrap();
    store
        .messages()
        .put_message(&message(&sid, &m2, pb::Role::Assistant), None)
        .await
        .unwrap();
    store
        .messages()
        .put_part(&text_part(&sid, &m3, &p[3], "m3 b"), None)
        .await
        .unwrap();
    store
        .messages()
        .put_part(&text_part(&sid, &m3, &p[2], "m3 a"), None)
        .await
        .unwrap();
    // Upsert replaces.
    store
        .messages()
        .put_part(&text_part(&sid, &m3, &p[3], "m3 b v2"), None)
        .await
        .unwrap();

    let (all, next) = store
        .messages()
        .list_messages(&sid, None, 10)
        .await
        .unwrap();
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
    let (everything, next) = store
        .messages()
        .list_messages(&sid, None, usize::MAX)
        .await
        .unwrap();
    assert_eq!(everything, all);
    assert_eq!(next, None);

    // Paging by one: oldest first, cursor = last id, no empty last page.
    let (page, next) = store.messages().list_messages(&sid, None, 1).await.unwrap();
    assert_eq!(page[0].id, m1);
    let (page, next) = store
        .messages()
        .list_messages(&sid, next.as_deref(), 1)
        .await
        .unwrap();
    assert_eq!(page[0].id, m2);
    let (page, next) = store
        .messages()
        .list_messages(&sid, next.as_deref(), 1)
        .await
        .unwrap();
    assert_eq!(page[0].id, m3);
    assert_eq!(next, None);

    let got = store
        .messages()
        .get_message(&sid, &m3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, all[2]);
    assert_eq!(
        store
            .messages()
            .get_message(&sid, "msg_missing")
            .await
            .unwrap(),
        None
    );

    // A part under an unlisted message would escape deletion: refused.
    let err = store
        .messages()
        .put_part(&text_part(&sid, "msg_unknown", &p[0], "x"), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    // A part carried by a message must belong to it.
    let mut wrong = message(&sid, &m2, pb::Role::User);
    wrong.parts = vec![text_part(&sid, &m1, &p[0], "x")];
    let err = store
        .messages()
        .put_message(&wrong, None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");
    // Writes to a missing session are refused.
    let err = store
        .messages()
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
        .messages()
        .put_message(&message(&sid, &m1, pb::Role::User), None)
        .await
        .unwrap();
    store
        .messages()
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
    store.messages().put_parts(&batch, None).await.unwrap();
    store.messages().put_parts(&[], None).await.unwrap();
    let (all, _) = store
        .messages()
        .list_messages(&sid, None, 10)
        .await
        .unwrap();
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
    let err = store.messages().put_parts(&bad, None).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert_eq!(
        store
            .messages()
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
    let err = store.messages().put_parts(&mixed, None).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_listed_rewrite_keeps_the_message_listed_and_is_fenced_and_gated() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let ttl = Duration::from_secs(5);
    let fence = store
        .leases()
        .acquire_lease(&sid, "a", ttl)
        .await
        .unwrap()
        .unwrap();
    let mut m = message(&sid, "msg_01", pb::Role::Assistant);
    store
        .messages()
        .put_message(&m, Some(&fence))
        .await
        .unwrap();
    m.finish = "stop".into();
    m.parts = vec![text_part(&sid, "msg_01", "prt_01", "hello")];
    store
        .messages()
        .put_message_listed(&m, Some(&fence), true)
        .await
        .unwrap();
    let (listed, _) = store
        .messages()
        .list_messages(&sid, None, usize::MAX)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "listed once: {listed:?}");
    assert_eq!(listed[0].finish, "stop");
    assert_eq!(text_of(&listed[0].parts[0]), "hello");
    // The skipped listing skips nothing else: a lost lease and a deleted session still refuse the write.
    store.leases().release_lease(&sid, &fence).await.unwrap();
    let _newer = store
        .leases()
        .acquire_lease(&sid, "b", ttl)
        .await
        .unwrap()
        .unwrap();
    m.finish = "length".into();
    let stale = store
        .messages()
        .put_message_listed(&m, Some(&fence), true)
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert!(store.sessions().delete_session(&sid).await.unwrap());
    let gone = store.messages().put_message_listed(&m, None, true).await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
    assert!(keys_under(&store, &prefix).await.is_empty());
    cleanup(&store, &prefix).await;
}
