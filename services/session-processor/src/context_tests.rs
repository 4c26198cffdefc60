use super::*;

#[test]
fn estimates_are_chars_over_four_rounded_up() {
    assert_eq!(estimate_text(""), 0);
    assert_eq!(estimate_text("abcd"), 1);
    assert_eq!(estimate_text("abcde"), 2);
    assert_eq!(estimate_text("ééé"), 1, "characters, not bytes");
    let g = gw::Generation {
        system: vec!["x".repeat(40)],
        messages: vec![gw::Message {
            role: gw::Role::User as i32,
            parts: vec![
                gw::Part {
                    kind: Some(gw::part::Kind::Text(gw::TextPart {
                        text: "y".repeat(400),
                    })),
                },
                gw::Part {
                    kind: Some(gw::part::Kind::File(gw::FilePart::default())),
                },
            ],
        }],
        tools: vec![gw::Tool {
            name: "read".into(),
            description: String::new(),
            input_schema_json: "{}".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(estimate_generation(&g), 10 + 100 + FILE_TOKENS + 1 + 1);
}

#[test]
fn usable_context_keeps_a_reserve_for_the_answer() {
    let tiny = Limits {
        input: 4_000,
        max_output: 500,
    };
    assert_eq!(tiny.usable(None), 3_500);
    assert_eq!(tiny.usable(Some(1_000)), 3_000);
    let big = Limits {
        input: 200_000,
        max_output: 64_000,
    };
    assert_eq!(big.usable(None), 180_000, "the default reserve is capped");
    let model = gw::Model {
        context_window: 128_000,
        max_input_tokens: 100_000,
        max_output_tokens: 16_000,
        ..Default::default()
    };
    assert_eq!(Limits::of(&model).input, 100_000, "the input limit wins");
    assert_eq!(
        Limits {
            input: 10,
            max_output: 500
        }
        .usable(None),
        0
    );
}
