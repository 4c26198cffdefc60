use super::*;
use crate::protocol::Protocol;
use pb::part::Kind;

#[test]
fn a_tool_loop_with_signed_thinking_translates_to_the_unified_request() {
    let (g, _, shape) = translate(json!({
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
    assert!(shape.stream);
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
        // The model is the one the request resolves to, named once it is.
        ("anthropic", "", r#"{"signature":"sig-1"}"#)
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
    server_tool["tools"] = json!([{"type": "web_search_20250305", "name": "web_search"}]);
    assert_eq!(
        translate(server_tool).unwrap_err().param.as_deref(),
        Some("tools[0].type")
    );
}

#[test]
fn images_arrive_as_file_parts() {
    let (g, _, _) = translate(json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}}
        ]}]}))
        .unwrap();
    let Some(Kind::File(f)) = &g.messages[0].parts[0].kind else {
        panic!()
    };
    assert_eq!(f.media_type, "image/png");
}

#[test]
fn structured_output_strict_tools_and_one_call_per_step_are_mapped() {
    for body in [
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
               "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}),
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
               "output_format": {"type": "json_schema", "schema": {"type": "object"}}}),
    ] {
        let (g, extras, _) = translate(body).unwrap();
        let f = g.output_format.unwrap();
        assert_eq!(
            (f.r#type, f.strict),
            (pb::output_format::Type::JsonSchema as i32, true)
        );
        assert_eq!(extras, Extras::default());
    }
    let (g, ..) = translate(json!({
        "model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}, "strict": true, "cache_control": {"type": "ephemeral"}}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
    }))
    .unwrap();
    assert!(g.tools[0].strict);
    assert!(g.tool_choice.unwrap().disable_parallel);
}

#[test]
fn fields_only_anthropic_has_go_to_anthropic_providers_and_are_refused_for_others() {
    let (mut g, extras, _) = translate(json!({
        "model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "low"},
        "metadata": {"user_id": "u1"},
    }))
    .unwrap();
    assert_eq!(g.reasoning, None);
    let mut same = g.clone();
    extras
        .clone()
        .settle(
            &mut same,
            Protocol::Anthropic,
            Some(Protocol::VertexAnthropic),
        )
        .unwrap();
    let sent: Value = serde_json::from_str(&same.provider_options_json).unwrap();
    assert_eq!(
        sent,
        json!({"anthropic": {"metadata": {"user_id": "u1"}, "thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}}})
    );
    let e = extras
        .settle(&mut g, Protocol::Anthropic, Some(Protocol::OpenaiChat))
        .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("thinking"));
}
