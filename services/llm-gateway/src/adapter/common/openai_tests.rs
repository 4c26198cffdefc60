use serde_json::json;

use super::*;

fn with_choice(mode: pb::tool_choice::Mode, tool_name: &str) -> pb::Generation {
    pb::Generation {
        tools: vec![pb::Tool {
            name: "get_weather".into(),
            ..Default::default()
        }],
        tool_choice: Some(pb::ToolChoice {
            mode: mode as i32,
            tool_name: tool_name.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn each_tool_choice_mode_has_its_value_and_a_named_tool_must_exist() {
    use pb::tool_choice::Mode;

    // What a protocol would write for each choice.
    let written = |g: &pb::Generation| {
        tool_choice(g).map(|c| {
            c.map(|c| match c {
                Choice::Mode(mode) => json!(mode),
                Choice::Named(name) => json!({ "name": name }),
            })
        })
    };
    for (mode, want) in [
        (Mode::Auto, Some(json!("auto"))),
        (Mode::None, Some(json!("none"))),
        (Mode::Required, Some(json!("required"))),
        (Mode::Unspecified, None),
        (Mode::Tool, Some(json!({ "name": "get_weather" }))),
    ] {
        let g = with_choice(mode, "get_weather");
        assert_eq!(written(&g).unwrap(), want, "{mode:?}");
    }
    let g = pb::Generation::default();
    assert_eq!(written(&g).unwrap(), None);
    for name in ["", "get_time"] {
        let e = written(&with_choice(Mode::Tool, name)).unwrap_err();
        assert_eq!(e.field, "generation.tool_choice.tool_name", "{name:?}");
    }
}

#[test]
fn a_replayed_calls_arguments_are_checked_json_and_empty_is_an_empty_object() {
    let call = |input: &str| pb::ToolCallPart {
        call_id: "c".into(),
        tool_name: "t".into(),
        input_json: input.into(),
        provider_metadata: None,
    };
    assert_eq!(call_arguments(0, 0, &call("")).unwrap(), "{}");
    assert_eq!(call_arguments(0, 0, &call(" ")).unwrap(), "{}");
    assert_eq!(
        call_arguments(0, 0, &call(r#"{"a":1}"#)).unwrap(),
        r#"{"a":1}"#
    );
    let e = call_arguments(2, 1, &call("{")).unwrap_err();
    assert_eq!(
        e.field,
        "generation.messages[2].parts[1].tool_call.input_json"
    );
}

mod features {
    //! The request features both OpenAI protocols write (docs/gateway.md "Request features by provider"): the
    //! caller's strict tools and schemas next to the `strict_schemas` capability, JSON-object output, one tool call
    //! per step, effort xhigh.

    use serde_json::{Value, json};

    use crate::adapter::testing::testkit::{
        asking, city_tool, json_object, json_schema, model, tool_choice,
    };
    use crate::adapter::{Target, pb};
    use crate::catalog::Capabilities;
    use crate::protocol::Protocol;
    use pb::tool_choice::Mode;

    fn body(protocol: Protocol, caps: Capabilities, g: &pb::Generation) -> Value {
        let m = model("openai/gpt-5", protocol, caps);
        protocol.adapter().build(g, &Target::new(&m)).unwrap().body
    }

    /// A schema strict mode refuses as written (`city` optional): what the capability lowers, and what a caller
    /// who asks for strict must not send.
    const LOOSE: &str = r#"{"type":"object","properties":{"city":{"type":"string"}}}"#;

    /// A strict and a plain tool, one call per step, strict JSON Schema output.
    fn everything(mode: Mode) -> pb::Generation {
        let mut g = asking("openai/gpt-5", "Weather in Paris, as JSON?");
        g.tools = vec![city_tool("get_weather", true), city_tool("get_time", false)];
        g.tool_choice = tool_choice(mode, "", true);
        g.output_format = json_schema(
            r#"{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"],"additionalProperties":false}"#,
            true,
        );
        g
    }

    fn summary() -> Value {
        json!({
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
            "additionalProperties": false
        })
    }

    fn city() -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }

    #[test]
    fn chat_sends_the_callers_strict_as_written_and_says_one_call_per_step() {
        assert_eq!(
            body(
                Protocol::OpenaiChat,
                Capabilities::default(),
                &everything(Mode::Required)
            ),
            json!({
                "model": "gpt-5",
                "messages": [{"role": "user", "content": "Weather in Paris, as JSON?"}],
                "tools": [
                    {"type": "function", "function": {"name": "get_weather", "parameters": city(), "strict": true}},
                    {"type": "function", "function": {"name": "get_time", "parameters": city()}}
                ],
                "tool_choice": "required",
                "parallel_tool_calls": false,
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "answer", "schema": summary(), "strict": true
                }},
                "stream": true,
                "stream_options": {"include_usage": true}
            })
        );
    }

    #[test]
    fn responses_sends_the_same_flat_with_effort_xhigh() {
        let mut g = everything(Mode::Auto);
        g.reasoning = Some(pb::Reasoning {
            effort: pb::reasoning::Effort::Xhigh.into(),
            budget_tokens: 0,
        });
        let reasoning = Capabilities {
            reasoning: true,
            temperature: false,
            ..Capabilities::default()
        };
        assert_eq!(
            body(Protocol::OpenaiResponses, reasoning, &g),
            json!({
                "model": "gpt-5",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris, as JSON?"}]}],
                "tools": [
                    {"type": "function", "name": "get_weather", "parameters": city(), "strict": true},
                    {"type": "function", "name": "get_time", "parameters": city(), "strict": false}
                ],
                "tool_choice": "auto",
                "parallel_tool_calls": false,
                "text": {"format": {"type": "json_schema", "name": "answer", "schema": summary(), "strict": true}},
                "reasoning": {"effort": "xhigh", "summary": "auto"},
                "include": ["reasoning.encrypted_content"],
                "store": false,
                "stream": true
            })
        );
    }

    #[test]
    fn with_strict_schemas_the_callers_strict_is_still_sent_as_written() {
        let mut g = asking("openai/gpt-5", "Weather?");
        g.tools = vec![
            pb::Tool {
                input_schema_json: LOOSE.into(),
                ..city_tool("mine", true)
            },
            pb::Tool {
                input_schema_json: LOOSE.into(),
                ..city_tool("lowered", false)
            },
        ];
        g.output_format = json_schema(LOOSE, true);
        let caps = Capabilities {
            strict_schemas: true,
            ..Capabilities::default()
        };
        let b = body(Protocol::OpenaiChat, caps, &g);
        let loose: Value = serde_json::from_str(LOOSE).unwrap();
        assert_eq!(b["tools"][0]["function"]["parameters"], loose);
        assert_eq!(b["tools"][0]["function"]["strict"], true);
        assert_eq!(
            b["tools"][1]["function"]["parameters"],
            json!({
                "type": "object",
                "properties": {"city": {"type": ["string", "null"]}},
                "required": ["city"],
                "additionalProperties": false
            })
        );
        assert_eq!(b["response_format"]["json_schema"]["schema"], loose);
        assert_eq!(b["response_format"]["json_schema"]["strict"], true);
        // Only the lowered tool has nulls to clean from its calls.
        let strict = crate::adapter::common::strict::StrictTools::of(&g);
        assert_eq!(strict.clean("lowered", r#"{"city":null}"#.into()), "{}");
        let raw = r#"{"city":null}"#;
        assert_eq!(strict.clean("mine", raw.into()), raw);
    }

    #[test]
    fn json_object_and_one_call_per_step_on_both_protocols() {
        for (protocol, format) in [
            (Protocol::OpenaiChat, "/response_format"),
            (Protocol::OpenaiResponses, "/text/format"),
        ] {
            let body = |g: &pb::Generation| body(protocol, Capabilities::default(), g);
            let mut g = asking("openai/gpt-5", "Answer in JSON.");
            g.output_format = json_object();
            let want = json!({"type": "json_object"});
            assert_eq!(body(&g).pointer(format), Some(&want));

            // Without tools OpenAI refuses `parallel_tool_calls`, and with NONE there is no call to limit.
            g.tool_choice = tool_choice(Mode::Auto, "", true);
            assert_eq!(body(&g).get("parallel_tool_calls"), None, "{protocol:?}");
            g.tools = vec![city_tool("get_weather", false)];
            g.tool_choice = tool_choice(Mode::None, "", true);
            assert_eq!(body(&g).get("parallel_tool_calls"), None, "{protocol:?}");
            for mode in [Mode::Unspecified, Mode::Required] {
                g.tool_choice = tool_choice(mode, "", true);
                assert_eq!(body(&g)["parallel_tool_calls"], false, "{protocol:?}");
            }
            g.tool_choice = tool_choice(Mode::Auto, "", false);
            assert_eq!(body(&g).get("parallel_tool_calls"), None, "{protocol:?}");
        }
    }
}
