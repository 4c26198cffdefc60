//! Google credentials never reach what operators read: the gateway runs as a process at `RUST_LOG=debug` with OTLP
//! on, serving a Vertex AI model with a service-account key; its first attempt is refused with a body echoing the
//! access token (a retried 429), the second succeeds. Neither the access token, nor the private key, nor the signed
//! JWT appears in any log line, span, metric or reply, in any letter case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::leaks::{found_in, replica_config, scan, traced_gateway};
use e2e_tests::otlp::OtlpReceiver;
use e2e_tests::vertex::{GoogleFakes, key_file};
use e2e_tests::{Bearer, generation, scrape_metrics};
use fake_provider::{GoogleTokens, Reply};
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;

const GATEWAY_TOKEN: &str = "gw-caller-Vx42SecretGatewayTokenPq77";

/// Distinctive, lower-cased pieces of every credential in play: the issued tokens, a run of the private key's
/// base64, and the start of every JWT the gateway signs (its header is fixed by the key id).
fn cores(tokens: &GoogleTokens) -> Vec<String> {
    let key: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(key_file("service_account.json")).unwrap())
            .unwrap();
    let pem = key["private_key"].as_str().unwrap();
    let key_run = pem.lines().nth(5).unwrap()[..40].to_lowercase();
    let mut cores: Vec<String> = tokens
        .issued()
        .iter()
        .map(|t| t.trim_start_matches("ya29.").to_lowercase())
        .collect();
    assert!(!cores.is_empty(), "no token was issued");
    cores.push(key_run);
    // base64url of `{"alg":"RS256","typ":"JWT","kid":"3f9c2a7d…`: any assertion, whole or cut, starts with it.
    cores.push("eyjhbgcioijsuzi1niisinr5cci6ikpxvcisimtpzci6ijnmowmy".into());
    cores.push(GATEWAY_TOKEN[10..GATEWAY_TOKEN.len() - 4].to_lowercase());
    cores
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_google_credential_appears_in_logs_spans_metrics_or_replies() {
    let otlp = OtlpReceiver::start().await;
    let g = GoogleFakes::start().await;
    let (tokens, oauth, fake) = (&g.tokens, &g.oauth, &g.vertex);
    fake.push(Reply::fn_reply(|req| {
        let bearer = req.header("authorization").unwrap_or_default().to_string();
        let body = serde_json::json!({"error": {
            "code": 429,
            "message": format!("Quota exceeded for the caller {bearer}"),
            "status": "RESOURCE_EXHAUSTED",
        }});
        Reply::json(429, body.to_string()).header("retry-after", "0")
    }));
    fake.push(Reply::fixture("gemini/text.sse"));

    let dir = tempfile::tempdir().unwrap();
    let provider = g.provider("vertex", "global", &g.key_settings("service_account.json"));
    let config = replica_config(dir.path(), &provider);
    let (gw, metrics_addr) = traced_gateway(
        env!("CARGO_BIN_EXE_gateway_replica"),
        &config,
        &otlp,
        GATEWAY_TOKEN,
        &[],
    )
    .await;

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", gw.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client =
        GatewayServiceClient::with_interceptor(channel, Bearer(Some(GATEWAY_TOKEN.into())));
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(generation("vertex/gemini-2.5-flash", "Say hello")),
        })
        .await
        .unwrap()
        .into_inner();
    let mut replies = Vec::new();
    while let Some(ev) = stream.message().await.unwrap() {
        replies.push(format!("{ev:?}"));
    }
    assert!(
        replies.last().unwrap().contains("StepFinish"),
        "{replies:#?}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "the refused attempt, then the answer");

    let spans = otlp
        .wait_until(Duration::from_secs(20), |s| {
            s.iter().any(|s| s.name == "chat vertex/gemini-2.5-flash")
        })
        .await;
    let metrics = scrape_metrics(metrics_addr.parse().unwrap()).await;
    let cores = cores(tokens);
    let leaks = |text: &str| found_in(&cores, text);
    // The pieces searched for are the real ones: the provider saw the token, the token endpoint the JWT.
    assert!(!leaks(requests[0].header("authorization").unwrap()).is_empty());
    assert!(!leaks(&String::from_utf8_lossy(&oauth.requests()[0].body)).is_empty());
    let found = scan(&cores, &gw.lines(), &spans, &metrics, &replies);
    assert!(
        found.is_empty(),
        "credentials leaked:\n{}",
        found.join("\n")
    );
}
