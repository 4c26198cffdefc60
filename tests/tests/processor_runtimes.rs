//! The processor on a runtime per core, in process as the binary runs it (`session_processor::runtimes::serve`):
//! connections spread over the runtimes, a prompt on each completes, a stream on one runtime follows a loop on
//! another live, and a shutdown drains every runtime and ends their threads. And the binary's refusal of a bad
//! `PROCESSOR_RUNTIMES`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::processor::{
    ProcessorSetup, Product, messages, prompt, prompt_until_done, text_reply as text,
};
use llm_proto::sessions as spb;
use session_processor::runtimes::Runtimes;
use spb::session_event::Event as SE;

fn deltas(events: &[SE]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            SE::PartDelta(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect()
}

/// Threads of this process (one test per process) named as the other runtimes' are.
fn runtime_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("runtime-"))
        .count()
}

async fn on_runtimes(n: usize, shutdown: Option<tokio_util::sync::CancellationToken>) -> Product {
    Product::start_setup(
        "",
        ProcessorSetup {
            runtimes: Some(Runtimes::PerCore(n)),
            shutdown,
            ..Default::default()
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_on_every_runtime_complete_and_a_stream_on_another_runtime_follows_live() {
    let p = on_runtimes(3, None).await;
    // Six connections, handed to the three runtimes in turn: two each.
    let mut clients = Vec::new();
    for _ in 0..6 {
        clients.push(p.client().await);
    }
    let mut sessions = Vec::new();
    for c in &mut clients {
        sessions.push(
            e2e_tests::processor::create_session(c, spb::CreateSessionRequest::default())
                .await
                .id,
        );
    }
    // Serving began (connections are taken only once every runtime started); the first is the test's own.
    assert_eq!(runtime_threads(), 2);
    for _ in 0..6 {
        p.gateway
            .openai
            .push(text("chatcmpl-r", &["one ", "answer ", "each"], (10, 3)));
    }
    let mut runs = tokio::task::JoinSet::new();
    for (i, session) in sessions.iter().enumerate() {
        // Followed from the next connection (another runtime) before the prompt starts, prompted on its own.
        let mut follower = clients[(i + 1) % 6].clone();
        let mut prompter = clients[i].clone();
        let session = session.clone();
        runs.spawn(async move {
            let mut followed = follower
                .subscribe(spb::SubscribeRequest {
                    session_id: session.clone(),
                    after_event_id: String::new(),
                })
                .await
                .unwrap()
                .into_inner();
            let prompted = prompt_until_done(&mut prompter, prompt(&session, "hi")).await;
            let seen = e2e_tests::processor::until_done(&mut followed, |r| r.event).await;
            (session, prompted, seen)
        });
    }
    let mut client = p.client().await;
    while let Some(run) = runs.join_next().await {
        let (session, prompted, seen) = run.unwrap();
        assert_eq!(deltas(&prompted), "one answer each", "{session}");
        assert_eq!(deltas(&seen), "one answer each", "{session}: the follower");
        let stored = messages(&mut client, &session).await;
        assert_eq!(stored.len(), 2, "{session}: the prompt and its answer");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_drains_every_runtime_and_ends_their_threads() {
    let stop = tokio_util::sync::CancellationToken::new();
    let mut p = on_runtimes(4, Some(stop.clone())).await;
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(p.client().await);
    }
    p.gateway
        .openai
        .push(text("chatcmpl-s", &["before ", "the stop"], (5, 2)));
    let session = p.session_on("").await;
    let events = prompt_until_done(&mut clients[3], prompt(&session.id, "hi")).await;
    assert_eq!(deltas(&events), "before the stop");
    assert_eq!(runtime_threads(), 3);
    drop(clients);
    e2e_tests::processor::check_sessions(p.addr).await;
    stop.cancel();
    assert!(
        p.stopped(Duration::from_secs(10)).await,
        "serving ends, without error, once every runtime drained"
    );
    assert_eq!(runtime_threads(), 0, "the other runtimes' threads are gone");
}

#[tokio::test]
async fn a_bad_runtimes_value_stops_the_start_naming_the_variable() {
    for bad in ["0", "many", "Shared"] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_processor_replica"))
            .env("PROCESSOR_RUNTIMES", bad)
            .output()
            .await
            .unwrap();
        assert!(!out.status.success(), "{bad}: started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("PROCESSOR_RUNTIMES") && stderr.contains(bad),
            "{bad}: {stderr}"
        );
    }
}
