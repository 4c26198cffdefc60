//! Transport security with certificates generated per test: llm-gateway and session-processor serving mutual TLS,
//! the processor reaching the gateway over mutual TLS and a TLS-only Redis as an ACL user (with a client
//! certificate), a prompt through all of it, and clients without a (trusted) certificate refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::processor::{PROCESSOR_TOKEN, create_session, messages, prompt, prompt_until_done};
use e2e_tests::service::{ServiceProcess, tls_redis};
use e2e_tests::{Bearer, Harness, TOKEN};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use service_kit::test_certs::TestPki;
use service_kit::tls::{ClientTls, ClientTlsFiles};
use session_processor::engine::gateway_client_balanced;
use session_processor::gateway_pool::Balance;
use tonic::transport::{Channel, Endpoint};

const REDIS_PASSWORD: &str = "redis-acl-password-7c1e";

/// A channel to `https://localhost:{port}` with `files`; any failure (handshake included) as text.
async fn tls_channel(port: u16, files: &ClientTlsFiles) -> Result<Channel, String> {
    let tls = ClientTls::load(files).map_err(|e| e.to_string())?;
    Endpoint::from_shared(format!("https://localhost:{port}"))
        .map_err(|e| e.to_string())?
        .tls_config(tls.tonic_config(None))
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("{e:?}"))
}

/// A health check over `files`: `Ok` only when the handshake and the call succeed. (Under TLS 1.3 a server that
/// rejects the client's certificate says so after the client's side of the handshake, so the call is what fails.)
async fn health(port: u16, files: &ClientTlsFiles) -> Result<(), String> {
    let channel = tls_channel(port, files).await?;
    let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
    client
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
}

/// The ways a client can come without a certificate the server accepts.
fn refused_clients(pki: &TestPki) -> Vec<(&'static str, ClientTlsFiles)> {
    vec![
        ("no certificate", pki.client(false)),
        (
            "a certificate from an untrusted CA",
            ClientTlsFiles {
                cert_file: Some(pki.rogue_client_cert.clone()),
                key_file: Some(pki.rogue_client_key.clone()),
                ..pki.client(false)
            },
        ),
    ]
}

async fn plaintext_fails(port: u16) {
    let plain = Endpoint::from_shared(format!("http://127.0.0.1:{port}")).unwrap();
    let result = match plain
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
    {
        Err(_) => Err(()),
        Ok(channel) => tonic_health::pb::health_client::HealthClient::new(channel)
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await
            .map(|_| ())
            .map_err(|_| ()),
    };
    assert!(
        result.is_err(),
        "a plaintext client was served on a TLS port"
    );
}

fn tls_table(pki: &TestPki) -> String {
    format!("tls = {}", pki.server_toml(true))
}

async fn processor(
    config: &std::path::Path,
    dir: &std::path::Path,
    port: u16,
    password: &str,
) -> Result<ServiceProcess, String> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_processor_replica"));
    cmd.arg(config)
        .env("PROCESSOR_AUTH_TOKENS", PROCESSOR_TOKEN)
        .env("GATEWAY_TOKEN", TOKEN)
        .env("REDIS_URL", format!("rediss://localhost:{port}/"))
        .env("REDIS_PASSWORD", password)
        .env("PROCESSOR_WORKSPACE_ROOT", dir);
    e2e_tests::service::start(cmd, "session-processor listening on ").await
}

fn processor_config(dir: &std::path::Path, pki: &TestPki, gateway_port: u16) -> std::path::PathBuf {
    let prefix = format!("e2e:{}:", session_processor::ids::new("tls"));
    let client = pki.client_toml(true);
    let config = dir.join("processor.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n{}\n\
             [gateway]\nurl = \"https://localhost:{gateway_port}\"\n\
             tls = {client}\n\
             [redis]\nprefix = \"{prefix}\"\nusername = \"processor\"\ntls = {client}\n\
             [titles]\nenabled = false\n[agents.default]\nmodel = \"openai/gpt-4o\"\n",
            tls_table(pki)
        ),
    )
    .unwrap();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_services_over_mutual_tls_and_redis_over_tls_with_an_acl_user() {
    service_kit::tls::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let pki = service_kit::test_certs::generate(dir.path());

    // The gateway serves mutual TLS only.
    let gateway = Harness::start_custom(&tls_table(&pki), "").await;
    let gateway_port = gateway.addr.port();
    health(gateway_port, &pki.client(true))
        .await
        .expect("a client with a certificate is served");
    for (what, files) in refused_clients(&pki) {
        assert!(
            health(gateway_port, &files).await.is_err(),
            "gateway served a client with {what}"
        );
    }
    plaintext_fails(gateway_port).await;
    // Balanced over the resolved addresses, the certificate is still checked against the host name.
    gateway
        .openai
        .set_fallback(Reply::fixture("openai_chat/text.sse"));
    let mut balanced = gateway_client_balanced(
        &format!("https://localhost:{gateway_port}"),
        TOKEN,
        Balance::Dns {
            interval: Duration::from_millis(200),
        },
        Some(ClientTls::load(&pki.client(true)).unwrap()),
    )
    .unwrap();
    let response = balanced
        .generate(llm_proto::gateway::GenerateRequest {
            generation: Some(e2e_tests::generation("openai/gpt-4o", "hi")),
        })
        .await
        .expect("a generation over TLS with DNS balancing")
        .into_inner();
    assert!(!response.output.is_empty());

    // Redis speaks only TLS, wants client certificates and knows only the `processor` user.
    let acl = format!("processor on >{REDIS_PASSWORD} ~* &* +@all");
    let (_redis, redis_port) = tls_redis(&pki, &[&acl]).await;

    let config = processor_config(dir.path(), &pki, gateway_port);
    let processor = processor(&config, dir.path(), redis_port, REDIS_PASSWORD)
        .await
        .expect("processor starts");
    let port: u16 = processor.addr.rsplit(':').next().unwrap().parse().unwrap();
    for (what, files) in refused_clients(&pki) {
        assert!(
            health(port, &files).await.is_err(),
            "processor served a client with {what}"
        );
    }
    plaintext_fails(port).await;

    // A prompt: caller → processor (mTLS) → gateway (mTLS) → fake provider, stored in Redis over TLS.
    let channel = tls_channel(port, &pki.client(true)).await.unwrap();
    let mut client =
        SessionServiceClient::with_interceptor(channel, Bearer(Some(PROCESSOR_TOKEN.into())));
    let session = create_session(&mut client, spb::CreateSessionRequest::default()).await;
    gateway.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-tls")
            .text(&["Over ", "TLS."])
            .finish("stop", Some((10, 3))),
    ));
    prompt_until_done(&mut client, prompt(&session.id, "hello")).await;
    let all = messages(&mut client, &session.id).await;
    let answer: String = all
        .iter()
        .filter(|m| m.role() == spb::Role::Assistant)
        .flat_map(|m| &m.parts)
        .filter_map(|p| match &p.kind {
            Some(spb::part::Kind::Text(t)) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answer, "Over TLS.");
    let lines = processor.lines().join("\n");
    assert!(
        !lines.contains(REDIS_PASSWORD),
        "the Redis password was logged: {lines}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_redis_password_stops_the_processor_without_printing_it() {
    service_kit::tls::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let pki = service_kit::test_certs::generate(dir.path());
    let acl = format!("processor on >{REDIS_PASSWORD} ~* &* +@all");
    let (_redis, redis_port) = tls_redis(&pki, &[&acl]).await;
    let config = processor_config(dir.path(), &pki, 1);
    let wrong = "not-the-password-93d1";
    let printed = match processor(&config, dir.path(), redis_port, wrong).await {
        Ok(_) => panic!("the processor started with a wrong Redis password"),
        Err(printed) => printed,
    };
    assert!(
        printed.contains("Password authentication failed"),
        "{printed}"
    );
    assert!(
        !printed.contains(wrong) && !printed.contains(REDIS_PASSWORD),
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_check_validates_the_tls_files() {
    let dir = tempfile::tempdir().unwrap();
    let pki = service_kit::test_certs::generate(dir.path());
    let check = |cert: &std::path::Path, key: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gateway_main"))
            .arg("--check")
            .env("GATEWAY_AUTH_TOKENS", TOKEN)
            .env("GATEWAY_TLS_CERT_FILE", cert)
            .env("GATEWAY_TLS_KEY_FILE", key)
            .env("GATEWAY_TLS_CLIENT_CA_FILE", &pki.ca)
            .env_remove("GATEWAY_CONFIG")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .unwrap()
    };
    let ok = check(&pki.server_cert, &pki.server_key);
    let stderr = String::from_utf8_lossy(&ok.stderr);
    assert!(
        ok.status.success() && stderr.contains("mutual TLS"),
        "{stderr}"
    );
    let bad = check(&pki.server_cert, &pki.client_key);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "{stderr}");
    assert!(
        stderr.contains("server.tls.key_file") && stderr.contains("does not fit"),
        "{stderr}"
    );
}
