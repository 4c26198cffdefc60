use super::*;

fn format(schema: &str, retry: Option<u32>) -> pb::OutputFormat {
    pb::OutputFormat {
        r#type: pb::output_format::Type::JsonSchema as i32,
        schema_json: schema.into(),
        retry_count: retry,
    }
}

const SCHEMA: &str = r#"{"type":"object","properties":{"city":{"type":"string"},"temp":{"type":"number"}},"required":["city","temp"],"additionalProperties":false}"#;

#[test]
fn formats_are_checked_before_the_loop_runs() {
    assert!(
        Format::from_proto(&pb::OutputFormat::default())
            .unwrap()
            .is_none()
    );
    let f = Format::from_proto(&format(SCHEMA, None)).unwrap().unwrap();
    assert_eq!(f.retry_count, DEFAULT_RETRY_COUNT);
    assert_eq!(
        Format::from_proto(&format(SCHEMA, Some(0)))
            .unwrap()
            .unwrap()
            .retry_count,
        0,
        "an explicit 0 means no corrections"
    );
    for bad in [
        format("{", None),
        format(r#"{"type":"array"}"#, None),
        format(
            r#"{"type":"object","properties":{"a":{"type":"nope"}}}"#,
            None,
        ),
        format(SCHEMA, Some(11)),
    ] {
        assert!(Format::from_proto(&bad).is_err(), "{bad:?}");
    }
}

#[test]
fn calls_are_validated_against_the_schema() {
    let f = Format::from_proto(&format(SCHEMA, None)).unwrap().unwrap();
    assert_eq!(
        f.check(r#"{ "city": "Paris", "temp": 21.5 }"#).unwrap(),
        r#"{"city":"Paris","temp":21.5}"#
    );
    let e = f.check(r#"{"city":"Paris"}"#).unwrap_err();
    assert!(e.contains("temp") && e.contains(TOOL_NAME), "{e}");
    assert!(f.check("not json").is_err());
}

fn processor_with_call(call_id: &str, input: &str) -> Processor {
    let mut p = Processor::new(
        pb::Message {
            id: "msg_1".into(),
            session_id: "ses_1".into(),
            role: pb::Role::Assistant as i32,
            ..Default::default()
        },
        None,
    );
    let mut out = Vec::new();
    p.handle(
        gw::StreamResponse {
            event: Some(gw::stream_response::Event::ToolCall(gw::ToolCall {
                call_id: call_id.into(),
                tool_name: TOOL_NAME.into(),
                input_json: input.into(),
                provider_metadata: None,
            })),
        },
        prost_types::Timestamp::default(),
        &mut out,
    );
    p
}

#[test]
fn a_valid_call_is_the_answer_and_an_invalid_one_a_correction_until_they_run_out() {
    let f = || Format::from_proto(&format(SCHEMA, Some(1))).unwrap();
    let now = prost_types::Timestamp::default();
    let mut out = Vec::new();

    let mut p = processor_with_call("c1", r#"{"city":"Paris","temp":20}"#);
    let mut turn = Turn::new(f(), 0);
    assert!(turn.intercept(
        &mut p,
        "c1",
        TOOL_NAME,
        r#"{"city":"Paris","temp":20}"#,
        now,
        &mut out
    ));
    assert_eq!(
        p.message().structured_output_json,
        r#"{"city":"Paris","temp":20}"#
    );
    assert!(turn.missing(p.message(), false).is_none());
    assert!(
        turn.intercept(&mut p, "c2", "read", "{}", now, &mut out),
        "later calls of the step are not run"
    );

    let mut p = processor_with_call("c1", "{}");
    let mut turn = Turn::new(f(), 0);
    turn.intercept(&mut p, "c1", TOOL_NAME, "{}", now, &mut out);
    assert!(p.message().error.is_none(), "one correction allowed");
    let state = p
        .parts()
        .tool_calls()
        .next()
        .unwrap()
        .state
        .clone()
        .unwrap();
    assert_eq!(state.status(), pb::tool_state::Status::Error);
    let mut p = processor_with_call("c2", "{}");
    let mut turn = Turn::new(f(), 1);
    turn.intercept(&mut p, "c2", TOOL_NAME, "{}", now, &mut out);
    assert_eq!(
        p.message().error.as_ref().unwrap().kind(),
        pb::message_error::Kind::StructuredOutput
    );

    let none = Turn::new(None, 0);
    assert!(!Turn::new(None, 0).intercept(&mut p, "c3", TOOL_NAME, "{}", now, &mut out));
    assert!(none.missing(p.message(), true).is_none());
}

#[test]
fn finishing_without_the_tool_is_a_failure() {
    let turn = Turn::new(Format::from_proto(&format(SCHEMA, None)).unwrap(), 0);
    let mut m = pb::Message {
        finish: "stop".into(),
        ..Default::default()
    };
    assert_eq!(
        turn.missing(&m, false).unwrap().kind(),
        pb::message_error::Kind::StructuredOutput
    );
    m.finish = "tool_calls".into();
    assert!(turn.missing(&m, false).is_none(), "other tools first");
    assert!(turn.missing(&m, true).is_some(), "but not on the last step");
}

#[test]
fn the_request_offers_the_tool_and_requires_a_call() {
    let turn = Turn::new(Format::from_proto(&format(SCHEMA, None)).unwrap(), 0);
    let mut g = gw::Generation {
        system: vec!["role".into(), "TEXT ONLY".into()],
        ..Default::default()
    };
    turn.decorate(&mut g, false, "TEXT ONLY");
    assert_eq!(g.tools.last().unwrap().name, TOOL_NAME);
    assert_eq!(
        g.tool_choice.as_ref().unwrap().mode(),
        gw::tool_choice::Mode::Required
    );
    let mut last = gw::Generation {
        system: vec!["role".into(), "TEXT ONLY".into()],
        ..Default::default()
    };
    turn.decorate(&mut last, true, "TEXT ONLY");
    assert_eq!(last.system, ["role", FINAL_STEP_SYSTEM]);
    assert_eq!(last.tools.len(), 1);
    assert_eq!(last.tool_choice.unwrap().tool_name, TOOL_NAME);
}

#[test]
fn failures_are_counted_for_the_latest_prompt_only() {
    let failed = |status: pb::tool_state::Status| pb::Part {
        kind: Some(pb::part::Kind::Tool(pb::ToolPart {
            tool: TOOL_NAME.into(),
            state: Some(pb::ToolState {
                status: status as i32,
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    let user = pb::Message {
        role: pb::Role::User as i32,
        ..Default::default()
    };
    let answer = pb::Message {
        role: pb::Role::Assistant as i32,
        parts: vec![
            failed(pb::tool_state::Status::Error),
            failed(pb::tool_state::Status::Completed),
        ],
        ..Default::default()
    };
    let h = vec![user.clone(), answer.clone(), answer.clone()];
    assert_eq!(failures_so_far(&h), 2);
    let h = vec![user.clone(), answer, user];
    assert_eq!(failures_so_far(&h), 0);
}
