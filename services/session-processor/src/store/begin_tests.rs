#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::test_support::{cleanup, new_session, redis_url, store};
use super::*;
use crate::ids;
use crate::store::ActiveMark;
use crate::store::Store;

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

fn args(owner: &str, time: bool) -> BeginArgs<'_> {
    BeginArgs {
        owner,
        ttl: Duration::from_secs(30),
        inputs: None,
        run: "run_1",
        time,
        validated: None,
    }
}

#[tokio::test]
async fn a_prompt_begins_in_one_script_and_a_busy_session_is_left_untouched() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let queued = pb::PromptRequest {
        session_id: sid.clone(),
        system: "queued".into(),
        ..Default::default()
    };
    store.queue().enqueue_prompt(&sid, &queued).await.unwrap();
    let first = user(&sid, "one");
    let Begin::Begun(b) = store
        .prompts()
        .begin_prompt(first.clone(), args("rep_a", true))
        .await
        .unwrap()
    else {
        panic!("the lease was free")
    };
    assert_eq!(b.fence.owner, "rep_a");
    assert!(
        store.queue().has_queued_prompts(&sid).await.unwrap(),
        "the queue is left to the loop's step boundary"
    );
    assert!(
        b.redis_ms.is_some_and(|ms| ms > 0),
        "Redis's clock, asked for"
    );
    assert!(!b.watched);
    assert_eq!(
        b.history,
        std::slice::from_ref(&first),
        "the new message, with its parts"
    );
    assert_eq!(
        store
            .messages()
            .prompt_model(&sid)
            .await
            .unwrap()
            .as_deref(),
        Some("openai/gpt-4o")
    );
    assert!(
        store
            .active()
            .active_sessions()
            .await
            .unwrap()
            .contains(&ActiveMark::of(&sid, "run_1"))
    );
    assert_eq!(
        store.leases().lease_holder(&sid).await.unwrap().unwrap().0,
        "rep_a"
    );

    let second = user(&sid, "two");
    assert!(matches!(
        store
            .prompts()
            .begin_prompt(second.clone(), args("rep_b", false))
            .await
            .unwrap(),
        Begin::Busy
    ));
    let (stored, _) = store
        .messages()
        .list_messages(&sid, None, 100)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1, "a busy session gets nothing written");

    assert!(
        store
            .leases()
            .release_lease_and_peek(&sid, &b.fence)
            .await
            .unwrap(),
        "the release sees the queued prompt"
    );
    assert!(store.leases().lease_holder(&sid).await.unwrap().is_none());
    store
        .event_log()
        .mark_watched(&sid, Duration::from_secs(5))
        .await
        .unwrap();
    let Begin::Begun(again) = store
        .prompts()
        .begin_prompt(second.clone(), args("rep_b", false))
        .await
        .unwrap()
    else {
        panic!("released")
    };
    assert!(
        again.fence.token > b.fence.token,
        "fencing tokens only grow"
    );
    assert_eq!(again.redis_ms, None, "the clock only when asked for");
    assert!(again.watched, "the watched mark is reported");
    assert_eq!(
        again.history,
        [first.clone(), second.clone()],
        "the history before the new message is read with it, parts included"
    );
    assert!(matches!(
        store
            .prompts()
            .begin_prompt(user("ses_missing", "x"), args("rep_a", false))
            .await,
        Err(StoreError::NotFound(_))
    ));
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn a_prompt_begins_only_from_the_record_and_prompt_model_redis_holds() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let session = pb::Session {
        id: sid.clone(),
        ..Default::default()
    };
    // What this replica wrote, it knows, without Redis.
    let (known, bytes, model) = store.sessions().known_session_for_prompt(&sid).unwrap();
    assert_eq!(known, session);
    assert_eq!(model, None);
    // Another replica changes the record: what this one knows is stale, and a begin from it writes nothing.
    let other = Store::connect(&redis_url(), &prefix).await.unwrap();
    other
        .sessions()
        .update_session(&sid, None, |s| {
            s.default_model = "openai/gpt-4o-mini".into()
        })
        .await
        .unwrap();
    let first = user(&sid, "one");
    let stale = BeginArgs {
        validated: Some((&bytes, None)),
        ..args("rep_a", false)
    };
    assert!(matches!(
        store
            .prompts()
            .begin_prompt(first.clone(), stale)
            .await
            .unwrap(),
        Begin::Stale
    ));
    assert!(store.leases().lease_holder(&sid).await.unwrap().is_none());
    let (stored, _) = store
        .messages()
        .list_messages(&sid, None, 100)
        .await
        .unwrap();
    assert!(stored.is_empty(), "a stale begin writes nothing");
    assert!(
        store.sessions().known_session_for_prompt(&sid).is_none(),
        "and forgets what it knew"
    );
    // From a fresh read it begins, and remembers the record with the prompt's model.
    let (_, fresh, model) = store
        .sessions()
        .get_session_for_prompt(&sid)
        .await
        .unwrap()
        .unwrap();
    let current = BeginArgs {
        validated: Some((&fresh, model.as_deref())),
        ..args("rep_a", false)
    };
    let Begin::Begun(b) = store
        .prompts()
        .begin_prompt(first.clone(), current)
        .await
        .unwrap()
    else {
        panic!("the record is current and the lease free")
    };
    let (_, remembered, model) = store.sessions().known_session_for_prompt(&sid).unwrap();
    assert_eq!(remembered, fresh);
    assert_eq!(model.as_deref(), Some("openai/gpt-4o"));
    store.leases().release_lease(&sid, &b.fence).await.unwrap();
    // A prompt model stored by another replica makes it stale too.
    let mut elsewhere = user(&sid, "two");
    elsewhere.model = "anthropic/claude".into();
    other
        .messages()
        .put_message(&elsewhere, None)
        .await
        .unwrap();
    let third = user(&sid, "three");
    let stale_model = BeginArgs {
        validated: Some((&remembered, model.as_deref())),
        ..args("rep_a", false)
    };
    assert!(matches!(
        store
            .prompts()
            .begin_prompt(third.clone(), stale_model)
            .await
            .unwrap(),
        Begin::Stale
    ));
    cleanup(&store, &prefix).await;
}

#[tokio::test]
async fn on_one_node_a_prompt_begins_and_marks_its_run_in_one_round_trip() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let before = store.traffic().counts().requests;
    let Begin::Begun(_) = store
        .prompts()
        .begin_prompt(user(&sid, "one"), args("rep_a", false))
        .await
        .unwrap()
    else {
        panic!("the lease was free")
    };
    assert_eq!(
        store.traffic().counts().requests - before,
        1,
        "the begin script and the run's mark in one pipeline"
    );
    assert!(
        store
            .active()
            .active_sessions()
            .await
            .unwrap()
            .contains(&ActiveMark::of(&sid, "run_1")),
        "the run is marked"
    );
    cleanup(&store, &prefix).await;
}
