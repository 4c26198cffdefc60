use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::config::{Config, FileConfig};

async fn engine(gateway_url: &str) -> Arc<Engine> {
    let env = [("PROCESSOR_AUTH_TOKENS", "catalog-test-token-0123456789")];
    let config = Config::from_file(FileConfig::default(), std::path::Path::new("."), &env).unwrap();
    let redis = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let store = crate::store::Store::connect(&redis, "test:catalog:")
        .await
        .unwrap();
    let gateway = crate::engine::gateway_client(gateway_url, "").unwrap();
    Engine::new(store, gateway, Arc::new(config))
}

#[tokio::test]
async fn an_unreachable_gateway_accepts_the_model_unchecked() {
    // Nothing listens there: the connection is refused at once.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let e = engine(&format!("http://{addr}")).await;
    check_model(&e, "default_model", "openai/anything")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_gateway_that_never_answers_accepts_the_model_after_the_timeout() {
    // Accepts connections and never speaks HTTP/2.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let e = engine(&format!("http://{addr}")).await;
    let started = Instant::now();
    check_model(&e, "default_model", "openai/anything")
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= CATALOG_TIMEOUT - Duration::from_millis(100),
        "{took:?}"
    );
    assert!(took < CATALOG_TIMEOUT * 5, "{took:?}");
    hold.abort();
}
