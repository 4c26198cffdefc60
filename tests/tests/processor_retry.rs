//! Step retries through both services, the fake provider and real Redis: an error after output started becomes a
//! retry part and a `retry` status, the provider's `retry_after` is honoured, and errors no retry can fix stop at
//! once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::processor::{Product, SessionsClient, messages, prompt, prompt_until_done};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

fn answer() -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-ok")
            .text(&["Recovered ", "answer."])
            .finish("stop", Some((30, 4))),
    )
}

async fn session(c: &mut SessionsClient) -> spb::Session {
    c.create_session(spb::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
}

fn texts(m: &spb::Message) -> String {
    m.parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Text(t)) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

fn millis(t: &prost_types::Timestamp) -> i64 {
    t.seconds * 1000 + i64::from(t.nanos) / 1_000_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_after_output_started_is_retried_with_a_retry_part_and_status() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = session(&mut c).await;
    p.gateway
        .openai
        .push(Reply::fixture("openai_chat/error_after_200.sse"));
    p.gateway.openai.push(answer());
    let events = prompt_until_done(&mut c, prompt(&s.id, "hi")).await;

    let retry_status: Vec<&spb::SessionStatus> = events
        .iter()
        .filter_map(|e| match e {
            SE::Status(st) if st.kind() == spb::session_status::Kind::Retry => Some(st),
            _ => None,
        })
        .collect();
    assert_eq!(retry_status.len(), 1, "{events:?}");
    assert_eq!(retry_status[0].attempt, 1);
    assert!(retry_status[0].next_attempt_at.is_some());
    assert!(
        retry_status[0].message.contains("server had an error"),
        "{}",
        retry_status[0].message
    );
    assert!(
        !events.iter().any(|e| matches!(e, SE::Error(_))),
        "a retried error is not the loop's error"
    );

    let ms = messages(&mut c, &s.id).await;
    assert_eq!(ms.len(), 3, "user, the failed attempt, the retry");
    let failed = &ms[1];
    assert_eq!(failed.finish, "retried");
    assert!(failed.error.is_none());
    assert_eq!(
        texts(failed),
        "The answer is",
        "what streamed before the error is kept"
    );
    let retry: Vec<&spb::RetryPart> = failed
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Retry(r)) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].attempt, 1);
    let error = retry[0].error.as_ref().unwrap();
    assert!(error.retryable && error.message.contains("server had an error"));
    let next = millis(retry[0].next_attempt_at.as_ref().unwrap());
    assert!(next >= millis(failed.completed_at.as_ref().unwrap()));
    let done = &ms[2];
    assert_eq!(
        (done.finish.as_str(), texts(done).as_str()),
        ("stop", "Recovered answer.")
    );
    // The retry did not replay the failed attempt's partial text.
    let second = p.gateway.openai.requests()[1].json();
    assert!(!second.to_string().contains("The answer is"), "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_retry_after_is_waited_for() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = session(&mut c).await;
    // A rate limit after output started, whose message says how long to wait (1.2 s, longer than the 0.5 s backoff).
    let mut body = ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-rl")
        .text(&["Partial"])
        .finish("stop", None);
    body = body.replace("data: [DONE]\n\n", "");
    let finish_chunk = body.rfind("data: ").unwrap();
    body.truncate(finish_chunk);
    body.push_str("data: {\"error\":{\"message\":\"Rate limit reached for gpt-4o. Please try again in 1.2s.\",\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}\n\n");
    p.gateway.openai.push(Reply::sse(body));
    p.gateway.openai.push(answer());
    prompt_until_done(&mut c, prompt(&s.id, "hi")).await;

    let reqs = p.gateway.openai.requests();
    assert_eq!(reqs.len(), 2);
    let waited = reqs[1].received_at - reqs[0].received_at;
    assert!(waited >= Duration::from_millis(1200), "{waited:?}");
    let ms = messages(&mut c, &s.id).await;
    let retry = ms[1]
        .parts
        .iter()
        .find_map(|p| match &p.kind {
            Some(spb::part::Kind::Retry(r)) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    let planned = millis(retry.next_attempt_at.as_ref().unwrap())
        - millis(ms[1].completed_at.as_ref().unwrap());
    assert!(
        planned >= 1200,
        "next attempt planned {planned} ms after the failure"
    );
    assert_eq!(texts(&ms[2]), "Recovered answer.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_no_retry_can_fix_stop_at_once() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = session(&mut c).await;
    p.gateway.openai.push(Reply::json_fixture(
        429,
        "openai_chat/errors/insufficient_quota.json",
    ));
    p.gateway.openai.push(answer());
    let events = prompt_until_done(&mut c, prompt(&s.id, "hi")).await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SE::Status(st) if st.kind() == spb::session_status::Kind::Retry)),
        "{events:?}"
    );
    let error = events
        .iter()
        .find_map(|e| match e {
            SE::Error(e) => Some(e.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(error.kind(), spb::message_error::Kind::Auth);
    assert!(!error.retryable);
    assert_eq!(p.gateway.openai.requests().len(), 1, "quota: no retry");
    let ms = messages(&mut c, &s.id).await;
    assert_eq!(ms.len(), 2);
    assert!(
        !ms[1]
            .parts
            .iter()
            .any(|p| matches!(p.kind, Some(spb::part::Kind::Retry(_))))
    );
}
