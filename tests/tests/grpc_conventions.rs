//! The gRPC conventions of both services (docs/operations.md, "gRPC conventions"): gzip and zstd both ways,
//! reflection v1 and v1alpha listing exactly the served services, health `Watch` of an unknown service, and a 5 MiB
//! prompt from a Python client with the documented client settings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::processor::{PROCESSOR_TOKEN, ProcessorSetup, Product, channel};
use e2e_tests::{Bearer, TOKEN, generation, windows};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use futures::FutureExt;
use llm_proto::gateway as gpb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use tonic::codec::CompressionEncoding;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1 as refl;

const GATEWAY: &str = "llm.gateway.v1.GatewayService";
/// The gateway's admin service, served beside it.
const KEYS: &str = "llm.gateway.v1.KeysService";
const SESSIONS: &str = "llm.sessions.v1.SessionService";
const COMMON: [&str; 3] = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

fn reply(text: &str) -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-conv")
            .text(&[text])
            .finish("stop", Some((12, 6))),
    )
}

fn encoding_of(metadata: &tonic::metadata::MetadataMap) -> Option<String> {
    metadata
        .get("grpc-encoding")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn expected(own: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = COMMON.iter().map(|s| s.to_string()).collect();
    all.extend(own.iter().map(|s| s.to_string()));
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_services_take_and_send_gzip_and_zstd() {
    let p = Product::start("").await;
    for (encoding, name) in [
        (CompressionEncoding::Gzip, "gzip"),
        (CompressionEncoding::Zstd, "zstd"),
    ] {
        // Gateway: a unary call and the `Stream` route, compressed request and response.
        let mut gateway = GatewayServiceClient::with_interceptor(
            p.gateway.channel().await,
            Bearer(Some(TOKEN.into())),
        )
        .send_compressed(encoding)
        .accept_compressed(encoding);
        let models = gateway
            .list_models(gpb::ListModelsRequest::default())
            .await
            .unwrap_or_else(|e| panic!("{name} ListModels: {e}"));
        assert_eq!(encoding_of(models.metadata()).as_deref(), Some(name));
        assert!(!models.get_ref().models.is_empty());

        p.gateway.openai.push(reply("compressed both ways"));
        let stream = gateway
            .stream(gpb::StreamRequest {
                generation: Some(generation("openai/gpt-4o", "hello")),
            })
            .await
            .unwrap_or_else(|e| panic!("{name} Stream: {e}"));
        assert_eq!(encoding_of(stream.metadata()).as_deref(), Some(name));
        let mut stream = stream.into_inner();
        let mut text = String::new();
        while let Some(ev) = stream.message().await.unwrap() {
            if let Some(gpb::stream_response::Event::TextDelta(d)) = ev.event {
                text.push_str(&d.delta);
            }
        }
        assert_eq!(text, "compressed both ways");

        // Processor: a unary call and the Prompt stream.
        let mut sessions = SessionServiceClient::with_interceptor(
            channel(p.addr).await,
            Bearer(Some(PROCESSOR_TOKEN.into())),
        )
        .send_compressed(encoding)
        .accept_compressed(encoding);
        let created = sessions
            .create_session(spb::CreateSessionRequest::default())
            .await
            .unwrap_or_else(|e| panic!("{name} CreateSession: {e}"));
        assert_eq!(encoding_of(created.metadata()).as_deref(), Some(name));
        let session = created.into_inner().session.unwrap();

        p.gateway.openai.push(reply("through the processor"));
        let prompt = sessions
            .prompt(e2e_tests::processor::prompt(&session.id, "hi"))
            .await
            .unwrap_or_else(|e| panic!("{name} Prompt: {e}"));
        assert_eq!(encoding_of(prompt.metadata()).as_deref(), Some(name));
        let mut prompt = prompt.into_inner();
        let mut streamed = String::new();
        while let Some(resp) = prompt.message().await.unwrap() {
            match resp.event.and_then(|e| e.event) {
                Some(spb::session_event::Event::PartDelta(d)) => streamed.push_str(&d.delta),
                Some(spb::session_event::Event::Done(_)) => break,
                _ => {}
            }
        }
        assert_eq!(streamed, "through the processor");
    }
}

/// `ListServices` over reflection v1.
async fn list_v1(channel: tonic::transport::Channel) -> Vec<String> {
    let mut client = refl::server_reflection_client::ServerReflectionClient::new(channel);
    let request = refl::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            refl::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let mut answers = client
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.message().await.unwrap().expect("an answer");
    let Some(refl::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answer.message_response
    else {
        panic!("not a service list: {answer:?}");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    names
}

/// `FileContainingSymbol` over reflection v1: how many files describe it, or the error code.
async fn file_of(channel: tonic::transport::Channel, symbol: &str) -> Result<usize, i32> {
    let mut client = refl::server_reflection_client::ServerReflectionClient::new(channel);
    let request = refl::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            refl::server_reflection_request::MessageRequest::FileContainingSymbol(symbol.into()),
        ),
    };
    let mut answers = client
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    // tonic's reflection ends the call with the status rather than answering an `ErrorResponse`; either counts.
    let answer = match answers.message().await {
        Ok(answer) => answer.expect("an answer"),
        Err(status) => return Err(status.code() as i32),
    };
    match answer.message_response {
        Some(refl::server_reflection_response::MessageResponse::FileDescriptorResponse(f)) => {
            Ok(f.file_descriptor_proto.len())
        }
        Some(refl::server_reflection_response::MessageResponse::ErrorResponse(e)) => {
            Err(e.error_code)
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_v1_lists_exactly_the_served_services() {
    let p = Product::start("").await;
    assert_eq!(
        list_v1(p.gateway.channel().await).await,
        expected(&[GATEWAY, KEYS])
    );
    assert_eq!(list_v1(channel(p.addr).await).await, expected(&[SESSIONS]));
    // Neither describes the other's service: a symbol it does not serve is NOT_FOUND (5).
    assert!(file_of(channel(p.addr).await, SESSIONS).await.is_ok());
    assert_eq!(file_of(channel(p.addr).await, GATEWAY).await, Err(5));
    assert!(file_of(p.gateway.channel().await, GATEWAY).await.is_ok());
    assert!(file_of(p.gateway.channel().await, KEYS).await.is_ok());
    assert_eq!(file_of(p.gateway.channel().await, SESSIONS).await, Err(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_watch_of_an_unknown_service_sends_service_unknown_and_stays_open() {
    let p = Product::start("").await;
    for (ch, own) in [
        (p.gateway.channel().await, GATEWAY),
        (channel(p.addr).await, SESSIONS),
    ] {
        let mut health = HealthClient::new(ch);
        let ask = |service: &str| HealthCheckRequest {
            service: service.into(),
        };
        let mut watch = health
            .watch(ask("no.such.Service"))
            .await
            .expect("Watch of an unknown service is not an error")
            .into_inner();
        let first = watch.message().await.unwrap().expect("a first status");
        assert_eq!(first.status, ServingStatus::ServiceUnknown as i32);
        // The call stays open (the service might appear later): no end of stream is ready.
        assert!(
            watch.message().now_or_never().is_none(),
            "the Watch call ended"
        );
        // Check keeps NOT_FOUND for an unknown service, as the protocol says; known services serve.
        let code = health
            .check(ask("no.such.Service"))
            .await
            .unwrap_err()
            .code();
        assert_eq!(code, tonic::Code::NotFound);
        let serving = health.check(ask(own)).await.unwrap().into_inner();
        assert_eq!(serving.status, ServingStatus::Serving as i32);
        let mut known = health.watch(ask(own)).await.unwrap().into_inner();
        let status = known.message().await.unwrap().unwrap();
        assert_eq!(status.status, ServingStatus::Serving as i32);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sees_v1alpha_reflection_and_sends_a_5_mib_prompt_with_the_documented_settings() {
    // The gateway's default request limit (32 MiB), not the harness's 1 MiB, and a context window that holds a
    // prompt of 3 MiB.
    let p = Product::start_all(
        "max_request_bytes = 33554432",
        "[models.\"openai/gpt-4o\"]\ncontext_window = 10000000\nmax_input_tokens = 10000000\n",
        e2e_tests::processor::ProcessorSetup::default(),
    )
    .await;
    p.gateway.openai.push(reply("read 5 MiB"));
    p.gateway.openai.push(reply("read 3 MiB"));
    let out = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/conventions_test.py");
    let output = tokio::process::Command::new(e2e_tests::clients::python3())
        .arg(script)
        .env("GATEWAY_ADDR", p.gateway.addr.to_string())
        .env("GATEWAY_TOKEN", TOKEN)
        .env("PROCESSOR_ADDR", p.addr.to_string())
        .env("PROCESSOR_TOKEN", PROCESSOR_TOKEN)
        .env("OUT_DIR", out.path())
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "python3 did not start ({e}); {}",
                e2e_tests::clients::INSTALL
            )
        });
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python failed{}:\n{stdout}\n{stderr}",
        e2e_tests::clients::missing_package(&stderr)
    );
    let found: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");

    let names = |key: &str| -> Vec<String> {
        serde_json::from_value(found[key]["services"].clone()).unwrap()
    };
    assert_eq!(names("gateway_reflection"), expected(&[GATEWAY, KEYS]));
    assert_eq!(names("processor_reflection"), expected(&[SESSIONS]));
    assert_eq!(
        found["gateway_reflection"]["methods"][GATEWAY],
        serde_json::json!([
            "CountTokens",
            "Embed",
            "Generate",
            "GetModel",
            "ListModels",
            "Stream"
        ])
    );
    assert!(
        found["processor_reflection"]["methods"][SESSIONS]
            .as_array()
            .is_some_and(|m| m.iter().any(|n| n == "Prompt")),
        "{found}"
    );

    assert_eq!(
        found["gateway_big_prompt"],
        serde_json::json!({"text": "read 5 MiB", "finish": "stop"})
    );
    assert_eq!(
        found["processor_big_prompt"]["code"], "RESOURCE_EXHAUSTED",
        "{found}"
    );
    assert!(
        found["processor_big_prompt"]["details"]
            .as_str()
            .is_some_and(|d| d.contains("parts")),
        "{found}"
    );
    let limit = 3 * 1024 * 1024 - 64;
    assert_eq!(found["processor_limit_prompt"]["echoed"], limit);
    assert_eq!(
        found["processor_limit_prompt"]["streamed"], "read 3 MiB",
        "{}",
        found["processor_limit_prompt"]["error"]
    );
    assert_eq!(
        found["processor_limit_prompt"]["stored"],
        serde_json::json!([limit, "read 3 MiB".len()])
    );
}

/// Both servers let one call send 64 KiB of its request ahead of their reading and a connection 1 MiB, so a request
/// of megabytes arrives in steps instead of one burst the connection's other calls wait behind;
/// `server.stream_window_bytes` raises the processor's as it does the gateway's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_servers_grant_one_call_64_kib_and_the_processor_takes_its_key() {
    let p = Product::start("").await;
    assert_eq!(
        windows::granted(p.gateway.addr).await,
        (65_535, 1024 * 1024)
    );
    assert_eq!(windows::granted(p.addr).await, (65_535, 1024 * 1024));
    let p = Product::start_setup(
        "",
        ProcessorSetup {
            server_lines: "stream_window_bytes = 2097152".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(windows::granted(p.addr).await, (2_097_152, 2_097_152));
}
