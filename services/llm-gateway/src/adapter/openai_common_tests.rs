use serde_json::json;

use super::*;

fn with_choice(mode: pb::tool_choice::Mode, tool_name: &str) -> pb::Generation {
    pb::Generation {
        tools: vec![pb::Tool {
            name: "get_weather".into(),
            ..Default::default()
        }],
        tool_choice: Some(pb::ToolChoice {
            mode: mode as i32,
            tool_name: tool_name.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn each_tool_choice_mode_has_its_value_and_a_named_tool_must_exist() {
    use pb::tool_choice::Mode;

    let named = |name: &str| json!({ "name": name });
    for (mode, want) in [
        (Mode::Auto, Some(json!("auto"))),
        (Mode::None, Some(json!("none"))),
        (Mode::Required, Some(json!("required"))),
        (Mode::Unspecified, None),
        (Mode::Tool, Some(json!({ "name": "get_weather" }))),
    ] {
        let g = with_choice(mode, "get_weather");
        assert_eq!(tool_choice_with(&g, named).unwrap(), want, "{mode:?}");
    }
    let g = pb::Generation::default();
    assert_eq!(tool_choice_with(&g, named).unwrap(), None);
    for name in ["", "get_time"] {
        let e = tool_choice_with(&with_choice(Mode::Tool, name), named).unwrap_err();
        assert_eq!(e.field, "generation.tool_choice.tool_name", "{name:?}");
    }
}

#[test]
fn a_replayed_calls_arguments_are_checked_json_and_empty_is_an_empty_object() {
    let call = |input: &str| pb::ToolCallPart {
        call_id: "c".into(),
        tool_name: "t".into(),
        input_json: input.into(),
        provider_metadata: None,
    };
    assert_eq!(call_arguments(0, 0, &call("")).unwrap(), "{}");
    assert_eq!(call_arguments(0, 0, &call(" ")).unwrap(), "{}");
    assert_eq!(
        call_arguments(0, 0, &call(r#"{"a":1}"#)).unwrap(),
        r#"{"a":1}"#
    );
    let e = call_arguments(2, 1, &call("{")).unwrap_err();
    assert_eq!(
        e.field,
        "generation.messages[2].parts[1].tool_call.input_json"
    );
}
