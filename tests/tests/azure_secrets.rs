//! Azure credentials never reach what operators read: the gateway runs as a process at `RUST_LOG=debug` with OTLP
//! on, serving one Azure OpenAI provider with the resource key and one with Entra ID tokens. Each provider's first
//! attempt is refused with a 429 whose body echoes the credential it carried (retried), the second succeeds; then a
//! stream fails after output with an error frame echoing the token. Neither the key, nor the client secret, nor
//! any issued token appears in any log line, span, metric or reply, in any letter case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::azure::{AZURE_KEY_ENV, AzureFakes, ENTRA_SECRET_ENV};
use e2e_tests::leaks::{found_in, replica_config, scan, traced_gateway};
use e2e_tests::otlp::OtlpReceiver;
use e2e_tests::{Bearer, generation, scrape_metrics};
use fake_provider::Reply;
use fake_provider::azure::{TEST_API_KEY, TEST_CLIENT_SECRET};
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;

const GATEWAY_TOKEN: &str = "gw-caller-Az42SecretGatewayTokenQm88";

/// A 429 whose body quotes the credential the request carried (`api-key` or the bearer token).
fn echoing_429() -> Reply {
    Reply::fn_reply(|req| {
        let credential = req
            .header("api-key")
            .or(req.header("authorization"))
            .unwrap_or_default()
            .to_string();
        let body = serde_json::json!({"error": {
            "code": "429",
            "message": format!("Requests with the credential {credential} have exceeded the rate limit. Please retry after 0 seconds."),
        }});
        Reply::json(429, body.to_string()).header("retry-after-ms", "0")
    })
}

/// Distinctive, lower-cased pieces of every credential in play: the key, the client secret, each issued token's
/// claims and signature segments, and the caller's token.
fn cores(a: &AzureFakes) -> Vec<String> {
    let mut cores = vec![
        TEST_API_KEY.to_lowercase(),
        TEST_CLIENT_SECRET.to_lowercase(),
        GATEWAY_TOKEN[10..GATEWAY_TOKEN.len() - 4].to_lowercase(),
    ];
    let tokens = a.entra.issued();
    assert!(!tokens.is_empty(), "no token was issued");
    for t in tokens {
        cores.extend(t.split('.').skip(1).map(str::to_lowercase));
    }
    cores
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_azure_credential_appears_in_logs_spans_metrics_or_replies() {
    let otlp = OtlpReceiver::start().await;
    let a = AzureFakes::start().await;
    a.azure.push(echoing_429());
    a.azure.push(Reply::fixture("azure_chat/text.sse"));
    a.azure.push(echoing_429());
    a.azure.push(Reply::fixture("azure_chat/text.sse"));
    a.azure.push(Reply::fn_reply(|req| {
        let bearer = req.header("authorization").unwrap_or_default().to_string();
        let text = std::fs::read_to_string(format!(
            "{}/../shared/fake-provider/fixtures/azure_chat/error_after_output.sse",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
        .replace("Sorry about that!", &format!("Sorry about that, {bearer}!"));
        Reply::sse(text)
    }));

    let dir = tempfile::tempdir().unwrap();
    let providers = format!(
        "{}{}",
        a.key_provider(
            "azure",
            "azure_chat",
            "api = \"deployments\", api_version = \"2024-10-21\""
        ),
        a.entra_provider("aoai", "azure_chat", "api = \"v1\"", &a.entra_settings(""))
    );
    let config = replica_config(dir.path(), &providers);
    let (gw, metrics_addr) = traced_gateway(
        env!("CARGO_BIN_EXE_gateway_replica"),
        &config,
        &otlp,
        GATEWAY_TOKEN,
        &[
            (AZURE_KEY_ENV, TEST_API_KEY),
            (ENTRA_SECRET_ENV, TEST_CLIENT_SECRET),
        ],
    )
    .await;

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client =
        GatewayServiceClient::with_interceptor(channel, Bearer(Some(GATEWAY_TOKEN.into())));
    let mut replies = Vec::new();
    for model in ["azure/prod-4o", "aoai/prod-4o", "aoai/prod-4o"] {
        let mut stream = client
            .stream(pb::StreamRequest {
                generation: Some(generation(model, "Say hello")),
            })
            .await
            .unwrap()
            .into_inner();
        while let Some(ev) = stream.message().await.unwrap() {
            replies.push(format!("{ev:?}"));
        }
    }
    assert!(
        replies.iter().filter(|r| r.contains("StepFinish")).count() == 2
            && replies.last().unwrap().contains("Error"),
        "{replies:#?}"
    );
    let requests = a.azure.requests();
    assert_eq!(
        requests.len(),
        5,
        "two refused attempts, two answers, one broken stream"
    );
    assert_eq!(a.azure.rejections(), vec![]);

    let spans = otlp
        .wait_until(Duration::from_secs(20), |s| {
            s.iter().filter(|s| s.name.starts_with("chat ")).count() >= 3
        })
        .await;
    let metrics = scrape_metrics(metrics_addr.parse().unwrap()).await;
    let cores = cores(&a);
    let leaks = |text: &str| found_in(&cores, text);
    // The pieces searched for are the real ones: the resource saw the key and the token, Entra the secret.
    assert!(!leaks(requests[0].header("api-key").unwrap()).is_empty());
    assert!(!leaks(requests[2].header("authorization").unwrap()).is_empty());
    assert!(!leaks(&String::from_utf8_lossy(&a.login.requests()[0].body)).is_empty());
    let found = scan(&cores, &gw.lines(), &spans, &metrics, &replies);
    assert!(
        found.is_empty(),
        "credentials leaked:\n{}",
        found.join("\n")
    );
}
