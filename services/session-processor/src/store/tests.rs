//! Tests of the store as a whole, against a real Redis (`REDIS_URL`, default `redis://127.0.0.1:6379`); each
//! handle's tests are beside it (`<handle>_tests.rs`).

use std::time::Duration;

use super::test_support::{redis_url, store};
use super::*;

#[tokio::test]
async fn connect_rejects_a_prefix_with_a_hash_tag_and_pings() {
    let err = Store::connect(&redis_url(), "app:{x}:").await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");
    let (store, _) = store().await;
    store.ping().await.unwrap();
}

#[test]
fn stream_ids_and_millis_parse() {
    assert!(is_stream_id("0"));
    assert!(is_stream_id("0-0"));
    assert!(is_stream_id("1712345678901-3"));
    for bad in ["", "$", ">", "1-", "-1", "1-2-3", "a-1", "+"] {
        assert!(!is_stream_id(bad), "{bad:?}");
    }
    assert_eq!(ceil_millis(Duration::from_micros(1)), 1);
    assert_eq!(ceil_millis(Duration::from_micros(1500)), 2);
    assert_eq!(ceil_millis(Duration::ZERO), 1);
}
