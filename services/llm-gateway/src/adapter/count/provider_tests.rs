use super::*;
use crate::catalog::ModelInfo;

fn generation() -> pb::Generation {
    pb::Generation {
        model: "p/m".into(),
        system: vec!["Be brief.".into()],
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart {
                    text: "Weather in Paris?".into(),
                })),
            }],
        }],
        tools: vec![pb::Tool {
            name: "get_weather".into(),
            description: "Weather for a city".into(),
            input_schema_json: r#"{"type":"object","properties":{"city":{"type":"string"}}}"#
                .into(),
            ..Default::default()
        }],
        sampling: Some(pb::Sampling {
            temperature: Some(0.5),
            max_output_tokens: Some(100),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The body of `req` as JSON, and its top-level keys in order.
fn body(req: &EncodedRequest) -> (Value, Vec<String>) {
    let v: Value = serde_json::from_slice(&req.body).unwrap();
    let keys = v.as_object().unwrap().keys().cloned().collect();
    (v, keys)
}

#[test]
fn anthropic_counts_the_messages_body_without_what_count_tokens_refuses() {
    let model = ModelInfo::for_tests("claude-sonnet-4-5", Protocol::Anthropic);
    let t = Target::new(&model);
    let chat = Anthropic.build(&generation(), &t).unwrap().body;
    let req = AnthropicCount.build(&generation(), &t).unwrap();
    assert_eq!(req.path, "/v1/messages/count_tokens");
    assert_eq!(
        req.headers,
        [("anthropic-version".to_string(), "2023-06-01".to_string())]
    );
    let (v, keys) = body(&req);
    assert_eq!(keys, ["model", "messages", "system", "tools"]);
    for k in &keys {
        assert_eq!(v[k], chat[k], "{k}");
    }
    assert!(chat.get("max_tokens").is_some() && chat.get("temperature").is_some());
    let answer = Answer {
        body: r#"{"input_tokens":2095}"#.into(),
        ..Default::default()
    };
    assert_eq!(AnthropicCount.decode(&answer).unwrap(), 2095);
}

#[test]
fn vertex_anthropic_counts_on_the_count_tokens_model_naming_the_model_in_the_body() {
    let model = ModelInfo::for_tests("claude-haiku-4-5@20251001", Protocol::VertexAnthropic);
    let req = VertexAnthropicCount
        .build(&generation(), &Target::new(&model))
        .unwrap();
    assert_eq!(
        req.path,
        "/publishers/anthropic/models/count-tokens:rawPredict"
    );
    let (v, keys) = body(&req);
    assert_eq!(
        keys,
        ["anthropic_version", "model", "messages", "system", "tools"]
    );
    assert_eq!(v["anthropic_version"], "vertex-2023-10-16");
    assert_eq!(v["model"], "claude-haiku-4-5@20251001");
    assert!(req.headers.is_empty(), "{:?}", req.headers);
}

#[test]
fn gemini_counts_the_whole_generate_content_request_with_its_model() {
    let model = ModelInfo::for_tests("gemini-2.5-flash", Protocol::Gemini);
    let t = Target::new(&model);
    let chat = Gemini.build(&generation(), &t).unwrap().body;
    let req = GeminiCount.build(&generation(), &t).unwrap();
    assert_eq!(req.path, "/v1beta/models/gemini-2.5-flash:countTokens");
    let (v, keys) = body(&req);
    assert_eq!(keys, ["generateContentRequest"]);
    let inner = &v["generateContentRequest"];
    assert_eq!(inner["model"], "models/gemini-2.5-flash");
    for k in ["contents", "systemInstruction", "tools", "generationConfig"] {
        assert_eq!(inner[k], chat[k], "{k}");
    }
    let answer = Answer {
        body: r#"{"totalTokens": 31, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 31}]}"#.into(),
        ..Default::default()
    };
    assert_eq!(GeminiCount.decode(&answer).unwrap(), 31);
    // Google leaves zero out of its JSON.
    let zero = Answer {
        body: "{}".into(),
        ..Default::default()
    };
    assert_eq!(GeminiCount.decode(&zero).unwrap(), 0);
}

#[test]
fn vertex_gemini_counts_at_the_top_level_without_tool_config() {
    let model = ModelInfo::for_tests("gemini-2.5-pro", Protocol::VertexGemini);
    let generation = pb::Generation {
        tool_choice: Some(pb::ToolChoice {
            mode: pb::tool_choice::Mode::Required as i32,
            ..Default::default()
        }),
        ..generation()
    };
    let t = Target::new(&model);
    let chat = VertexGemini.build(&generation, &t).unwrap().body;
    assert!(chat.get("toolConfig").is_some());
    let req = VertexGeminiCount.build(&generation, &t).unwrap();
    assert_eq!(
        req.path,
        "/publishers/google/models/gemini-2.5-pro:countTokens"
    );
    let (_, keys) = body(&req);
    assert_eq!(
        keys,
        ["contents", "systemInstruction", "tools", "generationConfig"]
    );
    let answer = Answer {
        body: r#"{"totalTokens": 12, "totalBillableCharacters": 40}"#.into(),
        ..Default::default()
    };
    assert_eq!(VertexGeminiCount.decode(&answer).unwrap(), 12);
}

#[test]
fn bedrock_counts_the_converse_input_of_the_foundation_model() {
    let model = ModelInfo::for_tests(
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        Protocol::Bedrock,
    );
    let t = Target::new(&model);
    let chat = Bedrock.build(&generation(), &t).unwrap().body;
    let req = BedrockCount.build(&generation(), &t).unwrap();
    assert_eq!(
        req.path,
        "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens"
    );
    let (v, keys) = body(&req);
    assert_eq!(keys, ["input"]);
    let converse = &v["input"]["converse"];
    let inner: Vec<&String> = converse.as_object().unwrap().keys().collect();
    assert_eq!(inner, ["messages", "system", "toolConfig"]);
    assert_eq!(converse["messages"], chat["messages"]);
    assert!(chat.get("inferenceConfig").is_some());
    let answer = Answer {
        body: r#"{"inputTokens": 47}"#.into(),
        ..Default::default()
    };
    assert_eq!(BedrockCount.decode(&answer).unwrap(), 47);
}

#[test]
fn inference_profiles_count_as_their_foundation_model() {
    assert_eq!(
        foundation_model("us.anthropic.claude-x-v1:0"),
        "anthropic.claude-x-v1:0"
    );
    assert_eq!(
        foundation_model("global.anthropic.claude-x"),
        "anthropic.claude-x"
    );
    assert_eq!(foundation_model("anthropic.claude-x"), "anthropic.claude-x");
    assert_eq!(
        foundation_model("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-x"),
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-x"
    );
}

#[test]
fn an_answer_that_is_not_the_endpoints_shape_is_a_provider_error_keeping_the_body_scrubbed() {
    let answer = Answer {
        body: "<html>busy; your key sk-ant-secret-1 was logged</html>".into(),
        secrets: vec!["sk-ant-secret-1".into()],
        ..Default::default()
    };
    let e = AnthropicCount.decode(&answer).unwrap_err();
    assert_eq!(e.kind, crate::error::ErrorKind::ProviderError);
    assert!(e.provider_body.contains("busy"), "{e:?}");
    assert!(!e.provider_body.contains("sk-ant-secret-1"), "{e:?}");
}

#[test]
fn openai_family_protocols_have_no_endpoint() {
    for p in [
        Protocol::OpenaiChat,
        Protocol::OpenaiResponses,
        Protocol::AzureChat,
        Protocol::AzureResponses,
    ] {
        assert!(for_protocol(p).is_none());
    }
}
