//! Azure OpenAI end to end, through the real gRPC server against a fake Azure OpenAI resource that checks every
//! request as the real one does (the `api-key`, or an Entra ID token its fake token endpoint issued after checking
//! the client credentials; the route and its `api-version`; the deployment; OpenAI's body rules for the model the
//! deployment runs) and replays byte-exact fixtures (`shared/fake-provider/fixtures/azure_chat/`,
//! `azure_responses/`): text with usage priced from the catalog entry of the deployment's model, on the
//! deployments surface with a key; parallel tool calls with fragmented arguments on the v1 surface with Entra
//! tokens, their results accepted; Responses reasoning whose encrypted content is replayed; a 429 retried after
//! `retry-after-ms`; an error mid-stream; a context overflow and content-filter refusals classified and not retried;
//! the caller cancelling; Entra tokens cached, refreshed before expiry and dropped on a 401; a refused grant; an
//! unknown deployment; and a conversation that moves from Claude to an Azure reasoning deployment and on to a
//! Responses-only one, every request accepted by the providers' validators.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::azure::AzureFakes;
use e2e_tests::*;
use fake_provider::Reply;
use fake_provider::azure::TEST_API_KEY;
use llm_proto::gateway as pb;
use serde_json::json;

/// The deployments surface, as Azure's dated REST API and the `AzureOpenAI` SDK client address it.
const DATED: &str = "api = \"deployments\", api_version = \"2024-10-21\"";
const V1: &str = "api = \"v1\"";

fn fixture(name: &str) -> Reply {
    Reply::fixture(&format!("azure_chat/{name}.sse"))
}

fn error(status: u16, name: &str) -> Reply {
    Reply::json_fixture(status, &format!("azure_chat/errors/{name}.json"))
}

async fn run(h: &Harness, g: pb::Generation) -> Vec<String> {
    render(&h.stream(g).await.expect("stream starts"))
}

fn assert_accepted(a: &AzureFakes) {
    assert_eq!(
        a.azure.rejections(),
        vec![],
        "the fake Azure resource refused a request"
    );
}

/// A harness with provider `azure` (the key, the deployments surface) and `aoai` (Entra ID, v1) on `a`'s fakes.
async fn start(a: &AzureFakes, extra: &str) -> Harness {
    let config = format!(
        "{}{}{extra}",
        a.key_provider("azure", "azure_chat", DATED),
        a.entra_provider("aoai", "azure_chat", V1, &a.entra_settings(""))
    );
    Harness::start_with(&config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_with_usage_on_the_deployments_surface_with_a_key() {
    let a = AzureFakes::start().await;
    let h = start(&a, "").await;
    a.azure.push(fixture("text").split_every(5));
    let lines = run(&h, generation("azure/prod-4o", "Say hello")).await;
    // 21 prompt and 4 output tokens at gpt-4o's $2.50 / $10 per MTok: 52 500 + 40 000 nano-USD.
    assert_eq!(
        lines,
        [
            "stream_start azure azure/prod-4o attempt=1",
            "step_start",
            "text_start text-0",
            "text_delta text-0 \"Hello\"",
            "text_delta text-0 \" from\"",
            "text_delta text-0 \" Azure.\"",
            "text_end text-0",
            "step_finish Stop raw=stop in=21 cr=0 cw=0 out=4 rs=0 total=25 cost=92500 id=chatcmpl-CmAz7tQ2rLw9XyP4nB6vHs1eKd3Jf model=gpt-4o-2024-11-20",
        ],
        "{lines:#?}"
    );
    assert_accepted(&a);
    let req = &a.azure.requests()[0];
    assert_eq!(
        req.path,
        "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(req.header("api-key"), Some(TEST_API_KEY));
    assert_eq!(req.header("authorization"), None);
    let body = req.json();
    assert_eq!(body["model"], "prod-4o");
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_on_v1_with_entra_tokens_then_their_results() {
    let a = AzureFakes::start().await;
    let h = start(&a, "").await;
    a.azure.push(fixture("parallel_tools").split_every(7));
    a.azure.push(fixture("text"));
    let first = h.stream(tools_generation("aoai/prod-41")).await.unwrap();
    let lines = render(&first);
    assert_well_formed(&lines);
    let calls: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("tool_call "))
        .collect();
    assert_eq!(
        calls,
        [
            "tool_call call_Ab3Kd9Lm2Nq5Rt8Vw1Xy4Zc7 get_weather {\"city\":\"Paris\"}",
            "tool_call call_Ef6Gh2Jk5Lm8Np1Qr4St7Uv0 get_weather {\"city\":\"Tokyo\"}",
        ]
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("tool_input_delta "))
            .count(),
        8,
        "every fragment forwarded: {lines:#?}"
    );
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("step_finish ToolCalls raw=tool_calls in=88 cr=0 cw=0 out=46"),
        "{lines:#?}"
    );

    let step = turns::fold(&first);
    let mut next = tools_generation("aoai/prod-41");
    next.messages.push(step.assistant);
    next.messages.push(turns::results(&step.calls));
    let lines = run(&h, next).await;
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_accepted(&a);
    // One token, fetched once with the client credentials, carried by both requests; never the key.
    let tokens = a.entra.issued();
    assert_eq!(tokens.len(), 1, "{:?}", a.entra.refusals());
    let reqs = a.azure.requests();
    for req in &reqs {
        assert_eq!(req.path, "/openai/v1/chat/completions");
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {}", tokens[0]).as_str())
        );
        assert_eq!(req.header("api-key"), None);
    }
    let body = reqs[1].json();
    assert_eq!(body["model"], "prod-41");
    assert_eq!(
        body["messages"][1]["tool_calls"][1]["id"],
        "call_Ef6Gh2Jk5Lm8Np1Qr4St7Uv0"
    );
    assert_eq!(
        body["messages"][3]["tool_call_id"],
        "call_Ef6Gh2Jk5Lm8Np1Qr4St7Uv0"
    );
    let grant = String::from_utf8(a.login.requests()[0].body.to_vec()).unwrap();
    assert!(
        grant.starts_with("grant_type=client_credentials&client_id="),
        "{grant}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_reasoning_with_encrypted_content_is_replayed_on_the_next_request() {
    let a = AzureFakes::start().await;
    let extra = a.key_provider("azr", "azure_responses", V1);
    let h = start(&a, &extra).await;
    a.azure
        .push(Reply::fixture("azure_responses/reasoning.sse"));
    a.azure.push(Reply::fixture("openai_responses/text.sse"));
    let mut g = generation("azr/reasoner", "17 × 23?");
    g.reasoning = Some(reasoning(pb::reasoning::Effort::Medium));
    let events = h.stream(g.clone()).await.unwrap();
    let lines = render(&events);
    assert_well_formed(&lines);
    // 42 input, 22 visible and 128 reasoning tokens at o4-mini's $1.10 / $4.40: 46 200 + 660 000 nano-USD.
    assert!(
        lines.last().unwrap().starts_with(
            "step_finish Stop raw=completed in=42 cr=0 cw=0 out=22 rs=128 total=192 cost=706200"
        ),
        "{lines:#?}"
    );
    let step = turns::fold(&events);
    let metadata = step
        .assistant
        .parts
        .iter()
        .find_map(|p| match &p.kind {
            Some(pb::part::Kind::Reasoning(r)) => r.provider_metadata.clone(),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (metadata.protocol.as_str(), metadata.model.as_str()),
        ("openai_responses", "azr/reasoner")
    );
    let first = a.azure.requests()[0].json();
    assert_eq!(a.azure.requests()[0].path, "/openai/v1/responses");
    assert_eq!(first["model"], "reasoner");
    assert_eq!(first["store"], false);
    assert_eq!(first["include"], json!(["reasoning.encrypted_content"]));

    // The next step sends the reasoning back, as the session-processor would, with the metadata it received.
    g.messages.push(step.assistant);
    g.messages.push(user("And 18 × 23?"));
    let lines = run(&h, g).await;
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_accepted(&a);
    let body = a.azure.requests()[1].json();
    let replayed = &body["input"][1];
    assert_eq!(replayed["type"], "reasoning");
    assert_eq!(replayed["id"], "rs_68f2c1aa1f3e4d5c6b7a8990e2e0c0ffee11");
    assert!(
        replayed["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("gAAAAABo8sGqAzureE2e")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_before_output_is_retried_after_azures_retry_after_ms() {
    let a = AzureFakes::start().await;
    let h = start(&a, "").await;
    a.azure.push(
        error(429, "rate_limit")
            .header("retry-after-ms", "10")
            .header("retry-after", "2"),
    );
    a.azure.push(fixture("text"));
    let lines = run(&h, generation("azure/prod-4o", "hi")).await;
    assert_eq!(lines[0], "stream_start azure azure/prod-4o attempt=2");
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_eq!(a.azure.requests().len(), 2);
    // `retry-after-ms` wins over `retry-after`: 5 s is over the harness's 2 s cap, so the gateway does not wait
    // (`retry-after: 0` would have meant "now") and reports the delay Azure asked for.
    a.azure.push(
        error(429, "rate_limit")
            .header("retry-after-ms", "5000")
            .header("retry-after", "0"),
    );
    let lines = run(&h, generation("azure/prod-4o", "hi")).await;
    assert_eq!(
        lines.last().unwrap(),
        "error RateLimited retryable=true status=429 retry_after_ms=5000"
    );
    assert_eq!(a.azure.requests().len(), 3);
    assert_accepted(&a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_mid_stream_ends_the_stream_with_its_error() {
    let a = AzureFakes::start().await;
    let h = start(&a, "").await;
    a.azure.push(fixture("error_after_output"));
    let lines = run(&h, generation("azure/prod-4o", "hi")).await;
    assert_eq!(
        lines,
        [
            "stream_start azure azure/prod-4o attempt=1",
            "step_start",
            "text_start text-0",
            "text_delta text-0 \"Partial answer\"",
            "error ProviderError retryable=true status=0 retry_after_ms=-1",
        ]
    );
    assert_eq!(a.azure.requests().len(), 1, "output had started: no retry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_and_content_filter_refusals_are_classified_and_not_retried() {
    let a = AzureFakes::start().await;
    let h = start(&a, "").await;
    for (reply, want) in [
        (
            error(400, "context_length_exceeded"),
            "error ContextOverflow retryable=false status=400 retry_after_ms=-1",
        ),
        (
            error(400, "content_filter"),
            "error ContentFilter retryable=false status=400 retry_after_ms=-1",
        ),
    ] {
        a.azure.push(reply);
        let lines = run(&h, generation("aoai/prod-4o", "…")).await;
        assert_eq!(
            lines,
            [
                "stream_start aoai aoai/prod-4o attempt=1".to_string(),
                want.to_string()
            ]
        );
    }
    assert_eq!(a.azure.requests().len(), 2, "neither was retried");
    // The completion filtered after some output: a content-filter finish, not an error.
    a.azure.push(fixture("content_filter"));
    let lines = run(&h, generation("aoai/prod-4o", "…")).await;
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("step_finish ContentFilter raw=content_filter in=34"),
        "{lines:#?}"
    );
    assert_accepted(&a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_cancelling_closes_the_provider_connection() {
    let a = AzureFakes::start().await;
    let h = start(&a, "").await;
    a.azure.push(fixture("text").stall_after(3));
    let stream = h.open_stream(generation("aoai/prod-4o", "hi")).await;
    assert_cancel_closes_upstream(stream, &a.azure).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entra_tokens_are_cached_refreshed_before_expiry_and_dropped_on_a_401() {
    let a = AzureFakes::start().await;
    let h = start(&a, "").await;
    // The first token lives 200 s, under the 300 s refresh margin: the next request replaces it; the second token
    // (3599 s) is then reused.
    a.entra.next_lifetime(200);
    for _ in 0..3 {
        a.azure.push(fixture("text"));
        let lines = run(&h, generation("aoai/prod-4o", "hi")).await;
        assert!(
            lines.last().unwrap().starts_with("step_finish Stop"),
            "{lines:#?}"
        );
    }
    let tokens = a.entra.issued();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    let bearer = |i: usize| {
        a.azure.requests()[i]
            .header("authorization")
            .unwrap()
            .to_string()
    };
    assert_eq!(bearer(0), format!("Bearer {}", tokens[0]));
    assert_eq!(bearer(1), format!("Bearer {}", tokens[1]));
    assert_eq!(bearer(2), format!("Bearer {}", tokens[1]));

    // Revoked: Azure answers 401, the gateway reports it (an auth failure is not retried) and drops the token, so
    // the next request fetches a new one and succeeds.
    a.entra.revoke_all();
    let lines = run(&h, generation("aoai/prod-4o", "hi")).await;
    assert_eq!(
        lines.last().unwrap(),
        "error Auth retryable=false status=401 retry_after_ms=-1"
    );
    a.azure.push(fixture("text"));
    let lines = run(&h, generation("aoai/prod-4o", "hi")).await;
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_eq!(a.entra.issued().len(), 3);
    assert_eq!(a.login.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_grant_is_an_auth_error_naming_entras_code_but_never_the_secret() {
    let a = AzureFakes::start().await;
    // The application's secret read from the wrong variable: the resource key, which Entra refuses.
    let wrong = a
        .entra_settings("")
        .replace(azure::ENTRA_SECRET_ENV, azure::AZURE_KEY_ENV);
    let extra = a.entra_provider("wrong", "azure_chat", V1, &wrong);
    let h = start(&a, &extra).await;
    let events = h.stream(generation("wrong/prod-4o", "hi")).await.unwrap();
    let lines = render(&events);
    assert_eq!(
        lines.last().unwrap(),
        "error Auth retryable=false status=401 retry_after_ms=-1"
    );
    let shown = format!("{events:?}");
    assert!(shown.contains("AADSTS7000215"), "{shown}");
    assert!(!shown.contains(TEST_API_KEY), "{shown}");
    assert_eq!(
        a.login.requests().len(),
        1,
        "a refused grant is not retried"
    );
    assert!(a.azure.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_the_resource_does_not_have_is_an_invalid_request() {
    let a = AzureFakes::start().await;
    let extra = format!(
        "[providers.ghosts]\nprotocol = \"azure_chat\"\nbase_url = \"{}\"\napi_key_env = \"{}\"\nazure = {{ {DATED}, deployments = {{ \"ghost\" = \"gpt-4o\" }} }}\n",
        a.azure.base_url(),
        azure::AZURE_KEY_ENV
    );
    let h = start(&a, &extra).await;
    let lines = run(&h, generation("ghosts/ghost", "hi")).await;
    assert_eq!(
        lines.last().unwrap(),
        "error InvalidRequest retryable=false status=404 retry_after_ms=-1"
    );
    let refused = a.azure.rejections();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].code.as_deref(), Some("DeploymentNotFound"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_moving_from_claude_to_azure_deployments_passes_every_validator() {
    let a = AzureFakes::start().await;
    let h = start(&a, "").await;
    h.anthropic
        .validate_requests(fake_provider::Protocol::Anthropic);
    h.anthropic
        .push(Reply::fixture("anthropic/thinking_tool_use.sse"));
    a.azure.push(fixture("parallel_tools"));
    a.azure
        .push(Reply::fixture("openai_responses/parallel_tools.sse"));
    let step = |model: &str, messages: &[pb::Message]| pb::Generation {
        model: model.into(),
        system: vec!["You are a travel assistant.".into()],
        messages: messages.to_vec(),
        tools: vec![weather_tool()],
        reasoning: Some(reasoning(pb::reasoning::Effort::Medium)),
        ..Default::default()
    };
    let mut messages = vec![user("What's the weather in Paris and Tokyo?")];

    // Claude thinks, signs and calls a tool.
    let first = turns::fold(
        &h.stream(step("anthropic/claude-sonnet-4-5", &messages))
            .await
            .unwrap(),
    );
    assert_eq!(first.calls.len(), 1);
    messages.push(first.assistant);
    messages.push(turns::results(&first.calls));

    // An o4-mini deployment on Chat Completions: the reasoning rules hold whatever the deployment is called.
    let events = h.stream(step("aoai/reasoner", &messages)).await.unwrap();
    assert!(
        matches!(terminal(&events), pb::stream_response::Event::StepFinish(_)),
        "{:#?}",
        render(&events)
    );
    let body = a.azure.requests()[0].json();
    let text = body.to_string();
    assert!(
        !text.contains("The user wants the weather") && !text.contains("\"signature\""),
        "{body:#}"
    );
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["developer", "user", "assistant", "tool"]);
    assert!(body.get("temperature").is_none() && body.get("max_tokens").is_none());
    let second = turns::fold(&events);
    messages.push(second.assistant);
    messages.push(turns::results(&second.calls));

    // `codex` runs gpt-5-codex, which Azure serves over Responses only: the same provider sends it there.
    let events = h.stream(step("aoai/codex", &messages)).await.unwrap();
    assert!(
        matches!(terminal(&events), pb::stream_response::Event::StepFinish(_)),
        "{:#?}",
        render(&events)
    );
    let req = &a.azure.requests()[1];
    assert_eq!(req.path, "/openai/v1/responses");
    let input = req.json()["input"].as_array().unwrap().clone();
    let ids = |kind: &str| -> Vec<String> {
        input
            .iter()
            .filter(|i| i["type"] == kind)
            .map(|i| i["call_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("function_call"), ids("function_call_output"));
    assert_eq!(ids("function_call").len(), 3);
    assert!(h.anthropic.rejections().is_empty());
    assert_accepted(&a);
}
