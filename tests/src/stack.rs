//! Both services as real child processes (the `gateway_replica` and `processor_replica` binaries), configured as
//! an operator configures them (a TOML file each and environment variables), in front of one fake provider: for
//! the tests of what the processes themselves emit (traces, metrics, logs). The conversation they run is the same
//! two-step one every time: the model lists the workspace with a tool, then answers.

use fake_provider::FakeProvider;
use llm_proto::sessions as spb;
use tokio::process::Command;

use crate::processor::{client_at, prompt, redis_url, text_reply, tool_call_reply};
use crate::service::{ServiceProcess, start_all};

/// What the gateway prints once it listens, before its address.
pub const GATEWAY_READY: &str = "llm-gateway listening on ";
/// What the processor prints once it listens, before its address.
pub const PROCESSOR_READY: &str = "session-processor listening on ";

/// What one test's stack looks like.
pub struct StackSetup<'a> {
    /// Names the test's Redis key prefix.
    pub label: &'a str,
    /// The gateway's whole configuration file.
    pub gateway_toml: String,
    /// The token callers present to the gateway (the processor among them).
    pub gateway_token: &'a str,
    /// The token callers present to the processor.
    pub processor_token: &'a str,
    /// Variables beyond the tokens, for each service.
    pub gateway_env: Vec<(&'a str, String)>,
    pub processor_env: Vec<(&'a str, String)>,
    /// Lines waited for beyond the listening one (e.g. where metrics are served), for each service; what follows
    /// them is in [`ServiceProcess::also`].
    pub gateway_ready: &'a [&'a str],
    pub processor_ready: &'a [&'a str],
}

/// Both services running, the processor on the gateway, a workspace `w` holding one file.
pub struct Stack {
    pub gateway: ServiceProcess,
    pub processor: ServiceProcess,
    processor_token: String,
    /// The workspace root and the configuration files.
    _dir: tempfile::TempDir,
}

/// The OpenTelemetry variables of a service exporting spans to `endpoint` (every 50 ms) under `name`.
pub fn otel_env(endpoint: String, name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_BSP_SCHEDULE_DELAY", "50".to_string()),
        ("OTEL_SERVICE_NAME", name.to_string()),
    ]
}

/// Queues the provider's two answers of the conversation: a call of the `list` tool (100 tokens in, 10 out), then
/// the answer (200 in, 5 out).
pub fn push_list_files(fake: &FakeProvider) {
    fake.push(tool_call_reply(
        "chatcmpl-list",
        "call_list",
        "list",
        &["{}"],
        (100, 10),
    ));
    fake.push(text_reply("chatcmpl-answer", &["One ", "file."], (200, 5)));
}

async fn spawn(
    bin: &str,
    config: &std::path::Path,
    env: &[(&str, String)],
    ready: &[&str],
) -> ServiceProcess {
    let mut cmd = Command::new(bin);
    cmd.arg(config);
    for (k, v) in env {
        cmd.env(k, v);
    }
    start_all(cmd, ready)
        .await
        .unwrap_or_else(|e| panic!("{bin} starts: {e}"))
}

impl Stack {
    /// Starts the gateway (the binary `gateway`), then the processor (`processor`) on it.
    pub async fn start(setup: StackSetup<'_>, gateway: &str, processor: &str) -> Stack {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("ws/w")).expect("workspace");
        std::fs::write(dir.path().join("ws/w/a.txt"), "a").expect("workspace file");
        let gw_config = dir.path().join("gateway.toml");
        std::fs::write(&gw_config, &setup.gateway_toml).expect("gateway config");
        let mut gw_env = setup.gateway_env;
        gw_env.push(("GATEWAY_AUTH_TOKENS", setup.gateway_token.to_string()));
        // The key the fake providers expect a request to carry, for configurations that name it.
        gw_env.push(("E2E_OPENAI_KEY", crate::OPENAI_KEY.to_string()));
        let gw_ready = [&[GATEWAY_READY], setup.gateway_ready].concat();
        let gateway = spawn(gateway, &gw_config, &gw_env, &gw_ready).await;

        let sp_config = dir.path().join("processor.toml");
        let prefix = format!("e2e:{}:", session_processor::ids::new(setup.label));
        std::fs::write(
            &sp_config,
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\n[gateway]\nurl = \"http://{}\"\n[redis]\nprefix = \"{prefix}\"\n[titles]\nenabled = false\n[agents.default]\nmodel = \"openai/gpt-4o\"\ntools = [\"list\"]\n",
                gateway.addr
            ),
        )
        .expect("processor config");
        let mut sp_env = setup.processor_env;
        sp_env.extend([
            ("PROCESSOR_AUTH_TOKENS", setup.processor_token.to_string()),
            ("GATEWAY_TOKEN", setup.gateway_token.to_string()),
            ("REDIS_URL", redis_url()),
            (
                "PROCESSOR_WORKSPACE_ROOT",
                dir.path().join("ws").to_string_lossy().to_string(),
            ),
        ]);
        let sp_ready = [&[PROCESSOR_READY], setup.processor_ready].concat();
        let processor = spawn(processor, &sp_config, &sp_env, &sp_ready).await;
        Stack {
            gateway,
            processor,
            processor_token: setup.processor_token.to_string(),
            _dir: dir,
        }
    }

    /// Asks "How many files?" in a new session on workspace `w`, with `traceparent` as the caller's trace context
    /// when given: the session's id, and every response of the prompt's stream up to its `done`.
    pub async fn ask_how_many_files(
        &self,
        traceparent: Option<&str>,
    ) -> (String, Vec<spb::PromptResponse>) {
        let mut c = client_at(&self.processor.addr, &self.processor_token).await;
        let s = c
            .create_session(spb::CreateSessionRequest {
                workspace: "w".into(),
                ..Default::default()
            })
            .await
            .expect("create session")
            .into_inner()
            .session
            .expect("session");
        let mut req = tonic::Request::new(prompt(&s.id, "How many files?"));
        if let Some(t) = traceparent {
            req.metadata_mut()
                .insert("traceparent", t.parse().expect("traceparent"));
        }
        let mut stream = c.prompt(req).await.expect("prompt").into_inner();
        let mut responses = Vec::new();
        while let Some(r) = stream.message().await.expect("prompt stream") {
            let done = matches!(
                r.event.as_ref().and_then(|e| e.event.as_ref()),
                Some(spb::session_event::Event::Done(_))
            );
            responses.push(r);
            if done {
                return (s.id, responses);
            }
        }
        panic!("the prompt stream ended without done: {responses:?}");
    }
}
