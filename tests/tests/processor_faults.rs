//! Faults under a running prompt, with real processes: Redis killed (SIGKILL) or stopped (SIGTERM) and restarted
//! from its AOF, Redis refusing writes for 3 s, and the gateway restarted mid-step; Redis faults as the run ends and
//! with a prompt queued behind the running one. Each test asserts the end state:
//! the Prompt and Subscribe streams ended with a terminal `done` within a bound that means "it happened", the prompt
//! was answered (resumed here or by recovery), nothing is left busy, and Diagnose is healthy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::faults::{
    assert_ended_through_the_fault, assert_settled, short_answer, slow_answer, until_deltas,
    until_done,
};
use e2e_tests::processor::{
    Processor, ProcessorSetup, SessionsClient, assert_healthy, create_session, messages, prompt,
    start_processor, until_end,
};
use e2e_tests::procs::RedisServer;
use e2e_tests::service::{ServiceProcess, free_port};
use e2e_tests::{Harness, TOKEN};
use fake_provider::FakeProvider;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

#[derive(Clone, Copy)]
enum Fault {
    /// SIGKILL, back after 300 ms.
    Kill,
    /// SIGTERM, back after 300 ms.
    Terminate,
    /// SIGKILL, back after 3 s: longer than the lease, so the loop must hand the session to recovery.
    KillPastTheLease,
    /// Writes refused for 3 s.
    RefuseWrites,
}

/// Applies `fault` to `redis` now and lifts it `down` later, on a task of its own, which returns the server and the
/// instant the lift began (nothing reaches Redis, or is written to it, before then).
async fn inject(
    fault: Fault,
    mut redis: RedisServer,
    down: Duration,
) -> tokio::task::JoinHandle<(RedisServer, std::time::Instant)> {
    match fault {
        Fault::Kill | Fault::KillPastTheLease => redis.kill().await,
        Fault::Terminate => redis.terminate().await,
        Fault::RefuseWrites => redis.refuse_writes().await,
    }
    tokio::spawn(async move {
        tokio::time::sleep(down).await;
        let lifted = std::time::Instant::now();
        if matches!(fault, Fault::RefuseWrites) {
            redis.accept_writes().await;
        } else {
            redis.restart().await;
        }
        (redis, lifted)
    })
}

/// What the Redis fault tests run on: a private Redis, the gateway harness and a processor (recovery on), with a
/// session whose first step streams a slow answer (later steps get a short one).
struct Rig {
    redis: RedisServer,
    gateway: Harness,
    p: Processor,
    c: SessionsClient,
    s: spb::Session,
}

async fn rig() -> Rig {
    let redis = RedisServer::start().await;
    let gateway = Harness::start().await;
    let p = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: redis.url(),
        recovery: true,
        // Windows shorter than the fault, so the loop writes while Redis is down whatever the lease's renewal does.
        extra: "[events]\nflush_interval_ms = 50\nunwatched_flush_interval_ms = 50\n".into(),
        // As the binary runs by default: each runtime with its own Redis connection, all of them hit by the fault.
        runtimes: Some(session_processor::runtimes::Runtimes::PerCore(2)),
        ..Default::default()
    })
    .await;
    let mut c = p.client().await;
    let s = create_session(&mut c, Default::default()).await;
    gateway.openai.push(slow_answer());
    gateway.openai.set_fallback(short_answer());
    Rig {
        redis,
        gateway,
        p,
        c,
        s,
    }
}

/// How long `fault` lasts mid-prompt.
fn outage(fault: Fault) -> Duration {
    match fault {
        Fault::Kill | Fault::Terminate => Duration::from_millis(300),
        Fault::KillPastTheLease | Fault::RefuseWrites => Duration::from_secs(3),
    }
}

async fn redis_fault_mid_prompt(fault: Fault) {
    let Rig {
        redis,
        gateway,
        p,
        mut c,
        s,
    } = rig().await;
    // A second replica of the same deployment: its Subscribe reads the event log in Redis.
    let other = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: redis.url(),
        prefix: p.engine.config().redis_prefix.clone(),
        ..Default::default()
    })
    .await;
    let mut remote = other
        .client()
        .await
        .subscribe(spb::SubscribeRequest {
            session_id: s.id.clone(),
            after_event_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut sub = c
        .subscribe(spb::SubscribeRequest {
            session_id: s.id.clone(),
            after_event_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut stream = c.prompt(prompt(&s.id, "talk")).await.unwrap().into_inner();
    // The fault lands once text streams.
    until_deltas(&mut stream, 3).await;
    let undo = inject(fault, redis, outage(fault)).await;
    // The lease (1.5 s) bounds how long a stream can wait; 15 s means "it ended", not "it was fast".
    let events = until_done(&mut stream, |r| r.event, Duration::from_secs(15)).await;
    let sub_events = until_done(&mut sub, |r| r.event, Duration::from_secs(15)).await;
    let remote_events = until_done(&mut remote, |r| r.event, Duration::from_secs(30)).await;
    let (_redis, _) = undo.await.unwrap();
    if matches!(fault, Fault::KillPastTheLease) {
        assert!(
            matches!(events.last(), Some(SE::Done(d)) if d.stopped_by() == spb::StopReason::HandedOff),
            "the loop could not prove its lease and said so: {events:?}"
        );
    }
    for evs in [&events, &sub_events, &remote_events] {
        assert_ended_through_the_fault(evs);
    }
    assert_settled(&mut c, &s.id).await;
    let report = e2e_tests::processor::diagnose(&mut c, &s.id).await;
    eprintln!(
        "storage failures seen: {}, streams ended with {:?} / {:?}",
        report.storage_write_failures,
        events.last(),
        sub_events.last()
    );
    assert!(
        report.storage_write_failures > 0,
        "the fault hit the loop's writes"
    );
    drop((p, other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_prompt_ends_every_stream_and_the_prompt_is_answered() {
    redis_fault_mid_prompt(Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_longer_than_the_lease_hands_the_prompt_to_recovery_which_answers_it() {
    redis_fault_mid_prompt(Fault::KillPastTheLease).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_mid_prompt_ends_every_stream_and_the_prompt_is_answered() {
    redis_fault_mid_prompt(Fault::Terminate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_refusing_writes_for_three_seconds_ends_every_stream_and_the_prompt_is_answered() {
    redis_fault_mid_prompt(Fault::RefuseWrites).await;
}

/// A gateway process on a fixed port, so a restart comes back where the processor's channel reconnects.
async fn start_gateway(port: u16, fake: &FakeProvider, dir: &std::path::Path) -> ServiceProcess {
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[retry]\nmax_attempts = 2\nbase_delay_ms = 5\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"E2E_OPENAI_KEY\"\n",
            fake.base_url()
        ),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_gateway_replica"));
    cmd.arg(&config)
        .env("GATEWAY_AUTH_TOKENS", TOKEN)
        .env("E2E_OPENAI_KEY", e2e_tests::OPENAI_KEY)
        .env("RUST_LOG", "warn");
    e2e_tests::service::start(cmd, "llm-gateway listening on ")
        .await
        .expect("the gateway starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_restart_of_two_seconds_mid_step_does_not_fail_the_prompt() {
    let fake = FakeProvider::start().await.unwrap();
    fake.push(slow_answer());
    fake.set_fallback(short_answer());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut gateway = start_gateway(port, &fake, dir.path()).await;
    let p: Processor = start_processor(ProcessorSetup {
        gateway: format!("127.0.0.1:{port}"),
        ..Default::default()
    })
    .await;
    let mut c = p.client().await;
    let s = create_session(&mut c, Default::default()).await;
    let mut stream = c.prompt(prompt(&s.id, "talk")).await.unwrap().into_inner();
    until_deltas(&mut stream, 3).await;
    gateway.child.start_kill().unwrap();
    gateway.child.wait().await.unwrap();
    // Down for 2 s: the processor's step retries back off past it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut gateway = start_gateway(port, &fake, dir.path()).await;
    let events = until_done(&mut stream, |r| r.event, Duration::from_secs(30)).await;
    let Some(SE::Done(d)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        (d.finish.as_str(), d.stopped_by()),
        ("stop", spb::StopReason::Completed),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, SE::Status(st) if st.kind() == spb::session_status::Kind::Retry)),
        "the wait shows as retries: {events:?}"
    );
    let answer = messages(&mut c, &s.id).await.pop().unwrap();
    assert!(answer.error.is_none());
    assert_healthy(&mut c, &s.id).await;
    gateway.child.start_kill().unwrap();
}

/// A Redis fault that lands just as the run ends: the step's text has reached the caller and the provider's end of
/// stream follows a moment later, so the write that logs `done` (and releases the lease) meets the fault. A kill
/// lasts 900 ms, well within the lease (6 s, so the end carries no renewal); refused writes last 3 s, beyond the
/// lease (1.5 s), and the end comes before any renewal is due (a script whose first write is a renewal goes on
/// writing while Redis refuses writes, and the fault would miss the end). The run's end is written once the fault
/// lifts (or recovery answers the prompt), the lease and the active marks are gone, and the answer is not produced
/// twice.
async fn redis_fault_as_the_run_ends(fault: Fault) {
    let redis = RedisServer::start().await;
    let gateway = Harness::start().await;
    let (redis_lines, burst, pace, down) = match fault {
        Fault::RefuseWrites => ("", 2, 100, Duration::from_secs(3)),
        _ => ("lease_ttl_ms = 6000\n", 4, 400, Duration::from_millis(900)),
    };
    let p = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: redis.url(),
        recovery: true,
        redis_lines: redis_lines.into(),
        ..Default::default()
    })
    .await;
    let mut c = p.client().await;
    let s = create_session(&mut c, Default::default()).await;
    gateway.openai.push(
        fake_provider::Reply::sse(
            fake_provider::openai_sse::ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-end")
                .text(&["The whole answer."])
                .finish("stop", Some((10, 4))),
        )
        .burst_head(burst)
        .pace(Duration::from_millis(pace)),
    );
    gateway.openai.set_fallback(short_answer());
    let mut stream = c.prompt(prompt(&s.id, "talk")).await.unwrap().into_inner();
    until_deltas(&mut stream, 1).await;
    let undo = inject(fault, redis, down).await;
    let events = until_done(&mut stream, |r| r.event, Duration::from_secs(15)).await;
    let done_at = std::time::Instant::now();
    let (_redis, lifted) = undo.await.unwrap();
    assert_ended_through_the_fault(&events);
    // The fault hit the run's end: a write of it failed, or it waited for Redis to come back (this replica's
    // streams get a completed `done` only once the end is written and the lease released). A loop that cannot
    // prove its lease for a whole ttl hands the session off instead, and recovery ends the run.
    let waited = matches!(events.last(), Some(SE::Done(d)) if d.stopped_by() == spb::StopReason::Completed)
        && done_at > lifted;
    let failed = e2e_tests::processor::diagnose(&mut c, &s.id)
        .await
        .storage_write_failures
        > 0;
    assert!(waited || failed, "the run ended clear of the fault");
    assert_settled(&mut c, &s.id).await;
    assert_eq!(
        messages(&mut c, &s.id)
            .await
            .iter()
            .filter(|m| m.role() == spb::Role::Assistant && m.finish == "stop")
            .count(),
        1,
        "answered once"
    );
    let store = &p.engine.store();
    tokio::time::timeout(Duration::from_secs(10), async {
        while store.active().is_active(&s.id).await.unwrap_or(true) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("no active mark is left");
    assert!(store.leases().lease_holder(&s.id).await.unwrap().is_none());
    if matches!(events.last(), Some(SE::Done(d)) if d.stopped_by() == spb::StopReason::Completed) {
        let ends = store
            .event_log()
            .read_events(&s.id, "0", None, 1000)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| matches!(e.event, Some(SE::Done(_))))
            .count();
        assert_eq!(ends, 1, "the run ended once, and no recovery ran after it");
    }
    drop(p);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_as_the_run_ends_leaves_no_lease_and_no_mark_behind() {
    redis_fault_as_the_run_ends(Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_refusing_writes_as_the_run_ends_leaves_no_lease_and_no_mark_behind() {
    redis_fault_as_the_run_ends(Fault::RefuseWrites).await;
}

/// A prompt queued behind a running one when Redis fails: it is answered exactly once (never lost, never stored
/// twice), and its stream ends with a terminal event.
async fn redis_fault_with_a_prompt_queued(fault: Fault) {
    // The gateway is held to the end (dropping it stops it).
    let Rig {
        redis,
        gateway: _gateway,
        p,
        mut c,
        s,
    } = rig().await;
    let mut first = c.prompt(prompt(&s.id, "talk")).await.unwrap().into_inner();
    until_deltas(&mut first, 3).await;
    let mut queued = p
        .client()
        .await
        .prompt(prompt(&s.id, "queued"))
        .await
        .unwrap()
        .into_inner();
    let undo = inject(fault, redis, outage(fault)).await;
    let first_events = until_done(&mut first, |r| r.event, Duration::from_secs(15)).await;
    let queued_events = until_end(&mut queued, Duration::from_secs(30)).await;
    let (_redis, _) = undo.await.unwrap();
    assert_ended_through_the_fault(&first_events);
    assert_ended_through_the_fault(&queued_events);
    assert_settled(&mut c, &s.id).await;
    let ms = messages(&mut c, &s.id).await;
    let asked: Vec<&spb::Message> = ms
        .iter()
        .filter(|m| {
            m.role() == spb::Role::User
                && m.parts.iter().any(
                    |p| matches!(&p.kind, Some(spb::part::Kind::Text(t)) if t.text == "queued"),
                )
        })
        .collect();
    assert_eq!(asked.len(), 1, "stored once, never lost: {ms:?}");
    assert!(
        ms.iter().any(|m| m.role() == spb::Role::Assistant
            && m.parent_id == asked[0].id
            && m.finish == "stop"),
        "and answered: {ms:?}"
    );
    if matches!(queued_events.last(), Some(SE::Done(d)) if d.stopped_by() == spb::StopReason::Completed)
    {
        assert!(
            queued_events
                .iter()
                .any(|e| matches!(e, SE::MessageUpdated(m) if m.id == asked[0].id)),
            "a stream that ended completed carried its prompt: {queued_events:?}"
        );
    }
    assert_healthy(&mut c, &s.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_with_a_prompt_queued_answers_it_once() {
    redis_fault_with_a_prompt_queued(Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_refusing_writes_with_a_prompt_queued_answers_it_once() {
    redis_fault_with_a_prompt_queued(Fault::RefuseWrites).await;
}
