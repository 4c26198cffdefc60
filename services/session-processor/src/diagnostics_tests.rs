use super::*;
use crate::processor::{Effect, Processor};
use llm_proto::gateway as gw;

fn ts(s: i64) -> Timestamp {
    Timestamp {
        seconds: s,
        nanos: 0,
    }
}

fn part(id: &str, kind: pb::part::Kind) -> pb::Part {
    pb::Part {
        id: id.into(),
        kind: Some(kind),
        ..Default::default()
    }
}

fn tokens(input: u64, output: u64) -> pb::Tokens {
    pb::Tokens {
        input,
        output,
        ..Default::default()
    }
}

fn start(id: &str) -> pb::Part {
    part(id, pb::part::Kind::StepStart(pb::StepStartPart::default()))
}

fn finish(id: &str, reason: &str, t: pb::Tokens, cost: i64) -> pb::Part {
    part(
        id,
        pb::part::Kind::StepFinish(pb::StepFinishPart {
            reason: reason.into(),
            tokens: Some(t),
            cost_nano_usd: cost,
            model: "openai/gpt-4o".into(),
            requested_model: "openai/gpt-4o".into(),
            ..Default::default()
        }),
    )
}

fn text(id: &str, ended: bool) -> pb::Part {
    part(
        id,
        pb::part::Kind::Text(pb::TextPart {
            text: "hi".into(),
            started_at: Some(ts(1)),
            ended_at: ended.then(|| ts(2)),
            synthetic: false,
        }),
    )
}

fn tool(id: &str, status: pb::tool_state::Status) -> pb::Part {
    part(
        id,
        pb::part::Kind::Tool(pb::ToolPart {
            call_id: format!("call_{id}"),
            tool: "read".into(),
            state: Some(pb::ToolState {
                status: status as i32,
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
}

fn user(id: &str) -> pb::Message {
    pb::Message {
        id: id.into(),
        role: pb::Role::User as i32,
        parts: vec![text(&format!("{id}_t"), true)],
        ..Default::default()
    }
}

fn assistant(
    id: &str,
    finish: &str,
    cost: i64,
    t: pb::Tokens,
    parts: Vec<pb::Part>,
) -> pb::Message {
    pb::Message {
        id: id.into(),
        role: pb::Role::Assistant as i32,
        model: "openai/gpt-4o".into(),
        finish: finish.into(),
        cost_nano_usd: cost,
        tokens: Some(t),
        completed_at: Some(ts(3)),
        parts,
        ..Default::default()
    }
}

/// A two-step tool conversation as the loop stores it: step 1 calls a tool, step 2 answers.
fn healthy() -> Loaded {
    let m1 = assistant(
        "msg_2",
        "tool_calls",
        100,
        tokens(10, 5),
        vec![
            start("p1"),
            tool("p2", pb::tool_state::Status::Completed),
            finish("p3", "tool_calls", tokens(10, 5), 100),
        ],
    );
    let m2 = assistant(
        "msg_3",
        "stop",
        250,
        tokens(20, 7),
        vec![
            start("p4"),
            text("p5", true),
            finish("p6", "stop", tokens(20, 7), 250),
        ],
    );
    Loaded {
        session: pb::Session {
            id: "ses_1".into(),
            cost_nano_usd: 350,
            tokens: Some(tokens(30, 12)),
            ..Default::default()
        },
        messages: vec![user("msg_1"), m1, m2],
        ..Default::default()
    }
}

fn check<'a>(checks: &'a [pb::DiagnosticCheck], name: &str) -> &'a pb::DiagnosticCheck {
    checks.iter().find(|c| c.name == name).unwrap()
}

fn failing(data: &Loaded) -> Vec<String> {
    run_checks(data)
        .into_iter()
        .filter(|c| !c.ok)
        .map(|c| c.name)
        .collect()
}

#[test]
fn a_healthy_session_passes_every_check_in_the_fixed_order() {
    let checks = run_checks(&healthy());
    let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, CHECKS);
    for c in &checks {
        assert!(c.ok, "{c:?}");
        assert!(c.detail.is_empty());
        assert!(!c.description.is_empty());
    }
    let r = report(&healthy(), &WriteFailures::default());
    assert!(r.healthy);
    assert_eq!(
        (r.retries, r.fallbacks, r.storage_write_failures),
        (0, 0, 0)
    );
    assert!(r.last_error.is_none() && r.last_storage_failure_at.is_none());
}

#[test]
fn a_step_start_without_its_step_finish_is_named() {
    let mut data = healthy();
    data.messages[2].parts.push(start("p7"));
    assert_eq!(failing(&data), [STEP_PAIRING]);
    let c = check(&run_checks(&data), STEP_PAIRING).clone();
    assert!(
        c.detail.contains("msg_3") && c.detail.contains("p7"),
        "{}",
        c.detail
    );

    // Two starts in a row, and a finish without a start.
    let mut data = healthy();
    data.messages[1].parts.insert(1, start("p1b"));
    data.messages[2].parts.remove(0);
    let c = step_pairing(&data);
    assert!(!c.ok);
    assert!(
        c.detail
            .contains("step-start p1 has no step-finish before step-start p1b"),
        "{}",
        c.detail
    );
    assert!(
        c.detail.contains("step-finish p6 has no step-start"),
        "{}",
        c.detail
    );
}

#[test]
fn a_step_that_ended_early_for_a_recorded_reason_may_lack_its_step_finish() {
    for (finish, error) in [
        ("retried", false),
        ("", true),
        ("interrupted", false),
        (FINISH_OVERFLOW, false),
    ] {
        let mut data = healthy();
        let m = assistant(
            "msg_4",
            finish,
            0,
            pb::Tokens::default(),
            vec![start("p8"), text("p9", true)],
        );
        data.messages.push(pb::Message {
            error: error.then(|| pb::MessageError {
                kind: pb::message_error::Kind::Api as i32,
                message: "overloaded".into(),
                ..Default::default()
            }),
            ..m
        });
        assert!(step_pairing(&data).ok, "{finish} {error}");
    }
    // The running step of a live loop is skipped too.
    let mut data = healthy();
    data.lease_holder = Some("rep_a".into());
    data.active = true;
    let mut running = assistant("msg_4", "", 0, pb::Tokens::default(), vec![start("p8")]);
    running.completed_at = None;
    data.messages.push(running.clone());
    assert!(failing(&data).is_empty(), "{:?}", run_checks(&data));
    // Without the lease, the same message is an orphan.
    data.lease_holder = None;
    data.active = false;
    assert_eq!(failing(&data), [STEP_PAIRING, PARTS_CLOSED]);
}

#[test]
fn a_message_cost_that_does_not_add_up_is_named_with_its_values() {
    let mut data = healthy();
    data.messages[2].cost_nano_usd = 251;
    data.session.cost_nano_usd = 351;
    assert_eq!(failing(&data), [MESSAGE_COST]);
    let c = message_cost(&data);
    assert!(
        c.detail
            .contains("message msg_3: cost 251 nano-USD but its steps sum to 250"),
        "{}",
        c.detail
    );
    assert!(
        !c.detail.contains("session"),
        "the session equals its messages: {}",
        c.detail
    );

    let mut data = healthy();
    data.session.cost_nano_usd = 1;
    let c = message_cost(&data);
    assert!(
        c.detail
            .contains("session ses_1: cost 1 nano-USD but its messages sum to 350"),
        "{}",
        c.detail
    );
    // While a loop runs, the session total is not compared (settled after each step).
    data.lease_holder = Some("rep".into());
    data.active = true;
    assert!(message_cost(&data).ok);
}

#[test]
fn message_tokens_are_the_last_steps_and_session_tokens_the_sum() {
    let mut data = healthy();
    data.messages[2].tokens = Some(tokens(30, 12));
    assert_eq!(failing(&data), [MESSAGE_TOKENS]);
    assert!(message_tokens(&data).detail.contains("message msg_3"));

    let mut data = healthy();
    data.session.tokens = Some(tokens(20, 7));
    let c = message_tokens(&data);
    assert!(!c.ok && c.detail.contains("session ses_1"), "{}", c.detail);

    // A message with no step-finish has no tokens.
    let mut data = healthy();
    data.messages.push(assistant(
        "msg_4",
        "retried",
        0,
        tokens(1, 0),
        vec![start("p8")],
    ));
    data.messages[3]
        .parts
        .push(part("p9", pb::part::Kind::Retry(pb::RetryPart::default())));
    assert_eq!(failing(&data), [MESSAGE_TOKENS]);
}

#[test]
fn a_tool_left_running_is_named_unless_the_live_loop_runs_it() {
    let mut data = healthy();
    data.messages[1].parts[1] = tool("p2", pb::tool_state::Status::Running);
    assert_eq!(failing(&data), [TOOLS_SETTLED]);
    let c = tools_settled(&data);
    assert!(
        c.detail
            .contains("tool part p2 (call call_p2, `read`) is running"),
        "{}",
        c.detail
    );

    let mut data = healthy();
    data.lease_holder = Some("rep".into());
    data.active = true;
    let mut waiting = assistant(
        "msg_4",
        "tool_calls",
        5,
        tokens(1, 1),
        vec![
            start("p8"),
            tool("p9", pb::tool_state::Status::Pending),
            finish("pa", "tool_calls", tokens(1, 1), 5),
        ],
    );
    waiting.completed_at = None;
    data.messages.push(waiting);
    assert!(tools_settled(&data).ok);
}

#[test]
fn open_parts_and_messages_without_completion_are_named() {
    let mut data = healthy();
    data.messages[2].parts[1] = text("p5", false);
    data.messages[1].completed_at = None;
    assert_eq!(failing(&data), [PARTS_CLOSED]);
    let c = parts_closed(&data);
    assert!(
        c.detail.contains("message msg_2 has no completion time"),
        "{}",
        c.detail
    );
    assert!(
        c.detail
            .contains("message msg_3: text part p5 has no end time"),
        "{}",
        c.detail
    );
}

#[test]
fn busy_and_lease_must_agree() {
    let mut data = healthy();
    data.active = true;
    assert_eq!(failing(&data), [BUSY_UNDER_LEASE]);
    assert!(busy_under_lease(&data).detail.contains("no lease is held"));

    let mut data = healthy();
    data.lease_holder = Some("rep_x".into());
    let c = busy_under_lease(&data);
    assert!(
        !c.ok && c.detail.contains("lease held by rep_x"),
        "{}",
        c.detail
    );

    data.active = true;
    assert!(busy_under_lease(&data).ok);
    data.held_here_without_loop = true;
    let c = busy_under_lease(&data);
    assert!(
        !c.ok && c.detail.contains("no loop for the session runs here"),
        "{}",
        c.detail
    );
}

#[test]
fn many_findings_are_listed_up_to_a_bound() {
    let mut data = healthy();
    for i in 0..(MAX_FINDINGS + 3) {
        data.messages[2]
            .parts
            .push(text(&format!("q{i:02}"), false));
    }
    let c = parts_closed(&data);
    assert_eq!(c.detail.matches("has no end time").count(), MAX_FINDINGS);
    assert!(c.detail.ends_with("and 3 more"), "{}", c.detail);
}

#[test]
fn retries_fallbacks_and_the_last_error_are_reported() {
    let mut data = healthy();
    let mut failed = assistant(
        "msg_2a",
        "retried",
        0,
        pb::Tokens::default(),
        vec![
            start("p0"),
            part(
                "p0r",
                pb::part::Kind::Retry(pb::RetryPart {
                    attempt: 1,
                    ..Default::default()
                }),
            ),
        ],
    );
    failed.error = None;
    data.messages.insert(1, failed);
    if let Some(pb::part::Kind::StepFinish(f)) = data.messages[3].parts[2].kind.as_mut() {
        f.model = "anthropic/claude-sonnet-4-5".into();
    }
    // An older step stored before the requested model was recorded is not a fallback.
    if let Some(pb::part::Kind::StepFinish(f)) = data.messages[2].parts[2].kind.as_mut() {
        f.requested_model.clear();
        f.model = "openai/gpt-4o-2024-08-06".into();
    }
    let old = pb::MessageError {
        kind: pb::message_error::Kind::Api as i32,
        message: "old".into(),
        ..Default::default()
    };
    let new = pb::MessageError {
        kind: pb::message_error::Kind::OutputLength as i32,
        message: "cut".into(),
        ..Default::default()
    };
    data.messages[2].error = Some(old);
    data.messages[3].error = Some(new.clone());
    let failures = WriteFailures {
        count: 2,
        last_at_ms: 1_700_000_000_123,
        last_message: "redis: broken pipe".into(),
    };
    let r = report(&data, &failures);
    assert_eq!((r.retries, r.fallbacks), (1, 1));
    assert_eq!(r.last_error, Some(new));
    assert_eq!(r.last_error_message_id, "msg_3");
    assert_eq!(r.storage_write_failures, 2);
    assert_eq!(
        r.last_storage_failure_at,
        Some(Timestamp {
            seconds: 1_700_000_000,
            nanos: 123_000_000
        })
    );
    assert_eq!(r.last_storage_failure, "redis: broken pipe");
    assert!(!r.lease_held && r.lease_holder.is_empty());
}

#[test]
fn the_processor_records_the_requested_and_the_served_model_on_step_finish() {
    let mut p = Processor::new(
        pb::Message {
            id: "msg_1".into(),
            session_id: "ses_1".into(),
            role: pb::Role::Assistant as i32,
            model: "openai/gpt-4o".into(),
            ..Default::default()
        },
        None,
    );
    let mut out = Vec::new();
    use gw::stream_response::Event as E;
    for e in [
        E::StreamStart(gw::StreamStart {
            provider: "anthropic".into(),
            model: "anthropic/claude-sonnet-4-5".into(),
            attempt: 4,
            ..Default::default()
        }),
        E::StepStart(gw::StepStart {}),
        E::StepFinish(gw::StepFinish {
            finish_reason: gw::FinishReason::Stop as i32,
            ..Default::default()
        }),
    ] {
        p.handle(gw::StreamResponse { event: Some(e) }, ts(1), &mut out);
    }
    let finish = out
        .iter()
        .find_map(|e| match e {
            Effect::Part(p) => match &p.kind {
                Some(pb::part::Kind::StepFinish(f)) => Some(f.clone()),
                _ => None,
            },
            _ => None,
        })
        .unwrap();
    assert_eq!(finish.model, "anthropic/claude-sonnet-4-5");
    assert_eq!(finish.requested_model, "openai/gpt-4o");
    let m = pb::Message {
        role: pb::Role::Assistant as i32,
        parts: vec![part("p", pb::part::Kind::StepFinish(finish))],
        ..Default::default()
    };
    assert_eq!(fallbacks(&[m]), 1);
}
