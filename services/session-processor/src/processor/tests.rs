use super::*;
use gw::stream_response::Event as E;

fn ts(s: i64) -> Timestamp {
    Timestamp {
        seconds: s,
        nanos: 0,
    }
}

fn ev(e: E) -> gw::StreamResponse {
    gw::StreamResponse { event: Some(e) }
}

fn processor() -> Processor {
    Processor::new(
        pb::Message {
            id: "msg_1".into(),
            session_id: "ses_1".into(),
            role: pb::Role::Assistant as i32,
            model: "openai/gpt-4o".into(),
            ..Default::default()
        },
        Some(1000),
    )
}

fn feed(p: &mut Processor, events: Vec<E>) -> Vec<Effect> {
    let mut out = Vec::new();
    for (i, e) in events.into_iter().enumerate() {
        p.handle(ev(e), ts(i as i64), &mut out);
    }
    out
}

fn text_start(id: &str) -> E {
    E::TextStart(gw::TextStart { id: id.into() })
}

fn text_delta(id: &str, delta: &str) -> E {
    E::TextDelta(gw::TextDelta {
        id: id.into(),
        delta: delta.into(),
    })
}

fn text_end(id: &str) -> E {
    E::TextEnd(gw::TextEnd { id: id.into() })
}

fn reasoning_start(id: &str) -> E {
    E::ReasoningStart(gw::ReasoningStart { id: id.into() })
}

fn reasoning_delta(id: &str, delta: &str) -> E {
    E::ReasoningDelta(gw::ReasoningDelta {
        id: id.into(),
        delta: delta.into(),
    })
}

fn tool_input_start(call_id: &str, tool: &str) -> E {
    E::ToolInputStart(gw::ToolInputStart {
        call_id: call_id.into(),
        tool_name: tool.into(),
    })
}

fn tool_call(call_id: &str, tool: &str, input_json: &str) -> E {
    E::ToolCall(gw::ToolCall {
        call_id: call_id.into(),
        tool_name: tool.into(),
        input_json: input_json.into(),
        provider_metadata: None,
    })
}

/// The provider said the context does not fit.
fn overflow(message: &str) -> E {
    E::Error(gw::Error {
        kind: gw::ErrorKind::ContextOverflow as i32,
        message: message.into(),
        ..Default::default()
    })
}

/// A retryable provider error with its HTTP status.
fn retryable(kind: gw::ErrorKind, message: &str, http_status: u32) -> gw::Error {
    gw::Error {
        kind: kind as i32,
        message: message.into(),
        retryable: true,
        http_status,
        ..Default::default()
    }
}

fn finish(reason: gw::FinishReason, input: u64, cost: i64) -> E {
    E::StepFinish(gw::StepFinish {
        finish_reason: reason as i32,
        raw_finish_reason: String::new(),
        usage: Some(gw::Usage {
            input_tokens: input,
            output_tokens: 10,
            ..Default::default()
        }),
        cost: Some(gw::Cost {
            total_nano_usd: cost,
            priced: true,
        }),
        response_id: "r".into(),
        response_model: "m".into(),
    })
}

#[test]
fn text_is_created_on_start_appended_on_delta_and_closed_on_end() {
    let mut p = processor();
    let out = feed(
        &mut p,
        vec![
            E::StepStart(gw::StepStart {}),
            text_start("t"),
            text_delta("t", "Hel"),
            text_delta("t", "lo"),
            text_end("t"),
        ],
    );
    assert!(
        matches!(&out[0], Effect::Part(p) if matches!(p.kind, Some(pb::part::Kind::StepStart(_))))
    );
    let deltas: Vec<_> = out
        .iter()
        .filter_map(|e| {
            if let Effect::Delta { delta, .. } = e {
                Some(delta.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(deltas, ["Hel", "lo"]);
    let Some(pb::part::Kind::Text(t)) = &p.parts()[1].kind else {
        panic!()
    };
    assert_eq!(t.text, "Hello");
    assert_eq!(t.started_at, Some(ts(1)));
    assert_eq!(t.ended_at, Some(ts(4)));
    assert!(matches!(out.last(), Some(Effect::Part(_))));
    // Every delta of the part carries the same ids, made once.
    let ids: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            Effect::Delta { ids, .. } => Some(ids),
            _ => None,
        })
        .collect();
    assert_eq!(ids[0].part_id, p.parts()[1].id);
    assert_eq!(ids[0].message_id, p.message().id);
    assert!(std::sync::Arc::ptr_eq(ids[0], ids[1]));
}

#[test]
fn text_and_reasoning_blocks_emit_their_part_on_start_and_end_and_every_delta_between() {
    let mut p = processor();
    let metadata = gw::ProviderMetadata {
        protocol: "anthropic".into(),
        model: "anthropic/x".into(),
        json: "{\"signature\":\"s\"}".into(),
    };
    let out = feed(
        &mut p,
        vec![
            text_start("t"),
            reasoning_start("r"),
            text_delta("t", "a"),
            reasoning_delta("r", "b"),
            // Ids of the other kind, or of no open block, change nothing.
            text_delta("r", "x"),
            reasoning_delta("t", "y"),
            text_end("nope"),
            E::ReasoningEnd(gw::ReasoningEnd {
                id: "t".into(),
                provider_metadata: None,
            }),
            text_end("t"),
            E::ReasoningEnd(gw::ReasoningEnd {
                id: "r".into(),
                provider_metadata: Some(metadata.clone()),
            }),
            // A closed block takes no more text.
            text_delta("t", "late"),
        ],
    );
    let (text_id, reasoning_id) = (p.parts()[0].id.clone(), p.parts()[1].id.clone());
    let part = |id: &str, kind| pb::Part {
        id: id.into(),
        message_id: "msg_1".into(),
        session_id: "ses_1".into(),
        kind: Some(kind),
    };
    let text = |text: &str, ended_at| {
        pb::part::Kind::Text(pb::TextPart {
            text: text.into(),
            started_at: Some(ts(0)),
            ended_at,
            synthetic: false,
        })
    };
    let reasoning = |text: &str, provider_metadata_json: String, ended_at| {
        pb::part::Kind::Reasoning(pb::ReasoningPart {
            text: text.into(),
            provider_metadata_json,
            started_at: Some(ts(1)),
            ended_at,
        })
    };
    let delta = |part_id: &str, delta: &str| Effect::Delta {
        ids: std::sync::Arc::new(crate::event_wire::PartIds {
            part_id: part_id.into(),
            message_id: "msg_1".into(),
        }),
        delta: delta.into(),
    };
    assert_eq!(
        out,
        vec![
            Effect::Part(Box::new(part(&text_id, text("", None)))),
            Effect::Part(Box::new(part(
                &reasoning_id,
                reasoning("", String::new(), None)
            ))),
            delta(&text_id, "a"),
            delta(&reasoning_id, "b"),
            Effect::Part(Box::new(part(&text_id, text("a", Some(ts(8)))))),
            Effect::Part(Box::new(part(
                &reasoning_id,
                reasoning("b", metadata_json(Some(&metadata)), Some(ts(9)))
            ))),
        ]
    );
    let mut out = Vec::new();
    p.cleanup(ts(20), false, &mut out);
    assert!(
        matches!(out.as_slice(), [Effect::Message(_)]),
        "closed blocks are not closed again: {out:?}"
    );
}

#[test]
fn reasoning_keeps_its_provider_metadata() {
    let mut p = processor();
    feed(
        &mut p,
        vec![
            reasoning_start("r"),
            reasoning_delta("r", "think"),
            E::ReasoningEnd(gw::ReasoningEnd {
                id: "r".into(),
                provider_metadata: Some(gw::ProviderMetadata {
                    protocol: "anthropic".into(),
                    model: "anthropic/x".into(),
                    json: "{\"signature\":\"s\"}".into(),
                }),
            }),
        ],
    );
    let Some(pb::part::Kind::Reasoning(r)) = &p.parts()[0].kind else {
        panic!()
    };
    assert_eq!(r.text, "think");
    let m = metadata_from_json(&r.provider_metadata_json).unwrap();
    assert_eq!(m.json, "{\"signature\":\"s\"}");
    assert_eq!(m.protocol, "anthropic");
}

#[test]
fn tools_go_pending_then_running_and_are_handed_to_the_loop() {
    let mut p = processor();
    let out = feed(
        &mut p,
        vec![
            tool_input_start("c1", "read"),
            E::ToolInputDelta(gw::ToolInputDelta {
                call_id: "c1".into(),
                delta: "{\"path\":".into(),
            }),
            E::ToolInputEnd(gw::ToolInputEnd {
                call_id: "c1".into(),
            }),
            tool_call("c1", "read", "{\"path\":\"a\"}"),
        ],
    );
    let Effect::Part(first) = &out[0] else {
        panic!()
    };
    let Some(pb::part::Kind::Tool(t)) = &first.kind else {
        panic!()
    };
    assert_eq!(
        t.state.as_ref().unwrap().status(),
        pb::tool_state::Status::Pending
    );
    let Some(Effect::ToolCall {
        call_id,
        input_json,
        ..
    }) = out.last()
    else {
        panic!("{out:?}")
    };
    assert_eq!(
        (call_id.as_str(), input_json.as_str()),
        ("c1", "{\"path\":\"a\"}")
    );
    let running = p.parts().tool_calls().next().unwrap();
    assert_eq!(
        running.state.as_ref().unwrap().status(),
        pb::tool_state::Status::Running
    );
    let mut out = Vec::new();
    p.parts_mut()
        .tool_finished("c1", Ok("contents".into()), ts(9), &mut out);
    let done = p
        .parts()
        .tool_calls()
        .next()
        .unwrap()
        .state
        .clone()
        .unwrap();
    assert_eq!(done.status(), pb::tool_state::Status::Completed);
    assert_eq!(done.output, "contents");
    assert_eq!(p.outcome(), Outcome::Continue);
}

#[test]
fn step_finish_settles_tokens_and_cost_and_checks_overflow() {
    let mut p = processor();
    feed(
        &mut p,
        vec![
            E::StepStart(gw::StepStart {}),
            finish(gw::FinishReason::Stop, 100, 42),
        ],
    );
    assert_eq!(p.message().cost_nano_usd, 42);
    assert_eq!(p.message().tokens.unwrap().input, 100);
    assert_eq!(p.message().finish, "stop");
    assert_eq!(p.outcome(), Outcome::Continue);
    let mut big = processor();
    feed(&mut big, vec![finish(gw::FinishReason::Stop, 995, 1)]);
    assert!(big.needs_compaction(), "995 + 10 output ≥ 1000 usable");
    assert_eq!(big.outcome(), Outcome::Compact);
}

#[test]
fn length_finish_is_an_output_length_error() {
    let mut p = processor();
    feed(&mut p, vec![finish(gw::FinishReason::Length, 10, 1)]);
    assert_eq!(
        p.message().error.as_ref().unwrap().kind(),
        pb::message_error::Kind::OutputLength
    );
    assert_eq!(p.outcome(), Outcome::Stop);
}

#[test]
fn context_overflow_error_is_a_compaction_need_not_a_failure() {
    let mut p = processor();
    feed(&mut p, vec![overflow("too long")]);
    assert_eq!(p.outcome(), Outcome::Compact);
    assert!(p.message().error.is_none());
    let mut out = Vec::new();
    p.cleanup(ts(9), false, &mut out);
    assert!(p.message().error.is_none(), "the loop decides, not cleanup");
    assert_eq!(p.message().finish, FINISH_OVERFLOW);
    assert!(p.overflowed());
}

#[test]
fn a_mid_stream_overflow_keeps_the_partial_output_but_marks_the_message() {
    let mut p = processor();
    feed(
        &mut p,
        vec![
            text_start("t"),
            text_delta("t", "partial"),
            overflow("maximum context length"),
        ],
    );
    let mut out = Vec::new();
    p.cleanup(ts(9), false, &mut out);
    assert_eq!(p.outcome(), Outcome::Compact);
    assert_eq!(p.message().finish, FINISH_OVERFLOW);
    let Some(pb::part::Kind::Text(t)) = &p.parts()[0].kind else {
        panic!()
    };
    assert_eq!((t.text.as_str(), t.ended_at), ("partial", Some(ts(9))));
}

#[test]
fn a_failure_keeps_the_kind_and_the_providers_retry_after() {
    let mut p = processor();
    feed(
        &mut p,
        vec![E::Error(gw::Error {
            retry_after: Some(prost_types::Duration {
                seconds: 1,
                nanos: 500_000_000,
            }),
            ..retryable(gw::ErrorKind::RateLimited, "slow down", 429)
        })],
    );
    assert_eq!(
        p.failure(),
        Some(Failure {
            kind: gw::ErrorKind::RateLimited,
            retryable: true,
            retry_after: Some(Duration::from_millis(1500)),
            retry_after_beyond_cap: false,
        })
    );
    let mut out = Vec::new();
    p.fail(
        pb::MessageError {
            kind: pb::message_error::Kind::BudgetExceeded as i32,
            ..Default::default()
        },
        &mut out,
    );
    assert_eq!(p.outcome(), Outcome::Stop);
    assert!(matches!(out.last(), Some(Effect::Message(_))));
}

#[test]
fn a_structured_output_completes_the_answer() {
    let mut p = processor();
    feed(&mut p, vec![finish(gw::FinishReason::ToolCalls, 10, 1)]);
    let mut out = Vec::new();
    p.set_structured_output("{\"a\":1}".into(), &mut out);
    assert_eq!(
        (
            p.message().finish.as_str(),
            p.message().structured_output_json.as_str()
        ),
        ("stop", "{\"a\":1}")
    );
}

#[test]
fn other_errors_stop_with_a_typed_message_error() {
    let mut p = processor();
    feed(
        &mut p,
        vec![E::Error(retryable(gw::ErrorKind::Overloaded, "busy", 529))],
    );
    let e = p.message().error.clone().unwrap();
    assert_eq!(
        (e.kind(), e.http_status, e.retryable),
        (pb::message_error::Kind::Api, 529, true)
    );
    assert_eq!(p.outcome(), Outcome::Stop);
}

#[test]
fn cleanup_closes_parts_aborts_tools_and_completes_the_message() {
    let mut p = processor();
    feed(
        &mut p,
        vec![
            text_start("t"),
            text_delta("t", "partial"),
            reasoning_start("r"),
            tool_input_start("c", "bash"),
        ],
    );
    let mut out = Vec::new();
    p.cleanup(ts(50), true, &mut out);
    for part in p.parts().iter() {
        match &part.kind {
            Some(pb::part::Kind::Text(t)) => assert_eq!(t.ended_at, Some(ts(50))),
            Some(pb::part::Kind::Reasoning(r)) => assert_eq!(r.ended_at, Some(ts(50))),
            Some(pb::part::Kind::Tool(t)) => {
                let s = t.state.as_ref().unwrap();
                assert_eq!(
                    (s.status(), s.error.as_str(), s.interrupted),
                    (pb::tool_state::Status::Error, "aborted", true)
                );
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(p.message().completed_at, Some(ts(50)));
    assert_eq!(
        p.message().error.as_ref().unwrap().kind(),
        pb::message_error::Kind::Aborted
    );
    assert!(matches!(out.last(), Some(Effect::Message(_))));
}

#[test]
fn a_blocked_tool_stops_the_loop_and_the_model_sees_why() {
    let mut p = processor();
    feed(&mut p, vec![tool_call("c", "bash", "{}")]);
    let mut out = Vec::new();
    p.parts_mut().block(
        "c",
        Blocked::PermissionDenied,
        "permission denied",
        ts(3),
        &mut out,
    );
    let s = p
        .parts()
        .tool_calls()
        .next()
        .unwrap()
        .state
        .clone()
        .unwrap();
    assert_eq!(
        (s.status(), s.error.as_str()),
        (pb::tool_state::Status::Error, "permission denied")
    );
    assert_eq!(p.outcome(), Outcome::Stop);
    assert_eq!(p.parts().blocked(), Some(Blocked::PermissionDenied));
}

#[test]
fn snapshots_go_on_the_step_parts_and_changes_become_a_sorted_patch() {
    let mut p = processor();
    p.set_start_snapshot("a".repeat(40));
    let out = feed(
        &mut p,
        vec![
            E::StepStart(gw::StepStart {}),
            finish(gw::FinishReason::ToolCalls, 10, 1),
        ],
    );
    let Effect::Part(start) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        start.kind,
        Some(pb::part::Kind::StepStart(pb::StepStartPart {
            snapshot: "a".repeat(40)
        }))
    );
    assert!(
        out.iter().any(|e| matches!(e, Effect::Persist(p)
            if matches!(p.kind, Some(pb::part::Kind::StepFinish(_))))),
        "with snapshots the step-finish part is stored at once but not yet published: {out:?}"
    );
    assert!(
        !out.iter().any(|e| matches!(e, Effect::Part(p)
            if matches!(p.kind, Some(pb::part::Kind::StepFinish(_))))),
        "{out:?}"
    );
    let change = |path: &str| pb::FileChange {
        path: path.into(),
        status: pb::file_change::Status::Added as i32,
        additions: 1,
        ..Default::default()
    };
    let mut out = Vec::new();
    p.finish_snapshot(
        "b".repeat(40),
        vec![change("z.txt"), change("a/b.txt")],
        &mut out,
    );
    let kinds: Vec<_> = out
        .iter()
        .map(|e| match e {
            Effect::Part(p) => p.kind.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    let Some(pb::part::Kind::StepFinish(f)) = &kinds[0] else {
        panic!("{kinds:?}")
    };
    assert_eq!(f.snapshot, "b".repeat(40));
    let Some(pb::part::Kind::Patch(patch)) = &kinds[1] else {
        panic!("{kinds:?}")
    };
    assert_eq!(
        (
            patch.hash.as_str(),
            patch.after.as_str(),
            patch.files.clone()
        ),
        (
            "a".repeat(40).as_str(),
            "b".repeat(40).as_str(),
            vec!["a/b.txt".to_string(), "z.txt".to_string()]
        )
    );
    assert_eq!(patch.changes[0].path, "a/b.txt");
    assert!(
        p.parts()
            .last()
            .is_some_and(|l| matches!(l.kind, Some(pb::part::Kind::Patch(_)))),
        "the patch follows the step-finish part"
    );
    let mut unchanged = processor();
    let mut out = Vec::new();
    unchanged.finish_snapshot("b".repeat(40), Vec::new(), &mut out);
    assert!(
        out.is_empty(),
        "no step-finish and no changes: nothing to write"
    );
}

/// Each part's final state is published once: without snapshots at step-finish, with snapshots once the end
/// snapshot is known, or at cleanup when none came.
#[test]
fn the_step_finish_part_is_published_once() {
    let published = |out: &[Effect]| {
        out.iter()
            .filter(|e| {
                matches!(e, Effect::Part(p)
                if matches!(p.kind, Some(pb::part::Kind::StepFinish(_))))
            })
            .count()
    };
    let mut plain = processor();
    let mut out = feed(&mut plain, vec![finish(gw::FinishReason::Stop, 1, 1)]);
    plain.cleanup(ts(9), false, &mut out);
    assert_eq!(published(&out), 1, "{out:?}");

    let mut snapped = processor();
    snapped.set_start_snapshot("a".repeat(40));
    let mut out = feed(&mut snapped, vec![finish(gw::FinishReason::Stop, 1, 1)]);
    snapped.finish_snapshot("b".repeat(40), Vec::new(), &mut out);
    snapped.cleanup(ts(9), false, &mut out);
    assert_eq!(published(&out), 1, "{out:?}");

    let mut no_end = processor();
    no_end.set_start_snapshot("a".repeat(40));
    let mut out = feed(&mut no_end, vec![finish(gw::FinishReason::Stop, 1, 1)]);
    no_end.cleanup(ts(9), false, &mut out);
    assert_eq!(published(&out), 1, "{out:?}");
}

#[test]
fn an_answer_without_text_reasoning_or_tools_is_empty() {
    let mut p = processor();
    feed(
        &mut p,
        vec![
            E::StepStart(gw::StepStart {}),
            finish(gw::FinishReason::Other, 1, 0),
        ],
    );
    assert!(p.is_empty_answer());
    let mut t = processor();
    feed(&mut t, vec![tool_call("c", "read", "{}")]);
    assert!(!t.is_empty_answer());
}

#[test]
fn the_served_model_is_recorded_after_a_fallback() {
    let mut p = processor();
    let out = feed(
        &mut p,
        vec![E::StreamStart(gw::StreamStart {
            provider: "anthropic".into(),
            model: "anthropic/x".into(),
            attempt: 1,
            ..Default::default()
        })],
    );
    assert_eq!(p.message().model, "anthropic/x");
    assert!(matches!(&out[0], Effect::Message(_)));
}

#[test]
fn only_the_events_that_stamp_a_time_read_the_clock() {
    let mut p = processor();
    let mut out = Vec::new();
    let mut reads = 0;
    let events = [
        (text_start("t"), true),
        (text_delta("t", "a"), false),
        (text_delta("t", "b"), false),
        (reasoning_start("r"), true),
        (reasoning_delta("r", "x"), false),
        (E::ToolInputDelta(gw::ToolInputDelta::default()), false),
        (text_end("t"), true),
        (tool_call("c1", "read", "{}"), true),
        (finish(gw::FinishReason::ToolCalls, 10, 1), false),
    ];
    for (i, (event, stamps)) in events.into_iter().enumerate() {
        let before = reads;
        p.handle_at(
            ev(event),
            || {
                reads += 1;
                ts(i as i64)
            },
            &mut out,
        );
        assert_eq!(reads - before, usize::from(stamps), "event {i}");
    }
    // The times read are the ones stamped.
    let text = p.parts().iter().find_map(|part| match &part.kind {
        Some(pb::part::Kind::Text(t)) => Some(t.clone()),
        _ => None,
    });
    let text = text.unwrap();
    assert_eq!(text.text, "ab");
    assert_eq!(text.started_at, Some(ts(0)));
    assert_eq!(text.ended_at, Some(ts(6)));
}
