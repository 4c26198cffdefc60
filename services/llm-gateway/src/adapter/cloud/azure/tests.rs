use super::*;
use crate::catalog::{Capabilities, ModelInfo};

fn model(deployment: &str, protocol: Protocol) -> ModelInfo {
    let mut m = ModelInfo::for_tests(deployment, protocol);
    m.id = format!("azure/{deployment}");
    m.provider = "azure".into();
    m.capabilities = Capabilities {
        reasoning: true,
        temperature: false,
        ..Capabilities::default()
    };
    m
}

fn generation() -> pb::Generation {
    pb::Generation {
        model: "azure/prod-reasoner".into(),
        system: vec!["Be brief.".into()],
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart { text: "Hi".into() })),
            }],
        }],
        ..Default::default()
    }
}

fn api(surface: Surface, version: Option<&str>) -> AzureApi {
    AzureApi {
        surface,
        api_version: version.map(String::from),
    }
}

#[test]
fn chat_paths_follow_the_surface() {
    let m = model("prod-reasoner", Protocol::AzureChat);
    let g = generation();
    let cases = [
        (None, "/v1/chat/completions"),
        (Some(api(Surface::V1, None)), "/v1/chat/completions"),
        (
            Some(api(Surface::V1, Some("preview"))),
            "/v1/chat/completions?api-version=preview",
        ),
        (
            Some(api(Surface::Deployments, Some("2024-10-21"))),
            "/deployments/prod-reasoner/chat/completions?api-version=2024-10-21",
        ),
    ];
    for (api, path) in cases {
        let t = Target {
            model: &m,
            azure: api.as_ref(),
        };
        let azure = AzureChat.build(&g, &t).unwrap();
        assert_eq!(azure.path, path);
        // Only the path differs from OpenAI's request: the body (model = the deployment) and headers are OpenAI's.
        let openai = OpenAiChat.build(&g, &t).unwrap();
        assert_eq!(azure.body, openai.body);
        assert_eq!(azure.headers, openai.headers);
        assert_eq!(azure.body["model"], "prod-reasoner");
        // A reasoning deployment gets the reasoning model's fixes, from the catalog entry behind it.
        assert_eq!(azure.body["messages"][0]["role"], "developer");
    }
}

#[test]
fn responses_paths_follow_the_surface() {
    let m = model("prod-codex", Protocol::AzureResponses);
    let g = generation();
    let v1 = api(Surface::V1, None);
    let dated = api(Surface::Deployments, Some("2025-04-01-preview"));
    for (api, path) in [
        (&v1, "/v1/responses"),
        (&dated, "/responses?api-version=2025-04-01-preview"),
    ] {
        let t = Target {
            model: &m,
            azure: Some(api),
        };
        let azure = AzureResponses.build(&g, &t).unwrap();
        assert_eq!(azure.path, path);
        let openai = OpenAiResponses.build(&g, &t).unwrap();
        assert_eq!(azure.body, openai.body);
        assert_eq!(azure.body["model"], "prod-codex");
        assert_eq!(azure.body["store"], false);
    }
}

#[test]
fn keys_go_in_the_api_key_header_and_tokens_in_authorization() {
    assert_eq!(
        AzureChat.auth_headers("k3y"),
        vec![("api-key", "k3y".to_string())]
    );
    assert!(AzureResponses.auth_headers("").is_empty());
    assert_eq!(
        AzureChat.token_headers("eyJ0"),
        vec![("authorization", "Bearer eyJ0".to_string())]
    );
    assert_eq!(
        Protocol::AzureChat.adapter().protocol(),
        Protocol::AzureChat
    );
    assert_eq!(
        Protocol::AzureResponses.adapter().protocol(),
        Protocol::AzureResponses
    );
    assert_eq!(Protocol::AzureChat.wire(), Protocol::OpenaiChat);
    assert_eq!(Protocol::AzureResponses.wire(), Protocol::OpenaiResponses);
}

#[test]
fn deployment_names_that_could_leave_the_path_are_refused() {
    for bad in ["../admin", "a/b", "a?x=1", ".hidden", "", "a b"] {
        let m = model(bad, Protocol::AzureChat);
        let dated = api(Surface::Deployments, Some("2024-10-21"));
        let t = Target {
            model: &m,
            azure: Some(&dated),
        };
        let err = AzureChat.build(&generation(), &t).unwrap_err();
        assert_eq!(err.field, "generation.model", "{bad}");
        assert!(AzureResponses.build(&generation(), &t).is_err(), "{bad}");
    }
    for good in ["gpt-4o", "prod_4o.v2", "o4-mini-2025-04-16"] {
        assert!(valid_deployment(good), "{good}");
    }
}

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fake-provider/fixtures"
);

/// The fixture `name` through the SSE framing and `protocol`'s decoder, in reads of `split` bytes.
fn decode(protocol: Protocol, name: &str, split: usize) -> Vec<crate::event::Event> {
    use crate::adapter::framing::{Framing, Parser};
    let body = std::fs::read(format!("{FIXTURES}/{name}")).unwrap();
    let m = model("d", protocol);
    let mut decoder = protocol.adapter().decoder(&Target::new(&m));
    let mut parser = Parser::new(Framing::Sse, 1 << 20);
    let mut out = Vec::new();
    for read in body.chunks(split) {
        parser.feed(read, decoder.as_mut(), &mut out).unwrap();
    }
    parser.finish(decoder.as_mut(), &mut out).unwrap();
    if !decoder.is_done() {
        decoder.end(&mut out);
    }
    crate::adapter::testing::invariants::check(&out).unwrap();
    out
}

fn texts(events: &[crate::event::Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            crate::event::Event::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

fn finish(events: &[crate::event::Event]) -> &crate::event::Finish {
    match events.last() {
        Some(crate::event::Event::Finish(f)) => f,
        other => panic!("{other:?}"),
    }
}

#[test]
fn azure_chat_streams_decode_with_their_filter_chunks_skipped() {
    use crate::event::{FinishReason, Usage};
    for split in [1, 7, 4096] {
        let text = decode(Protocol::AzureChat, "azure_chat/text.sse", split);
        assert_eq!(texts(&text), ["Hello", " from", " Azure."]);
        let f = finish(&text);
        assert_eq!(
            (f.reason, f.raw_reason.as_str()),
            (FinishReason::Stop, "stop")
        );
        assert_eq!(
            f.usage,
            Usage {
                input: 21,
                output: 4,
                ..Usage::default()
            }
        );
        assert_eq!(f.response_id, "chatcmpl-CmAz7tQ2rLw9XyP4nB6vHs1eKd3Jf");
        assert_eq!(f.response_model, "gpt-4o-2024-11-20");

        // Asynchronous filtering: annotation chunks (a choice without a delta, empty id and model) in between.
        let annotated = decode(Protocol::AzureChat, "azure_chat/async_filter.sse", split);
        assert_eq!(texts(&annotated), ["Filtered", " later."]);
        let f = finish(&annotated);
        assert_eq!(f.reason, FinishReason::Stop);
        assert_eq!(f.response_id, "chatcmpl-CmB4nZ1xCv3bNm5QwErTy7Ui9Op2As");

        let filtered = decode(Protocol::AzureChat, "azure_chat/content_filter.sse", split);
        assert_eq!(texts(&filtered), ["The scene", " begins"]);
        let f = finish(&filtered);
        assert_eq!(
            (f.reason, f.raw_reason.as_str()),
            (FinishReason::ContentFilter, "content_filter")
        );
        assert_eq!(f.usage.output, 11);
    }
}

#[test]
fn azure_tool_calls_reasoning_and_errors_decode_like_openai() {
    use crate::error::ErrorKind;
    use crate::event::{Event, FinishReason};
    let tools = decode(Protocol::AzureChat, "azure_chat/parallel_tools.sse", 5);
    let calls: Vec<(&str, &str)> = tools
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall {
                call_id,
                input_json,
                ..
            } => Some((call_id.as_str(), input_json.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_Ab3Kd9Lm2Nq5Rt8Vw1Xy4Zc7", r#"{"city":"Paris"}"#),
            ("call_Ef6Gh2Jk5Lm8Np1Qr4St7Uv0", r#"{"city":"Tokyo"}"#),
        ]
    );
    assert_eq!(finish(&tools).reason, FinishReason::ToolCalls);

    let reasoning = decode(
        Protocol::AzureResponses,
        "azure_responses/reasoning.sse",
        11,
    );
    let replay = reasoning.iter().find_map(|e| match e {
        Event::ReasoningEnd { metadata, .. } => metadata.clone(),
        _ => None,
    });
    let replay: serde_json::Value = serde_json::from_str(&replay.unwrap()).unwrap();
    assert_eq!(replay["item_id"], "rs_68f2c1aa1f3e4d5c6b7a8990e2e0c0ffee11");
    assert!(
        replay["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("gAAAAABo8sGq")
    );
    assert_eq!(texts(&reasoning), ["17 × 23", " = 391."]);
    let f = finish(&reasoning);
    assert_eq!((f.usage.output, f.usage.reasoning), (22, 128));

    let failed = decode(Protocol::AzureChat, "azure_chat/error_after_output.sse", 64);
    let Some(Event::Error(e)) = failed.last() else {
        panic!("{failed:#?}")
    };
    assert_eq!((e.kind, e.retryable), (ErrorKind::ProviderError, true));
}

#[test]
fn azure_error_bodies_classify() {
    use crate::adapter::transport::classify::classify;
    use crate::error::ErrorKind;
    let body = |name: &str| {
        std::fs::read_to_string(format!("{FIXTURES}/azure_chat/errors/{name}")).unwrap()
    };
    let filtered = classify(Some(400), None, &body("content_filter.json"));
    assert_eq!(
        (filtered.kind, filtered.retryable),
        (ErrorKind::ContentFilter, false)
    );
    let overflow = classify(Some(400), None, &body("context_length_exceeded.json"));
    assert_eq!(overflow.kind, ErrorKind::ContextOverflow);
    let mut headers = http::HeaderMap::new();
    headers.insert("retry-after-ms", "1500".parse().unwrap());
    headers.insert("retry-after", "2".parse().unwrap());
    let limited = classify(Some(429), Some(&headers), &body("rate_limit.json"));
    assert_eq!(
        (limited.kind, limited.retryable),
        (ErrorKind::RateLimited, true)
    );
    assert_eq!(
        limited.retry_after,
        Some(std::time::Duration::from_millis(1500))
    );
}
