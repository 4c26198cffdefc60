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
//! Both tests passed 10 runs in a row locally (`cargo nextest run -p e2e-tests -E 'binary(processor_cluster)'`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::Harness;
use e2e_tests::cluster::RedisCluster;
use e2e_tests::faults::{assert_settled, until_done};
use e2e_tests::processor::{
    Processor, ProcessorSetup, SessionsClient, messages, prompt, start_processor,
};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

/// A long answer streamed slowly (40 chunks, 50 ms apart), so a fault lands in its middle.
fn slow_answer() -> Reply {
    let words: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-slow")
            .text(&words)
            .finish("stop", Some((10, 40))),
    )
    .pace(Duration::from_millis(50))
}

fn short_answer() -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-short")
            .text(&["Answered."])
            .finish("stop", Some((10, 2))),
    )
}

/// Two replicas of one deployment on `redis_lines` (its `[redis]` mode) and `url`.
pub async fn two_replicas(
    gateway: &Harness,
    url: &str,
    redis_lines: &str,
) -> (Processor, Processor) {
    let a = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: url.into(),
        redis_lines: redis_lines.into(),
        recovery: true,
        ..Default::default()
    })
    .await;
    let b = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: url.into(),
        redis_lines: redis_lines.into(),
        recovery: true,
        prefix: a.engine.config.redis_prefix.clone(),
        ..Default::default()
    })
    .await;
    (a, b)
}

async fn create(c: &mut SessionsClient) -> String {
    c.create_session(spb::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
        .id
}

/// Creates sessions, alternating replicas, until every primary serves at least one. Returns (id, slot) pairs.
async fn spread(
    cluster: &RedisCluster,
    clients: &mut [SessionsClient; 2],
    prefix: &str,
) -> Vec<(String, u16)> {
    let primaries: Vec<u16> = cluster.primaries().await.iter().map(|n| n.port).collect();
    let mut sessions = Vec::new();
    let mut served = std::collections::HashSet::new();
    for i in 0..64 {
        let id = create(&mut clients[i % 2]).await;
        let slot = cluster
            .slot_of(&format!("{prefix}{{sess:{id}}}:session"))
            .await;
        served.insert(cluster.owner(slot).await.port);
        sessions.push((id, slot));
        if sessions.len() >= 4 && primaries.iter().all(|p| served.contains(p)) {
            return sessions;
        }
    }
    panic!("64 sessions did not cover the 3 primaries");
}

/// Prompts the session and reads the stream to its end; the answer must be complete.
async fn answer(c: &mut SessionsClient, session_id: &str, text: &str) {
    let mut stream = c
        .prompt(prompt(session_id, text))
        .await
        .unwrap()
        .into_inner();
    let events = until_done(&mut stream, |r| r.event, Duration::from_secs(20)).await;
    let Some(SE::Done(d)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(d.stopped_by(), spb::StopReason::Completed, "{d:?}");
}

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
    let prefix = a.engine.config.redis_prefix.clone();
    let mut clients = [a.client().await, b.client().await];
    let sessions = spread(&cluster, &mut clients, &prefix).await;
    // Every session answered once, through both replicas: what is stored now was acknowledged.
    for (i, (id, _)) in sessions.iter().enumerate() {
        answer(&mut clients[i % 2], id, "hello").await;
    }
    let mut before = Vec::new();
    for (id, _) in &sessions[1..] {
        before.push(messages(&mut clients[0], id).await);
    }
    let (busy, slot) = sessions[0].clone();
    gateway.openai.push(slow_answer());
    let subscribe = spb::SubscribeRequest {
        session_id: busy.clone(),
        after_event_id: String::new(),
    };
    let mut remote = clients[1]
        .subscribe(subscribe.clone())
        .await
        .unwrap()
        .into_inner();
    let mut sub = clients[0].subscribe(subscribe).await.unwrap().into_inner();
    let mut stream = clients[0]
        .prompt(prompt(&busy, "talk"))
        .await
        .unwrap()
        .into_inner();
    let mut deltas = 0;
    while deltas < 3 {
        let ev = stream
            .message()
            .await
            .unwrap()
            .unwrap()
            .event
            .unwrap()
            .event
            .unwrap();
        if matches!(ev, SE::PartDelta(_)) {
            deltas += 1;
        }
    }
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
    let bound = Duration::from_secs(30);
    let local = until_done(&mut stream, |r| r.event, bound).await;
    eprintln!(
        "the prompt stream ended with {:?}",
        &local[local.len().saturating_sub(3)..]
    );
    for events in [
        local,
        until_done(&mut sub, |r| r.event, bound).await,
        until_done(&mut remote, |r| r.event, bound).await,
    ] {
        let Some(SE::Done(d)) = events.last() else {
            panic!("{events:?}")
        };
        assert!(
            matches!(
                d.stopped_by(),
                spb::StopReason::Completed
                    | spb::StopReason::HandedOff
                    | spb::StopReason::StorageUnavailable
            ),
            "{d:?}"
        );
    }
    assert_settled(&mut clients[0], &busy).await;
    let stored = messages(&mut clients[1], &busy).await;
    assert!(
        stored.iter().any(|m| m.role() == spb::Role::User
            && m.parts
                .iter()
                .any(|p| matches!(&p.kind, Some(spb::part::Kind::Text(t)) if t.text == "talk"))),
        "the acknowledged prompt is stored: {stored:?}"
    );
    for ((id, _), was) in sessions[1..].iter().zip(before) {
        assert_eq!(
            messages(&mut clients[1], id).await,
            was,
            "session {id} lost nothing"
        );
    }
    for (i, (id, _)) in sessions.iter().enumerate() {
        answer(&mut clients[(i + 1) % 2], id, "again").await;
        assert_settled(&mut clients[i % 2], id).await;
    }
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
