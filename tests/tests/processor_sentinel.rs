//! Sessions on a Sentinel-managed Redis (a primary, one replica and 3 sentinels, started here from Debian's
//! `redis-server`) served by two processor replicas in `mode = "sentinel"`. Mid-prompt the primary is SIGKILLed and
//! the sentinels promote the replica; the processors find it through the sentinels, without a proxy. Asserts what
//! the Cluster suite asserts (see `e2e_tests::faults::fault_mid_prompt`): every stream ends with a terminal `done`,
//! the prompt is answered with Diagnose healthy, nothing acknowledged and replicated is lost, and every session
//! answers a new prompt afterwards.
//!
//! Passed 10 runs in a row locally (`cargo nextest run -p e2e-tests -E 'test(/^processor_sentinel::/)'`), and again 10
//! in a row on 2026-12-05 with the replica wait option in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::Harness;
use e2e_tests::cluster::{SENTINEL_MASTER, Sentinels};
use e2e_tests::faults::{create, fault_mid_prompt, short_answer, two_replicas};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_primary_killed_mid_prompt_is_replaced_by_the_sentinels_and_every_stream_ends() {
    let mut redis = Sentinels::start().await;
    let gateway = Harness::start().await;
    gateway.openai.set_fallback(short_answer());
    let lines = format!("mode = \"sentinel\"\nsentinel_master = \"{SENTINEL_MASTER}\"");
    let (a, b) = two_replicas(&gateway, &redis.urls(), &lines).await;
    let mut clients = [a.client().await, b.client().await];
    let mut sessions = Vec::new();
    for i in 0..3 {
        sessions.push(create(&mut clients[i % 2]).await);
    }
    fault_mid_prompt(&gateway, &mut clients, &sessions, async {
        let new = redis.kill_primary().await;
        eprintln!("the sentinels promoted :{new}");
    })
    .await;
    // The loop wrote while the primary was down: the kill met the prompt's writes.
    let failed = a.engine.store().write_failures() + b.engine.store().write_failures();
    assert!(failed > 0, "no write failed while the primary was down");
    drop((a, b));
}
