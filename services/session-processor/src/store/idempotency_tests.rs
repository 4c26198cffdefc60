//! Tests against a real Redis (`REDIS_URL`): each works under its own random key prefix (`test_support`).

use std::time::Duration;
use std::time::Instant;

use super::super::test_support::{cleanup, new_session, store};

#[tokio::test]
async fn idempotency_key_is_claimed_once() {
    let (store, prefix) = store().await;
    let sid = new_session(&store).await;
    let ttl = Duration::from_secs(60);
    assert_eq!(
        store
            .prompts()
            .claim_idempotency_key(&sid, "key-1", "msg_a", ttl)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .prompts()
            .claim_idempotency_key(&sid, "key-1", "msg_b", ttl)
            .await
            .unwrap(),
        Some("msg_a".to_string())
    );
    assert_eq!(
        store
            .prompts()
            .claim_idempotency_key(&sid, "key-2", "msg_b", ttl)
            .await
            .unwrap(),
        None
    );
    // Any bytes, any length: the key is hashed into the key name.
    let long = "k{}:\u{1F600}".repeat(500);
    assert_eq!(
        store
            .prompts()
            .claim_idempotency_key(&sid, &long, "msg_c", ttl)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .prompts()
            .claim_idempotency_key(&sid, &long, "msg_d", ttl)
            .await
            .unwrap(),
        Some("msg_c".into())
    );

    // Claims expire.
    assert_eq!(
        store
            .prompts()
            .claim_idempotency_key(&sid, "short", "msg_e", Duration::from_millis(50))
            .await
            .unwrap(),
        None
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match store
            .prompts()
            .claim_idempotency_key(&sid, "short", "msg_f", Duration::from_millis(50))
            .await
            .unwrap()
        {
            None => break,
            Some(existing) => assert_eq!(existing, "msg_e"),
        }
        assert!(Instant::now() < deadline, "claim did not expire");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cleanup(&store, &prefix).await;
}
