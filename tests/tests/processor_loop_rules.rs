//! The loop's rules end to end (real Redis, the real gateway, fake providers): model priority at every level and
//! across prompts, each step-finish published once, typed stops (doom loop, denied permission, empty answer) that
//! Diagnose reports as healthy, retries that do not multiply the gateway's, the last step on a strict Anthropic,
//! and reasoning asked for and replayed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::processor::{
    ProcessorSetup, Product, SessionsClient, assert_healthy, assert_stream_invariants, done_of,
    messages, prompt, prompt_until_done, text_reply,
};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use fake_provider::validate::Protocol;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

fn text(id: &str, words: &[&str]) -> Reply {
    text_reply(id, words, (10, 3))
}

fn call(id: &str, call: &str, tool: &str, args: &str) -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", id)
            .tool_call(call, tool, &[args])
            .finish("tool_calls", Some((10, 3))),
    )
}

async fn create(c: &mut SessionsClient, req: spb::CreateSessionRequest) -> spb::Session {
    c.create_session(req)
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
}

/// The model each request to the fake OpenAI named, in order.
fn requested_models(p: &Product) -> Vec<String> {
    p.gateway
        .openai
        .requests()
        .iter()
        .map(|r| r.json()["model"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_priority_uses_each_level_and_persists_across_prompts() {
    let p = Product::start_setup(
        "",
        ProcessorSetup {
            gateway_lines: "default_model = \"openai/gpt-4.1-mini\"".into(),
            extra: "[agents.bare]\nrole_prompt = \"Bare.\"\n".into(),
            ..Default::default()
        },
    )
    .await;
    let mut c = p.client().await;
    p.gateway.openai.set_fallback(text("any", &["ok"]));

    // 5: nothing but the processor's default.
    let bare = create(
        &mut c,
        spb::CreateSessionRequest {
            agent: "bare".into(),
            ..Default::default()
        },
    )
    .await;
    prompt_until_done(&mut c, prompt(&bare.id, "one")).await;
    // 4: the agent's model.
    let agent = create(&mut c, spb::CreateSessionRequest::default()).await;
    prompt_until_done(&mut c, prompt(&agent.id, "one")).await;
    // 3: the session's default beats the agent's.
    let s = create(
        &mut c,
        spb::CreateSessionRequest {
            default_model: "openai/gpt-4.1".into(),
            ..Default::default()
        },
    )
    .await;
    prompt_until_done(&mut c, prompt(&s.id, "one")).await;
    // 1: the prompt's own; then 2: the previous prompt's, for a prompt that names none; then 1 again.
    let mut named = prompt(&s.id, "two");
    named.model = "openai/gpt-4o-mini".into();
    prompt_until_done(&mut c, named).await;
    prompt_until_done(&mut c, prompt(&s.id, "three")).await;
    let mut again = prompt(&s.id, "four");
    again.model = "openai/o4-mini".into();
    prompt_until_done(&mut c, again).await;

    assert_eq!(
        requested_models(&p),
        [
            "gpt-4.1-mini",
            "gpt-4o",
            "gpt-4.1",
            "gpt-4o-mini",
            "gpt-4o-mini",
            "o4-mini"
        ]
    );
    // Every user message stores the model it ran with; the answers name the model that served.
    let users: Vec<String> = messages(&mut c, &s.id)
        .await
        .iter()
        .filter(|m| m.role() == spb::Role::User)
        .map(|m| m.model.clone())
        .collect();
    assert_eq!(
        users,
        [
            "openai/gpt-4.1",
            "openai/gpt-4o-mini",
            "openai/gpt-4o-mini",
            "openai/o4-mini"
        ]
    );
    let bare_user = messages(&mut c, &bare.id).await.remove(0);
    assert_eq!(bare_user.model, "openai/gpt-4.1-mini");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_step_finish_is_published_once_with_or_without_snapshots() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = create(
        &mut c,
        spb::CreateSessionRequest {
            workspace: "w".into(),
            ..Default::default()
        },
    )
    .await;
    std::fs::write(p.workspaces.path().join("w/a.txt"), "a").unwrap();
    p.gateway.openai.push(call(
        "c1",
        "call_1",
        "write",
        r#"{"path":"b.txt","content":"b"}"#,
    ));
    p.gateway.openai.push(text("c2", &["written."]));
    let events = prompt_until_done(&mut c, prompt(&s.id, "write b")).await;
    assert_stream_invariants(&events);
    let finishes: Vec<&spb::StepFinishPart> = events
        .iter()
        .filter_map(|e| match e {
            SE::PartUpdated(spb::Part {
                kind: Some(spb::part::Kind::StepFinish(f)),
                ..
            }) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(finishes.len(), 2, "one per step");
    assert!(
        finishes.iter().all(|f| !f.snapshot.is_empty()),
        "the one publication carries the end snapshot: {finishes:?}"
    );
    let d = done_of(&events);
    assert_eq!(d.stopped_by(), spb::StopReason::Completed);
    assert_healthy(&mut c, &s.id).await;

    let plain = create(&mut c, spb::CreateSessionRequest::default()).await;
    p.gateway.openai.push(text("c3", &["hi."]));
    let events = prompt_until_done(&mut c, prompt(&plain.id, "hi")).await;
    assert_stream_invariants(&events);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doom_loop_stop_is_typed_not_an_error_and_diagnosed_healthy() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = create(
        &mut c,
        spb::CreateSessionRequest {
            workspace: "w".into(),
            ..Default::default()
        },
    )
    .await;
    std::fs::write(p.workspaces.path().join("w/a.txt"), "a").unwrap();
    for i in 0..3 {
        p.gateway.openai.push(call(
            &format!("c{i}"),
            &format!("call_{i}"),
            "read",
            r#"{"path":"a.txt"}"#,
        ));
    }
    let events = prompt_until_done(&mut c, prompt(&s.id, "loop")).await;
    assert_stream_invariants(&events);
    assert!(
        !events.iter().any(|e| matches!(e, SE::Error(_))),
        "{events:?}"
    );
    let d = done_of(&events);
    assert_eq!(
        (d.finish.as_str(), d.stopped_by()),
        ("tool_calls", spb::StopReason::DoomLoop)
    );
    let last = messages(&mut c, &s.id).await.pop().unwrap();
    assert!(last.error.is_none(), "{:?}", last.error);
    assert_eq!(last.stopped_by(), spb::StopReason::DoomLoop);
    let report = assert_healthy(&mut c, &s.id).await;
    assert_eq!(report.stopped_by(), spb::StopReason::DoomLoop);
    assert_eq!(report.stopped_by_message_id, last.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_permission_stops_typed_and_a_pending_one_shows_in_diagnose() {
    let p = Product::start(
        "[agents.careful]\nmodel = \"openai/gpt-4o\"\ntools = [\"read\", \"list\"]\npermission_timeout_ms = 20000\npermissions = [{ tool = \"list\", decision = \"ask\" }]\n",
    )
    .await;
    let mut c = p.client().await;
    let s = create(
        &mut c,
        spb::CreateSessionRequest {
            workspace: "w".into(),
            agent: "careful".into(),
            ..Default::default()
        },
    )
    .await;
    p.gateway
        .openai
        .push(call("c1", "call_1", "list", r#"{"path":"."}"#));
    let mut stream = c.prompt(prompt(&s.id, "list")).await.unwrap().into_inner();
    let mut events = Vec::new();
    let asked = loop {
        let ev = stream
            .message()
            .await
            .unwrap()
            .unwrap()
            .event
            .unwrap()
            .event
            .unwrap();
        events.push(ev.clone());
        if let SE::PermissionAsked(a) = ev {
            break a;
        }
    };
    let waiting = e2e_tests::processor::diagnose(&mut c, &s.id).await.waiting;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(
        (
            waiting[0].kind(),
            waiting[0].id.as_str(),
            waiting[0].tool.as_str()
        ),
        (
            spb::waiting::Kind::Permission,
            asked.permission_id.as_str(),
            "list"
        )
    );
    c.reply_permission(spb::ReplyPermissionRequest {
        session_id: s.id.clone(),
        permission_id: asked.permission_id.clone(),
        allow: false,
    })
    .await
    .unwrap();
    events.extend(e2e_tests::processor::until_done(&mut stream, |r| r.event).await);
    assert_stream_invariants(&events);
    assert!(!events.iter().any(|e| matches!(e, SE::Error(_))));
    let d = done_of(&events);
    assert_eq!(
        (d.finish.as_str(), d.stopped_by()),
        ("tool_calls", spb::StopReason::PermissionDenied)
    );
    let report = assert_healthy(&mut c, &s.id).await;
    assert_eq!(report.stopped_by(), spb::StopReason::PermissionDenied);
    assert!(report.waiting.is_empty(), "{:?}", report.waiting);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_stream_is_an_empty_answer_finished_other() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = create(&mut c, spb::CreateSessionRequest::default()).await;
    p.gateway.openai.push(Reply::sse("data: [DONE]\n\n"));
    let events = prompt_until_done(&mut c, prompt(&s.id, "say nothing")).await;
    assert_stream_invariants(&events);
    assert!(
        !events.iter().any(|e| matches!(e, SE::Error(_))),
        "{events:?}"
    );
    let d = done_of(&events);
    assert_eq!(
        (d.finish.as_str(), d.stopped_by()),
        ("other", spb::StopReason::EmptyResponse)
    );
    let answer = messages(&mut c, &s.id).await.pop().unwrap();
    assert!(answer.error.is_none());
    assert_eq!(answer.finish, "other");
    assert_eq!(p.gateway.openai.requests().len(), 1, "not retried");
    assert_healthy(&mut c, &s.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_provider_failure_costs_only_the_gateways_attempts() {
    // The gateway's harness retries 3 times; the agent has one step retry, which must not multiply them: the
    // error reached the processor before any output, after the gateway's own retries.
    let p = Product::start("").await;
    let mut c = p.client().await;
    let s = create(&mut c, spb::CreateSessionRequest::default()).await;
    p.gateway.openai.set_fallback(Reply::json(
        500,
        r#"{"error":{"message":"boom","type":"server_error"}}"#,
    ));
    let events = prompt_until_done(&mut c, prompt(&s.id, "hi")).await;
    assert_stream_invariants(&events);
    assert_eq!(
        p.gateway.openai.requests().len(),
        3,
        "the gateway's attempts only"
    );
    assert!(events.iter().any(|e| matches!(e, SE::Error(_))));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SE::Status(st) if st.kind() == spb::session_status::Kind::Retry)),
        "{events:?}"
    );
    assert_eq!(done_of(&events).stopped_by(), spb::StopReason::Error);
    assert_healthy(&mut c, &s.id).await;
}

/// Sends a prompt and reads it to its `done`, answering every client tool call with `answer`.
async fn prompt_answering_client_tools(
    c: &mut SessionsClient,
    req: spb::PromptRequest,
    answer: &str,
) -> Vec<SE> {
    let session_id = req.session_id.clone();
    let mut stream = c.prompt(req).await.unwrap().into_inner();
    let mut control = c.clone();
    let mut events = Vec::new();
    let read = async {
        while let Some(r) = stream.message().await.unwrap() {
            let ev = r.event.unwrap().event.unwrap();
            events.push(ev.clone());
            match ev {
                SE::ToolCallAwaiting(a) => {
                    control
                        .submit_tool_result(spb::SubmitToolResultRequest {
                            session_id: session_id.clone(),
                            call_id: a.call_id,
                            output: answer.into(),
                            is_error: false,
                        })
                        .await
                        .unwrap();
                }
                SE::Done(_) => break,
                _ => {}
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), read)
        .await
        .expect("the loop finishes within 20 s");
    events
}

fn anthropic_client_tool() -> spb::ClientTool {
    spb::ClientTool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema_json:
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                .into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_step_on_anthropic_keeps_tools_and_replays_the_signed_thinking() {
    let p = Product::start(
        "[agents.two]\nmodel = \"anthropic/claude-sonnet-4-5\"\ntools = []\nmax_steps = 2\nclient_tool_timeout_ms = 20000\n",
    )
    .await;
    p.gateway.anthropic.validate_requests(Protocol::Anthropic);
    p.gateway
        .anthropic
        .push(Reply::fixture("anthropic/thinking_tool_use.sse"));
    p.gateway
        .anthropic
        .push(Reply::fixture("anthropic/text.sse"));
    let mut c = p.client().await;
    let s = create(
        &mut c,
        spb::CreateSessionRequest {
            agent: "two".into(),
            ..Default::default()
        },
    )
    .await;
    let mut req = prompt(&s.id, "Weather in Paris?");
    req.client_tools = vec![anthropic_client_tool()];
    req.reasoning = Some(spb::Reasoning {
        effort: 0,
        budget_tokens: 2048,
    });
    let events = prompt_answering_client_tools(&mut c, req, "sunny, 24 °C").await;
    assert_stream_invariants(&events);
    assert!(
        p.gateway.anthropic.rejections().is_empty(),
        "{:?}",
        p.gateway.anthropic.rejections()
    );
    let requests = p.gateway.anthropic.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.json()["thinking"],
            serde_json::json!({"type": "enabled", "budget_tokens": 2048}),
            "reasoning asked on every step"
        );
    }
    let last = requests[1].json();
    assert!(
        last["tools"].as_array().is_some_and(|t| !t.is_empty()),
        "{last}"
    );
    assert_eq!(last["tool_choice"]["type"], "none", "{last}");
    let assistant = &last["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    let first_block = &assistant["content"][0];
    assert_eq!(first_block["type"], "thinking", "{assistant}");
    assert!(
        first_block["signature"]
            .as_str()
            .is_some_and(|s| s.starts_with("EpYCCkYI")),
        "the signature is replayed: {first_block}"
    );
    assert_eq!(done_of(&events).stopped_by(), spb::StopReason::MaxSteps);
    assert_healthy(&mut c, &s.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_reasoning_reaches_the_provider() {
    let p = Product::start(
        "[agents.thinker]\nmodel = \"openai/o4-mini\"\nreasoning = { effort = \"high\" }\n",
    )
    .await;
    let mut c = p.client().await;
    let s = create(
        &mut c,
        spb::CreateSessionRequest {
            agent: "thinker".into(),
            ..Default::default()
        },
    )
    .await;
    p.gateway.openai.push(text("c1", &["thought."]));
    prompt_until_done(&mut c, prompt(&s.id, "think")).await;
    let body = p.gateway.openai.requests()[0].json();
    assert_eq!(body["reasoning_effort"], "high", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_step_on_gemini_keeps_tools_but_forbids_calling_them() {
    let p = Product::start(
        "[agents.two]\nmodel = \"gemini/gemini-2.5-flash\"\ntools = []\nmax_steps = 2\nclient_tool_timeout_ms = 20000\n",
    )
    .await;
    p.gateway.gemini.validate_requests(Protocol::Gemini);
    p.gateway
        .gemini
        .push(Reply::fixture("gemini/parallel_tools.sse"));
    p.gateway.gemini.push(Reply::fixture("gemini/text.sse"));
    let mut c = p.client().await;
    let s = create(
        &mut c,
        spb::CreateSessionRequest {
            agent: "two".into(),
            ..Default::default()
        },
    )
    .await;
    let mut req = prompt(&s.id, "Weather in Paris and Tokyo?");
    req.client_tools = vec![anthropic_client_tool()];
    let events = prompt_answering_client_tools(&mut c, req, "mild").await;
    assert_stream_invariants(&events);
    assert!(
        p.gateway.gemini.rejections().is_empty(),
        "{:?}",
        p.gateway.gemini.rejections()
    );
    let requests = p.gateway.gemini.requests();
    assert_eq!(requests.len(), 2);
    let last = requests[1].json();
    assert!(
        last["tools"].as_array().is_some_and(|t| !t.is_empty()),
        "{last}"
    );
    assert_eq!(
        last["toolConfig"]["functionCallingConfig"]["mode"], "NONE",
        "{last}"
    );
    assert_eq!(done_of(&events).stopped_by(), spb::StopReason::MaxSteps);
    assert_healthy(&mut c, &s.id).await;
}
