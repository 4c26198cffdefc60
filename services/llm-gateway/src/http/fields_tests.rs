use serde_json::json;

use super::*;

#[test]
fn fields_of_one_object_merge_and_a_same_protocol_field_is_named_when_refused() {
    let mut extras = Extras::default();
    extras.same_protocol("text.verbosity", "text", json!({"verbosity": "low"}));
    extras.hint("text", json!({"other": 1}));
    extras.absorb(
        [
            ("min_p".to_string(), json!(0.1)),
            ("user".to_string(), json!("u")),
            ("gone".to_string(), Value::Null),
        ]
        .into_iter()
        .collect(),
        &["user"],
    );
    let mut g = pb::Generation {
        model: "m".into(),
        ..Default::default()
    };
    extras
        .clone()
        .settle(&mut g, Protocol::OpenaiChat, Some(Protocol::AzureChat))
        .unwrap();
    let sent: Value = serde_json::from_str(&g.provider_options_json).unwrap();
    assert_eq!(
        sent,
        json!({"openai_chat": {"text": {"verbosity": "low", "other": 1}, "min_p": 0.1, "user": "u"}})
    );
    let e = extras
        .clone()
        .settle(&mut g, Protocol::OpenaiChat, Some(Protocol::Gemini))
        .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("text.verbosity"));
    assert!(e.message.contains("gemini"), "{}", e.message);
    // A model that is not served: left for the core to report.
    let mut g = pb::Generation::default();
    extras.settle(&mut g, Protocol::OpenaiChat, None).unwrap();
    assert_eq!(g.provider_options_json, "");
}

#[test]
fn every_openai_effort_name_is_read_and_others_refused() {
    for name in ["none", "minimal", "low", "medium", "high", "xhigh"] {
        effort("reasoning_effort", name).unwrap();
    }
    let e = effort("reasoning.effort", "max").unwrap_err();
    assert_eq!(e.param.as_deref(), Some("reasoning.effort"));
}
