//! The session-processor's gateway client with `gateway.balance = "dns"`: calls are spread over every gateway
//! replica it resolves, over real sockets, instead of following one HTTP/2 connection.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::*;
use fake_provider::Reply;
use llm_proto::gateway as pb;
use session_processor::engine::{gateway_client, gateway_client_balanced};
use session_processor::gateway_pool::Balance;

async fn generate_n(mut client: session_processor::engine::GatewayClient, n: usize) {
    for i in 0..n {
        let response = client
            .generate(pb::GenerateRequest {
                generation: Some(generation("openai/gpt-4o", &format!("call {i}"))),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!response.output.is_empty(), "call {i} answered");
    }
}

/// How many of the calls each replica answered, asserting they add up to `total`.
fn answered(a: &Harness, b: &Harness, total: usize) -> (usize, usize) {
    let (na, nb) = (a.openai.requests().len(), b.openai.requests().len());
    assert_eq!(na + nb, total);
    (na, nb)
}

async fn two_replicas() -> (Harness, Harness) {
    let a = Harness::start().await;
    let b = Harness::start().await;
    for h in [&a, &b] {
        h.openai
            .set_fallback(Reply::fixture("openai_chat/text.sse"));
    }
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_balancing_spreads_calls_over_every_replica() {
    let (a, b) = two_replicas().await;
    let urls = format!("http://{},http://{}", a.addr, b.addr);
    let client = gateway_client_balanced(
        &urls,
        TOKEN,
        Balance::Dns {
            interval: Duration::from_millis(200),
        },
        None,
    )
    .unwrap();
    generate_n(client, 40).await;
    let (na, nb) = answered(&a, &b, 40);
    // Power of two choices over two idle replicas picks each with probability 1/2: 40 calls all on one replica
    // would happen with probability 2^-39.
    assert!(
        na > 0 && nb > 0,
        "calls spread over both replicas: {na} / {nb}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_sends_every_call_to_one_replica() {
    // The default the balancing mode exists for: a single URL, a single connection, a single replica.
    let (a, b) = two_replicas().await;
    let client = gateway_client(&format!("http://{}", a.addr), TOKEN).unwrap();
    generate_n(client, 10).await;
    assert_eq!(a.openai.requests().len(), 10);
    assert_eq!(b.openai.requests().len(), 0);
}

/// A TCP proxy that sends each new connection to the next of `backends` in turn, as a Kubernetes Service balances
/// connections (not calls) over its pods. Its address, and how many connections it forwarded.
async fn round_robin_proxy(
    backends: Vec<std::net::SocketAddr>,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let backend = backends[count.fetch_add(1, Ordering::SeqCst) % backends.len()];
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (addr, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_connections_behind_a_connection_balancer_reach_every_replica() {
    let (a, b) = two_replicas().await;
    let (proxy, accepted) = round_robin_proxy(vec![a.addr, b.addr]).await;
    let client = gateway_client_balanced(
        &format!("http://{proxy}"),
        TOKEN,
        Balance::Connection { connections: 4 },
        None,
    )
    .unwrap();
    generate_n(client, 40).await;
    let (na, nb) = answered(&a, &b, 40);
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        4,
        "four connections, kept for every call"
    );
    // Each call goes to the less loaded of two connections picked at random, two on each replica: 40 calls all on
    // one replica's two would happen with probability about 2^-40.
    assert!(
        na > 0 && nb > 0,
        "calls spread over both replicas: {na} / {nb}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_behind_a_connection_balancer_reaches_one_replica() {
    let (a, b) = two_replicas().await;
    let (proxy, accepted) = round_robin_proxy(vec![a.addr, b.addr]).await;
    let client = gateway_client(&format!("http://{proxy}"), TOKEN).unwrap();
    generate_n(client, 10).await;
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    let (na, nb) = answered(&a, &b, 10);
    assert!(na == 0 || nb == 0, "one replica answered all: {na} / {nb}");
}
