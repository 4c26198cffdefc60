use super::*;
use pb::part::Kind;

#[test]
fn a_tool_loop_with_signed_thinking_translates_to_the_unified_request() {
    let (g, stream) = translate(json!({
            "model": "anthropic/claude-sonnet-4-5",
            "max_tokens": 2048,
            "stream": true,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"},
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look it up.", "signature": "sig-1"},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]},
                    {"type": "text", "text": "And tomorrow?"}
                ]}
            ]
        }))
        .unwrap();
    assert!(stream);
    assert_eq!(g.system, ["Be brief."]);
    let roles: Vec<i32> = g.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            pb::Role::User as i32,
            pb::Role::Assistant as i32,
            pb::Role::Tool as i32,
            pb::Role::User as i32
        ]
    );
    let Some(Kind::Reasoning(r)) = &g.messages[1].parts[0].kind else {
        panic!()
    };
    let meta = r.provider_metadata.as_ref().unwrap();
    assert_eq!(
        (
            meta.protocol.as_str(),
            meta.model.as_str(),
            meta.json.as_str()
        ),
        (
            "anthropic",
            "anthropic/claude-sonnet-4-5",
            r#"{"signature":"sig-1"}"#
        )
    );
    let Some(Kind::ToolCall(c)) = &g.messages[1].parts[1].kind else {
        panic!()
    };
    assert_eq!(c.input_json, r#"{"city":"Paris"}"#);
    let Some(Kind::ToolResult(res)) = &g.messages[2].parts[0].kind else {
        panic!()
    };
    assert_eq!(
        (res.tool_name.as_str(), res.output.as_str()),
        ("get_weather", "18C")
    );
    assert_eq!(g.reasoning.unwrap().budget_tokens, 1024);
    assert_eq!(
        g.tool_choice.unwrap().mode,
        pb::tool_choice::Mode::Required as i32
    );
    assert_eq!(g.sampling.unwrap().max_output_tokens, Some(2048));
}

#[test]
fn mistakes_are_refused_naming_the_field() {
    let base = |messages: Value| json!({"model": "m", "max_tokens": 10, "messages": messages});
    let orphan = base(
        json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}]}]),
    );
    assert_eq!(
        translate(orphan).unwrap_err().param.as_deref(),
        Some("messages[0].content[0].tool_use_id")
    );
    let misplaced = base(
        json!([{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}]),
    );
    assert_eq!(
        translate(misplaced).unwrap_err().param.as_deref(),
        Some("messages[0].content[0]")
    );
    let mut server_tool = base(json!([{"role": "user", "content": "x"}]));
    server_tool["tools"] =
        json!([{"type": "web_search_20250305", "name": "web_search", "input_schema": {}}]);
    assert_eq!(
        translate(server_tool).unwrap_err().param.as_deref(),
        Some("tools[0].type")
    );
}

#[test]
fn images_arrive_as_file_parts() {
    let (g, _) = translate(json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}}
        ]}]}))
        .unwrap();
    let Some(Kind::File(f)) = &g.messages[0].parts[0].kind else {
        panic!()
    };
    assert_eq!(f.media_type, "image/png");
}
