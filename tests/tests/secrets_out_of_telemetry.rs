//! Secrets never reach what operators read: both services run as processes at `RUST_LOG=debug` with OTLP on, through
//! a two-step tool conversation whose first provider attempt is refused with a body echoing the key (as providers'
//! "invalid key" errors do), with distinctive provider keys and caller tokens. None of them appears in any log line,
//! span (name, attribute, event or status) or metric of either service, in any letter case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::otlp::OtlpReceiver;
use e2e_tests::service::free_port;
use e2e_tests::stack::{Stack, StackSetup, otel_env, push_list_files};
use e2e_tests::{Bearer, scrape_metrics};
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
    push_list_files(&fake);
    let env = |name: &str, metrics: (&'static str, String)| {
        let mut env = otel_env(otlp.endpoint(), name);
        env.extend([("RUST_LOG", "debug".to_string()), metrics]);
        env
    };
    let gw_metrics = format!("127.0.0.1:{}", free_port());
    let sp_metrics = format!("127.0.0.1:{}", free_port());
    let stack = Stack::start(
        StackSetup {
            label: "secrets",
            gateway_toml: format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n[retry]\nbase_delay_ms = 5\n[providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"SECRET_TEST_OPENAI_KEY\"\n",
                fake.base_url()
            ),
            gateway_token: GATEWAY_TOKEN,
            processor_token: PROCESSOR_TOKEN,
            gateway_env: [
                env("llm-gateway", ("GATEWAY_METRICS_LISTEN", gw_metrics.clone())),
                vec![("SECRET_TEST_OPENAI_KEY", PROVIDER_KEY.to_string())],
            ]
            .concat(),
            processor_env: env(
                "session-processor",
                ("PROCESSOR_METRICS_LISTEN", sp_metrics.clone()),
            ),
            gateway_ready: &[],
            processor_ready: &[],
        },
        env!("CARGO_BIN_EXE_gateway_replica"),
        env!("CARGO_BIN_EXE_processor_replica"),
    )
    .await;
    let (gw, sp) = (&stack.gateway, &stack.processor);
    let (session_id, responses) = stack.ask_how_many_files(None).await;
    let mut replies: Vec<String> = responses.iter().map(|r| format!("{r:?}")).collect();
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
    .get_session(spb::GetSessionRequest { session_id })
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
