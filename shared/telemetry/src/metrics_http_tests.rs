#![allow(clippy::unwrap_used)]

use super::*;

async fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

#[tokio::test]
async fn a_scrape_reads_what_the_listener_serves() {
    let mut registry = prometheus_client::registry::Registry::default();
    let counter = prometheus_client::metrics::counter::Counter::<u64>::default();
    registry.register("scrapes_seen", "a counter", counter.clone());
    counter.inc_by(3);
    let (listener, addr) = listener().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(Arc::new(registry), listener, async {
        let _ = stopped.await;
    }));
    let text = scrape(addr).await.unwrap();
    assert!(text.contains("scrapes_seen_total 3"), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    let _ = stop.send(());
    server.await.unwrap();
}

#[tokio::test]
async fn anything_but_an_openmetrics_200_is_an_error() {
    let (listener, addr) = listener().await;
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 256];
        let _ = sock.read(&mut request).await.unwrap();
        sock.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
    });
    let err = scrape(addr).await.unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");
}
