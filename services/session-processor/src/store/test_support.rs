//! What the store's Redis tests share: the server to use, a store under a fresh key prefix, and the clean-up of that
//! prefix. Each test works under its own random prefix, so tests run in parallel without seeing each other's keys.

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
        .query_async(&mut store.conn.clone())
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
            .query_async(&mut store.conn.clone())
            .await
            .expect("DEL");
    }
}

/// A new session (a fresh id, nothing else set); its id.
pub(crate) async fn new_session(store: &Store) -> String {
    let id = crate::ids::new("ses");
    store
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
        .queued_prompts(session_id)
        .await
        .expect("read the queue");
    queued
        .iter()
        .map(|q| prompt_text(&q.request).to_string())
        .collect()
}
