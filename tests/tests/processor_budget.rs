//! Cost hard-stops through both services, the fake provider and real Redis: a session's budget and a tenant's,
//! checked at step boundaries only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::processor::{Product, get_session, messages, prompt, prompt_until_done};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use spb::session_event::Event as SE;

const ACME: &str = "acme-tenant-token-0123456789";
const OTHER: &str = "other-tenant-token-0123456789";
const TENANTS: &str = "[tenants.acme]\ntokens = [\"acme-tenant-token-0123456789\"]\nbudget_usd = 0.4\n[tenants.other]\ntokens = [\"other-tenant-token-0123456789\"]\n";

/// gpt-4o list prices: 100 000 prompt tokens = 0.25 USD, 10 output tokens = 0.0001 USD.
const STEP_COST: i64 = 250_100_000;

fn read_call(id: &str) -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", id)
            .text(&["Let me read it."])
            .tool_call(&format!("call_{id}"), "read", &["{\"path\":\"a.txt\"}"])
            .finish("tool_calls", Some((100_000, 10))),
    )
}

fn text(id: &str) -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", id)
            .text(&["Done."])
            .finish("stop", Some((100_000, 10))),
    )
}

fn budget_errors(events: &[SE]) -> Vec<&spb::MessageError> {
    events
        .iter()
        .filter_map(|e| match e {
            SE::Error(e) if e.kind() == spb::message_error::Kind::BudgetExceeded => Some(e),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_budget_stops_the_loop_at_a_step_boundary_with_everything_closed() {
    let p = Product::start(TENANTS).await;
    let mut c = p.client_with_token(ACME).await;
    let s = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            budget_usd: 0.2,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(
        (s.budget_nano_usd, s.tenant.as_str()),
        (200_000_000, "acme")
    );
    std::fs::write(p.workspace("acme", "w").join("a.txt"), "contents").unwrap();
    p.gateway.openai.push(read_call("c1"));
    p.gateway.openai.push(text("c2"));

    let events = prompt_until_done(&mut c, prompt(&s.id, "read a.txt")).await;
    let errors = budget_errors(&events);
    assert_eq!(errors.len(), 1, "{events:?}");
    assert!(
        errors[0].message.contains("budget"),
        "{}",
        errors[0].message
    );
    assert_eq!(
        p.gateway.openai.requests().len(),
        1,
        "the second step never started"
    );

    let ms = messages(&mut c, &s.id).await;
    assert_eq!(ms.len(), 2);
    let step = &ms[1];
    assert_eq!(
        step.error.as_ref().unwrap().kind(),
        spb::message_error::Kind::BudgetExceeded
    );
    assert_eq!(step.finish, "tool_calls");
    assert!(step.completed_at.is_some());
    // The step was allowed to finish: its tool ran, its text closed, its step-finish written.
    let kinds = |f: fn(&spb::part::Kind) -> bool| {
        step.parts
            .iter()
            .filter(|p| p.kind.as_ref().is_some_and(f))
            .count()
    };
    assert_eq!(
        kinds(|k| matches!(k, spb::part::Kind::Text(_))),
        1,
        "{step:?}"
    );
    assert_eq!(
        kinds(|k| matches!(k, spb::part::Kind::Tool(_))),
        1,
        "{step:?}"
    );
    for part in &step.parts {
        match &part.kind {
            Some(spb::part::Kind::Text(t)) => assert!(t.ended_at.is_some()),
            Some(spb::part::Kind::Tool(t)) => {
                let state = t.state.as_ref().unwrap();
                assert_eq!(state.status(), spb::tool_state::Status::Completed);
                assert!(state.output.contains("contents"), "{}", state.output);
            }
            _ => {}
        }
    }
    let step_finish: Vec<i64> = step
        .parts
        .iter()
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::StepFinish(f)) => Some(f.cost_nano_usd),
            _ => None,
        })
        .collect();
    assert_eq!(step_finish, [STEP_COST]);
    // The costs add up: step → message → session → tenant.
    assert_eq!(step.cost_nano_usd, STEP_COST);
    let session = get_session(&mut c, &s.id).await;
    assert_eq!(session.cost_nano_usd, STEP_COST);
    assert_eq!(
        session.status.unwrap().kind(),
        spb::session_status::Kind::Idle
    );
    let spend = c
        .get_spend(spb::GetSpendRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            spend.tenant.as_str(),
            spend.spend_nano_usd,
            spend.budget_nano_usd
        ),
        ("acme", STEP_COST, 400_000_000)
    );

    // A spent session refuses the next prompt before any model call.
    let events = prompt_until_done(&mut c, prompt(&s.id, "more")).await;
    assert_eq!(budget_errors(&events).len(), 1);
    assert_eq!(p.gateway.openai.requests().len(), 1);
    let ms = messages(&mut c, &s.id).await;
    let refused = ms.last().unwrap();
    assert_eq!(refused.role(), spb::Role::Assistant);
    assert_eq!(
        refused.error.as_ref().unwrap().kind(),
        spb::message_error::Kind::BudgetExceeded
    );
    assert!(refused.parts.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_budget_spans_its_sessions_and_spend_is_readable_per_tenant() {
    let p = Product::start(TENANTS).await;
    let mut c = p.client_with_token(ACME).await;
    let s = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    std::fs::write(p.workspace("acme", "w").join("a.txt"), "contents").unwrap();
    // First prompt: one step, 0.2501 USD of the tenant's 0.4.
    p.gateway.openai.push(text("c1"));
    let events = prompt_until_done(&mut c, prompt(&s.id, "hi")).await;
    assert!(budget_errors(&events).is_empty());
    // Second prompt, in another session of the same tenant: its first step brings the tenant to 0.5002 USD, so the
    // loop stops before the step its tool call asked for.
    let s2 = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    p.gateway.openai.push(read_call("c2"));
    p.gateway.openai.push(text("c3"));
    let events = prompt_until_done(&mut c, prompt(&s2.id, "read a.txt")).await;
    let errors = budget_errors(&events);
    assert_eq!(errors.len(), 1, "{events:?}");
    assert!(errors[0].message.contains("acme"), "{}", errors[0].message);
    assert_eq!(p.gateway.openai.requests().len(), 2);

    let spend = c
        .get_spend(spb::GetSpendRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(spend.spend_nano_usd, 2 * STEP_COST);
    let first = get_session(&mut c, &s.id).await.cost_nano_usd;
    let second = get_session(&mut c, &s2.id).await.cost_nano_usd;
    assert_eq!(
        first + second,
        spend.spend_nano_usd,
        "sessions add up to the tenant"
    );

    // Who may read what: a tenant reads itself only (another's is as missing as an unknown one); an operator
    // token reads any tenant.
    let mut other = p.client_with_token(OTHER).await;
    let denied = other
        .get_spend(spb::GetSpendRequest {
            tenant: "acme".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::NotFound);
    let own = other
        .get_spend(spb::GetSpendRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!((own.spend_nano_usd, own.budget_nano_usd), (0, 0));
    let mut operator = p.operator().await;
    let read = operator
        .get_spend(spb::GetSpendRequest {
            tenant: "acme".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.spend_nano_usd, 2 * STEP_COST);
    let unknown = operator
        .get_spend(spb::GetSpendRequest {
            tenant: "nobody".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
}
