//! The session-processor end to end: both services on loopback, a fake provider, real Redis.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::processor::{
    Product, messages, prompt, prompt_until_done, text_reply as text, tool_call_reply as tool_call,
};
use fake_provider::Reply;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

fn tool_parts(m: &spb::Message) -> Vec<&spb::ToolPart> {
    m.parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Tool(t)) => Some(t),
            _ => None,
        })
        .collect()
}

fn step_costs(m: &spb::Message) -> i64 {
    m.parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::StepFinish(f)) => Some(f.cost_nano_usd),
            _ => None,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_step_conversation_with_a_builtin_and_a_client_tool_is_persisted_exactly() {
    let p = Product::start("").await;
    let session = p.session_on("ws1").await;
    std::fs::write(
        p.workspaces.path().join("ws1/notes.txt"),
        "the answer is 42\n",
    )
    .unwrap();
    let fake = &p.gateway.openai;
    fake.push(tool_call(
        "chatcmpl-1",
        "call_read1",
        "read",
        &["{\"path\":", "\"notes.txt\"}"],
        (100, 10),
    ));
    fake.push(tool_call(
        "chatcmpl-2",
        "call_wx1",
        "get_weather",
        &["{\"city\":\"Paris\"}"],
        (150, 12),
    ));
    fake.push(text(
        "chatcmpl-3",
        &["It is ", "42 and ", "sunny."],
        (200, 8),
    ));

    let mut client = p.client().await;
    let mut req = prompt(&session.id, "What do my notes say, and the weather?");
    req.client_tools.push(spb::ClientTool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema_json:
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                .into(),
    });
    let mut stream = client.prompt(req).await.unwrap().into_inner();
    let mut kinds = Vec::new();
    let mut streamed_text = String::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(20), stream.message())
        .await
        .unwrap()
        .unwrap()
    {
        let ev = ev.event.unwrap().event.unwrap();
        match &ev {
            SE::ToolCallAwaiting(a) => {
                assert_eq!(
                    (a.tool.as_str(), a.input_json.as_str()),
                    ("get_weather", "{\"city\":\"Paris\"}")
                );
                let mut c = p.client().await;
                c.submit_tool_result(spb::SubmitToolResultRequest {
                    session_id: session.id.clone(),
                    call_id: a.call_id.clone(),
                    output: "sunny".into(),
                    is_error: false,
                })
                .await
                .unwrap();
            }
            SE::PartDelta(d) => streamed_text.push_str(&d.delta),
            _ => {}
        }
        kinds.push(std::mem::discriminant(&ev));
        if matches!(ev, SE::Done(_)) {
            break;
        }
    }
    assert_eq!(streamed_text, "It is 42 and sunny.");

    let messages = client
        .list_messages(spb::ListMessagesRequest {
            session_id: session.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .messages;
    let roles: Vec<_> = messages
        .iter()
        .map(|m| (m.role(), m.finish.as_str()))
        .collect();
    assert_eq!(
        roles,
        [
            (spb::Role::User, ""),
            (spb::Role::Assistant, "tool_calls"),
            (spb::Role::Assistant, "tool_calls"),
            (spb::Role::Assistant, "stop")
        ]
    );
    let read = tool_parts(&messages[1])[0].state.clone().unwrap();
    assert_eq!(read.status(), spb::tool_state::Status::Completed);
    assert!(read.output.contains("the answer is 42"), "{}", read.output);
    let wx = tool_parts(&messages[2])[0].state.clone().unwrap();
    assert_eq!(
        (wx.status(), wx.output.as_str(), wx.client),
        (spb::tool_state::Status::Completed, "sunny", true)
    );
    for m in &messages[1..] {
        assert!(m.completed_at.is_some());
        assert_eq!(
            m.cost_nano_usd,
            step_costs(m),
            "message cost = sum of its step-finish costs"
        );
        assert!(m.cost_nano_usd > 0);
    }
    // gpt-4o: $2.50 in, $10 out per MTok → 100 in + 10 out = 350 000 nano-USD.
    assert_eq!(messages[1].cost_nano_usd, 350_000);
    let session = client
        .get_session(spb::GetSessionRequest {
            session_id: session.id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(
        session.cost_nano_usd,
        messages.iter().map(|m| m.cost_nano_usd).sum::<i64>(),
        "session total = sum of messages"
    );
    let t = session.tokens.unwrap();
    assert_eq!((t.input, t.output), (450, 30));

    // The provider saw every result paired with its call.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3);
    let second = reqs[1].json();
    let msgs = second["messages"].as_array().unwrap();
    let tool_msg = msgs
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("tool result sent");
    assert_eq!(tool_msg["tool_call_id"], "call_read1");
    assert!(tool_msg["content"].as_str().unwrap().contains("42"));
    let third = reqs[2].json();
    assert!(
        third["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool"
                && m["tool_call_id"] == "call_wx1"
                && m["content"] == "sunny")
    );
    // One prompt, three steps: its critical path is timed once per phase, on its first step only.
    let metrics = p.engine.metrics().encode();
    for phase in ["begun", "gateway_called", "first_event"] {
        let line = format!("session_processor_prompt_phase_seconds_count{{phase=\"{phase}\"}} 1");
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line}\n{metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_escape_is_refused_and_the_model_sees_the_error() {
    let p = Product::start("").await;
    let session = p.session_on("ws2").await;
    let outside = p.workspaces.path().join("secret.txt");
    std::fs::write(&outside, "top secret").unwrap();
    let fake = &p.gateway.openai;
    fake.push(tool_call(
        "c1",
        "call_esc",
        "read",
        &["{\"path\":\"../secret.txt\"}"],
        (10, 5),
    ));
    fake.push(text("c2", &["Cannot read that."], (20, 5)));
    let mut client = p.client().await;
    prompt_until_done(&mut client, prompt(&session.id, "read ../secret.txt")).await;
    let messages = messages(&mut client, &session.id).await;
    let state = tool_parts(&messages[1])[0].state.clone().unwrap();
    assert_eq!(state.status(), spb::tool_state::Status::Error);
    assert!(!state.error.contains("top secret") && !state.output.contains("top secret"));
    let second = fake.requests()[1].json();
    let tool_msg = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(!tool_msg["content"].as_str().unwrap().contains("top secret"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_mid_stream_leaves_closed_parts_and_an_aborted_message() {
    let p = Product::start("").await;
    let session = p.session_on("").await;
    p.gateway
        .openai
        .push(Reply::fixture("openai_chat/text.sse").stall_after(4));
    let mut client = p.client().await;
    let mut stream = client
        .prompt(prompt(&session.id, "hi"))
        .await
        .unwrap()
        .into_inner();
    let mut aborted = false;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .unwrap()
        .unwrap()
    {
        match ev.event.and_then(|e| e.event) {
            Some(SE::PartDelta(_)) if !aborted => {
                aborted = client
                    .abort(spb::AbortRequest {
                        session_id: session.id.clone(),
                    })
                    .await
                    .unwrap()
                    .into_inner()
                    .aborted;
                assert!(aborted);
            }
            Some(SE::Done(_)) => break,
            _ => {}
        }
    }
    assert!(
        p.gateway
            .openai
            .wait_closed(0, Duration::from_secs(2))
            .await
            .is_some(),
        "the provider request was dropped"
    );
    let messages = client
        .list_messages(spb::ListMessagesRequest {
            session_id: session.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .messages;
    let a = &messages[1];
    assert_eq!(
        a.error.as_ref().unwrap().kind(),
        spb::message_error::Kind::Aborted
    );
    assert!(a.completed_at.is_some());
    let texts: Vec<&spb::TextPart> = a
        .parts
        .iter()
        .filter_map(|part| match &part.kind {
            Some(spb::part::Kind::Text(t)) => Some(t),
            _ => None,
        })
        .collect();
    assert!(
        !texts.is_empty(),
        "the aborted answer kept its text part: {a:?}"
    );
    for t in texts {
        assert!(t.ended_at.is_some(), "text closed");
        assert!(!t.text.is_empty(), "what streamed before the abort is kept");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doom_loop_is_refused_under_the_deny_policy() {
    let p = Product::start("").await;
    let session = p.session_on("ws3").await;
    std::fs::write(p.workspaces.path().join("ws3/a.txt"), "a").unwrap();
    for i in 0..3 {
        p.gateway.openai.push(tool_call(
            &format!("c{i}"),
            &format!("call_{i}"),
            "read",
            &["{\"path\":\"a.txt\"}"],
            (10, 5),
        ));
    }
    p.gateway
        .openai
        .push(text("c9", &["never reached"], (10, 5)));
    let mut client = p.client().await;
    prompt_until_done(&mut client, prompt(&session.id, "loop")).await;
    let messages = messages(&mut client, &session.id).await;
    assert_eq!(
        messages.len(),
        4,
        "user + three steps; the loop stopped at the third call"
    );
    let third = tool_parts(&messages[3])[0].state.clone().unwrap();
    assert_eq!(third.status(), spb::tool_state::Status::Error);
    assert!(third.error.contains("doom loop"), "{}", third.error);
    assert_eq!(p.gateway.openai.requests().len(), 3);
}
