//! Tests against a real Redis (`REDIS_URL`): each works under its own random key prefix (`test_support`).

use super::super::test_support::{cleanup, store};

#[tokio::test]
async fn tenant_spend_adds_up() {
    let (store, prefix) = store().await;
    assert_eq!(store.spend().tenant_spend("acme").await.unwrap(), 0);
    assert_eq!(store.spend().add_tenant_spend("acme", 7).await.unwrap(), 7);
    assert_eq!(store.spend().add_tenant_spend("acme", 5).await.unwrap(), 12);
    assert_eq!(store.spend().tenant_spend("acme").await.unwrap(), 12);
    assert_eq!(store.spend().tenant_spend("other").await.unwrap(), 0);
    cleanup(&store, &prefix).await;
}
