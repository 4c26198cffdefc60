#![allow(clippy::unwrap_used)]

use super::*;
use crate::adapter::testing::testkit::{assistant, call, message, result, text, tool, user};

fn generation(messages: Vec<pb::Message>) -> pb::Generation {
    pb::Generation {
        messages,
        ..Default::default()
    }
}

/// Texts as blocks, dropping empty ones; calls and results as `call:ID` / `result:ID`.
fn block(role: pb::Role, kind: &Kind, field: &str) -> Result<Option<String>, BuildError> {
    Ok(match (role, kind) {
        (_, Kind::Text(t)) => (!t.text.is_empty()).then(|| t.text.clone()),
        (pb::Role::Assistant, Kind::ToolCall(c)) => Some(format!("call:{}", c.call_id)),
        (pb::Role::User | pb::Role::Tool, Kind::ToolResult(r)) => {
            Some(format!("result:{}", r.call_id))
        }
        (role, _) => return Err(not_allowed(field, role)),
    })
}

fn shape(turns: &[Turn<String>]) -> Vec<(Role, Vec<&str>)> {
    turns
        .iter()
        .map(|t| (t.role, t.blocks.iter().map(String::as_str).collect()))
        .collect()
}

#[test]
fn tool_messages_join_the_user_side_and_same_role_turns_merge() {
    let g = generation(vec![
        user(vec![text("Hi")]),
        assistant(vec![text("")]),
        user(vec![text("weather?")]),
        assistant(vec![call("1", "w", "{}")]),
        tool(vec![result("1", "w", "sun", false)]),
        user(vec![text("thanks")]),
    ]);
    let turns = merged(&g, block).unwrap();
    assert_eq!(
        shape(&turns),
        vec![
            (Role::User, vec!["Hi", "weather?"]),
            (Role::Assistant, vec!["call:1"]),
            (Role::User, vec!["result:1", "thanks"]),
        ]
    );
}

#[test]
fn a_refused_part_and_an_unset_role_name_their_field() {
    let misplaced = generation(vec![user(vec![text("a"), call("1", "w", "{}")])]);
    let err = merged(&misplaced, block).unwrap_err();
    assert_eq!(err.field, "generation.messages[0].parts[1]");
    assert!(err.message.contains("USER"), "{}", err.message);

    let no_role = generation(vec![
        user(vec![text("a")]),
        message(pb::Role::Unspecified, vec![text("b")]),
    ]);
    assert_eq!(
        merged(&no_role, block).unwrap_err().field,
        "generation.messages[1].role"
    );
}

#[test]
fn results_go_first_in_user_turns_only_keeping_their_order() {
    let mut turns = vec![
        Turn {
            role: Role::User,
            blocks: vec![
                "a".to_string(),
                "result:2".into(),
                "b".into(),
                "result:1".into(),
            ],
        },
        Turn {
            role: Role::Assistant,
            blocks: vec!["x".to_string(), "result:3".into()],
        },
    ];
    results_first(&mut turns, |b| b.starts_with("result:"));
    assert_eq!(
        shape(&turns),
        vec![
            (Role::User, vec!["result:2", "result:1", "a", "b"]),
            (Role::Assistant, vec!["x", "result:3"]),
        ]
    );
}

#[test]
fn an_assistant_opening_gets_a_user_turn_in_front_and_a_user_opening_does_not() {
    let mut turns = vec![Turn {
        role: Role::Assistant,
        blocks: vec!["hello".to_string()],
    }];
    lead_with_user(&mut turns, || ".".to_string());
    assert_eq!(
        shape(&turns),
        vec![(Role::User, vec!["."]), (Role::Assistant, vec!["hello"])]
    );
    lead_with_user(&mut turns, || "again".to_string());
    assert_eq!(turns.len(), 2);
}

#[test]
fn a_prefill_loses_trailing_whitespace_and_an_emptied_one_is_dropped() {
    let mut turns = vec![
        Turn {
            role: Role::User,
            blocks: vec!["q  ".to_string()],
        },
        Turn {
            role: Role::Assistant,
            blocks: vec!["call:1".to_string(), "The answer is \n".into()],
        },
    ];
    trim_prefill(&mut turns, |b| Some(b));
    assert_eq!(
        shape(&turns),
        vec![
            (Role::User, vec!["q  "]),
            (Role::Assistant, vec!["call:1", "The answer is"])
        ]
    );

    let mut turns = vec![
        Turn {
            role: Role::User,
            blocks: vec!["q".to_string()],
        },
        Turn {
            role: Role::Assistant,
            blocks: vec![" ".to_string()],
        },
    ];
    trim_prefill(&mut turns, |b| Some(b));
    assert_eq!(shape(&turns), vec![(Role::User, vec!["q"])]);
}

#[test]
fn the_turn_opening_the_tool_loop_decides_whether_thinking_fits() {
    let is_result = |b: &String| b.starts_with("result:");
    let opens = |b: &String| b == "thinking";
    let turn = |role, blocks: &[&str]| Turn {
        role,
        blocks: blocks.iter().map(|b| b.to_string()).collect(),
    };
    let with_thinking = [
        turn(Role::User, &["q"]),
        turn(Role::Assistant, &["thinking", "call:1"]),
        turn(Role::User, &["result:1"]),
        turn(Role::Assistant, &["call:2"]),
        turn(Role::User, &["result:2"]),
    ];
    assert!(loop_opens_with(&with_thinking, is_result, opens));
    let without = [
        turn(Role::User, &["q"]),
        turn(Role::Assistant, &["call:1"]),
        turn(Role::User, &["result:1"]),
    ];
    assert!(!loop_opens_with(&without, is_result, opens));
    // A new user question starts a new loop, which has no assistant turn yet.
    let fresh = [
        turn(Role::User, &["q"]),
        turn(Role::Assistant, &["call:1"]),
        turn(Role::User, &["result:1", "next"]),
    ];
    assert!(loop_opens_with(&fresh, is_result, opens));
}

#[test]
fn tool_choice_is_checked_against_the_tools() {
    use pb::tool_choice::Mode;
    let mut g = generation(Vec::new());
    assert_eq!(tool_choice(&g).unwrap(), ToolChoice::Default);
    let choose = |g: &mut pb::Generation, mode: Mode, name: &str| {
        g.tool_choice = Some(pb::ToolChoice {
            mode: mode.into(),
            tool_name: name.into(),
            ..Default::default()
        });
    };
    choose(&mut g, Mode::Required, "");
    assert_eq!(
        tool_choice(&g).unwrap_err().field,
        "generation.tool_choice.mode"
    );
    g.tools = vec![pb::Tool {
        name: "w".into(),
        ..Default::default()
    }];
    assert_eq!(tool_choice(&g).unwrap(), ToolChoice::Required);
    choose(&mut g, Mode::Tool, "other");
    assert_eq!(
        tool_choice(&g).unwrap_err().field,
        "generation.tool_choice.tool_name"
    );
    choose(&mut g, Mode::Tool, "w");
    assert_eq!(tool_choice(&g).unwrap(), ToolChoice::Tool("w"));
    choose(&mut g, Mode::None, "");
    assert_eq!(tool_choice(&g).unwrap(), ToolChoice::None);
    choose(&mut g, Mode::Unspecified, "");
    assert_eq!(tool_choice(&g).unwrap(), ToolChoice::Default);
}
