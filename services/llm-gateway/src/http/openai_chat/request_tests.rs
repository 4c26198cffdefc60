use serde_json::json;

use super::*;
use crate::protocol::Protocol;
use pb::part::Kind;

#[test]
fn a_two_turn_tool_conversation_translates_to_the_unified_request() {
    let (g, _, shape) = translate(json!({
            "model": "anthropic/claude-sonnet-4-5",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
                {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "noon"}]}
            ],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}}],
            "tool_choice": "required",
            "max_completion_tokens": 100,
            "stop": "END",
            "reasoning_effort": "low",
            "user": "a hint"
        }))
        .unwrap();
    assert!(shape.stream && shape.include_usage);
    assert_eq!(g.model, "anthropic/claude-sonnet-4-5");
    assert_eq!(g.system, ["Be brief."]);
    assert_eq!(g.messages.len(), 3);
    assert_eq!(g.messages[1].role, pb::Role::Assistant as i32);
    let Some(Kind::ToolCall(c)) = &g.messages[1].parts[0].kind else {
        panic!()
    };
    assert_eq!(
        (
            c.call_id.as_str(),
            c.tool_name.as_str(),
            c.input_json.as_str()
        ),
        ("call_1", "get_weather", "{\"city\":\"Paris\"}")
    );
    let results = &g.messages[2];
    assert_eq!(results.role, pb::Role::Tool as i32);
    let Some(Kind::ToolResult(r)) = &results.parts[1].kind else {
        panic!()
    };
    assert_eq!(
        (r.call_id.as_str(), r.tool_name.as_str(), r.output.as_str()),
        ("call_2", "get_time", "noon")
    );
    assert_eq!(g.tools[0].input_schema_json, r#"{"type":"object"}"#);
    assert_eq!(
        g.tool_choice.unwrap().mode,
        pb::tool_choice::Mode::Required as i32
    );
    let s = g.sampling.unwrap();
    assert_eq!(
        (s.max_output_tokens, s.stop_sequences),
        (Some(100), vec!["END".to_string()])
    );
    assert_eq!(
        g.reasoning.unwrap().effort,
        pb::reasoning::Effort::Low as i32
    );
}

#[test]
fn a_json_schema_response_format_becomes_schema_output() {
    let (g, _, shape) = translate(json!({
            "model": "openai/gpt-4o",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "city", "strict": true, "schema": {"type": "object"}}}
        }))
        .unwrap();
    assert!(!shape.stream);
    let f = g.output_format.unwrap();
    assert_eq!(
        (f.r#type, f.name.as_str(), f.schema_json.as_str()),
        (
            pb::output_format::Type::JsonSchema as i32,
            "city",
            r#"{"type":"object"}"#
        )
    );
}

#[test]
fn what_cannot_be_honoured_is_refused_naming_the_field() {
    let base = || json!({"model": "openai/gpt-4o", "messages": [{"role": "user", "content": "x"}]});
    for (key, value, field) in [
        ("n", json!(2), "n"),
        ("logprobs", json!(true), "logprobs"),
        ("audio", json!({"voice": "alloy"}), "audio"),
        ("functions", json!([]), "functions"),
        ("web_search_options", json!({}), "web_search_options"),
        (
            "response_format",
            json!({"type": "json_schema", "json_schema": {"schema": {}, "description": "d"}}),
            "response_format.json_schema.description",
        ),
        ("tool_choice", json!("sometimes"), "tool_choice"),
        (
            "messages",
            json!([{"role": "user", "content": "x", "name": "alice"}]),
            "messages[0].name",
        ),
        (
            "messages",
            json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}}]}]),
            "messages[0].content[0].image_url.detail",
        ),
        (
            "tools",
            json!([{"type": "function", "function": {"name": "f", "surprise": 1}}]),
            "tools[0].function.surprise",
        ),
        ("reasoning_effort", json!("max"), "reasoning_effort"),
    ] {
        let mut body = base();
        body[key] = value;
        assert_eq!(
            translate(body).unwrap_err().param.as_deref(),
            Some(field),
            "{key}"
        );
    }
    let orphan = json!({"model": "m", "messages": [{"role": "tool", "tool_call_id": "call_9", "content": "x"}]});
    assert_eq!(
        translate(orphan).unwrap_err().param.as_deref(),
        Some("messages[0].tool_call_id")
    );
    let bad_role = json!({"model": "m", "messages": [{"role": "wizard", "content": "x"}]});
    assert_eq!(
        translate(bad_role).unwrap_err().param.as_deref(),
        Some("messages[0].role")
    );
}

#[test]
fn images_arrive_as_file_parts() {
    let (g, _, _) = translate(
        json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}
        ]}]}),
    )
    .unwrap();
    let Some(Kind::File(f)) = &g.messages[0].parts[0].kind else {
        panic!()
    };
    assert_eq!(f.media_type, "image/png");
}

#[test]
fn strict_json_object_parallel_and_xhigh_reach_the_unified_request() {
    let (g, extras, _) = translate(json!({
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}}],
        "parallel_tool_calls": false,
        "response_format": {"type": "json_object"},
        "reasoning_effort": "xhigh",
    }))
    .unwrap();
    assert!(g.tools[0].strict);
    let choice = g.tool_choice.unwrap();
    assert!(choice.disable_parallel);
    assert_eq!(choice.mode, 0, "the mode is left to the model");
    assert_eq!(
        g.output_format.unwrap().r#type,
        pb::output_format::Type::JsonObject as i32
    );
    assert_eq!(g.reasoning.unwrap().effort(), pb::reasoning::Effort::Xhigh);
    assert_eq!(extras, Extras::default());
    let (g, ..) = translate(json!({
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "C", "schema": {"type": "object"}, "strict": true}},
    }))
    .unwrap();
    assert!(g.output_format.unwrap().strict);
}

#[test]
fn a_reply_sent_back_as_history_is_accepted_with_its_empty_echoes() {
    let (g, ..) = translate(json!({
        "model": "m",
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "refusal": "I cannot.", "annotations": [], "audio": null,
             "function_call": null, "tool_calls": []},
            {"role": "user", "content": "why?"},
        ],
    }))
    .unwrap();
    let Some(pb::part::Kind::Text(t)) = &g.messages[1].parts[0].kind else {
        panic!()
    };
    assert_eq!(t.text, "I cannot.");
}

#[test]
fn fields_this_door_does_not_map_are_hints_or_same_protocol() {
    let (mut g, extras, _) = translate(json!({
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "user": "u1",
        "store": true,
        "frequency_penalty": 0.5,
        "logit_bias": {"50256": -100},
        "min_p": 0.05,
    }))
    .unwrap();
    let mut same = g.clone();
    extras
        .clone()
        .settle(&mut same, Protocol::OpenaiChat, Some(Protocol::OpenaiChat))
        .unwrap();
    let sent: Value = serde_json::from_str(&same.provider_options_json).unwrap();
    assert_eq!(
        sent,
        json!({"openai_chat": {"user": "u1", "store": true, "frequency_penalty": 0.5, "logit_bias": {"50256": -100}, "min_p": 0.05}})
    );
    let e = extras
        .settle(&mut g, Protocol::OpenaiChat, Some(Protocol::Anthropic))
        .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("frequency_penalty"));
}
