//! A session-processor replica killed mid-step (a real process, SIGKILL) and a second replica resuming the session
//! with nothing lost and nothing stuck busy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use e2e_tests::processor::{PROCESSOR_TOKEN, SessionsClient, prompt, redis_url};
use e2e_tests::{Bearer, Harness, TOKEN};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use spb::session_event::Event as SE;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

struct Replica {
    child: Child,
    addr: String,
}

async fn start_replica(config: &std::path::Path, workspaces: &std::path::Path) -> Replica {
    let redis = redis_url();
    let mut child = Command::new(env!("CARGO_BIN_EXE_processor_replica"))
        .arg(config)
        .env("PROCESSOR_AUTH_TOKENS", PROCESSOR_TOKEN)
        .env("GATEWAY_TOKEN", TOKEN)
        .env("REDIS_URL", &redis)
        .env("PROCESSOR_WORKSPACE_ROOT", workspaces)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn processor-replica");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(addr) = line.strip_prefix("session-processor listening on ") {
                return addr.to_string();
            }
        }
        panic!("replica exited before listening");
    })
    .await
    .expect("replica starts");
    // Keep draining stderr so the replica never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Replica { child, addr }
}

/// A replica configuration (in a fresh temporary directory, which is also the workspace root) for `gateway`, with
/// its own Redis key prefix, a 1 s lease so a killed replica's sessions are resumed quickly, 100 ms event-log windows
/// (a test kills a replica once what its caller saw is logged, which must come before the gateway's stall time-out
/// ends the step), titles off, and `agent_extra` added to the default agent. Returns the directory, the config file and the prefix.
fn replica_config(
    gateway: &Harness,
    label: &str,
    agent_extra: &str,
) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("e2e:{}:", session_processor::ids::new(label));
    let config = dir.path().join("processor.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[gateway]\nurl = \"http://{}\"\n[redis]\nprefix = \"{prefix}\"\nlease_ttl_ms = 1000\n[events]\nflush_interval_ms = 100\nunwatched_flush_interval_ms = 100\n[titles]\nenabled = false\n[agents.default]\nmodel = \"openai/gpt-4o\"\n{agent_extra}",
            gateway.addr
        ),
    )
    .unwrap();
    (dir, config, prefix)
}

async fn client(addr: &str) -> SessionsClient {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    SessionServiceClient::with_interceptor(channel, Bearer(Some(PROCESSOR_TOKEN.into())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_step_is_resumed_by_another_with_nothing_lost() {
    let gateway = Harness::start().await;
    // The first attempt stalls mid-answer (the replica is killed there); the resumed step gets a full answer.
    gateway
        .openai
        .push(Reply::fixture("openai_chat/text.sse").stall_after(4));
    gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-r")
            .text(&["Recovered ", "answer."])
            .finish("stop", Some((30, 4))),
    ));
    let (dir, config, prefix) = replica_config(&gateway, "crash", "");

    let mut a = start_replica(&config, dir.path()).await;
    let mut ca = client(&a.addr).await;
    let session = ca
        .create_session(spb::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let mut stream = ca
        .prompt(prompt(&session.id, "hi"))
        .await
        .unwrap()
        .into_inner();
    let last_seen = loop {
        let ev = stream.message().await.unwrap().unwrap().event.unwrap();
        if matches!(ev.event, Some(SE::PartDelta(_))) {
            break ev.event_id;
        }
    };
    // The event log is written coalesced: a crash loses what was shown live but not yet written (at most one flush
    // window). Kill the replica once the delta the caller saw is in the log, so what follows checks that everything
    // logged before the crash ends up persisted in closed, consistent parts.
    let log = session_processor::store::Store::connect(&redis_url(), &prefix)
        .await
        .unwrap()
        .event_log();
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut cursor = session_processor::events::EventId::ZERO;
        loop {
            let page = log
                .read_event_page(&session.id, cursor, Some(Duration::from_secs(5)), 100)
                .await
                .unwrap();
            if page.events.iter().any(|e| e.event_id == last_seen) {
                return;
            }
            if let Some(c) = page.cursor {
                cursor = c;
            }
        }
    })
    .await
    .expect("the seen delta reaches the event log within a flush window");
    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    drop(stream);

    // A second replica resumes from the event log and carries the session to completion.
    let b = start_replica(&config, dir.path()).await;
    let mut cb = client(&b.addr).await;
    let mut sub = cb
        .subscribe(spb::SubscribeRequest {
            session_id: session.id.clone(),
            after_event_id: last_seen,
        })
        .await
        .unwrap()
        .into_inner();
    let done = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(ev) = sub.message().await.unwrap() {
            if let Some(SE::Done(d)) = ev.event.and_then(|e| e.event) {
                return d;
            }
        }
        panic!("subscription ended without done");
    })
    .await
    .expect("the session is resumed and finishes");
    assert_eq!(done.finish, "stop");

    let messages = cb
        .list_messages(spb::ListMessagesRequest {
            session_id: session.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .messages;
    assert_eq!(
        messages.len(),
        3,
        "user, the interrupted step, the resumed step: {messages:#?}"
    );
    let interrupted = &messages[1];
    assert_eq!(interrupted.finish, "interrupted");
    assert!(
        interrupted.completed_at.is_some(),
        "the orphaned message was closed"
    );
    let partial: String = interrupted
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Text(t)) => {
                assert!(t.ended_at.is_some(), "orphaned text part closed");
                Some(t.text.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        partial.starts_with("Hello"),
        "what streamed before the crash was persisted: {partial:?}"
    );
    let answer = &messages[2];
    assert_eq!(answer.finish, "stop");
    let text: String = answer
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Text(t)) => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Recovered answer.");
    let s = cb
        .get_session(spb::GetSessionRequest {
            session_id: session.id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(
        s.status.unwrap().kind(),
        spb::session_status::Kind::Idle,
        "nothing stuck busy"
    );
    // The resumed request did not replay the interrupted partial answer.
    let second = gateway.openai.requests()[1].json();
    let roles: Vec<_> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(roles, ["system", "user"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_call_pending_when_the_replica_dies_stays_open_and_a_late_answer_is_used() {
    // The prompt declares a client tool; the model calls it; the replica dies while the call waits for the
    // caller. The call stays the caller's to answer: the replica that resumes the session waits for it (it is not
    // closed as aborted), the answer the caller submits while no replica runs the loop is used, and the run's
    // client tools are stored with the session, so the next step still offers the tool.
    let gateway = Harness::start().await;
    gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-t1")
            .tool_call(
                "call_weather_1",
                "get_weather",
                &["{\"city\":", "\"Paris\"}"],
            )
            .finish("tool_calls", Some((20, 5))),
    ));
    gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-u")
            .text(&["Sunny ", "in Paris."])
            .finish("stop", Some((40, 4))),
    ));
    let (dir, config, _prefix) = replica_config(&gateway, "crashtool", "tools = []\n");
    let mut a = start_replica(&config, dir.path()).await;
    let mut ca = client(&a.addr).await;
    let session = ca
        .create_session(spb::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let mut req = prompt(&session.id, "Weather in Paris?");
    req.client_tools = vec![spb::ClientTool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema_json:
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                .into(),
    }];
    let mut stream = ca.prompt(req).await.unwrap().into_inner();
    let first = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let ev = stream.message().await.unwrap().unwrap().event.unwrap();
            if let Some(SE::ToolCallAwaiting(t)) = ev.event {
                return t;
            }
        }
    })
    .await
    .expect("the client tool call reaches the caller");
    assert_eq!(first.call_id, "call_weather_1");
    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    drop(stream);
    let b = start_replica(&config, dir.path()).await;
    let mut cb = client(&b.addr).await;
    // The caller answers late, through the other replica (before or after it resumed the session: the answer is
    // durable either way).
    cb.submit_tool_result(spb::SubmitToolResultRequest {
        session_id: session.id.clone(),
        call_id: "call_weather_1".into(),
        output: "sunny, 24 °C".into(),
        is_error: false,
    })
    .await
    .unwrap();
    let mut events = cb
        .subscribe(spb::SubscribeRequest {
            session_id: session.id.clone(),
            after_event_id: "0".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let answer = tokio::time::timeout(Duration::from_secs(30), async {
        let mut text = String::new();
        loop {
            let ev = events.message().await.unwrap().unwrap().event.unwrap();
            match ev.event {
                Some(SE::PartDelta(d)) => text.push_str(&d.delta),
                Some(SE::Done(_)) if text.contains("Sunny") => return text,
                _ => {}
            }
        }
    })
    .await
    .expect("the resumed loop finishes with the tool's answer");
    assert!(answer.contains("Sunny in Paris."), "{answer}");
    let requests = gateway.openai.requests();
    assert_eq!(requests.len(), 2, "the call was not made again");
    let last = requests[1].json();
    let tools: Vec<&str> = last["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["get_weather"], "{last}");
    assert!(
        last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("sunny, 24"))),
        "the late answer went to the model: {last}"
    );
    let messages = e2e_tests::processor::messages(&mut cb, &session.id).await;
    let call = messages
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match &p.kind {
            Some(spb::part::Kind::Tool(t)) if t.call_id == "call_weather_1" => t.state.clone(),
            _ => None,
        })
        .expect("the call's part");
    assert_eq!(call.status(), spb::tool_state::Status::Completed);
    assert!(!call.interrupted, "not closed as aborted");
}
