//! The request features beyond the conversation (docs/gateway.md "Request features by provider"): strict tools,
//! JSON Schema output through `output_config`, one tool call per step, and what the Messages API refuses.

use serde_json::json;

use super::*;
use crate::adapter::Adapter;
use crate::adapter::anthropic::Anthropic;
use crate::adapter::testing::testkit::{
    self, assistant, city_tool as tool, json_object, json_schema, text, tool_choice as choice, user,
};

/// Claude Sonnet 4.5 with structured outputs, as the bundled catalog describes it, without prompt caching so the
/// bodies read without cache markers.
fn structured() -> ModelInfo {
    let caps = Capabilities {
        reasoning: true,
        vision: true,
        json_schema: true,
        exclusive_temperature_top_p: true,
        ..Capabilities::default()
    };
    ModelInfo {
        max_output_tokens: 64_000,
        ..testkit::model("anthropic/claude-sonnet-4-5", Protocol::Anthropic, caps)
    }
}

/// The same model without structured outputs (Claude Sonnet 4, say).
fn unstructured() -> ModelInfo {
    let mut m = structured();
    m.capabilities.json_schema = false;
    m
}

fn body(g: &pb::Generation, m: &ModelInfo) -> Value {
    Anthropic.build(g, &Target::new(m)).unwrap().body
}

fn error(g: &pb::Generation, m: &ModelInfo) -> BuildError {
    Anthropic.build(g, &Target::new(m)).unwrap_err()
}

fn asking(messages: Vec<pb::Message>) -> pb::Generation {
    pb::Generation {
        model: "anthropic/claude-sonnet-4-5".into(),
        messages,
        ..Default::default()
    }
}

#[test]
fn strict_tools_schema_output_and_one_call_per_step() {
    let mut g = asking(vec![user(vec![text("Weather in Paris?")])]);
    g.tools = vec![tool("get_weather", true), tool("get_time", false)];
    g.tool_choice = choice(pb::tool_choice::Mode::Unspecified, "", true);
    g.output_format = json_schema(
        r#"{"type":"object","properties":{"summary":{"type":"string"},"place":{"type":"object","properties":{"city":{"type":"string"}}}}}"#,
        true,
    );
    assert_eq!(
        body(&g, &structured()),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}],
            "tools": [
                {
                    "name": "get_weather",
                    "input_schema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                        "additionalProperties": false
                    },
                    "strict": true
                },
                {
                    "name": "get_time",
                    "input_schema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"]
                    }
                }
            ],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
            "output_config": {"format": {"type": "json_schema", "schema": {
                "type": "object",
                "properties": {
                    "summary": {"type": "string"},
                    "place": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "additionalProperties": false
                    }
                },
                "additionalProperties": false
            }}},
            "stream": true
        })
    );
}

#[test]
fn one_call_per_step_rides_on_every_choice_that_allows_calls() {
    use pb::tool_choice::Mode;
    let cases = [
        (
            Mode::Auto,
            "",
            json!({"type": "auto", "disable_parallel_tool_use": true}),
        ),
        (
            Mode::Required,
            "",
            json!({"type": "any", "disable_parallel_tool_use": true}),
        ),
        (
            Mode::Tool,
            "get_weather",
            json!({"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true}),
        ),
        // NONE makes no call: nothing to limit, and `none` takes no such flag.
        (Mode::None, "", json!({"type": "none"})),
    ];
    for (mode, name, want) in cases {
        let mut g = asking(vec![user(vec![text("Hi")])]);
        g.tools = vec![tool("get_weather", false)];
        g.tool_choice = choice(mode, name, true);
        assert_eq!(body(&g, &structured())["tool_choice"], want, "{mode:?}");
    }
    // Without tools there is no call to limit and no tool choice to carry the flag.
    let mut g = asking(vec![user(vec![text("Hi")])]);
    g.tool_choice = choice(Mode::Auto, "", true);
    assert_eq!(body(&g, &structured()).get("tool_choice"), None);
}

#[test]
fn provider_options_add_to_output_config() {
    let mut g = asking(vec![user(vec![text("Hi")])]);
    g.output_format = json_schema(r#"{"type":"object","properties":{}}"#, true);
    g.provider_options_json = r#"{"anthropic":{"output_config":{"effort":"low"}}}"#.into();
    assert_eq!(
        body(&g, &structured())["output_config"],
        json!({
            "format": {"type": "json_schema", "schema": {"type": "object", "properties": {}, "additionalProperties": false}},
            "effort": "low"
        })
    );
}

#[test]
fn what_the_messages_api_cannot_do_is_refused_naming_the_field() {
    let hi = || asking(vec![user(vec![text("Hi")])]);

    let mut g = hi();
    g.output_format = json_object();
    let e = error(&g, &structured());
    assert_eq!(e.field, "generation.output_format.type");
    assert!(e.message.contains("no JSON mode"), "{e}");

    let mut g = hi();
    g.output_format = json_schema(r#"{"type":"object"}"#, true);
    let e = error(&g, &unstructured());
    assert_eq!(e.field, "generation.output_format.type");
    assert!(e.message.contains("json_schema"), "{e}");

    let mut g = hi();
    g.output_format = json_schema(
        r#"{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}}}"#,
        true,
    );
    assert_eq!(
        error(&g, &structured()).field,
        "generation.output_format.schema_json"
    );

    let mut g = hi();
    g.tools = vec![tool("a", false), tool("b", true)];
    let e = error(&g, &unstructured());
    assert_eq!(e.field, "generation.tools[1].strict");
    assert!(e.message.contains("strict tool use"), "{e}");

    let mut g = hi();
    g.tools = vec![pb::Tool {
        input_schema_json: r#"{"type":"object","additionalProperties":true}"#.into(),
        ..tool("a", true)
    }];
    assert_eq!(
        error(&g, &structured()).field,
        "generation.tools[0].input_schema_json"
    );

    let mut g = asking(vec![
        user(vec![text("Give me JSON")]),
        assistant(vec![text("{\"summary\":")]),
    ]);
    g.output_format = json_schema(r#"{"type":"object"}"#, true);
    let e = error(&g, &structured());
    assert_eq!(e.field, "generation.messages[1]");
    assert!(e.message.contains("prefill"), "{e}");
}
