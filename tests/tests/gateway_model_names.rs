//! Model names as callers write them, through gRPC and the HTTP front door: a bare provider name resolves to the
//! one catalog model that has it, an alias to its model and its own fallbacks, a name two providers share is refused
//! naming both, and an unknown name lists what is served. Aliases are listed beside the models.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::front_door::{post, request, send};
use e2e_tests::sdk::{GREETING, OPENAI_TEXT_CHECKS, Sdk, twice};
use e2e_tests::*;
use fake_provider::Reply;
use llm_proto::gateway as pb;

/// A second OpenAI-compatible provider serving a model named like one of `openai`'s, and two aliases.
const NAMES: &str = r#"
[providers.mirror]
protocol = "openai_chat"
base_url = "OPENAI_URL/v1"
api_key_env = "E2E_OPENAI_KEY"

[models."mirror/gpt-4o-mini"]
context_window = 128000
max_output_tokens = 16384

[aliases]
fast = { model = "openai/gpt-4o", fallbacks = ["anthropic/claude-sonnet-4-5"] }
"house-claude" = "anthropic/claude-sonnet-4-5"
"#;

fn served_model(events: &[pb::StreamResponse]) -> String {
    match &events[0].event {
        Some(pb::stream_response::Event::StreamStart(s)) => s.model.clone(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_name_is_the_one_catalog_model_that_has_it() {
    let h = Harness::start_with(NAMES).await;
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let events = h
        .stream(generation("claude-sonnet-4-5", "hi"))
        .await
        .unwrap();
    assert_eq!(served_model(&events), "anthropic/claude-sonnet-4-5");
    // The provider was asked for its own name of the model.
    assert_eq!(
        h.anthropic.requests()[0].json()["model"],
        "claude-sonnet-4-5"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_works_with_a_bare_name() {
    let h = Harness::start_with(NAMES).await;
    twice(&h.openai, "openai_chat/text.sse");
    let env = [
        ("MODEL", "gpt-4o"),
        ("EXPECT_TEXT", GREETING),
        ("EXPECT_PROMPT_TOKENS", "1234"),
        ("EXPECT_CACHED_TOKENS", "1024"),
    ];
    assert_eq!(Sdk::OpenAi.run(&h, "text", &env).await, OPENAI_TEXT_CHECKS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_serves_its_model_and_falls_back_to_its_own_fallbacks() {
    let h = Harness::start_with(NAMES).await;
    h.openai.set_fallback(Reply::json(
        503,
        r#"{"error":{"message":"busy","type":"server_error","param":null,"code":null}}"#,
    ));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let events = h.stream(generation("fast", "hi")).await.unwrap();
    assert_eq!(
        served_model(&events),
        "anthropic/claude-sonnet-4-5",
        "{:#?}",
        render(&events)
    );
    assert!(!h.openai.requests().is_empty());
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let events = h.stream(generation("house-claude", "hi")).await.unwrap();
    assert_eq!(served_model(&events), "anthropic/claude-sonnet-4-5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_two_providers_share_is_refused_naming_both() {
    let h = Harness::start_with(NAMES).await;
    let err = h.stream(generation("gpt-4o-mini", "hi")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("mirror/gpt-4o-mini")
            && err.message().contains("openai/gpt-4o-mini"),
        "{}",
        err.message()
    );
    let body = r#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}"#;
    let (status, _, body) = post(h.http_addr, "/v1/chat/completions", body).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "model", "{body}");
    assert!(h.openai.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_name_is_not_found_listing_what_is_served() {
    let h = Harness::start_with(NAMES).await;
    let err = h
        .stream(generation("claude-sonet-4-5", "hi"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert!(err.message().contains("did you mean"), "{}", err.message());
    let err = h
        .stream(generation("qwen-max-latest-turbo", "hi"))
        .await
        .unwrap_err();
    assert!(err.message().contains("served: "), "{}", err.message());
    let body = r#"{"model":"qwen-max-latest-turbo","messages":[{"role":"user","content":"hi"}]}"#;
    let (status, _, body) = post(h.http_addr, "/v1/chat/completions", body).await;
    assert_eq!(status, 404);
    assert_eq!(
        (&body["error"]["param"], &body["error"]["code"]),
        (&"model".into(), &"model_not_found".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aliases_are_listed_beside_the_models_they_name() {
    let h = Harness::start_with(NAMES).await;
    let mut client = h.client().await;
    let mut models = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_models(pb::ListModelsRequest {
                page_size: 3,
                page_token,
                provider: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        models.extend(page.models);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "listed in id order across pages");
    let fast = models
        .iter()
        .find(|m| m.id == "fast")
        .expect("the alias is listed");
    assert_eq!(fast.alias_of, "openai/gpt-4o");
    assert_eq!(fast.provider, "openai");
    let got = client
        .get_model(pb::GetModelRequest {
            model: "house-claude".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .model
        .unwrap();
    assert_eq!(
        (got.id.as_str(), got.alias_of.as_str()),
        ("house-claude", "anthropic/claude-sonnet-4-5")
    );
    let (status, _, text) = send(
        h.http_addr,
        false,
        request("GET", "/v1/models", Some(TOKEN), ""),
    )
    .await;
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    let fast = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "fast")
        .unwrap();
    assert_eq!(fast["alias_of"], "openai/gpt-4o");
}
