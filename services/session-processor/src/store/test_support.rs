//! What the store's Redis tests share: the server to use, a store under a fresh key prefix, and the clean-up of that
//! prefix. Each test works under its own random prefix, so tests run in parallel without seeing each other's keys.

use std::time::{Duration, Instant};

use llm_proto::sessions as pb;

use super::Store;

/// Redis for tests: `REDIS_URL`, or the loopback default.
pub(crate) fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_string())
}

/// A store under a fresh prefix, and that prefix.
pub(crate) async fn store() -> (Store, String) {
    let prefix = format!("test:{:016x}:", rand::random::<u64>());
    let store = Store::connect(&redis_url(), &prefix)
        .await
        .expect("a Redis server must answer at REDIS_URL");
    (store, prefix)
}

/// Every key under `prefix`, sorted. KEYS is fine here: a test Redis holds a handful of keys.
pub(crate) async fn keys_under(store: &Store, prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut store.db.conn.clone())
        .await
        .expect("KEYS");
    keys.sort();
    keys
}

/// Removes every key under `prefix` (the end of a test).
pub(crate) async fn cleanup(store: &Store, prefix: &str) {
    let keys = keys_under(store, prefix).await;
    if !keys.is_empty() {
        let _: i64 = redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut store.db.conn.clone())
            .await
            .expect("DEL");
    }
}

/// A new session (a fresh id, nothing else set); its id.
pub(crate) async fn new_session(store: &Store) -> String {
    let id = crate::ids::new("ses");
    store
        .sessions()
        .create_session(&llm_proto::sessions::Session {
            id: id.clone(),
            ..Default::default()
        })
        .await
        .expect("create the session");
    id
}

/// A new session whose lease `owner` holds (for 30 s); its id and the lease.
pub(crate) async fn leased_session(store: &Store, owner: &str) -> (String, super::Fence) {
    let id = new_session(store).await;
    let fence = store
        .leases()
        .acquire_lease(&id, owner, std::time::Duration::from_secs(30))
        .await
        .expect("acquire")
        .expect("the lease is free");
    (id, fence)
}

/// A prompt of one text part.
pub(crate) fn prompt(session_id: &str, text: &str) -> llm_proto::sessions::PromptRequest {
    use llm_proto::sessions as pb;
    pb::PromptRequest {
        session_id: session_id.to_string(),
        parts: vec![pb::PromptPart {
            kind: Some(pb::prompt_part::Kind::Text(text.to_string())),
        }],
        ..Default::default()
    }
}

/// The text of a prompt made by [`prompt`].
pub(crate) fn prompt_text(p: &llm_proto::sessions::PromptRequest) -> &str {
    match p.parts.first().and_then(|p| p.kind.as_ref()) {
        Some(llm_proto::sessions::prompt_part::Kind::Text(t)) => t,
        other => panic!("not a text prompt: {other:?}"),
    }
}

/// The texts of the prompts queued in the session, oldest first (prompts made by [`prompt`]).
pub(crate) async fn queued_texts(store: &Store, session_id: &str) -> Vec<String> {
    let queued = store
        .queue()
        .queued_prompts(session_id)
        .await
        .expect("read the queue");
    queued
        .iter()
        .map(|q| prompt_text(&q.request).to_string())
        .collect()
}

pub(crate) fn ts(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms / 1000,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

pub(crate) fn session_at(id: &str, created_ms: i64) -> pb::Session {
    pb::Session {
        id: id.to_string(),
        agent: "default".into(),
        default_model: "fake/model".into(),
        created_at: Some(ts(created_ms)),
        updated_at: Some(ts(created_ms)),
        ..Default::default()
    }
}

pub(crate) fn message(session_id: &str, id: &str, role: pb::Role) -> pb::Message {
    pb::Message {
        id: id.to_string(),
        session_id: session_id.to_string(),
        role: role as i32,
        model: "fake/model".into(),
        ..Default::default()
    }
}

pub(crate) fn text_part(session_id: &str, message_id: &str, id: &str, text: &str) -> pb::Part {
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

pub(crate) fn text_of(p: &pb::Part) -> &str {
    match &p.kind {
        Some(pb::part::Kind::Text(t)) => &t.text,
        other => panic!("not a text part: {other:?}"),
    }
}

pub(crate) fn delta(text: &str) -> pb::session_event::Event {
    pb::session_event::Event::PartDelta(pb::PartDelta {
        part_id: "prt_x".into(),
        message_id: "msg_x".into(),
        delta: text.to_string(),
    })
}

pub(crate) fn delta_text(e: &pb::SessionEvent) -> &str {
    match &e.event {
        Some(pb::session_event::Event::PartDelta(d)) => &d.delta,
        other => panic!("not a delta: {other:?}"),
    }
}

/// Polls `lease_holder` until nobody holds the lease, for at most 2 s: waiting on the explicit signal that the
/// lease expired rather than sleeping for the TTL and hoping.
pub(crate) async fn until_lease_free(store: &Store, session_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while store
        .leases()
        .lease_holder(session_id)
        .await
        .unwrap()
        .is_some()
    {
        assert!(
            Instant::now() < deadline,
            "lease of {session_id} did not expire"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
