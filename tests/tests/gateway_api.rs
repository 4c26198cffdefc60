//! The gateway's API surface through a real server on a loopback port: authentication, health, validation,
//! catalog paging, unary `Generate`, key hygiene and graceful shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::*;
use fake_provider::Reply;
use llm_proto::gateway as pb;
use tonic::Code;
use tonic_types::StatusExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_without_a_valid_bearer_token_are_unauthenticated() {
    let h = Harness::start().await;
    for token in [None, Some("wrong-token-0123456789")] {
        let mut c = h.client_with_token(token).await;
        let err = c
            .list_models(pb::ListModelsRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{token:?}");
        let err = c
            .stream(pb::StreamRequest {
                generation: Some(generation("openai/gpt-4o", "hi")),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated);
    }
    assert!(h.openai.requests().is_empty(), "nothing reached a provider");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_served_without_a_token() {
    let h = Harness::start().await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(h.channel().await);
    for service in ["", "llm.gateway.v1.GatewayService"] {
        let r = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            r.status(),
            tonic_health::pb::health_check_response::ServingStatus::Serving,
            "{service:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_requests_name_the_field() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let bad_schema = pb::Generation {
        tools: vec![pb::Tool {
            name: "t".into(),
            description: String::new(),
            input_schema_json: "{nope".into(),
            ..Default::default()
        }],
        ..generation("openai/gpt-4o", "hi")
    };
    let forbidden_header = pb::Generation {
        extra_headers: [("Authorization".to_string(), "Bearer stolen".to_string())]
            .into_iter()
            .collect(),
        ..generation("openai/gpt-4o", "hi")
    };
    let no_role = pb::Generation {
        messages: vec![pb::Message {
            role: 0,
            parts: vec![text_part("x")],
        }],
        ..generation("openai/gpt-4o", "hi")
    };
    let cases = [
        (
            pb::Generation {
                model: String::new(),
                ..generation("", "hi")
            },
            "generation.model",
        ),
        (
            pb::Generation {
                // A bare name is fine; one that displays as another is not.
                model: "gpt-4o\u{202E}".into(),
                ..generation("", "hi")
            },
            "generation.model",
        ),
        (
            pb::Generation {
                messages: vec![],
                ..generation("openai/gpt-4o", "")
            },
            "generation.messages",
        ),
        (bad_schema, "generation.tools[0].input_schema_json"),
        (forbidden_header, "generation.extra_headers[Authorization]"),
        (no_role, "generation.messages[0].role"),
    ];
    for (g, field) in cases {
        let err = c
            .stream(pb::StreamRequest {
                generation: Some(g),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
        assert!(
            err.message().starts_with(field),
            "{field}: {}",
            err.message()
        );
        let details = err.get_error_details();
        let violations = &details
            .bad_request()
            .expect("BadRequest detail")
            .field_violations;
        assert_eq!(violations[0].field, field);
    }
    let err = c
        .stream(pb::StreamRequest { generation: None })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(h.openai.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_models_are_not_found_with_suggestions() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let err = c
        .stream(pb::StreamRequest {
            generation: Some(generation("openai/gpt-4", "hi")),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains("openai/gpt-4o"), "{}", err.message());
    let err = c
        .get_model(pb::GetModelRequest {
            model: "nobody/nothing".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_are_resource_exhausted() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let big = "x".repeat(2 * 1024 * 1024);
    let err = c
        .stream(pb::StreamRequest {
            generation: Some(generation("openai/gpt-4o", &big)),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(h.openai.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_models_pages_through_the_catalog_in_order() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let mut ids = Vec::new();
    let mut token = String::new();
    loop {
        let page = c
            .list_models(pb::ListModelsRequest {
                page_size: 3,
                page_token: token.clone(),
                provider: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.models.len() <= 3);
        ids.extend(page.models.iter().map(|m| m.id.clone()));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ids, sorted, "ordered, no duplicates across pages");
    assert!(ids.contains(&"openai/gpt-4o".to_string()));
    assert!(ids.contains(&"anthropic/claude-sonnet-4-5".to_string()));
    assert!(
        !ids.iter().any(|i| i.starts_with("demo/")),
        "unconfigured providers are not listed"
    );

    let only = c
        .list_models(pb::ListModelsRequest {
            page_size: 0,
            page_token: String::new(),
            provider: "anthropic".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!only.models.is_empty() && only.models.iter().all(|m| m.provider == "anthropic"));

    let m = c
        .get_model(pb::GetModelRequest {
            model: "anthropic/claude-sonnet-4-5".into(),
        })
        .await
        .unwrap();
    let m = m.into_inner().model.unwrap();
    assert_eq!(m.protocol, "anthropic");
    let p = m.pricing.unwrap();
    assert_eq!(p.input_nano_usd_per_mtok, 3_000_000_000);
    assert_eq!(p.tiers[0].above_input_tokens, 200_000);
    let bad = c
        .list_models(pb::ListModelsRequest {
            page_size: 1,
            page_token: "not-a-token".into(),
            provider: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_collects_the_stream_into_one_reply() {
    let h = Harness::start().await;
    h.anthropic
        .push(Reply::fixture("anthropic/parallel_tools.sse"));
    let mut c = h.client().await;
    let g = pb::Generation {
        tools: vec![weather_tool()],
        ..generation("anthropic/claude-sonnet-4-5", "weather?")
    };
    let r = c
        .generate(pb::GenerateRequest {
            generation: Some(g),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.start.unwrap().model, "anthropic/claude-sonnet-4-5");
    let finish = r.finish.unwrap();
    assert_eq!(finish.finish_reason(), pb::FinishReason::ToolCalls);
    let calls: Vec<_> = r
        .output
        .iter()
        .filter_map(|p| match &p.kind {
            Some(pb::output_part::Kind::ToolCall(c)) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    for c in calls {
        let v: serde_json::Value = serde_json::from_str(&c.input_json).unwrap();
        assert!(v.is_object(), "{}", c.input_json);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_returns_provider_errors_as_statuses_with_details() {
    let h = Harness::start().await;
    h.openai.push(Reply::json(
        400,
        include_str!(
            "../../shared/fake-provider/fixtures/openai_chat/errors/context_length_exceeded.json"
        ),
    ));
    let mut c = h.client().await;
    let err = c
        .generate(pb::GenerateRequest {
            generation: Some(generation("openai/gpt-4o", "hi")),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let info = err
        .get_error_details()
        .error_info()
        .cloned()
        .expect("ErrorInfo");
    assert_eq!(info.reason, "CONTEXT_OVERFLOW");
    assert_eq!(info.domain, "llm-gateway");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_keys_never_reach_the_caller() {
    let h = Harness::start().await;
    // A provider that echoes the key it was given back in its error, as some do.
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {OPENAI_KEY}. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
    );
    h.openai.push(Reply::json(401, body));
    let events = h.stream(generation("openai/gpt-4o", "hi")).await.unwrap();
    let pb::stream_response::Event::Error(e) = terminal(&events) else {
        panic!("{:?}", render(&events))
    };
    assert_eq!(e.kind(), pb::ErrorKind::Auth);
    assert!(!e.retryable);
    assert!(
        !e.message.contains(OPENAI_KEY) && !e.provider_body.contains(OPENAI_KEY),
        "{e:?}"
    );
    assert!(e.provider_body.contains("[REDACTED]"));
    // And the key was sent to the provider, as a bearer token, and only there.
    let req = &h.openai.requests()[0];
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
}

#[tokio::test]
async fn provider_keys_never_reach_the_caller_lowercased_or_percent_encoded() {
    let h = Harness::start().await;
    let lower = OPENAI_KEY.to_lowercase().replace("sk-", "SK-");
    let encoded = OPENAI_KEY.replace('-', "%2D");
    let basic = "dXNlcjpzay1lMmUtb3BlbmFpLXNlY3JldC1rZXktMDAw"; // base64("user:" + OPENAI_KEY)
    let body = format!(
        r#"{{"error":{{"message":"key {lower} rejected for https://proxy.example/v1?key={encoded} (Basic {basic})","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
    );
    h.openai.push(Reply::json(401, body));
    let events = h.stream(generation("openai/gpt-4o", "hi")).await.unwrap();
    let pb::stream_response::Event::Error(e) = terminal(&events) else {
        panic!("{:?}", render(&events))
    };
    for text in [&e.message, &e.provider_body] {
        let folded = text.to_lowercase();
        assert!(!folded.contains(&OPENAI_KEY.to_lowercase()), "{text}");
        assert!(!folded.contains("%2d"), "{text}");
        assert!(!text.contains(basic), "{text}");
    }
    assert_eq!(
        e.provider_body.matches("[REDACTED]").count(),
        3,
        "{}",
        e.provider_body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_cannot_redirect_the_gateway_or_override_auth() {
    let h = Harness::start().await;
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let g = pb::Generation {
        extra_headers: [("x-trace-tag".to_string(), "t1".to_string())]
            .into_iter()
            .collect(),
        provider_options_json: r#"{"openai_chat":{"user":"u-1"}}"#.into(),
        ..generation("openai/gpt-4o", "hi")
    };
    h.stream(g).await.unwrap();
    let req = &h.openai.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("x-trace-tag"), Some("t1"));
    assert_eq!(req.json()["user"], "u-1");
    for header in ["Host", "x-api-key", "X-Goog-Api-Key"] {
        let g = pb::Generation {
            extra_headers: [(header.to_string(), "evil.example".to_string())]
                .into_iter()
                .collect(),
            ..generation("openai/gpt-4o", "hi")
        };
        let err = h
            .client()
            .await
            .stream(pb::StreamRequest {
                generation: Some(g),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{header}");
    }
    let g = pb::Generation {
        provider_options_json: r#"{"openai_chat":{"model":"gpt-4o-mini"}}"#.into(),
        ..generation("openai/gpt-4o", "hi")
    };
    let err = h
        .client()
        .await
        .stream(pb::StreamRequest {
            generation: Some(g),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .starts_with("generation.provider_options_json"),
        "{}",
        err.message()
    );
    assert_eq!(h.openai.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_streams_finish_and_refuses_new_calls() {
    let mut h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/text.sse").pace(Duration::from_millis(40)));
    let mut c = h.client().await;
    let mut stream = c
        .stream(pb::StreamRequest {
            generation: Some(generation("openai/gpt-4o", "hi")),
        })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(matches!(
        first.event,
        Some(pb::stream_response::Event::StreamStart(_))
    ));
    let server = h.begin_shutdown();
    let mut rest = vec![first];
    while let Some(ev) = stream.message().await.unwrap() {
        rest.push(ev);
    }
    assert!(
        matches!(terminal(&rest), pb::stream_response::Event::StepFinish(_)),
        "the in-flight stream completed: {:?}",
        render(&rest)
    );
    tokio::time::timeout(SHORT, server)
        .await
        .expect("server exits after draining")
        .unwrap();
    let refused = tonic::transport::Endpoint::from_shared(format!("http://{}", h.addr))
        .unwrap()
        .connect()
        .await;
    assert!(refused.is_err(), "no new connections after shutdown");
}
