//! Sessions on a Redis Cluster (3 primaries, 3 replicas, started here from Debian's `redis-server`) served by two
//! processor replicas, with sessions on every shard and prompts through the real gateway and a fake provider. Mid
//! prompt, (a) the primary serving the busy session is killed and its replica promoted, or (b) the busy session's
//! slot is migrated to another primary while the loop writes to it. Each test asserts: the Prompt stream, a local
//! Subscribe and a Subscribe on the other replica end with a terminal `done`; the prompt is answered and Diagnose is
//! healthy; every other session's messages, read before the fault, are unchanged after it (nothing acknowledged
//! and replicated is lost); and every session answers a new prompt afterwards.
//!
//! What a killed primary can lose: Redis replicates asynchronously, so writes the primary acknowledged in the last
//! moments before it died (the replication lag, on loopback well under a millisecond) may be missing on the
//! promoted replica; docs/operations.md ("Redis Cluster") explains how `min-replicas-to-write` narrows this. The
//! busy session's loop sees its writes fail or be fenced and ends or hands off its prompt, which recovery answers.
//!
//! Both tests passed 10 runs in a row locally (`cargo nextest run -p e2e-tests -E 'test(/^processor_cluster::/)'`), and
//! again 10 in a row on 2026-12-05 with the replica wait option in (together with the sentinel and replica-wait
//! suites).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::Harness;
use e2e_tests::cluster::RedisCluster;
use e2e_tests::faults::{fault_mid_prompt, short_answer, spread, two_replicas};

enum Fault {
    /// The busy session's primary SIGKILLed; its replica is promoted.
    KillPrimary,
    /// The busy session's slot moved to another primary.
    MigrateSlot,
}

async fn cluster_fault_mid_prompt(fault: Fault) {
    let mut cluster = RedisCluster::start().await;
    let gateway = Harness::start().await;
    gateway.openai.set_fallback(short_answer());
    let (a, b) = two_replicas(&gateway, &cluster.seeds(), "mode = \"cluster\"").await;
    let prefix = a.engine.config().redis_prefix.clone();
    let mut clients = [a.client().await, b.client().await];
    let sessions = spread(&cluster, &mut clients, &prefix).await;
    let slot = sessions[0].1;
    let ids: Vec<String> = sessions.into_iter().map(|(id, _)| id).collect();
    fault_mid_prompt(&gateway, &mut clients, &ids, async {
        match fault {
            Fault::KillPrimary => {
                let (old, new) = cluster.kill_primary_of(slot).await;
                eprintln!("primary :{old} killed, :{} promoted", new.port);
            }
            Fault::MigrateSlot => {
                let from = cluster.owner(slot).await;
                let to = cluster
                    .primaries()
                    .await
                    .into_iter()
                    .find(|p| p.port != from.port)
                    .unwrap();
                cluster.migrate_slot(slot, &to).await;
                eprintln!("slot {slot} moved from :{} to :{}", from.port, to.port);
            }
        }
    })
    .await;
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_mid_prompt_fails_over_and_every_stream_ends_and_nothing_acknowledged_is_lost()
 {
    cluster_fault_mid_prompt(Fault::KillPrimary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_busy_sessions_slot_migrated_mid_prompt_and_every_stream_ends_and_nothing_is_lost() {
    cluster_fault_mid_prompt(Fault::MigrateSlot).await;
}
