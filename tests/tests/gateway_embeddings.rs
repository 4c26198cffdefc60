//! Embeddings and token counts end to end, through the real gateway (gRPC `Embed` and `CountTokens`, and the HTTP
//! front door's `POST /v1/embeddings` and `POST /v1/messages/count_tokens`), against fake providers that check each
//! request as the real API does (credentials, required fields, batch limits, unknown fields refused) and answer in
//! its exact shape: OpenAI, Azure OpenAI, the Gemini API, Vertex AI, Bedrock (SigV4-verified), Anthropic. Clients:
//! a gRPC client, the official `openai` and `anthropic` Python SDKs, and LangChain.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::azure::{AZURE_KEY_ENV, AzureFakes};
use e2e_tests::sdk::Sdk;
use e2e_tests::vertex::GoogleFakes;
use e2e_tests::*;
use fake_provider::embeddings::{tokens_of, vector_of};
use fake_provider::{FakeProvider, Protocol, Reply};
use llm_proto::gateway as pb;
use tonic::Code;

const SMALL: &str = "openai/text-embedding-3-small";
const GEMINI: &str = "gemini/gemini-embedding-001";

fn texts(list: &[&str]) -> Vec<pb::EmbedInput> {
    list.iter()
        .map(|t| pb::EmbedInput {
            kind: Some(pb::embed_input::Kind::Text((*t).into())),
        })
        .collect()
}

fn request(model: &str, inputs: Vec<pb::EmbedInput>, dimensions: u32) -> pb::EmbedRequest {
    pb::EmbedRequest {
        model: model.into(),
        inputs,
        dimensions,
        ..Default::default()
    }
}

async fn embed(h: &Harness, r: pb::EmbedRequest) -> Result<pb::EmbedResponse, tonic::Status> {
    h.client()
        .await
        .embed(r)
        .await
        .map(tonic::Response::into_inner)
}

async fn count(h: &Harness, g: pb::Generation) -> Result<pb::CountTokensResponse, tonic::Status> {
    h.client()
        .await
        .count_tokens(pb::CountTokensRequest {
            generation: Some(g),
        })
        .await
        .map(tonic::Response::into_inner)
}

fn vectors(r: &pb::EmbedResponse) -> Vec<Vec<f32>> {
    r.embeddings.iter().map(|e| e.values.clone()).collect()
}

fn expected(list: &[&str], dims: usize) -> Vec<Vec<f32>> {
    list.iter().map(|t| vector_of(t, dims)).collect()
}

/// The field a status's `BadRequest` names.
fn field(s: &tonic::Status) -> String {
    use tonic_types::StatusExt;
    s.get_details_bad_request()
        .and_then(|b| b.field_violations.into_iter().next())
        .map(|v| v.field)
        .unwrap_or_default()
}

fn assert_accepted(fake: &FakeProvider) {
    assert_eq!(fake.rejections(), vec![], "the fake refused a request");
}

/// A harness whose fake (`pick`) checks `protocol`'s rules and answers any embeddings request.
async fn serving(protocol: Protocol, pick: fn(&Harness) -> &FakeProvider) -> Harness {
    let h = Harness::start().await;
    let fake = pick(&h);
    fake.validate_requests(protocol);
    fake.set_fallback(Reply::embeddings());
    h
}

/// `n` distinct texts.
fn numbered(n: usize, what: &str) -> Vec<String> {
    (0..n).map(|i| format!("{what} {i}")).collect()
}

/// The inputs and the vectors the fake answers for them, as JSON for a script's environment.
fn script_json(list: &[&str], dims: usize) -> (String, String) {
    let inputs = serde_json::to_string(list).unwrap();
    (
        inputs,
        serde_json::to_string(&expected(list, dims)).unwrap(),
    )
}

/// The value of the first sample of `series` whose labels hold every fragment of `labels`.
fn value(scrape: &str, series: &str, labels: &[&str]) -> f64 {
    scrape
        .lines()
        .filter(|l| l.starts_with(series) && labels.iter().all(|f| l.contains(f)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_vectors_come_back_in_input_order_with_usage_cost_and_metrics() {
    let h = serving(Protocol::OpenaiEmbeddings, |h| &h.openai).await;
    let list = ["one two", "three", "four five six"];
    let r = embed(&h, request(SMALL, texts(&list), 4)).await.unwrap();
    assert_eq!(vectors(&r), expected(&list, 4));
    let tokens: u64 = list.iter().map(|t| tokens_of(t)).sum();
    let usage = r.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.total_tokens), (tokens, tokens));
    // $0.02 per million tokens, in nano-USD, rounded once.
    let cost = r.cost.unwrap();
    assert!(cost.priced);
    assert_eq!(
        cost.total_nano_usd,
        (tokens as i64 * 20_000_000 + 500_000) / 1_000_000
    );
    assert_eq!(
        (r.model.as_str(), r.provider.as_str(), r.provider_requests),
        (SMALL, "openai", 1)
    );
    assert!(!r.usage_estimated);
    assert_accepted(&h.openai);
    let sent = &h.openai.requests()[0];
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(
        sent.header("authorization"),
        Some(&*format!("Bearer {OPENAI_KEY}"))
    );
    let body = sent.json();
    assert_eq!(
        (
            &body["model"],
            &body["encoding_format"],
            &body["dimensions"]
        ),
        (
            &"text-embedding-3-small".into(),
            &"base64".into(),
            &4.into()
        )
    );

    let m = h.scrape_metrics().await;
    let model = [
        "provider=\"openai\"",
        "model=\"openai/text-embedding-3-small\"",
    ];
    let with = |extra: &'static str| {
        let mut l = model.to_vec();
        l.push(extra);
        l
    };
    assert_eq!(
        value(&m, "llm_gateway_calls_total", &with("outcome=\"ok\"")),
        1.0,
        "{m}"
    );
    assert_eq!(value(&m, "llm_gateway_embedding_inputs_total", &model), 3.0);
    assert_eq!(
        value(&m, "llm_gateway_tokens_total", &with("type=\"input\"")),
        tokens as f64
    );
    assert!(value(&m, "llm_gateway_cost_nano_usd_total", &model) > 0.0);
    let gen_ai = [
        "gen_ai_operation_name=\"embeddings\"",
        "gen_ai_request_model=\"openai/text-embedding-3-small\"",
    ];
    assert_eq!(
        value(
            &m,
            "gen_ai_client_operation_duration_seconds_count",
            &gen_ai
        ),
        1.0,
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_the_gemini_api_takes_is_split_and_reassembled_in_order() {
    let h = serving(Protocol::GeminiEmbeddings, |h| &h.gemini).await;
    let owned = numbered(250, "input number");
    let list: Vec<&str> = owned.iter().map(String::as_str).collect();
    let r = embed(&h, request(GEMINI, texts(&list), 0)).await.unwrap();
    assert_eq!(vectors(&r), expected(&list, 8));
    assert_eq!(r.provider_requests, 3);
    assert_accepted(&h.gemini);
    let sizes: Vec<usize> = h
        .gemini
        .requests()
        .iter()
        .map(|q| q.json()["requests"].as_array().unwrap().len())
        .collect();
    let mut sorted = sizes.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [50, 100, 100], "{sizes:?}");
    assert_eq!(
        h.gemini.requests()[0].header("x-goog-api-key"),
        Some(GEMINI_KEY)
    );
    // The Gemini API counts no tokens: the gateway's estimate, four characters a token, said to be one.
    assert!(r.usage_estimated);
    let estimate: u64 = list
        .iter()
        .map(|t| (t.chars().count() as u64).div_ceil(4))
        .sum();
    assert_eq!(r.usage.unwrap().input_tokens, estimate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_predicts_with_its_token_counts_one_input_per_request_where_the_model_takes_one() {
    let g = GoogleFakes::start().await;
    g.vertex.validate_requests(Protocol::VertexEmbeddings);
    g.vertex.set_fallback(Reply::embeddings());
    let h = Harness::start_with(&g.provider(
        "vertex",
        "us-central1",
        &g.key_settings("service_account.json"),
    ))
    .await;
    let list = ["alpha beta", "gamma", "delta epsilon zeta"];
    let r = embed(&h, request("vertex/text-embedding-005", texts(&list), 16))
        .await
        .unwrap();
    assert_eq!(vectors(&r), expected(&list, 16));
    assert_eq!((r.provider_requests, r.usage_estimated), (1, false));
    assert_eq!(r.usage.unwrap().input_tokens, 6);
    // Billed by characters on Vertex AI: no token price.
    assert!(!r.cost.unwrap().priced);
    let r = embed(&h, request("vertex/gemini-embedding-001", texts(&list), 0))
        .await
        .unwrap();
    assert_eq!(vectors(&r), expected(&list, 8));
    assert_eq!(r.provider_requests, 3);
    assert_accepted(&g.vertex);
    let first = &g.vertex.requests()[0];
    assert!(
        first
            .path
            .ends_with("/publishers/google/models/text-embedding-005:predict"),
        "{}",
        first.path
    );
    assert!(
        first
            .header("authorization")
            .is_some_and(|a| a.starts_with("Bearer "))
    );
    assert_eq!(
        first.json()["parameters"],
        serde_json::json!({"autoTruncate": false, "outputDimensionality": 16})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bedrock_titan_and_cohere_are_signed_split_and_counted() {
    let fake = FakeProvider::start().await.unwrap();
    fake.validate_requests(Protocol::BedrockEmbeddings);
    fake.set_fallback(Reply::embeddings());
    let extra = format!(
        "[providers.bedrock]\nprotocol = \"bedrock\"\nbase_url = \"{}\"\n",
        fake.base_url()
    );
    let h = Harness::start_with(&extra).await;
    let list = ["hello world", "hi there friend"];
    // Titan takes one input per request, Cohere the batch; Titan counts tokens in its body, Cohere in a header.
    for (model, dims, requests) in [
        ("bedrock/amazon.titan-embed-text-v2:0", 256, 2),
        ("bedrock/cohere.embed-english-v3", 0, 1),
    ] {
        let r = embed(&h, request(model, texts(&list), dims)).await.unwrap();
        let shown = if dims == 0 { 8 } else { dims as usize };
        assert_eq!(vectors(&r), expected(&list, shown), "{model}");
        let counted = (r.provider_requests, r.usage.unwrap().input_tokens);
        assert_eq!(counted, (requests, 5), "{model}");
    }
    assert_accepted(&fake);
    let paths: Vec<String> = fake.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/model/amazon.titan-embed-text-v2%3A0/invoke",
            "/model/amazon.titan-embed-text-v2%3A0/invoke",
            "/model/cohere.embed-english-v3/invoke"
        ]
    );
    // A dimension Cohere v3 does not take is refused before any provider call, naming the field.
    let e = embed(
        &h,
        request("bedrock/cohere.embed-english-v3", texts(&list), 256),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code(), field(&e)),
        (Code::InvalidArgument, "dimensions".into())
    );
    assert_eq!(fake.requests().len(), 3);
    assert!(!e.message().contains(AWS_SECRET_ACCESS_KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_embeddings_address_the_deployment_on_both_surfaces() {
    let a = AzureFakes::start().await;
    a.resource.deploy("emb", "text-embedding-3-small");
    a.azure.set_fallback(Reply::embeddings());
    let provider = |id: &str, api: &str| {
        format!(
            "[providers.{id}]\nprotocol = \"azure_chat\"\nbase_url = \"{}\"\napi_key_env = \"{AZURE_KEY_ENV}\"\nazure = {{ {api}, deployments = {{ \"emb\" = \"text-embedding-3-small\" }} }}\n",
            a.azure.base_url()
        )
    };
    let config = provider(
        "azure",
        "api = \"deployments\", api_version = \"2024-10-21\"",
    ) + &provider("aoai", "api = \"v1\"");
    let h = Harness::start_with(&config).await;
    let list = ["one", "two words"];
    for model in ["azure/emb", "aoai/emb"] {
        let r = embed(&h, request(model, texts(&list), 0)).await.unwrap();
        assert_eq!(vectors(&r), expected(&list, 8), "{model}");
        assert!(
            r.cost.unwrap().priced,
            "{model}: the deployment has its model's price"
        );
    }
    assert_eq!(a.azure.rejections(), vec![]);
    let paths: Vec<String> = a.azure.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/openai/deployments/emb/embeddings?api-version=2024-10-21",
            "/openai/v1/embeddings"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_the_field_and_cost_no_provider_call() {
    let h = Harness::start().await;
    h.gemini.set_fallback(Reply::embeddings());
    let tokens = vec![pb::EmbedInput {
        kind: Some(pb::embed_input::Kind::Tokens(pb::TokenIds {
            ids: vec![1, 2],
        })),
    }];
    let many: Vec<String> = (0..2049).map(|i| i.to_string()).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    for (r, code, name) in [
        (
            request("openai/gpt-4o", texts(&["a"]), 0),
            Code::InvalidArgument,
            "model",
        ),
        (request("openai/nope", texts(&["a"]), 0), Code::NotFound, ""),
        (
            request(GEMINI, tokens, 0),
            Code::InvalidArgument,
            "inputs[0]",
        ),
        (
            request(GEMINI, texts(&["a", ""]), 0),
            Code::InvalidArgument,
            "inputs[1]",
        ),
        (
            request(GEMINI, Vec::new(), 0),
            Code::InvalidArgument,
            "inputs",
        ),
        (
            request(GEMINI, texts(&many), 0),
            Code::ResourceExhausted,
            "",
        ),
        (
            request("anthropic/claude-sonnet-4-5", texts(&["a"]), 0),
            Code::InvalidArgument,
            "model",
        ),
    ] {
        let e = embed(&h, r.clone()).await.unwrap_err();
        assert_eq!(e.code(), code, "{}: {e:?}", r.model);
        if !name.is_empty() {
            assert_eq!(field(&e), name, "{}: {e:?}", r.model);
        }
    }
    assert!(h.gemini.requests().is_empty() && h.openai.requests().is_empty());
    // An embedding model is no chat model, whichever door.
    let e = h.stream(generation(SMALL, "hi")).await.unwrap_err();
    assert_eq!(
        (e.code(), field(&e)),
        (Code::InvalidArgument, "generation.model".into())
    );
    let e = count(&h, generation(SMALL, "hi")).await.unwrap_err();
    assert_eq!(
        (e.code(), field(&e)),
        (Code::InvalidArgument, "generation.model".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_are_retried_then_reported_as_the_provider_said() {
    let h = Harness::start().await;
    h.openai.validate_requests(Protocol::OpenaiEmbeddings);
    h.openai.push(Reply::json_fixture(
        429,
        "openai_chat/errors/rate_limit.json",
    ));
    h.openai
        .push(Reply::json_fixture(200, "embeddings/openai/base64.json"));
    let r = embed(&h, request(SMALL, texts(&["a", "b"]), 0))
        .await
        .unwrap();
    assert_eq!(r.provider_requests, 2);
    assert_eq!(
        r.embeddings[1].values,
        [-0.0065413914f32, 0.017233623, 0.010345011]
    );
    assert_eq!(r.usage.unwrap().input_tokens, 8);

    h.openai.push(Reply::json_fixture(
        400,
        "embeddings/openai/errors/invalid_input.json",
    ));
    let e = embed(&h, request(SMALL, texts(&["a"]), 0))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("'$.input' is invalid"), "{e:?}");
    // A compatible server answering numbers instead of base64 is read as well.
    h.openai
        .push(Reply::json_fixture(200, "embeddings/openai/floats.json"));
    let r = embed(&h, request(SMALL, texts(&["a"]), 0)).await.unwrap();
    assert_eq!(
        r.embeddings[0].values,
        [0.0023064255f32, -0.009327292, -0.0028842222]
    );
    let m = h.scrape_metrics().await;
    let labels = [
        "model=\"openai/text-embedding-3-small\"",
        "operation=\"embeddings\"",
    ];
    assert_eq!(
        value(&m, "llm_gateway_call_errors_total", &labels),
        1.0,
        "{m}"
    );
    assert_eq!(
        value(
            &m,
            "llm_gateway_provider_errors_total",
            &[
                "model=\"openai/text-embedding-3-small\"",
                "kind=\"rate_limited\""
            ]
        ),
        1.0
    );
}

fn tool_generation(model: &str) -> pb::Generation {
    pb::Generation {
        system: vec!["Be brief.".into()],
        tools: vec![weather_tool()],
        ..generation(model, "hello world")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_go_to_each_providers_counting_endpoint() {
    let fake_bedrock = FakeProvider::start().await.unwrap();
    fake_bedrock.validate_requests(Protocol::BedrockCountTokens);
    fake_bedrock.push(Reply::json_fixture(200, "count_tokens/bedrock/count.json"));
    let extra = format!(
        "[providers.bedrock]\nprotocol = \"bedrock\"\nbase_url = \"{}\"\n",
        fake_bedrock.base_url()
    );
    let h = Harness::start_with(&extra).await;
    h.anthropic
        .validate_requests(Protocol::AnthropicCountTokens);
    h.anthropic.push(Reply::json_fixture(
        200,
        "count_tokens/anthropic/count.json",
    ));
    h.gemini.validate_requests(Protocol::GeminiCountTokens);
    h.gemini
        .push(Reply::json_fixture(200, "count_tokens/gemini/count.json"));
    for (model, tokens) in [
        ("anthropic/claude-sonnet-4-5", 2095),
        ("gemini/gemini-2.5-flash", 31),
        ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", 47),
    ] {
        let r = count(&h, tool_generation(model)).await.unwrap();
        assert_eq!(r.input_tokens, tokens, "{model}");
        assert_eq!(r.method(), pb::TokenCountMethod::Provider, "{model}");
        assert!(r.tokenizer.is_empty());
    }
    assert_accepted(&h.anthropic);
    assert_accepted(&h.gemini);
    assert_accepted(&fake_bedrock);
    let sent = &h.anthropic.requests()[0];
    assert_eq!(sent.path, "/v1/messages/count_tokens");
    assert_eq!(sent.header("x-api-key"), Some(ANTHROPIC_KEY));
    assert!(sent.json().get("max_tokens").is_none());
    assert_eq!(
        h.gemini.requests()[0].path,
        "/v1beta/models/gemini-2.5-flash:countTokens"
    );
    // CountTokens counts for the foundation model behind an inference profile.
    assert_eq!(
        fake_bedrock.requests()[0].path,
        "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens"
    );
    // A provider failure is the provider's, with its kind.
    h.anthropic.push(Reply::json_fixture(
        400,
        "count_tokens/anthropic/errors/invalid_request.json",
    ));
    let e = count(&h, tool_generation("anthropic/claude-sonnet-4-5"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_counts_gemini_and_anthropic_models_on_their_endpoints() {
    let g = GoogleFakes::start().await;
    g.vertex
        .validate_requests(Protocol::VertexGeminiCountTokens);
    g.vertex
        .validate_requests(Protocol::VertexAnthropicCountTokens);
    g.vertex.push(Reply::json_fixture(
        200,
        "count_tokens/vertex_gemini/count.json",
    ));
    g.vertex.push(Reply::json_fixture(
        200,
        "count_tokens/vertex_anthropic/count.json",
    ));
    let h = Harness::start_with(&g.provider(
        "vertex",
        "us-east5",
        &g.key_settings("service_account.json"),
    ))
    .await;
    let r = count(&h, tool_generation("vertex/gemini-2.5-flash"))
        .await
        .unwrap();
    assert_eq!(r.input_tokens, 31);
    let r = count(&h, tool_generation("vertex/claude-haiku-4-5@20251001"))
        .await
        .unwrap();
    assert_eq!(
        (r.input_tokens, r.method()),
        (14, pb::TokenCountMethod::Provider)
    );
    assert_accepted(&g.vertex);
    let sent = g.vertex.requests();
    assert!(
        sent[0]
            .path
            .ends_with("/publishers/google/models/gemini-2.5-flash:countTokens"),
        "{}",
        sent[0].path
    );
    assert!(
        sent[1]
            .path
            .ends_with("/publishers/anthropic/models/count-tokens:rawPredict"),
        "{}",
        sent[1].path
    );
    assert_eq!(sent[1].json()["model"], "claude-haiku-4-5@20251001");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_models_are_counted_locally_and_a_model_with_no_count_is_a_failed_precondition() {
    let extra = r#"
[providers.local]
protocol = "openai_chat"
base_url = "http://127.0.0.1:9/v1"
allow_unlisted_models = true
"#;
    let h = Harness::start_with(extra).await;
    let r = count(&h, generation("openai/gpt-4o", "hello world"))
        .await
        .unwrap();
    // 3 for the message, 1 for its role, 2 for "hello world", 3 priming the reply.
    assert_eq!(r.input_tokens, 9);
    assert_eq!(
        (r.method(), r.tokenizer.as_str()),
        (pb::TokenCountMethod::LocalTokenizer, "o200k_base")
    );
    assert!(h.openai.requests().is_empty(), "no provider call");
    let e = count(&h, generation("local/llama-3.3-70b", "hi"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("cannot be counted"), "{e:?}");
    let m = h.scrape_metrics().await;
    assert_eq!(
        value(
            &m,
            "llm_gateway_calls_total",
            &["operation=\"count_tokens\"", "outcome=\"ok\""]
        ),
        1.0,
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_embeds_in_floats_and_base64_with_dimensions() {
    let h = serving(Protocol::OpenaiEmbeddings, |h| &h.openai).await;
    let list = ["one two", "three"];
    let (inputs, vectors) = script_json(&list, 4);
    let env = [
        ("MODEL", SMALL),
        ("INPUTS", inputs.as_str()),
        ("DIMENSIONS", "4"),
        ("EXPECT_VECTORS", vectors.as_str()),
        ("EXPECT_TOKENS", "3"),
    ];
    let ran = Sdk::Calls.run(&h, "openai_embeddings", &env).await;
    assert_eq!(
        ran,
        [
            "default_base64_vectors",
            "indexes_in_order",
            "usage",
            "model_echoed",
            "float_vectors",
            "base64_vectors"
        ]
    );
    assert_accepted(&h.openai);
    assert_eq!(h.openai.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_gets_a_batch_larger_than_the_provider_takes_in_one_answer() {
    let h = serving(Protocol::GeminiEmbeddings, |h| &h.gemini).await;
    let owned = numbered(150, "document");
    let list: Vec<&str> = owned.iter().map(String::as_str).collect();
    let (inputs, vectors) = script_json(&list, 8);
    let env = [
        ("MODEL", GEMINI),
        ("INPUTS", inputs.as_str()),
        ("EXPECT_VECTORS", vectors.as_str()),
    ];
    let ran = Sdk::Calls.run(&h, "large_batch", &env).await;
    assert_eq!(ran, ["every_input_answered", "vectors_in_input_order"]);
    assert_accepted(&h.gemini);
    assert_eq!(h.gemini.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_sees_refusals_naming_the_field() {
    let h = Harness::start().await;
    let ran = Sdk::Calls
        .run(&h, "embedding_errors", &[("MODEL", GEMINI)])
        .await;
    assert_eq!(
        ran,
        [
            "token_ids_refused",
            "chat_model_refused",
            "embedding_model_not_for_chat"
        ]
    );
    assert!(h.gemini.requests().is_empty() && h.openai.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_counts_tokens_of_anthropic_and_openai_models() {
    let h = Harness::start().await;
    h.anthropic
        .validate_requests(Protocol::AnthropicCountTokens);
    h.anthropic.push(Reply::json_fixture(
        200,
        "count_tokens/anthropic/count.json",
    ));
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TOKENS", "2095"),
    ];
    let ran = Sdk::Calls.run(&h, "anthropic_count_tokens", &env).await;
    assert_eq!(ran, ["input_tokens", "max_tokens_refused"]);
    assert_accepted(&h.anthropic);
    assert_eq!(
        h.anthropic.requests().len(),
        1,
        "the refused body never reached the provider"
    );
    let sent = h.anthropic.requests()[0].json();
    assert_eq!(sent["system"][0]["text"], "Be brief.");
    assert_eq!(sent["tools"][0]["name"], "get_weather");

    // The same question about an OpenAI model is counted locally: the HTTP door and gRPC agree.
    let grpc = count(&h, tool_generation("openai/gpt-4o"))
        .await
        .unwrap()
        .input_tokens;
    let expect = grpc.to_string();
    let env = [
        ("MODEL", "openai/gpt-4o"),
        ("EXPECT_TOKENS", expect.as_str()),
    ];
    let ran = Sdk::Calls.run(&h, "anthropic_count_tokens", &env).await;
    assert_eq!(ran, ["input_tokens", "max_tokens_refused"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_embeds_documents_and_counts_a_conversation() {
    let h = serving(Protocol::OpenaiEmbeddings, |h| &h.openai).await;
    h.anthropic
        .validate_requests(Protocol::AnthropicCountTokens);
    h.anthropic.push(Reply::json_fixture(
        200,
        "count_tokens/anthropic/count.json",
    ));
    let list = ["one two", "three"];
    let (inputs, vectors) = script_json(&list, 4);
    let env = [
        ("MODEL", SMALL),
        ("INPUTS", inputs.as_str()),
        ("DIMENSIONS", "4"),
        ("EXPECT_VECTORS", vectors.as_str()),
    ];
    let ran = Sdk::Calls.run(&h, "langchain_embeddings", &env).await;
    assert_eq!(ran, ["embed_documents", "embed_query"]);
    assert_accepted(&h.openai);
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TOKENS", "2095"),
    ];
    let ran = Sdk::Calls.run(&h, "langchain_count_tokens", &env).await;
    assert_eq!(ran, ["get_num_tokens_from_messages"]);
    assert_accepted(&h.anthropic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_door_relays_the_providers_rate_limit_headers_and_refuses_without_a_token() {
    use e2e_tests::front_door::{request, send};
    let h = Harness::start().await;
    h.openai.push(
        Reply::json_fixture(200, "embeddings/openai/base64.json")
            .header("x-ratelimit-remaining-requests", "4999")
            .header("x-request-id", "req_embed_1"),
    );
    h.anthropic.push(
        Reply::json_fixture(200, "count_tokens/anthropic/count.json")
            .header("anthropic-ratelimit-requests-remaining", "49"),
    );
    let body = r#"{"model":"openai/text-embedding-3-small","input":["a","b"]}"#;
    let (status, headers, text) = send(
        h.http_addr,
        false,
        request("POST", "/v1/embeddings", Some(TOKEN), body),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["x-ratelimit-remaining-requests"], "4999");
    assert_eq!(headers["x-request-id"], "req_embed_1");
    let body =
        r#"{"model":"anthropic/claude-sonnet-4-5","messages":[{"role":"user","content":"Hi"}]}"#;
    let (status, headers, text) = send(
        h.http_addr,
        false,
        request("POST", "/v1/messages/count_tokens", Some(TOKEN), body),
    )
    .await;
    assert_eq!(
        (status.as_u16(), text.as_str()),
        (200, r#"{"input_tokens":2095}"#)
    );
    assert_eq!(headers["anthropic-ratelimit-requests-remaining"], "49");
    // Authenticated like every endpoint: no token, no call.
    let (status, _, _) = send(
        h.http_addr,
        false,
        request("POST", "/v1/embeddings", None, body),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(h.openai.requests().len() + h.anthropic.requests().len(), 2);
}
