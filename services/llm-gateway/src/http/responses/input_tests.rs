use serde_json::json;

use super::*;

fn translated(input: Value) -> Result<pb::Generation, ApiError> {
    let mut g = pb::Generation::default();
    let mut origins = Origins::default();
    translate(input, &mut g, &mut origins).map(|()| g)
}

fn kinds(m: &pb::Message) -> Vec<&'static str> {
    use pb::part::Kind;
    m.parts
        .iter()
        .map(|p| match p.kind.as_ref().unwrap() {
            Kind::Text(_) => "text",
            Kind::File(_) => "file",
            Kind::Reasoning(_) => "reasoning",
            Kind::ToolCall(_) => "call",
            Kind::ToolResult(_) => "result",
        })
        .collect()
}

#[test]
fn a_response_turn_sent_back_is_one_assistant_message_and_its_outputs_one_tool_message() {
    let g = translated(json!([
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"},
                                      {"type": "input_image", "image_url": "https://example.com/a.png"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}],
         "encrypted_content": "gAAA"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "w", "arguments": "{}", "status": "completed"},
        {"type": "function_call", "call_id": "c2", "name": "t", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]},
        {"role": "user", "content": "Thanks"},
    ]))
    .unwrap();
    assert_eq!(g.system, ["Be brief."]);
    let shape: Vec<_> = g.messages.iter().map(|m| (m.role, kinds(m))).collect();
    assert_eq!(
        shape,
        [
            (pb::Role::User as i32, vec!["text", "file"]),
            (
                pb::Role::Assistant as i32,
                vec!["reasoning", "text", "call", "call"]
            ),
            (pb::Role::Tool as i32, vec!["result", "result"]),
            (pb::Role::User as i32, vec!["text"]),
        ]
    );
    let Some(pb::part::Kind::ToolResult(r)) = &g.messages[2].parts[1].kind else {
        panic!()
    };
    assert_eq!((r.tool_name.as_str(), r.output.as_str()), ("t", "noon"));
}

#[test]
fn what_needs_state_or_is_not_served_is_refused_naming_the_item() {
    for (input, field) in [
        (
            json!([{"type": "item_reference", "id": "msg_1"}]),
            "input[0]",
        ),
        (
            json!([{"type": "web_search_call", "id": "ws_1"}]),
            "input[0].type",
        ),
        (
            json!([{"type": "function_call_output", "call_id": "nope", "output": "x"}]),
            "input[0].call_id",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]),
            "input[0].content[0].file_id",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/a.png", "detail": "high"}]}]),
            "input[0].content[0].detail",
        ),
        (
            json!([{"role": "user", "content": [{"type": "input_audio", "data": "x"}]}]),
            "input[0].content[0].type",
        ),
        (
            json!([{"role": "user", "content": "x", "surprise": 1}]),
            "input[0].surprise",
        ),
        (json!([{"role": "robot", "content": "x"}]), "input[0].role"),
        (json!([{"content": "x"}]), "input[0].type"),
        (json!(7), "input"),
    ] {
        let e = translated(input.clone()).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(field), "{input}: {}", e.message);
    }
}

#[test]
fn a_string_is_one_user_message() {
    let g = translated(json!("Hi")).unwrap();
    assert_eq!(g.messages.len(), 1);
    assert_eq!(kinds(&g.messages[0]), ["text"]);
}
