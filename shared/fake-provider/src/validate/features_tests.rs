//! The request features beyond the conversation, per protocol: strict tools and schemas, JSON-object output, one
//! tool call per step. Each fake takes exactly what the real API takes for them and refuses the rest.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};

use super::tests::{
    VERTEX_FLASH, anthropic_plain, assert_ok, assert_refused, at, chat_loop, gemini_loop, path_of,
    responses_loop, with,
};
use super::*;

const GEMINI_FLASH: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";

/// A closed object schema, what structured outputs take.
fn closed() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false})
}

#[test]
fn openai_chat_takes_json_object_and_parallel_tool_calls() {
    let p = path_of(Protocol::OpenaiChat);
    let base = chat_loop(["call_1", "call_2"]);
    let json_object = with(&base, |b| {
        b["response_format"] = json!({"type": "json_object"});
        b["parallel_tool_calls"] = json!(false);
        *at(b, "/messages/0/content") = json!("Answer in JSON.");
    });
    assert_ok(Protocol::OpenaiChat, p, &json_object);
    let cases = vec![
        (
            "'messages' must contain the word 'json' in some form",
            with(&json_object, |b| {
                *at(b, "/messages/0/content") = json!("Be brief.")
            }),
        ),
        (
            "'parallel_tool_calls' is only allowed when 'tools' are specified.",
            with(&json_object, |b| {
                let o = b.as_object_mut().unwrap();
                o.remove("tools");
                o.remove("tool_choice");
                o.insert(
                    "messages".into(),
                    json!([{"role": "user", "content": "json"}]),
                );
            }),
        ),
        (
            "Invalid type for 'parallel_tool_calls': expected a boolean",
            with(&json_object, |b| b["parallel_tool_calls"] = json!("no")),
        ),
        (
            "Supported values are: 'text', 'json_object', and 'json_schema'.",
            with(&json_object, |b| {
                b["response_format"] = json!({"type": "json"})
            }),
        ),
    ];
    assert_refused(Protocol::OpenaiChat, p, cases);
}

#[test]
fn openai_responses_takes_json_object_and_parallel_tool_calls() {
    let p = path_of(Protocol::OpenaiResponses);
    let json_object = with(&responses_loop(), |b| {
        b["text"] = json!({"format": {"type": "json_object"}});
        b["parallel_tool_calls"] = json!(false);
        b["instructions"] = json!("Answer in JSON.");
    });
    assert_ok(Protocol::OpenaiResponses, p, &json_object);
    let strict = with(&responses_loop(), |b| {
        *at(b, "/tools/0") = json!({"type": "function", "name": "get_weather", "parameters": closed(), "strict": true});
        b["text"] = json!({"format": {"type": "json_schema", "name": "answer", "schema": closed(), "strict": true}});
    });
    assert_ok(Protocol::OpenaiResponses, p, &strict);
    let cases = vec![
        (
            "Response input messages must contain the word 'json' in some form",
            with(&json_object, |b| b["instructions"] = json!("Be brief.")),
        ),
        (
            "Supported values are: 'text', 'json_object', and 'json_schema'.",
            with(&json_object, |b| {
                b["text"] = json!({"format": {"type": "yaml"}})
            }),
        ),
        (
            "Invalid type for 'parallel_tool_calls'",
            with(&json_object, |b| b["parallel_tool_calls"] = json!(0)),
        ),
    ];
    assert_refused(Protocol::OpenaiResponses, p, cases);
}

#[test]
fn anthropic_takes_strict_tools_output_config_and_one_call_per_step() {
    let p = path_of(Protocol::Anthropic);
    let structured = with(&anthropic_plain(), |b| {
        *at(b, "/tools/0/input_schema") = closed();
        b["tools"][0]["strict"] = json!(true);
        b["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": true});
        b["output_config"] =
            json!({"format": {"type": "json_schema", "schema": closed()}, "effort": "low"});
    });
    assert_ok(Protocol::Anthropic, p, &structured);
    for choice in [
        json!({"type": "any", "disable_parallel_tool_use": true}),
        json!({"type": "tool", "name": "get_weather", "disable_parallel_tool_use": false}),
        json!({"type": "none"}),
    ] {
        assert_ok(
            Protocol::Anthropic,
            p,
            &with(&structured, |b| b["tool_choice"] = choice),
        );
    }
    let open = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    let cases = vec![
        (
            "tools.0.custom.input_schema: For 'object' type, 'additionalProperties' must be explicitly set to false",
            with(&structured, |b| {
                *at(b, "/tools/0/input_schema") = open.clone()
            }),
        ),
        (
            "output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false",
            with(&structured, |b| {
                *at(b, "/output_config/format/schema") = json!({"type": "object", "properties": {
                    "place": {"type": "object", "properties": {}}
                }, "additionalProperties": false});
            }),
        ),
        (
            "output_config.format.type: Input should be 'json_schema'",
            with(&structured, |b| {
                *at(b, "/output_config/format/type") = json!("json_object")
            }),
        ),
        (
            "output_config.verbosity: Extra inputs are not permitted",
            with(&structured, |b| {
                b["output_config"]["verbosity"] = json!("low")
            }),
        ),
        (
            "tool_choice.none.disable_parallel_tool_use: Extra inputs are not permitted",
            with(&structured, |b| {
                b["tool_choice"] = json!({"type": "none", "disable_parallel_tool_use": true});
            }),
        ),
        (
            "tool_choice.auto.disable_parallel_tool_use: Input should be a valid boolean",
            with(&structured, |b| {
                b["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": "yes"});
            }),
        ),
        (
            "does not match any of the expected tags",
            with(&structured, |b| {
                b["tool_choice"] = json!({"type": "required"})
            }),
        ),
        (
            "tools.0.custom.parallel: Extra inputs are not permitted",
            with(&structured, |b| b["tools"][0]["parallel"] = json!(false)),
        ),
    ];
    assert_refused(Protocol::Anthropic, p, cases);
}

#[test]
fn gemini_takes_validated_mode_and_json_without_a_schema() {
    let json_object = with(&gemini_loop(), |b| {
        b.as_object_mut().unwrap().remove("tools");
        b["generationConfig"]["responseMimeType"] = json!("application/json");
    });
    assert_ok(Protocol::Gemini, GEMINI_FLASH, &json_object);
    let validated = with(&gemini_loop(), |b| {
        b["toolConfig"] = json!({"functionCallingConfig": {"mode": "VALIDATED"}});
    });
    assert_ok(Protocol::Gemini, GEMINI_FLASH, &validated);
    let cases = vec![
        (
            "Invalid value at 'tool_config.function_calling_config.mode'",
            with(&validated, |b| {
                b["toolConfig"]["functionCallingConfig"]["mode"] = json!("STRICT");
            }),
        ),
        (
            "allowed_function_names can be set only when the mode is ANY or VALIDATED",
            with(&validated, |b| {
                b["toolConfig"]["functionCallingConfig"] =
                    json!({"mode": "AUTO", "allowedFunctionNames": ["get_weather"]});
            }),
        ),
        (
            "response_mime_type must be `application/json` or `text/x.enum` when response_schema is set",
            with(&json_object, |b| {
                b["generationConfig"] = json!({"responseSchema": {"type": "object"}});
            }),
        ),
        (
            "allowed mimetypes are",
            with(&json_object, |b| {
                b["generationConfig"]["responseMimeType"] = json!("application/yaml");
            }),
        ),
    ];
    assert_refused(Protocol::Gemini, GEMINI_FLASH, cases);
    // Vertex's v1 API has no VALIDATED mode.
    assert_refused(
        Protocol::VertexGemini,
        VERTEX_FLASH,
        vec![("\"VALIDATED\"", validated.clone())],
    );
    let any = with(&validated, |b| {
        b["toolConfig"]["functionCallingConfig"] =
            json!({"mode": "ANY", "allowedFunctionNames": ["get_weather"]});
    });
    assert_ok(Protocol::VertexGemini, VERTEX_FLASH, &any);
}

#[test]
fn bedrock_takes_strict_tool_specs_and_nothing_else() {
    let body = |spec: Value, choice: Value| {
        json!({
            "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
            "toolConfig": {"tools": [{"toolSpec": spec}], "toolChoice": choice}
        })
    };
    let spec = json!({"name": "f", "inputSchema": {"json": {"type": "object"}}, "strict": true});
    assert!(bedrock::check_body(&body(spec.clone(), json!({"auto": {}}))).is_ok());
    for (bad, fragment) in [
        (
            body(
                with(&spec, |s| s["parallel"] = json!(false)),
                json!({"auto": {}}),
            ),
            "extraneous key [parallel]",
        ),
        (
            body(
                with(&spec, |s| s["strict"] = json!("yes")),
                json!({"auto": {}}),
            ),
            "strict must be a boolean",
        ),
        (
            body(spec.clone(), json!({"auto": {}, "any": {}})),
            "exactly one of auto, any or tool",
        ),
    ] {
        let e = bedrock::check_body(&bad).unwrap_err();
        assert!(e.message.contains(fragment), "{}", e.message);
    }
}
