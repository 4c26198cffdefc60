#![allow(clippy::unwrap_used)]

use super::*;

fn generation(tools: usize, choice: Option<pb::ToolChoice>) -> pb::Generation {
    pb::Generation {
        tools: (0..tools)
            .map(|i| pb::Tool {
                name: format!("t{i}"),
                strict: i == 1,
                ..Default::default()
            })
            .collect(),
        tool_choice: choice,
        ..Default::default()
    }
}

fn choice(mode: pb::tool_choice::Mode, disable_parallel: bool) -> Option<pb::ToolChoice> {
    Some(pb::ToolChoice {
        mode: mode.into(),
        tool_name: String::new(),
        disable_parallel,
    })
}

fn format(ty: pb::output_format::Type) -> pb::Generation {
    pb::Generation {
        output_format: Some(pb::OutputFormat {
            r#type: ty.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn output_kinds() {
    use pb::output_format::Type;
    assert_eq!(output(&pb::Generation::default()), Output::Text);
    assert_eq!(output(&format(Type::Text)), Output::Text);
    assert_eq!(output(&format(Type::Unspecified)), Output::Text);
    assert_eq!(output(&format(Type::JsonObject)), Output::JsonObject);
    let g = format(Type::JsonSchema);
    assert!(matches!(output(&g), Output::JsonSchema(_)));

    let e = refuse_json_object(&format(Type::JsonObject), "Bedrock").unwrap_err();
    assert_eq!(e.field, "generation.output_format.type");
    assert!(e.message.starts_with("Bedrock has no JSON mode"), "{e}");
    assert!(refuse_json_object(&g, "Bedrock").is_ok());
}

#[test]
fn one_call_per_step_needs_tools_and_a_choice_that_allows_calls() {
    use pb::tool_choice::Mode;
    assert!(one_call_per_step(&generation(1, choice(Mode::Auto, true))));
    assert!(one_call_per_step(&generation(
        1,
        choice(Mode::Unspecified, true)
    )));
    assert!(one_call_per_step(&generation(
        1,
        choice(Mode::Required, true)
    )));
    assert!(!one_call_per_step(&generation(
        1,
        choice(Mode::Auto, false)
    )));
    assert!(!one_call_per_step(&generation(1, choice(Mode::None, true))));
    assert!(!one_call_per_step(&generation(0, choice(Mode::Auto, true))));
    assert!(!one_call_per_step(&generation(1, None)));

    let e =
        refuse_one_call_per_step(&generation(2, choice(Mode::Auto, true)), "Gemini").unwrap_err();
    assert_eq!(e.field, "generation.tool_choice.disable_parallel");
    assert!(e.message.starts_with("Gemini has no switch"), "{e}");
    assert!(refuse_one_call_per_step(&generation(2, choice(Mode::None, true)), "Gemini").is_ok());
}

#[test]
fn strict_tools_are_found_by_position() {
    assert_eq!(first_strict_tool(&generation(1, None)), None);
    assert_eq!(first_strict_tool(&generation(3, None)), Some(1));
    assert_eq!(strict_field(1), "generation.tools[1].strict");
}
