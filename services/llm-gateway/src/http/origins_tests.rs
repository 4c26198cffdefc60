use serde_json::json;

use crate::http::errors::ApiError;

#[test]
fn unified_fields_are_named_as_the_chat_body_names_them() {
    let (_, _, shape) = crate::http::openai_chat::request::translate(json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be kind."},
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "t", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "c2", "content": "noon"},
        ],
        "tools": [{"type": "function", "function": {"name": "w"}}, {"type": "function", "function": {"name": "t"}}],
    }))
    .unwrap();
    let o = &shape.origins;
    for (unified, ours) in [
        ("generation.system[0]", "messages[0].content"),
        ("generation.messages[0].parts[0]", "messages[1].content"),
        ("generation.messages[0].role", "messages[1].role"),
        ("generation.messages[1].parts[1]", "messages[2].content"),
        // The two tool messages are one unified message: each result is named by the message it came in.
        ("generation.messages[2].parts[0]", "messages[3].content"),
        ("generation.messages[2].parts[1]", "messages[4].content"),
        (
            "generation.tools[1].input_schema_json",
            "tools[1].function.parameters",
        ),
        ("generation.tools[1].name", "tools[1].name"),
        ("generation.model", "model"),
        (
            "generation.sampling.max_output_tokens",
            "max_completion_tokens",
        ),
        (
            "generation.tool_choice.disable_parallel",
            "parallel_tool_calls",
        ),
    ] {
        assert_eq!(o.locate(unified).as_deref(), Some(ours), "{unified}");
    }
    assert_eq!(o.locate("generation.messages[9].parts[0]"), None);
}

#[test]
fn an_error_found_after_translation_names_the_callers_field() {
    let (_, _, shape) = crate::http::anthropic::request::translate(json!({
        "model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "a"}],
        "messages": [{"role": "user", "content": "x"}],
    }))
    .unwrap();
    let e = ApiError::invalid(
        "generation.sampling.max_output_tokens",
        "above the model's 64000",
    )
    .located(&shape.origins);
    assert_eq!(e.param.as_deref(), Some("max_tokens"));
    assert_eq!(e.message, "max_tokens: above the model's 64000");
    let e = ApiError::invalid("generation.system[0]", "empty").located(&shape.origins);
    assert_eq!(e.param.as_deref(), Some("system[0]"));
    // A field of the caller's own is left as it is.
    let e = ApiError::invalid("messages[0].content", "bad").located(&shape.origins);
    assert_eq!(e.param.as_deref(), Some("messages[0].content"));
}
