//! Health tells the truth about storage: with its Redis killed, the processor's `SessionService` health (what
//! readiness probes ask) turns `NOT_SERVING` once the configured grace has passed, and `SERVING` again when Redis is
//! back; the server's own status (what liveness probes ask) stays `SERVING` throughout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::Harness;
use e2e_tests::processor::{ProcessorSetup, channel, start_processor};
use e2e_tests::procs::RedisServer;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const SESSIONS: &str = "llm.sessions.v1.SessionService";

/// Waits on a `Watch` of `service` until it reports `want`; a bound that means "it never came", not a speed.
async fn until_status(
    watch: &mut tonic::Streaming<tonic_health::pb::HealthCheckResponse>,
    want: ServingStatus,
) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(r) = watch.message().await.unwrap() {
            if r.status == want as i32 {
                return;
            }
        }
        panic!("the Watch ended before {want:?}");
    })
    .await
    .unwrap_or_else(|_| panic!("never {want:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_not_serving_while_redis_is_down_past_the_grace_and_serving_once_back() {
    let mut redis = RedisServer::start().await;
    let gateway = Harness::start().await;
    let p = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: redis.url(),
        server_lines: "store_unreachable_grace_ms = 400".into(),
        ..Default::default()
    })
    .await;
    let mut health = HealthClient::new(channel(p.addr).await);
    let ask = |service: &str| HealthCheckRequest {
        service: service.into(),
    };
    let mut sessions = health.watch(ask(SESSIONS)).await.unwrap().into_inner();
    until_status(&mut sessions, ServingStatus::Serving).await;

    redis.kill().await;
    until_status(&mut sessions, ServingStatus::NotServing).await;
    let checked = health.check(ask(SESSIONS)).await.unwrap().into_inner();
    assert_eq!(checked.status, ServingStatus::NotServing as i32);
    let alive = health.check(ask("")).await.unwrap().into_inner();
    assert_eq!(
        alive.status,
        ServingStatus::Serving as i32,
        "liveness is not readiness"
    );

    redis.restart().await;
    until_status(&mut sessions, ServingStatus::Serving).await;
}
