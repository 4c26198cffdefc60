use serde_json::json;

use super::*;
use crate::protocol::Protocol;

fn ok(body: Value) -> (pb::Generation, Extras, Shape) {
    translate(body).unwrap()
}

fn refused(body: Value) -> String {
    translate(body).unwrap_err().param.unwrap_or_default()
}

#[test]
fn the_mapped_fields_reach_the_unified_request() {
    let (g, extras, shape) = ok(json!({
        "model": "gpt-4o",
        "instructions": "Be kind.",
        "input": "Hi",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": true}],
        "tool_choice": {"type": "function", "name": "f"},
        "parallel_tool_calls": false,
        "text": {"format": {"type": "json_schema", "name": "City", "schema": {"type": "object"}, "strict": true}},
        "reasoning": {"effort": "medium"},
        "max_output_tokens": 100,
        "temperature": 0.5,
        "top_p": 0.9,
        "stream": true,
    }));
    assert_eq!(g.model, "gpt-4o");
    assert_eq!(g.system, ["Be kind."]);
    assert_eq!(g.messages.len(), 1);
    assert!(g.tools[0].strict);
    let choice = g.tool_choice.unwrap();
    assert_eq!(
        (choice.tool_name.as_str(), choice.disable_parallel),
        ("f", true)
    );
    let format = g.output_format.unwrap();
    assert_eq!((format.name.as_str(), format.strict), ("City", true));
    assert_eq!(g.reasoning.unwrap().effort(), pb::reasoning::Effort::Medium);
    let s = g.sampling.unwrap();
    assert_eq!(
        (s.max_output_tokens, s.temperature, s.top_p),
        (Some(100), Some(0.5), Some(0.9))
    );
    assert!(shape.stream);
    assert_eq!(extras, Extras::default());
    assert_eq!(shape.echo["instructions"], "Be kind.");
}

#[test]
fn a_function_tool_is_strict_unless_it_says_otherwise() {
    let (g, ..) = ok(json!({"model": "m", "input": "x", "tools": [
        {"type": "function", "name": "a"},
        {"type": "function", "name": "b", "strict": false},
    ]}));
    assert_eq!(
        g.tools.iter().map(|t| t.strict).collect::<Vec<_>>(),
        [true, false]
    );
}

#[test]
fn what_needs_state_or_cannot_be_honoured_is_refused_naming_it() {
    let base = || json!({"model": "m", "input": "x"});
    for (key, value) in [
        ("previous_response_id", json!("resp_1")),
        ("conversation", json!("conv_1")),
        ("prompt", json!({"id": "pmpt_1"})),
        ("store", json!(true)),
        ("background", json!(true)),
        ("truncation", json!("auto")),
        ("top_logprobs", json!(5)),
        ("max_tool_calls", json!(3)),
    ] {
        let mut body = base();
        body[key] = value;
        assert_eq!(refused(body), key);
    }
    let mut body = base();
    body["include"] = json!([
        "reasoning.encrypted_content",
        "message.output_text.logprobs"
    ]);
    assert_eq!(refused(body), "include[1]");
    let mut body = base();
    body["tools"] = json!([{"type": "web_search"}]);
    assert_eq!(refused(body), "tools[0].type");
    let mut body = base();
    body["text"] = json!({"format": {"type": "json_schema", "schema": {}, "description": "d"}});
    assert_eq!(refused(body), "text.format.description");
}

#[test]
fn the_stateless_values_of_stateful_fields_are_accepted() {
    let (g, extras, _) = ok(json!({
        "model": "m", "input": "x", "store": false, "background": false, "truncation": "disabled",
        "include": ["reasoning.encrypted_content"], "stream_options": {"include_obfuscation": false},
        "top_logprobs": 0, "max_tool_calls": null, "previous_response_id": null,
    }));
    assert_eq!(g.messages.len(), 1);
    assert_eq!(extras, Extras::default());
}

#[test]
fn hints_and_unknown_fields_are_left_for_a_responses_provider() {
    let (mut g, extras, _) = ok(json!({
        "model": "m", "input": "x",
        "metadata": {"k": "v"}, "user": "u1", "service_tier": "flex",
        "text": {"verbosity": "low"},
        "reasoning": {"effort": "low", "summary": "auto"},
        "some_new_field": 1,
    }));
    let mut same = g.clone();
    extras
        .clone()
        .settle(
            &mut same,
            Protocol::OpenaiResponses,
            Some(Protocol::AzureResponses),
        )
        .unwrap();
    let sent: Value = serde_json::from_str(&same.provider_options_json).unwrap();
    assert_eq!(
        sent,
        json!({"openai_responses": {
            "text": {"verbosity": "low"},
            "reasoning": {"effort": "low", "summary": "auto"},
            "metadata": {"k": "v"}, "user": "u1", "service_tier": "flex", "some_new_field": 1,
        }})
    );
    // Another protocol: the first field only Responses takes is refused, naming it.
    let e = extras
        .settle(&mut g, Protocol::OpenaiResponses, Some(Protocol::Anthropic))
        .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("text.verbosity"));
}

#[test]
fn hints_alone_are_left_out_for_another_protocol() {
    let (mut g, extras, _) =
        ok(json!({"model": "m", "input": "x", "metadata": {"k": "v"}, "user": "u"}));
    extras
        .settle(&mut g, Protocol::OpenaiResponses, Some(Protocol::Gemini))
        .unwrap();
    assert_eq!(g.provider_options_json, "");
}
