use super::*;

#[test]
fn model_ids_are_one_encoded_path_segment() {
    assert_eq!(
        stream_path("us.anthropic.claude-sonnet-4-5-20250929-v1:0").unwrap(),
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    assert_eq!(
        stream_path("arn:aws:bedrock:us-east-1:1:inference-profile/x").unwrap(),
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse-stream"
    );
    for dots in [".", ".."] {
        assert_eq!(stream_path(dots).unwrap_err().field, "generation.model");
        assert_eq!(converse_path(dots).unwrap_err().field, "generation.model");
    }
    assert_eq!(Bedrock.framing(), Framing::EventStream);
    assert!(Bedrock.auth_headers("k").is_empty());
}

fn llama(streaming_tool_use: bool) -> crate::catalog::ModelInfo {
    let mut m = crate::catalog::ModelInfo::for_tests(
        "us.meta.llama3-3-70b-instruct-v1:0",
        Protocol::Bedrock,
    );
    m.capabilities.streaming_tool_use = streaming_tool_use;
    m
}

fn ask(tools: bool) -> pb::Generation {
    pb::Generation {
        model: "p/us.meta.llama3-3-70b-instruct-v1:0".into(),
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart {
                    text: "Weather in Paris?".into(),
                })),
            }],
        }],
        tools: if tools {
            vec![pb::Tool {
                name: "get_weather".into(),
                description: "Weather".into(),
                input_schema_json: r#"{"type":"object","properties":{"city":{"type":"string"}}}"#
                    .into(),
                ..Default::default()
            }]
        } else {
            Vec::new()
        },
        ..Default::default()
    }
}

#[test]
fn models_without_streaming_tool_use_call_converse_when_tools_are_sent() {
    let model = llama(false);
    let target = Target::new(&model);
    let with_tools = Bedrock.build(&ask(true), &target).unwrap();
    assert_eq!(
        with_tools.path,
        "/model/us.meta.llama3-3-70b-instruct-v1%3A0/converse"
    );
    assert_eq!(Bedrock.framing_of(&with_tools), Framing::Json);
    assert!(with_tools.body.get("toolConfig").is_some());
    // The same body as the stream would get: only the operation differs.
    let streaming = llama(true);
    let streamed = Bedrock.build(&ask(true), &Target::new(&streaming)).unwrap();
    assert_eq!(streamed.body, with_tools.body);
    assert_eq!(Bedrock.framing_of(&streamed), Framing::EventStream);

    let plain = Bedrock.build(&ask(false), &target).unwrap();
    assert!(plain.path.ends_with("/converse-stream"), "{}", plain.path);
    assert_eq!(Bedrock.framing_of(&plain), Framing::EventStream);
}
