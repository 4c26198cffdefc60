//! A session's totals (cost and tokens) stay the sum of its assistant messages across several prompts, a step with
//! a tool call (two steps settled in one run) and a loop resumed after its replica died mid-step: the loop carries
//! the totals between steps instead of re-reading the history, and this checks that the carried sum never drifts
//! from what is stored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::processor::{
    Product, get_session, messages, prompt, prompt_until_done, text_reply as text,
};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use session_processor::store::ActiveMark;
use spb::session_event::Event as SE;

/// The sum of the assistant messages' costs and of their step-finish tokens, as stored.
fn summed(history: &[spb::Message]) -> (i64, spb::Tokens) {
    let mut cost = 0;
    let mut tokens = spb::Tokens::default();
    for m in history.iter().filter(|m| m.role() == spb::Role::Assistant) {
        cost += m.cost_nano_usd;
        for p in &m.parts {
            if let Some(spb::part::Kind::StepFinish(f)) = &p.kind {
                let t = f.tokens.unwrap_or_default();
                tokens.input += t.input;
                tokens.output += t.output;
                tokens.reasoning += t.reasoning;
                tokens.cache_read += t.cache_read;
                tokens.cache_write += t.cache_write;
            }
        }
    }
    (cost, tokens)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_totals_equal_the_sum_of_messages_across_prompts_tools_and_a_resume() {
    let p = Product::start("").await;
    std::fs::create_dir_all(p.workspaces.path().join("w")).unwrap();
    std::fs::write(p.workspaces.path().join("w/a.txt"), "alpha").unwrap();
    let mut c = p.client().await;
    let session = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let id = session.id.clone();

    // Prompt 1: a tool call, then the answer (two steps settled by one run).
    p.gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "c1")
            .tool_call("call_1", "read", &["{\"path\":\"a.txt\"}"])
            .finish("tool_calls", Some((40, 6))),
    ));
    p.gateway
        .openai
        .push(text("c2", &["It ", "says alpha."], (55, 4)));
    let events = prompt_until_done(&mut c, prompt(&id, "read a.txt")).await;
    assert!(matches!(events.last(), Some(SE::Done(d)) if d.finish == "stop"));
    let s = get_session(&mut c, &id).await;
    let (cost, tokens) = summed(&messages(&mut c, &id).await);
    assert!(cost > 0, "the steps cost something");
    assert_eq!((s.cost_nano_usd, s.tokens.unwrap()), (cost, tokens));

    // Prompt 2: a plain answer.
    p.gateway.openai.push(text("c3", &["Again."], (70, 2)));
    prompt_until_done(&mut c, prompt(&id, "again")).await;
    let s = get_session(&mut c, &id).await;
    let (cost, tokens) = summed(&messages(&mut c, &id).await);
    assert_eq!((s.cost_nano_usd, s.tokens.unwrap()), (cost, tokens));
    let before_crash = s.cost_nano_usd;

    // A replica died mid-step: it stored a prompt and a step that finished with a tool call (its cost and tokens
    // stored with it) but never completed it, settled the totals or released the session.
    let store = &p.engine.store();
    let user = spb::Message {
        id: session_processor::ids::new("msg"),
        session_id: id.clone(),
        role: spb::Role::User as i32,
        parts: vec![spb::Part {
            id: session_processor::ids::new("prt"),
            kind: Some(spb::part::Kind::Text(spb::TextPart {
                text: "read it once more".into(),
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    };
    store.messages().put_message(&user, None).await.unwrap();
    let orphan_tokens = spb::Tokens {
        input: 9,
        output: 5,
        ..Default::default()
    };
    let orphan = spb::Message {
        id: session_processor::ids::new("msg"),
        session_id: id.clone(),
        role: spb::Role::Assistant as i32,
        parent_id: user.id.clone(),
        model: "openai/gpt-4o".into(),
        agent: "default".into(),
        finish: "tool_calls".into(),
        cost_nano_usd: 123_457,
        tokens: Some(orphan_tokens),
        parts: vec![
            spb::Part {
                id: session_processor::ids::new("prt"),
                kind: Some(spb::part::Kind::StepStart(spb::StepStartPart::default())),
                ..Default::default()
            },
            spb::Part {
                id: session_processor::ids::new("prt"),
                kind: Some(spb::part::Kind::Tool(spb::ToolPart {
                    call_id: "call_2".into(),
                    tool: "read".into(),
                    state: Some(spb::ToolState {
                        status: spb::tool_state::Status::Running as i32,
                        input_json: "{\"path\":\"a.txt\"}".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
                ..Default::default()
            },
            spb::Part {
                id: session_processor::ids::new("prt"),
                kind: Some(spb::part::Kind::StepFinish(spb::StepFinishPart {
                    reason: "tool_calls".into(),
                    tokens: Some(orphan_tokens),
                    cost_nano_usd: 123_457,
                    ..Default::default()
                })),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    store.messages().put_message(&orphan, None).await.unwrap();
    store
        .active()
        .mark_active(&id, "run_orphaned")
        .await
        .unwrap();
    let after = store.event_log().last_event_id(&id).await.unwrap();
    let mut sub = c
        .subscribe(spb::SubscribeRequest {
            session_id: id.clone(),
            after_event_id: after,
        })
        .await
        .unwrap()
        .into_inner();

    // This replica resumes it: the orphaned step is closed, the aborted tool result goes back to the model, and the
    // next step answers; settling it must count the orphan it never settled itself.
    p.gateway.openai.push(text("c4", &["Resumed."], (80, 3)));
    assert!(
        p.engine
            .resume(&[ActiveMark::of(&id, "run_orphaned")])
            .await
            .unwrap(),
        "the session is resumed"
    );
    let done = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(ev) = sub.message().await.unwrap() {
            if let Some(SE::Done(d)) = ev.event.and_then(|e| e.event) {
                return d;
            }
        }
        panic!("subscription ended without done");
    })
    .await
    .expect("the resumed loop finishes");
    assert_eq!(done.finish, "stop");

    let history = messages(&mut c, &id).await;
    let s = get_session(&mut c, &id).await;
    let (cost, tokens) = summed(&history);
    assert_eq!((s.cost_nano_usd, s.tokens.unwrap()), (cost, tokens));
    assert!(
        s.cost_nano_usd > before_crash + 123_457,
        "the orphan's and the resumed step's costs are both counted: {} after {before_crash}",
        s.cost_nano_usd
    );
    let answers = history
        .iter()
        .filter(|m| m.role() == spb::Role::Assistant)
        .count();
    assert_eq!(
        answers, 5,
        "two steps, one, the orphan and the resumed step"
    );
}
