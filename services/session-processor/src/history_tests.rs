use super::*;

fn user(text: &str, model: &str) -> pb::Message {
    pb::Message {
        id: crate::ids::new("msg"),
        role: pb::Role::User as i32,
        model: model.into(),
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::Text(pb::TextPart {
                text: text.into(),
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn assistant(finish: &str, completed: bool, tools: Vec<pb::ToolPart>) -> pb::Message {
    pb::Message {
        id: crate::ids::new("msg"),
        role: pb::Role::Assistant as i32,
        finish: finish.into(),
        completed_at: completed.then_some(prost_types::Timestamp {
            seconds: 1,
            nanos: 0,
        }),
        parts: tools
            .into_iter()
            .map(|t| pb::Part {
                kind: Some(pb::part::Kind::Tool(t)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn tool(call: &str, status: pb::tool_state::Status, out: &str) -> pb::ToolPart {
    pb::ToolPart {
        call_id: call.into(),
        tool: "read".into(),
        state: Some(pb::ToolState {
            status: status as i32,
            input_json: "{\"path\":\"a\"}".into(),
            output: out.into(),
            error: out.into(),
            ..Default::default()
        }),
        provider_metadata_json: String::new(),
    }
}

#[test]
fn exit_rule() {
    assert!(needs_work(&[user("hi", "")]));
    assert!(needs_work(&[
        user("hi", ""),
        assistant("tool_calls", true, vec![])
    ]));
    assert!(!needs_work(&[
        user("hi", ""),
        assistant("stop", true, vec![])
    ]));
    assert!(needs_work(&[
        user("hi", ""),
        assistant("stop", true, vec![]),
        user("more", "")
    ]));
    assert!(
        needs_work(&[user("hi", ""), assistant("", false, vec![])]),
        "an orphaned step is resumed"
    );
    let mut failed = assistant("", true, vec![]);
    failed.error = Some(pb::MessageError::default());
    assert!(!needs_work(&[user("hi", ""), failed]));
}

#[test]
fn the_rule_after_a_step_is_the_rule_of_the_history_with_it() {
    let histories: Vec<Vec<pb::Message>> = vec![
        vec![],
        vec![user("hi", "")],
        vec![user("hi", ""), assistant("stop", true, vec![])],
        vec![assistant("stop", true, vec![])],
        vec![user("hi", ""), assistant("tool_calls", true, vec![])],
    ];
    let mut failed = assistant("", true, vec![]);
    failed.error = Some(pb::MessageError::default());
    let answers = [
        assistant("stop", true, vec![]),
        assistant("tool_calls", true, vec![]),
        assistant("stop", false, vec![]),
        assistant("retried", true, vec![]),
        assistant("interrupted", true, vec![]),
        assistant(FINISH_OVERFLOW, true, vec![]),
        failed,
    ];
    for h in &histories {
        for a in &answers {
            let mut with = h.clone();
            with.push(a.clone());
            assert_eq!(
                needs_work_after(h, a),
                needs_work(&with),
                "history {h:?} then {a:?}"
            );
        }
    }
}

#[test]
fn every_call_is_paired_with_one_result() {
    let history = vec![
        user("read a", ""),
        assistant(
            "tool_calls",
            true,
            vec![
                tool("c1", pb::tool_state::Status::Completed, "A"),
                tool("c2", pb::tool_state::Status::Error, "denied"),
            ],
        ),
    ];
    let msgs = to_gateway(&history);
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1].role(), gw::Role::Assistant);
    assert_eq!(msgs[2].role(), gw::Role::Tool);
    let results: Vec<(String, bool)> = msgs[2]
        .parts
        .iter()
        .map(|p| match &p.kind {
            Some(gw::part::Kind::ToolResult(r)) => (r.call_id.clone(), r.is_error),
            _ => panic!(),
        })
        .collect();
    assert_eq!(
        results,
        [("c1".to_string(), false), ("c2".to_string(), true)]
    );
}

fn compaction(summary: &str, completed: bool) -> pb::Message {
    let mut m = assistant("stop", completed, vec![]);
    m.parts = vec![
        pb::Part {
            id: "prt_1".into(),
            kind: Some(pb::part::Kind::Compaction(pb::CompactionPart {
                auto: true,
                overflow: false,
            })),
            ..Default::default()
        },
        pb::Part {
            id: "prt_2".into(),
            kind: Some(pb::part::Kind::Text(pb::TextPart {
                text: summary.into(),
                ..Default::default()
            })),
            ..Default::default()
        },
    ];
    m
}

#[test]
fn the_history_starts_at_the_last_completed_compaction() {
    let old = user("old", "");
    let done = compaction("we did X", true);
    let unfinished = compaction("half a summ", false);
    let next = user("next", "");
    let view = since_compaction(vec![
        old.clone(),
        done.clone(),
        unfinished.clone(),
        next.clone(),
    ]);
    assert_eq!(
        view.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        [&done.id, &unfinished.id, &next.id]
    );
    let msgs = to_gateway(&view);
    assert_eq!(msgs.len(), 2, "the unfinished summary is not replayed");
    assert_eq!(msgs[0].role(), gw::Role::User);
    let Some(gw::part::Kind::Text(t)) = &msgs[0].parts[0].kind else {
        panic!()
    };
    assert!(t.text.starts_with(SUMMARY_PREAMBLE) && t.text.ends_with("we did X"));
    assert_eq!(
        since_compaction(vec![old.clone(), next.clone()]).len(),
        2,
        "no compaction: everything"
    );
    assert!(!needs_work(&[done]), "a summary alone needs no answer");
}

#[test]
fn an_overflowed_step_is_pending_work_and_never_replayed() {
    let overflowed = assistant(FINISH_OVERFLOW, true, vec![]);
    let h = vec![user("big", ""), overflowed.clone()];
    assert!(needs_work(&h));
    assert_eq!(to_gateway(&h).len(), 1);
    let mut failed = overflowed;
    failed.error = Some(pb::MessageError::default());
    assert!(!needs_work(&[user("big", ""), failed]));
}

#[test]
fn old_tool_outputs_beyond_the_protected_window_are_pruned_in_requests_only() {
    let call = |id: &str, out: &str| {
        let mut m = assistant(
            "tool_calls",
            true,
            vec![tool(id, pb::tool_state::Status::Completed, out)],
        );
        m.parts[0].id = format!("prt_{id}");
        m
    };
    let big = "x".repeat(400); // 100 estimated tokens each
    let h = vec![
        user("go", ""),
        call("c1", &big),
        call("c2", &big),
        call("c3", &big),
        call("c4", &big),
    ];
    // Protect 150 tokens: c4 (the latest, always kept) and c3 fill it; c1 and c2 go.
    let pruned = prunable(&h, 150, 100);
    let mut ids: Vec<&str> = pruned.iter().map(String::as_str).collect();
    ids.sort();
    assert_eq!(ids, ["prt_c1", "prt_c2"]);
    assert!(
        prunable(&h, 150, 500).is_empty(),
        "not worth it below the minimum"
    );
    let render = Render {
        pruned,
        summary: false,
    };
    let msgs = to_gateway_with(&h, &render);
    let outputs: Vec<String> = msgs
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match &p.kind {
            Some(gw::part::Kind::ToolResult(r)) => Some(r.output.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(outputs[..2], [PRUNED_OUTPUT, PRUNED_OUTPUT]);
    assert_eq!(outputs[2..], [big.clone(), big.clone()]);
    let summary = to_gateway_with(
        &h,
        &Render {
            pruned: HashSet::new(),
            summary: true,
        },
    );
    assert!(
        summary.iter().all(|m| m.role() != gw::Role::Tool
            && m.parts
                .iter()
                .all(|p| matches!(p.kind, Some(gw::part::Kind::Text(_))))),
        "the summary request carries tools as text"
    );
}

#[test]
fn the_latest_prompt_carries_the_format() {
    let mut u = user("json please", "");
    u.format = Some(pb::OutputFormat {
        r#type: pb::output_format::Type::JsonSchema as i32,
        schema_json: "{}".into(),
        retry_count: None,
    });
    assert!(output_format(&[u.clone()]).is_some());
    assert!(output_format(&[u, user("plain", "")]).is_none());
}
