//! Secrets never reach what operators read: both services run as processes at `RUST_LOG=debug` with OTLP on, through
//! a two-step tool conversation whose first provider attempt is refused with a body echoing the key (as providers'
//! "invalid key" errors do), with distinctive provider keys and caller tokens. None of them appears in any log line,
//! span (name, attribute, event or status) or metric of either service, in any letter case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::otlp::OtlpReceiver;
use e2e_tests::processor::{prompt, redis_url};
use e2e_tests::service::{ServiceProcess, free_port};
use e2e_tests::{Bearer, scrape_metrics};
use fake_provider::openai_sse::ChatStream;
use fake_provider::{FakeProvider, Reply};
use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;

const PROVIDER_KEY: &str = "sk-proj-Zx81SecretProviderKeyQv93";
const GATEWAY_TOKEN: &str = "gw-caller-Tq55SecretGatewayTokenLm20";
const PROCESSOR_TOKEN: &str = "sp-caller-Wd17SecretProcessorTokenRk64";
const SECRETS: [&str; 3] = [PROVIDER_KEY, GATEWAY_TOKEN, PROCESSOR_TOKEN];

/// The distinctive middle of each secret, lowercased: a secret printed whole, cut, or case-folded still matches.
fn cores() -> Vec<String> {
    SECRETS
        .iter()
        .map(|s| s[8..s.len() - 4].to_lowercase())
        .collect()
}

/// Every secret core that `text` contains, case-insensitively.
fn leaks(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    cores().into_iter().filter(|c| lower.contains(c)).collect()
}

async fn spawn(
    bin: &str,
    config: &std::path::Path,
    envs: &[(&str, String)],
    ready: &str,
) -> ServiceProcess {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg(config);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    e2e_tests::service::start(cmd, ready)
        .await
        .expect("the service starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_or_token_appears_in_logs_spans_or_metrics() {
    let otlp = OtlpReceiver::start().await;
    let fake = FakeProvider::start().await.unwrap();
    // The first attempt is refused with the key echoed back (a retried 429), then a tool call, then the answer.
    fake.push(
        Reply::json(
            429,
            format!(
                "{{\"error\":{{\"message\":\"Rate limit reached for key {PROVIDER_KEY}.\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}}}"
            ),
        )
        .header("retry-after-ms", "10"),
    );
    fake.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-s1")
            .tool_call("call_s1", "list", &["{}"])
            .finish("tool_calls", Some((100, 10))),
    ));
    fake.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-s2")
            .text(&["One ", "file."])
            .finish("stop", Some((200, 5))),
    ));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws/w")).unwrap();
    std::fs::write(dir.path().join("ws/w/a.txt"), "a").unwrap();
    let common = |name: &str| {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50".to_string()),
            ("OTEL_SERVICE_NAME", name.to_string()),
            ("RUST_LOG", "debug".to_string()),
        ]
    };

    let gw_config = dir.path().join("gateway.toml");
    std::fs::write(
        &gw_config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[retry]\nbase_delay_ms = 5\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"SECRET_TEST_OPENAI_KEY\"\n",
            fake.base_url()
        ),
    )
    .unwrap();
    let gw_metrics = format!("127.0.0.1:{}", free_port());
    let mut gw_env = common("llm-gateway");
    gw_env.extend([
        ("GATEWAY_AUTH_TOKENS", GATEWAY_TOKEN.to_string()),
        ("SECRET_TEST_OPENAI_KEY", PROVIDER_KEY.to_string()),
        ("GATEWAY_METRICS_LISTEN", gw_metrics.clone()),
    ]);
    let gw = spawn(
        env!("CARGO_BIN_EXE_gateway_replica"),
        &gw_config,
        &gw_env,
        "llm-gateway listening on ",
    )
    .await;

    let sp_config = dir.path().join("processor.toml");
    let prefix = format!("e2e:{}:", session_processor::ids::new("secrets"));
    std::fs::write(
        &sp_config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[gateway]\nurl = \"http://{}\"\n[redis]\nprefix = \"{prefix}\"\n[titles]\nenabled = false\n[agents.default]\nmodel = \"openai/gpt-4o\"\ntools = [\"list\"]\n",
            gw.addr
        ),
    )
    .unwrap();
    let sp_metrics = format!("127.0.0.1:{}", free_port());
    let mut sp_env = common("session-processor");
    sp_env.extend([
        ("PROCESSOR_AUTH_TOKENS", PROCESSOR_TOKEN.to_string()),
        ("GATEWAY_TOKEN", GATEWAY_TOKEN.to_string()),
        ("REDIS_URL", redis_url()),
        ("PROCESSOR_METRICS_LISTEN", sp_metrics.clone()),
        (
            "PROCESSOR_WORKSPACE_ROOT",
            dir.path().join("ws").to_string_lossy().to_string(),
        ),
    ]);
    let sp = spawn(
        env!("CARGO_BIN_EXE_processor_replica"),
        &sp_config,
        &sp_env,
        "session-processor listening on ",
    )
    .await;

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", sp.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c =
        SessionServiceClient::with_interceptor(channel, Bearer(Some(PROCESSOR_TOKEN.into())));
    let s = c
        .create_session(spb::CreateSessionRequest {
            workspace: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let mut stream = c
        .prompt(prompt(&s.id, "How many files?"))
        .await
        .unwrap()
        .into_inner();
    let mut replies = Vec::new();
    while let Some(ev) = stream.message().await.unwrap() {
        let done = matches!(
            ev.event.as_ref().and_then(|e| e.event.as_ref()),
            Some(spb::session_event::Event::Done(_))
        );
        replies.push(format!("{ev:?}"));
        if done {
            break;
        }
    }
    // A call with a wrong token is refused without echoing what was sent or what was expected.
    let wrong = SessionServiceClient::with_interceptor(
        tonic::transport::Endpoint::from_shared(format!("http://{}", sp.addr))
            .unwrap()
            .connect()
            .await
            .unwrap(),
        Bearer(Some(format!("{PROCESSOR_TOKEN}x"))),
    )
    .clone()
    .get_session(spb::GetSessionRequest {
        session_id: s.id.clone(),
    })
    .await
    .unwrap_err();
    replies.push(format!("{wrong:?}"));

    // The key was really used: every provider request carried it.
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "refused attempt, tool step, answer");
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {PROVIDER_KEY}").as_str())
        );
    }
    let spans = otlp
        .wait_until(Duration::from_secs(20), |s| {
            s.iter().filter(|s| s.name.starts_with("step ")).count() >= 2
                && s.iter().filter(|s| s.name == "chat openai/gpt-4o").count() >= 2
                && s.iter().any(|s| s.name == "invoke_agent")
        })
        .await;
    let metrics = [
        scrape_metrics(gw_metrics.parse().unwrap()).await,
        scrape_metrics(sp_metrics.parse().unwrap()).await,
    ];

    let mut found = Vec::new();
    for (what, lines) in [("gateway log", gw.lines()), ("processor log", sp.lines())] {
        assert!(
            lines.iter().any(|l| l.contains("DEBUG")),
            "{what} was not at debug level"
        );
        for line in lines {
            for leak in leaks(&line) {
                found.push(format!("{what}: {leak} in {line}"));
            }
        }
    }
    for span in &spans {
        for leak in leaks(&format!("{} {:?}", span.name, span.raw)) {
            found.push(format!("span {} of {}: {leak}", span.name, span.service));
        }
    }
    for (what, text) in ["gateway metrics", "processor metrics"]
        .iter()
        .zip(&metrics)
    {
        for leak in leaks(text) {
            found.push(format!("{what}: {leak}"));
        }
    }
    for reply in &replies {
        for leak in leaks(reply) {
            found.push(format!("reply to the caller: {leak} in {reply}"));
        }
    }
    assert!(found.is_empty(), "secrets leaked:\n{}", found.join("\n"));
}
