//! What the fault tests share: reading a stream to its terminal event, and waiting until a session has settled
//! with its prompt answered and Diagnose healthy.

use std::time::Duration;

use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;

use crate::Harness;
use crate::cluster::RedisCluster;
pub use crate::processor::until_done_within as until_done;
use crate::processor::{
    Processor, ProcessorSetup, SessionsClient, assert_healthy, messages, prompt, start_processor,
};

/// Waits (30 s at most) until the session is idle with no lease and its latest prompt has a completed answer, then
/// checks that answer and Diagnose.
pub async fn assert_settled(c: &mut SessionsClient, session_id: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let settled = loop {
        let report = c
            .diagnose(spb::DiagnoseRequest {
                session_id: session_id.into(),
            })
            .await
            .map(|r| r.into_inner());
        let ms = match &report {
            Ok(_) => messages(c, session_id).await,
            Err(_) => Vec::new(),
        };
        let answered = ms.last().is_some_and(|m| {
            m.role() == spb::Role::Assistant && m.completed_at.is_some() && m.finish == "stop"
        });
        if let Ok(r) = &report
            && !r.lease_held
            && r.healthy
            && answered
        {
            break ms;
        }
        if tokio::time::Instant::now() > deadline {
            let outline: Vec<String> = ms.iter().map(crate::processor::outline).collect();
            panic!(
                "the prompt was not answered (resumed or closed) within 30 s; Diagnose: {report:?}\nmessages:\n{}",
                outline.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let answer = settled.last().unwrap();
    assert!(answer.error.is_none(), "{:?}", answer.error);
    assert_eq!(answer.stopped_by(), spb::StopReason::Completed);
    for m in &settled {
        assert!(
            m.role() != spb::Role::Assistant || m.completed_at.is_some(),
            "no message left open: {m:?}"
        );
    }
    let s = c
        .get_session(spb::GetSessionRequest {
            session_id: session_id.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(
        s.status.map(|st| st.kind()),
        Some(spb::session_status::Kind::Idle)
    );
    assert_healthy(c, session_id).await;
}

/// Two replicas of one deployment on `redis_lines` (its `[redis]` mode) and `url`.
pub async fn two_replicas(
    gateway: &Harness,
    url: &str,
    redis_lines: &str,
) -> (Processor, Processor) {
    // The first as the binary runs by default (a runtime per core, each with its own connection to the deployment),
    // the second on one shared runtime: a fleet in the middle of a rollout.
    let a = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: url.into(),
        redis_lines: redis_lines.into(),
        recovery: true,
        runtimes: Some(session_processor::runtimes::Runtimes::PerCore(2)),
        ..Default::default()
    })
    .await;
    let b = start_processor(ProcessorSetup {
        gateway: gateway.addr.to_string(),
        redis: url.into(),
        redis_lines: redis_lines.into(),
        recovery: true,
        prefix: a.engine.config().redis_prefix.clone(),
        ..Default::default()
    })
    .await;
    (a, b)
}

/// A long answer streamed slowly (40 chunks, 50 ms apart), so a fault lands in its middle.
pub fn slow_answer() -> Reply {
    let words: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-slow")
            .text(&words)
            .finish("stop", Some((10, 40))),
    )
    .pace(Duration::from_millis(50))
}

pub fn short_answer() -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-short")
            .text(&["Answered."])
            .finish("stop", Some((10, 2))),
    )
}

/// Creates a session; its id.
pub async fn create(c: &mut SessionsClient) -> String {
    c.create_session(spb::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
        .id
}

/// Creates sessions through `clients` in turn until every primary of `cluster` serves at least one and there are at
/// least 4; returns (id, slot) pairs. `prefix` is the processors' key prefix.
pub async fn spread(
    cluster: &RedisCluster,
    clients: &mut [SessionsClient],
    prefix: &str,
) -> Vec<(String, u16)> {
    let primaries: Vec<u16> = cluster.primaries().await.iter().map(|n| n.port).collect();
    let mut sessions = Vec::new();
    let mut served = std::collections::HashSet::new();
    for i in 0..64 {
        let n = clients.len();
        let id = create(&mut clients[i % n]).await;
        let slot = cluster
            .slot_of(&format!("{prefix}{{sess:{id}}}:session"))
            .await;
        served.insert(cluster.owner(slot).await.port);
        sessions.push((id, slot));
        if sessions.len() >= 4 && primaries.iter().all(|p| served.contains(p)) {
            return sessions;
        }
    }
    panic!(
        "64 sessions did not cover the {} primaries",
        primaries.len()
    );
}

/// Prompts the session and reads the stream to its end; the answer must be complete.
pub async fn answer(c: &mut SessionsClient, session_id: &str, text: &str) {
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

/// The fault scenario the Cluster and Sentinel suites share, on two replicas' `clients` and existing `sessions`:
/// every session answered once (so its messages are acknowledged), then `sessions[0]` prompted with a slow answer
/// (`slow_answer`, pushed on the gateway's OpenAI fake; the fallback answers everything else) followed by a Prompt
/// stream and a local Subscribe on replica 0 and a Subscribe on replica 1, `fault` once text streams, and then:
/// the fault struck while the provider was still streaming the answer (so the prompt's writes met it), every stream
/// ends with a terminal `done`, the prompt is answered with Diagnose healthy, the acknowledged prompt is stored,
/// every other session's messages are as they were, and every session answers a new prompt.
pub async fn fault_mid_prompt(
    gateway: &Harness,
    clients: &mut [SessionsClient; 2],
    sessions: &[String],
    fault: impl std::future::Future<Output = ()>,
) {
    // Every session answered once, through both replicas: what is stored now was acknowledged.
    for (i, id) in sessions.iter().enumerate() {
        answer(&mut clients[i % 2], id, "hello").await;
    }
    let mut before = Vec::new();
    for id in &sessions[1..] {
        before.push(messages(&mut clients[0], id).await);
    }
    let busy = sessions[0].clone();
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
    until_deltas(&mut stream, 3).await;
    let struck = std::time::Instant::now();
    fault.await;
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
        assert_ended_through_the_fault(&events);
    }
    assert_struck_mid_answer(gateway, struck).await;
    assert_settled(&mut clients[0], &busy).await;
    let stored = messages(&mut clients[1], &busy).await;
    assert!(
        stored.iter().any(|m| m.role() == spb::Role::User
            && m.parts
                .iter()
                .any(|p| matches!(&p.kind, Some(spb::part::Kind::Text(t)) if t.text == "talk"))),
        "the acknowledged prompt is stored: {stored:?}"
    );
    for (id, was) in sessions[1..].iter().zip(before) {
        assert_eq!(
            messages(&mut clients[1], id).await,
            was,
            "session {id} lost nothing"
        );
    }
    for (i, id) in sessions.iter().enumerate() {
        answer(&mut clients[(i + 1) % 2], id, "again").await;
        assert_settled(&mut clients[i % 2], id).await;
    }
}

/// The slow answer's provider call (the first request whose last user text is the busy prompt's `talk`; a resumed
/// prompt asks again) was still streaming when the fault struck at `struck`: it ended after, completed or cancelled
/// by the loop meeting the fault. Without this the suite could pass with a fault that came after the prompt was done.
async fn assert_struck_mid_answer(gateway: &Harness, struck: std::time::Instant) {
    let requests = gateway.openai.requests();
    let call = requests
        .iter()
        .position(|r| {
            r.json()["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .is_some_and(|m| m.to_string().contains("talk"))
        })
        .expect("the busy prompt reached the provider");
    let ended = gateway
        .openai
        .wait_reply_ended(call, Duration::from_secs(30))
        .await
        .expect("the slow answer's call ended");
    assert!(
        ended > struck,
        "the answer's provider call ended {:?} before the fault struck: the fault was not mid-prompt",
        struck - ended
    );
}

/// Reads a Prompt stream until `n` text deltas came (where a fault test lands its fault: once text streams).
pub async fn until_deltas(stream: &mut tonic::Streaming<spb::PromptResponse>, n: usize) {
    let mut deltas = 0;
    while deltas < n {
        let ev = stream
            .message()
            .await
            .expect("stream ok")
            .expect("a delta before the end")
            .event
            .and_then(|e| e.event);
        if matches!(ev, Some(SE::PartDelta(_))) {
            deltas += 1;
        }
    }
}

/// A stream that lived through a storage fault ended with `done`, completed or handed on (to recovery, or because
/// storage stayed away longer than the lease).
pub fn assert_ended_through_the_fault(events: &[SE]) {
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
