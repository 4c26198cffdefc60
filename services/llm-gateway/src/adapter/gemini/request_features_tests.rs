//! The request features beyond the conversation (docs/gateway.md "Request features by provider"): strict tools as
//! function calling mode `VALIDATED`, JSON-object output, schema output as it always is, and one call per step
//! refused.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::request::build;
use crate::adapter::testing::testkit::{self, city_tool, json_object, json_schema, tool_choice};
use crate::adapter::{Target, pb};
use crate::catalog::ModelInfo;
use crate::protocol::Protocol;

use pb::tool_choice::Mode;

fn model(name: &str) -> ModelInfo {
    ModelInfo::for_tests(name, Protocol::Gemini)
}

fn build_for(g: &pb::Generation, name: &str) -> Result<Value, crate::adapter::BuildError> {
    Ok(build(g, &Target::new(&model(name)))?.body)
}

fn asking() -> pb::Generation {
    testkit::asking("gemini/gemini-2.5-flash", "Weather in Paris?")
}

#[test]
fn a_strict_tool_makes_calls_validated_while_the_model_may_still_answer_in_text() {
    let mut g = asking();
    g.tools = vec![city_tool("get_weather", true), city_tool("get_time", false)];
    assert_eq!(
        build_for(&g, "gemini-2.5-flash").unwrap(),
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
            "tools": [{"functionDeclarations": [
                {"name": "get_weather", "parameters": {
                    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]
                }},
                {"name": "get_time", "parameters": {
                    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]
                }}
            ]}],
            "toolConfig": {"functionCallingConfig": {"mode": "VALIDATED"}}
        })
    );
    g.tool_choice = tool_choice(Mode::Auto, "", false);
    let b = build_for(&g, "gemini-2.5-flash").unwrap();
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "VALIDATED"}})
    );
    // ANY is constrained already, and NONE makes no call: strict changes neither.
    g.tool_choice = tool_choice(Mode::Tool, "get_weather", false);
    let b = build_for(&g, "gemini-2.5-flash").unwrap();
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}})
    );
    g.tool_choice = tool_choice(Mode::None, "", false);
    let b = build_for(&g, "gemini-2.5-flash").unwrap();
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "NONE"}})
    );
}

#[test]
fn json_object_is_json_without_a_schema_and_a_schema_is_constrained_strict_or_not() {
    let mut g = asking();
    g.output_format = json_object();
    assert_eq!(
        build_for(&g, "gemini-2.5-flash").unwrap()["generationConfig"],
        json!({"responseMimeType": "application/json"})
    );
    let schema = r#"{"type":"object","properties":{"summary":{"type":"string"}}}"#;
    for strict in [false, true] {
        g.output_format = json_schema(schema, strict);
        assert_eq!(
            build_for(&g, "gemini-2.5-flash").unwrap()["generationConfig"],
            json!({
                "responseMimeType": "application/json",
                "responseSchema": {"type": "object", "properties": {"summary": {"type": "string"}}}
            }),
            "strict {strict}"
        );
    }
    // Before Gemini 3, JSON output of either kind cannot go with function calling.
    g.output_format = json_object();
    g.tools = vec![city_tool("get_weather", false)];
    assert_eq!(
        build_for(&g, "gemini-2.5-flash").unwrap_err().field,
        "generation.output_format"
    );
    assert!(build_for(&g, "gemini-3-pro-preview").is_ok());
}

#[test]
fn one_call_per_step_is_refused_where_a_call_could_be_made() {
    let mut g = asking();
    g.tools = vec![city_tool("get_weather", false)];
    for mode in [Mode::Unspecified, Mode::Auto, Mode::Required] {
        g.tool_choice = tool_choice(mode, "", true);
        let e = build_for(&g, "gemini-2.5-flash").unwrap_err();
        assert_eq!(
            e.field, "generation.tool_choice.disable_parallel",
            "{mode:?}"
        );
        assert!(e.message.contains("Gemini has no switch"), "{e}");
    }
    g.tool_choice = tool_choice(Mode::None, "", true);
    assert!(build_for(&g, "gemini-2.5-flash").is_ok());
    g.tools.clear();
    g.tool_choice = tool_choice(Mode::Auto, "", true);
    assert!(build_for(&g, "gemini-2.5-flash").is_ok());
}
