//! Session diagnostics end to end (both services, fake providers, real Redis): `Diagnose` on a healthy tool
//! conversation, on a retried step (with the RETRY status GetSession and ListSessions show during the wait), on a step
//! a gateway fallback served, and on a session whose stored data was broken on purpose; and the `sessions diagnose`
//! CLI run as a real process against the product, whose exit code says healthy (0) or not (1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime};

use e2e_tests::processor::{
    PROCESSOR_TOKEN, Product, SessionsClient, get_session, messages, prompt, prompt_until_done,
    text_reply as text, tool_call_reply as tool_call,
};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use session_processor::diagnostics::CHECKS;

async fn create(c: &mut SessionsClient, workspace: &str) -> spb::Session {
    c.create_session(spb::CreateSessionRequest {
        workspace: workspace.into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .session
    .unwrap()
}

async fn diagnose(c: &mut SessionsClient, session_id: &str) -> spb::DiagnoseResponse {
    c.diagnose(spb::DiagnoseRequest {
        session_id: session_id.into(),
    })
    .await
    .unwrap()
    .into_inner()
}

/// Waits (bounded) until the session's loop has released its lease: `done` is published just before.
async fn idle(c: &mut SessionsClient, session_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while get_session(c, session_id).await.status.unwrap().kind() != spb::session_status::Kind::Idle
    {
        assert!(
            Instant::now() < deadline,
            "the loop never released its lease"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn failing(r: &spb::DiagnoseResponse) -> Vec<&str> {
    r.checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.name.as_str())
        .collect()
}

/// A read-file tool step, then the answer: a healthy two-step tool conversation.
async fn tool_conversation(p: &Product, c: &mut SessionsClient) -> spb::Session {
    let s = create(c, "ws").await;
    std::fs::write(p.workspaces.path().join("ws/notes.txt"), "42\n").unwrap();
    p.gateway.openai.push(tool_call(
        "chatcmpl-1",
        "call_read1",
        "read",
        &["{\"path\":\"notes.txt\"}"],
        (100, 10),
    ));
    p.gateway
        .openai
        .push(text("chatcmpl-2", &["The notes ", "say 42."], (150, 8)));
    prompt_until_done(c, prompt(&s.id, "What do my notes say?")).await;
    idle(c, &s.id).await;
    s
}

/// Runs the `sessions` CLI with `args` against the product; returns the exit code and stdout.
async fn cli(p: &Product, args: &[&str]) -> (Option<i32>, String) {
    let addr = format!("http://{}", p.addr);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sessions_cli"))
        .args(["--addr", addr.as_str(), "--token", PROCESSOR_TOKEN])
        .args(args)
        .env_remove("PROCESSOR_ADDR")
        .env_remove("PROCESSOR_TOKEN")
        .output()
        .await
        .expect("run the sessions CLI");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.stderr.is_empty(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), stdout)
}

/// Runs `sessions diagnose <id>`.
async fn cli_diagnose(p: &Product, session_id: &str) -> (Option<i32>, String) {
    cli(p, &["diagnose", session_id]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_step_tool_conversation_is_healthy_and_the_cli_exits_0() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = tool_conversation(&p, &mut c).await;
    let ms = messages(&mut c, &s.id).await;
    assert_eq!(ms.len(), 3, "user, tool step, answer");

    let r = diagnose(&mut c, &s.id).await;
    assert_eq!(r.session_id, s.id);
    let names: Vec<&str> = r.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, CHECKS, "every check, in the fixed order");
    for check in &r.checks {
        assert!(check.ok, "{check:?}");
        assert!(check.detail.is_empty());
        assert!(!check.description.is_empty());
    }
    assert!(r.healthy, "{:?}", r.checks);
    assert_eq!((r.retries, r.fallbacks), (0, 0));
    assert_eq!(r.storage_write_failures, 0);
    assert!(r.last_storage_failure_at.is_none() && r.last_storage_failure.is_empty());
    assert!(r.last_error.is_none() && r.last_error_message_id.is_empty());
    assert!(
        !r.lease_held && r.lease_holder.is_empty(),
        "the loop is done"
    );

    let (code, stdout) = cli_diagnose(&p, &s.id).await;
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("session {}: healthy", s.id)),
        "{stdout}"
    );
    for name in CHECKS {
        assert!(stdout.contains(&format!("ok      {name}")), "{stdout}");
    }

    let (code, stdout) = cli(&p, &["get", &s.id]).await;
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("status    idle"), "{stdout}");
    let session = get_session(&mut c, &s.id).await;
    assert!(
        stdout.contains(&format!("({} nano-USD)", session.cost_nano_usd)),
        "{stdout}"
    );
    // A failing call exits 2, not 1: "not healthy" and "could not ask" stay distinguishable.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sessions_cli"))
        .args([
            "--addr",
            &format!("http://{}", p.addr),
            "--token",
            PROCESSOR_TOKEN,
        ])
        .args(["diagnose", "ses_missing"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_stored_data_is_named_by_exactly_the_checks_it_breaks_and_the_cli_exits_1() {
    let mut p = Product::start("").await;
    // The test breaks the stored session on purpose.
    p.check_on_drop = false;
    let mut c = p.client().await;
    let s = tool_conversation(&p, &mut c).await;
    let before = diagnose(&mut c, &s.id).await;
    assert!(before.healthy, "{:?}", before.checks);

    // Break the answer on purpose through the store: a step-start with no step-finish after its last step, and a
    // cost its steps do not add up to.
    let store = &p.engine.store();
    let mut answer = messages(&mut c, &s.id).await.pop().unwrap();
    assert_eq!(answer.finish, "stop");
    let stray = spb::Part {
        id: session_processor::ids::new("prt"),
        message_id: answer.id.clone(),
        session_id: s.id.clone(),
        kind: Some(spb::part::Kind::StepStart(spb::StepStartPart::default())),
    };
    store.messages().put_part(&stray, None).await.unwrap();
    let cost = answer.cost_nano_usd;
    answer.cost_nano_usd = cost + 7;
    answer.parts.clear();
    store.messages().put_message(&answer, None).await.unwrap();

    let r = diagnose(&mut c, &s.id).await;
    assert!(!r.healthy);
    assert_eq!(failing(&r), ["step_pairing", "message_cost"]);
    let detail = |name: &str| {
        r.checks
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .detail
            .clone()
    };
    let pairing = detail("step_pairing");
    assert!(
        pairing.contains(&answer.id) && pairing.contains(&stray.id),
        "{pairing}"
    );
    let costs = detail("message_cost");
    assert!(
        costs.contains(&format!(
            "message {}: cost {} nano-USD but its steps sum to {cost}",
            answer.id,
            cost + 7
        )),
        "{costs}"
    );
    assert!(
        costs.contains(&format!("session {}", s.id)),
        "the session total no longer matches its messages either: {costs}"
    );

    let (code, stdout) = cli_diagnose(&p, &s.id).await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("NOT HEALTHY"), "{stdout}");
    assert!(stdout.contains("FAILED  step_pairing: "), "{stdout}");
    assert!(stdout.contains("FAILED  message_cost: "), "{stdout}");
    assert!(stdout.contains("ok      tools_settled"), "{stdout}");

    // Not found and a missing id are the API's usual errors.
    let missing = c
        .diagnose(spb::DiagnoseRequest {
            session_id: "ses_missing".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    let empty = c
        .diagnose(spb::DiagnoseRequest::default())
        .await
        .unwrap_err();
    assert_eq!(empty.code(), tonic::Code::InvalidArgument);
    assert!(
        empty.message().contains("session_id"),
        "{}",
        empty.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_step_shows_retry_status_while_waiting_and_counts_one_retry() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = create(&mut c, "").await;
    // A rate limit after output started, asking for a 2 s wait: the loop records a retry and waits that long.
    let mut body = ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-rl")
        .text(&["Partial"])
        .finish("stop", None);
    body = body.replace("data: [DONE]\n\n", "");
    let finish_chunk = body.rfind("data: ").unwrap();
    body.truncate(finish_chunk);
    body.push_str("data: {\"error\":{\"message\":\"Rate limit reached for gpt-4o. Please try again in 2s.\",\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}\n\n");
    p.gateway.openai.push(Reply::sse(body));
    p.gateway
        .openai
        .push(text("chatcmpl-ok", &["Recovered."], (30, 4)));

    let mut stream = c.prompt(prompt(&s.id, "hi")).await.unwrap().into_inner();
    // Poll until the loop is waiting (the status says RETRY), within a bounded deadline.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = get_session(&mut c, &s.id).await.status.unwrap();
        if status.kind() == spb::session_status::Kind::Retry {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "GetSession never showed RETRY (last: {status:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.attempt, 1);
    assert!(
        status.message.contains("Rate limit reached"),
        "{}",
        status.message
    );
    let next = SystemTime::try_from(status.next_attempt_at.unwrap()).unwrap();
    assert!(
        next > SystemTime::now() - Duration::from_secs(2),
        "the next attempt is planned about 2 s after the failure: {next:?}"
    );
    let listed = c
        .list_sessions(spb::ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .sessions;
    let mine = listed.iter().find(|l| l.id == s.id).unwrap();
    assert_eq!(
        mine.status.as_ref().unwrap().kind(),
        spb::session_status::Kind::Retry,
        "ListSessions shows it too (unless the wait just ended)"
    );

    e2e_tests::processor::until_done(&mut stream, |r| r.event).await;
    idle(&mut c, &s.id).await;
    let after = get_session(&mut c, &s.id).await.status.unwrap();
    assert_eq!(after.kind(), spb::session_status::Kind::Idle);
    assert_eq!(after.attempt, 0);

    let ms = messages(&mut c, &s.id).await;
    let retry_parts: Vec<&spb::RetryPart> = ms
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Retry(r)) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(retry_parts.len(), 1, "the retry part is visible");
    let r = diagnose(&mut c, &s.id).await;
    assert_eq!(r.retries, 1);
    assert_eq!(r.fallbacks, 0);
    assert!(
        r.healthy,
        "a retried step may lack its step-finish: {:?}",
        r.checks
    );
    assert!(
        r.last_error.is_none(),
        "the retried attempt's error is on its retry part"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_served_by_a_gateway_fallback_is_counted() {
    let p = Product::start_with(
        "[models.\"openai/gpt-4o\"]\nfallbacks = [\"anthropic/claude-sonnet-4-5\"]\n",
        "",
    )
    .await;
    let mut c = p.client().await;
    let s = create(&mut c, "").await;
    let overloaded = std::fs::read_to_string(format!(
        "{}/../shared/fake-provider/fixtures/openai_chat/errors/server_error.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    p.gateway.openai.set_fallback(Reply::json(503, overloaded));
    p.gateway
        .anthropic
        .push(Reply::fixture("anthropic/text.sse"));
    prompt_until_done(&mut c, prompt(&s.id, "Say hello")).await;
    idle(&mut c, &s.id).await;

    let ms = messages(&mut c, &s.id).await;
    let answer = ms.last().unwrap();
    assert_eq!(
        answer.model, "anthropic/claude-sonnet-4-5",
        "the served model"
    );
    let r = diagnose(&mut c, &s.id).await;
    assert_eq!(r.fallbacks, 1);
    assert_eq!(r.retries, 0);
    assert!(r.healthy, "{:?}", r.checks);
}
