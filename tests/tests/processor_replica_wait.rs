//! `[redis] wait_replicas` (docs/operations.md, "Redis Cluster"): on a Redis Cluster of 3 primaries and 3 replicas
//! (started here from Debian's `redis-server`), a processor that waits for one replica after each acknowledged write
//! answers prompts on every shard, and Redis shows the `WAIT`s where they belong: on the primaries that ran the
//! scripts they follow, never failing and never short. Also `--check`'s reading of the keys.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bench::redisinfo::CommandStats;
use e2e_tests::Harness;
use e2e_tests::cluster::RedisCluster;
use e2e_tests::faults::{answer, short_answer, spread};
use e2e_tests::processor::{ProcessorSetup, start_processor};

/// `INFO commandstats` of every node, by port.
async fn command_stats(cluster: &RedisCluster) -> Vec<(u16, CommandStats)> {
    let mut out = Vec::new();
    for node in &cluster.nodes {
        let info = node.cli(&["INFO", "commandstats"]).await.expect("INFO");
        out.push((node.port, CommandStats::parse(&info)));
    }
    out
}

/// `WAIT` calls per node since `before`.
async fn waits_since(cluster: &RedisCluster, before: &[(u16, CommandStats)]) -> Vec<(u16, u64)> {
    command_stats(cluster)
        .await
        .into_iter()
        .zip(before)
        .map(|((port, after), (_, was))| {
            let ran = after.since(was);
            (port, ran.0.get("wait").copied().unwrap_or(0))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_replicas_prompts_complete_and_each_primary_waits_for_its_replica() {
    let cluster = RedisCluster::start().await;
    let before = command_stats(&cluster).await;
    let gateway = Harness::start().await;
    gateway.openai.set_fallback(short_answer());
    let processor = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: cluster.seeds(),
        redis_lines: "mode = \"cluster\"\nwait_replicas = 1\nwait_timeout_ms = 1000".into(),
        ..Default::default()
    })
    .await;
    let prefix = processor.engine.config().redis_prefix.clone();
    let mut clients = [processor.client().await];
    let sessions = spread(&cluster, &mut clients, &prefix).await;
    let mut owners = Vec::new();
    for (_, slot) in &sessions {
        owners.push(cluster.owner(*slot).await.port);
    }
    // First only the sessions of one primary: their WAITs must all land there, with the scripts they follow (a
    // WAIT routed on its own would go to any primary).
    let first = owners[0];
    let mut prompted = 0;
    for ((id, _), owner) in sessions.iter().zip(&owners) {
        if *owner == first {
            answer(&mut clients[0], id, "hello").await;
            prompted += 1;
        }
    }
    let waits = waits_since(&cluster, &before).await;
    for (port, n) in &waits {
        let expected = if *port == first { 2 * prompted } else { 0 };
        assert!(
            *n >= expected && (*port == first || *n == 0),
            "WAITs by node after {prompted} prompts of sessions on :{first}: {waits:?}"
        );
    }
    // Then every other session, on the other primaries.
    for ((id, _), owner) in sessions.iter().zip(&owners) {
        if *owner != first {
            answer(&mut clients[0], id, "hello").await;
        }
    }
    let counts = processor.engine.store().traffic().counts();
    assert_eq!(
        (counts.short, counts.skipped),
        (0, 0),
        "every replica acknowledged in time"
    );
    // Each prompt's first write and at least its last flush waited.
    assert!(
        counts.acknowledged >= 2 * sessions.len() as u64,
        "{counts:?} for {} prompts",
        sessions.len()
    );
    let primaries: Vec<u16> = cluster.primaries().await.iter().map(|n| n.port).collect();
    let waits = waits_since(&cluster, &before).await;
    for (port, n) in &waits {
        assert_eq!(
            *n > 0,
            primaries.contains(port),
            "WAITs on every primary, none on a replica: {waits:?}"
        );
    }
    // One WAIT per acknowledged write; a pipeline sent again after NOSCRIPT (a primary that had not seen the begin
    // or flush script yet) runs its WAIT twice: at most 2 scripts × 3 primaries more.
    let total: u64 = waits.iter().map(|(_, n)| n).sum();
    assert!(
        (counts.acknowledged..=counts.acknowledged + 6).contains(&total),
        "{total} WAITs in Redis for {counts:?}"
    );
    drop(processor);
}

#[test]
fn check_reads_and_validates_the_wait_keys() {
    let dir = tempfile::tempdir().unwrap();
    let check = |redis_lines: &str| {
        let path = dir.path().join("processor.toml");
        std::fs::write(
            &path,
            format!(
                "[server]\nauth_tokens = [\"check-token-0123456789abcdef\"]\n[redis]\nmode = \"cluster\"\n\
                 url = \"redis://127.0.0.1:7000,redis://127.0.0.1:7001\"\n{redis_lines}\n"
            ),
        )
        .unwrap();
        session_processor::app::check(Some(&path)).map_err(|e| e.to_string())
    };
    let summary = check("wait_replicas = 1\nwait_timeout_ms = 50").unwrap();
    assert!(
        summary.ends_with("Redis cluster, WAIT for 1 replica (50 ms)"),
        "{summary}"
    );
    assert!(check("").unwrap().ends_with("Redis cluster"));
    let e = check("wait_replicas = 1\nwait_timeout_ms = 0").unwrap_err();
    assert!(e.contains("redis.wait_timeout_ms"), "{e}");
    let e = check("wait_replicas = 17").unwrap_err();
    assert!(e.contains("redis.wait_replicas"), "{e}");
}
