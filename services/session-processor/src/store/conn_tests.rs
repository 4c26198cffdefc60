/// The Redis connection a store's request took, as the server numbers it.
async fn client_id(store: &crate::store::Store) -> i64 {
    redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut store.db.conn.clone())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_connection_of_the_thread_serves_that_store_on_that_thread_only() {
    use crate::store::test_support::{redis_url, store};
    use crate::store::{RedisAccess, RedisTarget};
    let (mine, _) = store().await;
    let (other, _) = store().await;
    let shared = client_id(&mine).await;
    let others = client_id(&other).await;
    mine.connect_here(
        &RedisTarget::standalone(redis_url()),
        &RedisAccess::default(),
    )
    .await
    .unwrap();
    let here = client_id(&mine).await;
    assert_ne!(
        here, shared,
        "this thread's requests take its own connection"
    );
    assert_eq!(client_id(&mine.clone()).await, here, "clones share it");
    assert_eq!(
        client_id(&other).await,
        others,
        "another store keeps its connection"
    );
    // Another thread (its own runtime) still takes the shared one, which this runtime drives meanwhile.
    let elsewhere = tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(client_id(&mine))
    })
    .await
    .unwrap();
    assert_eq!(elsewhere, shared);
}
