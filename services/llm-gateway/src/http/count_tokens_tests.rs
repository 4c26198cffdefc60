use super::*;

#[test]
fn a_count_body_is_a_messages_body_without_generation_settings() {
    let g = translate(json!({
        "model": "anthropic/claude-sonnet-4-5",
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"name": "t", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }))
    .unwrap();
    assert_eq!(g.model, "anthropic/claude-sonnet-4-5");
    assert_eq!((g.system.len(), g.messages.len(), g.tools.len()), (1, 1, 1));
    assert_eq!(g.reasoning.map(|r| r.budget_tokens), Some(2048));
}

#[test]
fn what_count_tokens_does_not_take_is_refused_naming_it() {
    for field in [
        "max_tokens",
        "stream",
        "temperature",
        "metadata",
        "output_config",
    ] {
        let e = translate(json!({
            "model": "m",
            "messages": [{"role": "user", "content": "Hi"}],
            field: 1,
        }))
        .unwrap_err();
        assert_eq!(e.param.as_deref(), Some(field));
        assert!(
            e.message.contains("Extra inputs are not permitted"),
            "{}",
            e.message
        );
    }
    let e = translate(json!(["not", "an", "object"])).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("body"));
}
