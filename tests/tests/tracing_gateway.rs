//! The gateway's spans, exported over OTLP to a real receiver: a gRPC server span per call parented on the caller's
//! W3C trace context and ended with the call's final status (`NOT_FOUND`, a caller's cancel, a deadline), a
//! `chat {model}` span inside it with GenAI attributes (token counts, cost), and one provider-request span per
//! attempt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use e2e_tests::otlp::{OtlpReceiver, SpanKind, assert_rpc_span};
use e2e_tests::{Bearer, TOKEN, generation, tools_generation};
use fake_provider::{FakeProvider, Reply};
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use tokio::io::{AsyncBufReadExt, BufReader};

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN: &str = "b7ad6b7169203331";
const STREAM: &str = "llm.gateway.v1.GatewayService/Stream";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_is_one_trace_from_the_caller_to_each_provider_attempt() {
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    fake.push(Reply::json(429, r#"{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#).header("retry-after-ms", "10"));
    fake.push(Reply::fixture("openai_chat/text.sse"));
    let (mut child, mut client, _dir) = start_gateway(&fake, &otlp, &[]).await;
    let mut g = generation("openai/gpt-4o", "Say hello");
    g.context = Some(pb::RequestContext {
        session_id: "ses_trace".into(),
        request_id: "r1".into(),
        agent: "a".into(),
    });
    let mut stream = client
        .stream(in_callers_trace(g))
        .await
        .unwrap()
        .into_inner();
    while stream.message().await.unwrap().is_some() {}

    let spans = otlp
        .wait_until(Duration::from_secs(15), |s| {
            // The call's span ends after the spans under it: it may come in a later batch.
            s.iter().any(|s| s.name == STREAM)
                && s.iter().any(|s| s.name == "chat openai/gpt-4o")
                && s.iter().filter(|s| s.name.starts_with("POST")).count() >= 2
        })
        .await;
    let call = spans
        .iter()
        .find(|s| s.name == STREAM)
        .expect("the call's server span");
    assert_eq!(call.service, "llm-gateway");
    assert_eq!(call.trace_id, TRACE_ID, "the caller's trace");
    assert_eq!(call.parent_id, CALLER_SPAN, "parented on the caller's span");
    assert_rpc_span(call, SpanKind::Server, STREAM, 0, false);
    assert_eq!(call.string("server.address"), Some("127.0.0.1"));
    assert_eq!(call.string("network.peer.address"), Some("127.0.0.1"));
    let chat = spans
        .iter()
        .find(|s| s.name == "chat openai/gpt-4o")
        .unwrap();
    assert_eq!(chat.service, "llm-gateway");
    assert_eq!(chat.trace_id, TRACE_ID, "the caller's trace");
    assert_eq!(
        chat.parent_id, call.span_id,
        "the generation is a child of the call's span"
    );
    assert_eq!(chat.attr("gen_ai.operation.name").as_deref(), Some("chat"));
    assert_eq!(chat.attr("gen_ai.provider.name").as_deref(), Some("openai"));
    assert_eq!(
        chat.attr("gen_ai.request.model").as_deref(),
        Some("openai/gpt-4o")
    );
    assert_eq!(
        chat.attr("gen_ai.response.model").as_deref(),
        Some("gpt-4.1-mini-2025-04-14")
    );
    assert_eq!(
        chat.strings("gen_ai.response.finish_reasons"),
        Some(vec!["stop".to_string()]),
        "a string array"
    );
    assert_eq!(
        chat.attr("gen_ai.conversation.id").as_deref(),
        Some("ses_trace")
    );
    // text.sse: prompt_tokens 1234 (1024 cached), completion_tokens 9.
    assert_eq!(
        chat.attr("gen_ai.usage.input_tokens").as_deref(),
        Some("1234")
    );
    assert_eq!(
        chat.attr("gen_ai.usage.cache_read.input_tokens").as_deref(),
        Some("1024")
    );
    assert_eq!(
        chat.attr("gen_ai.usage.output_tokens").as_deref(),
        Some("9")
    );
    assert_eq!(
        chat.attr("gen_ai.usage.reasoning.output_tokens").as_deref(),
        Some("0")
    );
    assert_eq!(chat.attr("llm.cost_nano_usd").as_deref(), Some("1895000"));
    assert!(chat.attr("gen_ai.client.time_to_first_chunk").is_some());
    assert_eq!(chat.attr("llm.attempts").as_deref(), Some("2"));
    // Who called: the key (a `server.auth_tokens` key, named by its digest), never the token; the unnamed tenant is
    // left out.
    let key = format!(
        "token-{}",
        &llm_gateway::keys::to_hex(&llm_gateway::keys::digest(TOKEN))[..8]
    );
    assert_eq!(chat.attr("llm.key"), Some(key));
    assert_eq!(chat.attr("llm.tenant"), None);
    for key in [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
    ] {
        assert_eq!(
            chat.attr(key),
            None,
            "{key}: content is recorded only when opted in"
        );
    }

    let attempts: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "POST /chat/completions")
        .collect();
    assert_eq!(attempts.len(), 2, "the retry shows as a second attempt");
    for a in &attempts {
        assert_eq!(a.trace_id, TRACE_ID);
        assert_eq!(
            a.parent_id, chat.span_id,
            "attempts are children of the chat span"
        );
    }
    let failed = attempts
        .iter()
        .find(|a| a.attr("llm.attempt").as_deref() == Some("1"))
        .unwrap();
    assert_eq!(
        failed.attr("http.response.status_code").as_deref(),
        Some("429")
    );
    assert_eq!(failed.attr("error.type").as_deref(), Some("rate_limited"));
    // The provider saw each attempt's own span as the parent of its request.
    let reqs = fake.requests();
    for (req, attempt) in reqs.iter().zip(["1", "2"]) {
        let span = attempts
            .iter()
            .find(|a| a.attr("llm.attempt").as_deref() == Some(attempt))
            .unwrap();
        assert_eq!(
            req.header("traceparent"),
            Some(format!("00-{TRACE_ID}-{}-01", span.span_id).as_str())
        );
    }
    child.kill().await.unwrap();
}

/// A stream request for `g` inside the caller's sampled trace (`traceparent` with [`TRACE_ID`], [`CALLER_SPAN`]).
fn in_callers_trace(g: pb::Generation) -> tonic::Request<pb::StreamRequest> {
    let mut req = tonic::Request::new(pb::StreamRequest {
        generation: Some(g),
    });
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-{CALLER_SPAN}-01").parse().unwrap(),
    );
    req
}

/// Where a started gateway keeps its configuration, and listens.
struct Started {
    _dir: tempfile::TempDir,
    addr: String,
}

/// Starts a gateway replica exporting to `otlp`, with extra environment variables, and a client for it.
async fn start_gateway(
    fake: &FakeProvider,
    otlp: &OtlpReceiver,
    env: &[(&str, &str)],
) -> (
    tokio::process::Child,
    GatewayServiceClient<
        tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>,
    >,
    Started,
) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[retry]\nbase_delay_ms = 5\nmax_delay_ms = 10\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"E2E_OPENAI_KEY\"\n",
            fake.base_url()
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_gateway_replica"))
        .arg(&config)
        .env("GATEWAY_AUTH_TOKENS", TOKEN)
        .env("E2E_OPENAI_KEY", e2e_tests::OPENAI_KEY)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint())
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("gateway exited before listening");
        if let Some(a) = line.strip_prefix("llm-gateway listening on ") {
            break a.to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let client = GatewayServiceClient::with_interceptor(channel, Bearer(Some(TOKEN.into())));
    (child, client, Started { _dir: dir, addr })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_content_is_on_the_chat_span_only_when_opted_in() {
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    fake.push(Reply::fixture("openai_chat/parallel_tools.sse"));
    let (mut child, mut client, _dir) = start_gateway(
        &fake,
        &otlp,
        &[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")],
    )
    .await;
    let mut g = tools_generation("openai/gpt-4o");
    g.system = vec!["Be brief.".into()];
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(g),
        })
        .await
        .unwrap()
        .into_inner();
    let mut calls = Vec::new();
    while let Some(ev) = stream.message().await.unwrap() {
        if let Some(pb::stream_response::Event::ToolCall(c)) = ev.event {
            calls.push(c);
        }
    }
    assert!(!calls.is_empty(), "the fixture calls tools");
    let spans = otlp
        .wait_until(Duration::from_secs(15), |s| {
            s.iter().any(|s| s.name == "chat openai/gpt-4o")
        })
        .await;
    let chat = spans
        .iter()
        .find(|s| s.name == "chat openai/gpt-4o")
        .unwrap();
    let json = |key: &str| -> serde_json::Value {
        serde_json::from_str(&chat.attr(key).unwrap_or_else(|| panic!("{key} recorded"))).unwrap()
    };
    assert_eq!(
        json("gen_ai.system_instructions"),
        serde_json::json!([{"type": "text", "content": "Be brief."}])
    );
    assert_eq!(
        json("gen_ai.input.messages"),
        serde_json::json!([{"role": "user", "parts": [
            {"type": "text", "content": "Weather in Paris and Tokyo?"}
        ]}])
    );
    let output = json("gen_ai.output.messages");
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["finish_reason"], "tool_calls");
    let recorded: Vec<(String, String)> = output[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "tool_call")
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let streamed: Vec<(String, String)> = calls
        .iter()
        .map(|c| (c.call_id.clone(), c.tool_name.clone()))
        .collect();
    assert_eq!(
        recorded, streamed,
        "every tool call, with the ids the caller saw"
    );
    for (p, c) in output[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "tool_call")
        .zip(&calls)
    {
        let args: serde_json::Value = serde_json::from_str(&c.input_json).unwrap();
        assert_eq!(p["arguments"], args, "arguments as JSON, not a string");
    }
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_follows_otel_traces_sampler() {
    // parentbased_traceidratio with ratio 0: a caller's sampled trace is kept, a new root trace is dropped.
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    fake.set_fallback(Reply::fixture("openai_chat/text.sse"));
    let (mut child, mut client, _dir) = start_gateway(
        &fake,
        &otlp,
        &[
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0"),
        ],
    )
    .await;
    // First a generation without a caller trace: its root is sampled at ratio 0, so nothing is exported.
    let mut unsampled = generation("openai/gpt-4o", "no trace");
    unsampled.context = Some(pb::RequestContext {
        session_id: "ses_unsampled".into(),
        ..Default::default()
    });
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(unsampled),
        })
        .await
        .unwrap()
        .into_inner();
    while stream.message().await.unwrap().is_some() {}
    // Then one inside the caller's sampled trace: kept, because the parent decided.
    let mut sampled = generation("openai/gpt-4o", "traced");
    sampled.context = Some(pb::RequestContext {
        session_id: "ses_sampled".into(),
        ..Default::default()
    });
    let mut stream = client
        .stream(in_callers_trace(sampled))
        .await
        .unwrap()
        .into_inner();
    while stream.message().await.unwrap().is_some() {}
    // The batch exporter sends spans in the order they ended, so once the second generation's chat span has
    // arrived, the first one's would have too.
    let spans = otlp
        .wait_until(Duration::from_secs(15), |s| {
            s.iter().any(|s| s.name == "chat openai/gpt-4o")
        })
        .await;
    assert!(!spans.is_empty());
    for s in &spans {
        assert_eq!(
            s.trace_id, TRACE_ID,
            "only the caller's sampled trace is exported: {s:?}"
        );
    }
    assert!(
        spans
            .iter()
            .all(|s| s.attr("gen_ai.conversation.id").as_deref() != Some("ses_unsampled"))
    );
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_span_ends_with_its_final_status() {
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    // Both streams stall after their first events: one is cancelled by its caller, one runs out of time.
    fake.push(Reply::fixture("openai_chat/text.sse").stall_after(2));
    fake.push(Reply::fixture("openai_chat/text.sse").stall_after(2));
    let (mut child, mut client, dir) = start_gateway(&fake, &otlp, &[]).await;

    // A health check, first: not traced (were it, its span would be exported before the later calls' spans).
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", dir.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .unwrap();

    // An unknown model: NOT_FOUND, the caller's mistake, so not an error of the server's span.
    let status = client
        .get_model(pb::GetModelRequest {
            model: "openai/no-such-model".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);

    // A stream the caller drops after its first event: CANCELLED, when the caller let go, not before.
    let mut stream = client
        .stream(in_callers_trace(generation("openai/gpt-4o", "cancel me")))
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some(), "a first event");
    drop(stream);

    // A stream past its deadline: DEADLINE_EXCEEDED, an error of the server's.
    let mut req = tonic::Request::new(pb::StreamRequest {
        generation: Some(generation("openai/gpt-4o", "too slow")),
    });
    req.set_timeout(Duration::from_millis(300));
    let mut stream = client.stream(req).await.unwrap().into_inner();
    let ended = loop {
        match stream.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stalled stream ended without its deadline"),
            Err(status) => break status,
        }
    };
    assert_eq!(ended.code(), tonic::Code::DeadlineExceeded);

    let code = |s: &e2e_tests::otlp::Span| s.int("rpc.grpc.status_code");
    let spans = otlp
        .wait_until(Duration::from_secs(15), |spans| {
            [5, 1, 4]
                .iter()
                .all(|c| spans.iter().any(|s| code(s) == Some(*c)))
        })
        .await;
    let with = |path: &str, c: i64| {
        spans
            .iter()
            .find(|s| s.name == path && code(s) == Some(c))
            .unwrap_or_else(|| panic!("a {path} span with status {c}"))
    };
    assert_rpc_span(
        with("llm.gateway.v1.GatewayService/GetModel", 5),
        SpanKind::Server,
        "llm.gateway.v1.GatewayService/GetModel",
        5,
        false,
    );
    let cancelled = with(STREAM, 1);
    assert_rpc_span(cancelled, SpanKind::Server, STREAM, 1, false);
    assert_eq!(cancelled.trace_id, TRACE_ID);
    let late = with(STREAM, 4);
    assert_rpc_span(late, SpanKind::Server, STREAM, 4, true);
    assert_eq!(late.string("error.type"), Some("DEADLINE_EXCEEDED"));
    assert!(
        spans.iter().all(|s| !s.name.starts_with("grpc.")),
        "health and reflection calls have no spans"
    );
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_front_door_parents_its_generation_on_the_callers_traceparent() {
    use http_body_util::BodyExt;
    // No gRPC call, so no call span: the generation takes the caller's context from the HTTP headers itself.
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    fake.push(Reply::fixture("openai_chat/text.sse"));
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"E2E_OPENAI_KEY\"\n",
        fake.base_url()
    );
    let door = e2e_tests::front_door::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_gateway_main")),
        &config,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint().as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    )
    .await;
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let resp = door
        .post_json(
            "/v1/chat/completions",
            &[("traceparent", traceparent.as_str())],
            br#"{"model":"openai/gpt-4o","messages":[{"role":"user","content":"Hi"}]}"#,
        )
        .await;
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.unwrap();

    let spans = otlp
        .wait_until(Duration::from_secs(15), |s| {
            s.iter().any(|s| s.name == "chat openai/gpt-4o")
        })
        .await;
    let chat = spans
        .iter()
        .find(|s| s.name == "chat openai/gpt-4o")
        .unwrap();
    assert_eq!(chat.trace_id, TRACE_ID);
    assert_eq!(chat.parent_id, CALLER_SPAN, "parented on the caller's span");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_and_token_counts_are_spans_in_the_callers_trace() {
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    fake.push(Reply::json_fixture(200, "embeddings/openai/base64.json"));
    let (_child, mut client, _dir) = start_gateway(&fake, &otlp, &[]).await;
    let text = |t: &str| pb::EmbedInput {
        kind: Some(pb::embed_input::Kind::Text(t.into())),
    };
    let mut req = tonic::Request::new(pb::EmbedRequest {
        model: "openai/text-embedding-3-small".into(),
        inputs: vec![text("hello"), text("world")],
        ..Default::default()
    });
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-{CALLER_SPAN}-01").parse().unwrap(),
    );
    client.embed(req).await.unwrap();
    let counted = pb::CountTokensRequest {
        generation: Some(generation("openai/gpt-4o", "hello world")),
    };
    client.count_tokens(counted).await.unwrap();

    const EMBED: &str = "llm.gateway.v1.GatewayService/Embed";
    let spans = otlp
        .wait_until(Duration::from_secs(15), |s| {
            [
                EMBED,
                "embeddings openai/text-embedding-3-small",
                "POST /embeddings",
                "count_tokens openai/gpt-4o",
            ]
            .iter()
            .all(|name| s.iter().any(|s| s.name == *name))
        })
        .await;
    let find = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let call = find(EMBED);
    let embeddings = find("embeddings openai/text-embedding-3-small");
    assert_eq!(embeddings.trace_id, TRACE_ID, "the caller's trace");
    assert_eq!(
        embeddings.parent_id, call.span_id,
        "a child of the call's span"
    );
    assert_eq!(
        embeddings.attr("gen_ai.operation.name").as_deref(),
        Some("embeddings")
    );
    assert_eq!(
        embeddings.attr("gen_ai.provider.name").as_deref(),
        Some("openai")
    );
    assert_eq!(embeddings.int("gen_ai.usage.input_tokens"), Some(8));
    assert_eq!(embeddings.int("gen_ai.embeddings.dimension.count"), Some(3));
    // 8 tokens at $0.02 per million.
    assert_eq!(embeddings.int("llm.cost_nano_usd"), Some(160));
    let post = find("POST /embeddings");
    assert_eq!(
        post.parent_id, embeddings.span_id,
        "the provider request inside the call"
    );
    let count = find("count_tokens openai/gpt-4o");
    assert_eq!(
        count.string("llm.token_count.method"),
        Some("local_tokenizer")
    );
    assert_eq!(count.int("gen_ai.usage.input_tokens"), Some(9));
}
