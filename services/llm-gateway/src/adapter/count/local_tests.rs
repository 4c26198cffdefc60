use super::*;

fn text(t: &str) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::Text(pb::TextPart { text: t.into() })),
    }
}

fn message(role: pb::Role, parts: Vec<pb::Part>) -> pb::Message {
    pb::Message {
        role: role as i32,
        parts,
    }
}

fn user(t: &str) -> pb::Message {
    message(pb::Role::User, vec![text(t)])
}

fn generation(messages: Vec<pb::Message>) -> pb::Generation {
    pb::Generation {
        model: "openai/gpt-4o".into(),
        messages,
        ..Default::default()
    }
}

#[test]
fn a_user_message_costs_its_role_its_text_and_the_documented_overhead() {
    // "hello world" is two tokens and "user" one in both encodings: 3 per message + 1 + 2, and 3 priming the reply.
    let g = generation(vec![user("hello world")]);
    assert_eq!(count(&g, TokenizerName::O200kBase).unwrap(), 9);
    assert_eq!(count(&g, TokenizerName::Cl100kBase).unwrap(), 9);
}

#[test]
fn system_sections_are_system_messages_and_each_message_adds_its_overhead() {
    let bpe = bpe(TokenizerName::O200kBase);
    let g = pb::Generation {
        system: vec!["Be brief.".into()],
        ..generation(vec![
            user("What is 2+2?"),
            message(pb::Role::Assistant, vec![text("4")]),
            user("And 3+3?"),
        ])
    };
    let expected = 3
        + (3 + tokens(bpe, "system") + tokens(bpe, "Be brief."))
        + (3 + tokens(bpe, "user") + tokens(bpe, "What is 2+2?"))
        + (3 + tokens(bpe, "assistant") + tokens(bpe, "4"))
        + (3 + tokens(bpe, "user") + tokens(bpe, "And 3+3?"));
    assert_eq!(count(&g, TokenizerName::O200kBase).unwrap(), expected);
}

#[test]
fn tool_calls_and_results_count_their_name_arguments_and_output() {
    let bpe = bpe(TokenizerName::O200kBase);
    let call = pb::Part {
        kind: Some(pb::part::Kind::ToolCall(pb::ToolCallPart {
            call_id: "call_1".into(),
            tool_name: "get_weather".into(),
            input_json: r#"{"city":"Paris"}"#.into(),
            ..Default::default()
        })),
    };
    let result = pb::Part {
        kind: Some(pb::part::Kind::ToolResult(pb::ToolResultPart {
            call_id: "call_1".into(),
            tool_name: "get_weather".into(),
            output: "sunny".into(),
            ..Default::default()
        })),
    };
    let g = generation(vec![
        user("Weather?"),
        message(pb::Role::Assistant, vec![call]),
        message(pb::Role::Tool, vec![result]),
    ]);
    let expected = 3
        + (3 + tokens(bpe, "user") + tokens(bpe, "Weather?"))
        + (3 + tokens(bpe, "assistant")
            + tokens(bpe, "get_weather")
            + tokens(bpe, r#"{"city":"Paris"}"#))
        + (3 + tokens(bpe, "tool") + tokens(bpe, "sunny"));
    assert_eq!(count(&g, TokenizerName::O200kBase).unwrap(), expected);
}

#[test]
fn tools_are_counted_with_the_cookbook_estimate() {
    let bpe = bpe(TokenizerName::O200kBase);
    let tool = pb::Tool {
        name: "get_weather".into(),
        description: "Weather for a city.".into(),
        input_schema_json: r#"{"type":"object","properties":{
            "city":{"type":"string","description":"The city."},
            "unit":{"type":"string","enum":["c","f"]}}}"#
            .into(),
        ..Default::default()
    };
    let bare = count(&generation(vec![user("hi")]), TokenizerName::O200kBase).unwrap();
    let with = count(
        &pb::Generation {
            tools: vec![tool],
            ..generation(vec![user("hi")])
        },
        TokenizerName::O200kBase,
    )
    .unwrap();
    // function start 7, name:description (period dropped), properties start 3, each property 3 (less 3 for one with
    // an enum, whose items cost 3 each), `name:type:description` per property, and 12 closing the list.
    let expected = 7
        + tokens(bpe, "get_weather:Weather for a city")
        + 3
        + (3 + tokens(bpe, "city:string:The city"))
        + (3 + tokens(bpe, "c"))
        + (3 + tokens(bpe, "f"))
        + tokens(bpe, "unit:string:")
        + 12;
    assert_eq!(with - bare, expected);
}

#[test]
fn files_are_refused_naming_the_part_and_reasoning_is_not_counted() {
    let file = pb::Part {
        kind: Some(pb::part::Kind::File(pb::FilePart {
            media_type: "image/png".into(),
            ..Default::default()
        })),
    };
    let g = generation(vec![
        user("a"),
        message(pb::Role::User, vec![text("b"), file]),
    ]);
    let e = count(&g, TokenizerName::O200kBase).unwrap_err();
    assert_eq!(e.field, "generation.messages[1].parts[1]");

    let reasoning = pb::Part {
        kind: Some(pb::part::Kind::Reasoning(pb::ReasoningPart {
            text: "long thoughts".into(),
            ..Default::default()
        })),
    };
    let with = generation(vec![message(
        pb::Role::Assistant,
        vec![reasoning, text("ok")],
    )]);
    let without = generation(vec![message(pb::Role::Assistant, vec![text("ok")])]);
    assert_eq!(
        count(&with, TokenizerName::O200kBase).unwrap(),
        count(&without, TokenizerName::O200kBase).unwrap()
    );
}

#[test]
fn special_token_strings_in_text_are_counted_as_text() {
    // `<|endoftext|>` typed by a caller is text to the API, several ordinary tokens, never one special token.
    let g = generation(vec![user("<|endoftext|>")]);
    assert!(count(&g, TokenizerName::Cl100kBase).unwrap() > 3 + 1 + 1 + 3);
}

#[test]
fn counting_is_linear_whatever_the_text_holds() {
    // Runs a backtracking pre-tokenizer would overflow its stack on, or take quadratic time over.
    for text in [
        "a".repeat(1 << 18),
        " ".repeat(1 << 18),
        "\n".repeat(1 << 18),
    ] {
        let g = generation(vec![user(&text)]);
        let started = std::time::Instant::now();
        let n = count(&g, TokenizerName::O200kBase).unwrap();
        assert!(n > 7, "{n}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
}
