//! What a prompt costs in Redis, counted by Redis itself (`INFO commandstats` and `MONITOR` on a private
//! `redis-server`): a one-step prompt runs at most 30 commands in at most 7 requests, and before the gateway is
//! called the processor waits for one round trip on a replica that knows the session's record (it created the
//! session, or ran its last prompt): the script that checks the record is still that one, takes the lease, stores
//! the user message and reads the history, with the active mark beside it. On a replica that does not know the
//! record, the session read comes first. Counts and order, not timings: they do not depend on the machine's speed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use e2e_tests::monitor::{Monitor, Monitored, calls_since, command_calls};
use e2e_tests::processor::{
    ProcessorSetup, Product, SessionsClient, create_session, messages, prompt, prompt_until_done,
    start_processor,
};
use e2e_tests::procs::RedisServer;
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use session_processor::engine::Engine;

/// A reply of 64 text deltas, sent at once (so the event channel's windows do not depend on timing).
fn answer() -> Reply {
    let pieces: Vec<String> = (0..64).map(|i| format!("tok{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-count")
            .text(&refs)
            .finish("stop", Some((10, 64))),
    )
}

/// The product (gateway and processor) on the test's own Redis.
async fn product_on(redis: &RedisServer) -> Product {
    Product::start_setup(
        "",
        ProcessorSetup {
            redis: redis.url(),
            ..Default::default()
        },
    )
    .await
}

/// Waits (bounded) until the session's loop has ended on the engine's replica: its last writes are done.
async fn until_idle(engine: &Engine, session_id: &str) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while engine.is_running(session_id) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the loop ends after done");
}

/// What one prompt cost: commands executed by name (Redis's count, scripts' commands included), every command in
/// the order Redis ran them, and when the provider got the step's request (machine clock, µs).
struct Cost {
    calls: BTreeMap<String, u64>,
    seen: Vec<Monitored>,
    called_at_us: u64,
}

impl Cost {
    fn executed(&self) -> u64 {
        self.calls.values().sum()
    }

    fn requests(&self) -> Vec<&Monitored> {
        self.seen.iter().filter(|m| m.client).collect()
    }

    /// The requests Redis had run when the provider got the model request: the processor's critical path (it
    /// writes nothing beside the call).
    fn before_the_call(&self) -> Vec<&str> {
        self.requests()
            .into_iter()
            .filter(|m| m.at_us < self.called_at_us)
            .map(|m| m.name.as_str())
            .collect()
    }

    fn listing(&self) -> String {
        self.seen
            .iter()
            .map(|m| format!("  {}{}", if m.client { "" } else { "    " }, m.short))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs one prompt to its end (the loop's last write included) and counts what it cost in Redis.
async fn measured_prompt(
    p: &Product,
    c: &mut SessionsClient,
    redis: &RedisServer,
    session_id: &str,
) -> Cost {
    let called_at_us = Arc::new(AtomicU64::new(0));
    let called = called_at_us.clone();
    p.gateway.openai.push(Reply::fn_reply(move |_| {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        called.store(now.as_micros() as u64, Ordering::SeqCst);
        answer()
    }));
    let monitor = Monitor::start(redis.port).await;
    let before = command_calls(redis.port).await;
    let events = prompt_until_done(c, prompt(session_id, "count")).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, spb::session_event::Event::PartDelta(_))),
        "the prompt streamed text: {events:?}"
    );
    until_idle(&p.engine, session_id).await;
    let mut calls = calls_since(&before, &command_calls(redis.port).await);
    // The two INFO calls are the test's.
    calls.remove("info");
    let seen = monitor
        .take()
        .into_iter()
        .filter(|m| m.name != "info")
        .collect();
    Cost {
        calls,
        seen,
        called_at_us: called_at_us.load(Ordering::SeqCst),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_step_prompt_costs_few_redis_commands() {
    let redis = RedisServer::start().await;
    let p = product_on(&redis).await;
    let mut c = p.client().await;
    // Warm-up: connections open and scripts loaded, as on a replica that has served before.
    let warm = create_session(&mut c, spb::CreateSessionRequest::default()).await;
    p.gateway.openai.push(answer());
    prompt_until_done(&mut c, prompt(&warm.id, "warm up")).await;
    until_idle(&p.engine, &warm.id).await;

    let s = create_session(&mut c, spb::CreateSessionRequest::default()).await;
    for (n, label) in [
        (1, "a session's first prompt"),
        (2, "a prompt with history"),
    ] {
        let cost = measured_prompt(&p, &mut c, &redis, &s.id).await;
        eprintln!(
            "{label}: {} commands executed, {} requests: {:?}\n{}",
            cost.executed(),
            cost.requests().len(),
            cost.calls,
            cost.listing()
        );
        assert!(
            cost.executed() <= 30,
            "prompt {n} ({label}) ran {} Redis commands (at most 30): {:?}\n{}",
            cost.executed(),
            cost.calls,
            cost.listing()
        );
        // One round trip before the model is asked: the script that checks the record this replica knows (it
        // created the session, then ran its last prompt and wrote its totals), takes the lease, stores the message
        // and reads the history (the active mark goes beside it, in the same round trip).
        assert_eq!(
            cost.before_the_call(),
            ["evalsha", "sadd"],
            "prompt {n} ({label}): the requests before the gateway call\n{}",
            cost.listing()
        );
        assert!(
            cost.requests().len() <= 7,
            "prompt {n} ({label}) sent {} requests (at most 7)\n{}",
            cost.requests().len(),
            cost.listing()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_knows_a_stale_record_reads_it_afresh_and_acts_on_the_fresh_one() {
    let redis = RedisServer::start().await;
    let p = product_on(&redis).await;
    // A second replica of the same deployment.
    let other = start_processor(ProcessorSetup {
        gateway: p.gateway.addr.to_string(),
        redis: redis.url(),
        prefix: p.engine.config().redis_prefix.clone(),
        ..Default::default()
    })
    .await;
    let mut here = p.client().await;
    let mut there = other.client().await;
    // This replica creates the session, so it knows its record and that no prompt model is stored yet.
    let s = create_session(&mut here, spb::CreateSessionRequest::default()).await;
    // The other replica runs a prompt naming a model: the record's totals and the stored prompt model change.
    p.gateway.openai.push(answer());
    let named = spb::PromptRequest {
        model: "openai/gpt-4o-mini".into(),
        ..prompt(&s.id, "with a model")
    };
    prompt_until_done(&mut there, named).await;
    until_idle(&other.engine, &s.id).await;
    // A prompt naming no model here: the model is the session's latest prompt's, which only a fresh read knows.
    let cost = measured_prompt(&p, &mut here, &redis, &s.id).await;
    let before = cost.before_the_call();
    assert_eq!(
        before.iter().filter(|n| **n == "evalsha").count(),
        2,
        "the begin from what this replica knew was refused, and the one after a fresh read ran: {before:?}\n{}",
        cost.listing()
    );
    assert!(before.contains(&"mget"), "the fresh read: {before:?}");
    let stored = messages(&mut here, &s.id).await;
    let users: Vec<&str> = stored
        .iter()
        .filter(|m| m.role() == spb::Role::User)
        .map(|m| m.model.as_str())
        .collect();
    assert_eq!(
        users,
        ["openai/gpt-4o-mini", "openai/gpt-4o-mini"],
        "one user message per prompt (the refused begin wrote nothing), the second with the stored prompt model"
    );
}
