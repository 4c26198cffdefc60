//! SIGHUP on the real `llm-gateway` process: the configuration file is read again and applied without a restart (a
//! new model resolves and serves, a new caller token is accepted), and a file that fails validation is logged, naming
//! the key, while the running configuration stays in force.
//!
//! Linux only: the test waits for the process to catch SIGHUP (`/proc/<pid>/status`) before sending it, since a
//! SIGHUP that arrives first would end the process.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use e2e_tests::{Client, OPENAI_KEY, SHORT, TOKEN, generation, render};
use fake_provider::{FakeProvider, Reply};
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tonic::Code;

/// The caller token the reloaded file adds.
const ROTATED: &str = "rotated-caller-token-0123456789";
/// The model the reloaded file adds.
const NEW_MODEL: &str = "openai/from-sighup";
/// Pause between two polls of a condition that has no signal of its own (bounded by [`SHORT`]).
const POLL: Duration = Duration::from_millis(10);

/// The gateway's configuration file: one OpenAI-compatible provider at `fake`, with `server` lines in `[server]`
/// and `extra` TOML appended.
fn config(fake: &FakeProvider, server: &str, extra: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{server}\n\n\
         [providers.openai]\nprotocol = \"openai_chat\"\nbase_url = \"{}/v1\"\napi_key_env = \"E2E_OPENAI_KEY\"\n\n\
         {extra}\n",
        fake.base_url()
    )
}

/// A catalog entry for `model`.
fn model_entry(model: &str) -> String {
    format!("[models.\"{model}\"]\ncontext_window = 8000\nmax_output_tokens = 512\n")
}

/// The `llm-gateway` binary running as a child process, with its JSON log lines.
struct Gateway {
    child: Child,
    addr: String,
    logs: mpsc::UnboundedReceiver<serde_json::Value>,
    /// Every log line read so far, for failure messages.
    seen: Vec<String>,
}

impl Gateway {
    /// Starts the binary on `config` and waits until it listens and catches SIGHUP.
    async fn start(config: &Path) -> Gateway {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gateway_main"))
            .arg("--config")
            .arg(config)
            .env("GATEWAY_AUTH_TOKENS", TOKEN)
            .env("E2E_OPENAI_KEY", OPENAI_KEY)
            .env("LOG_FORMAT", "json")
            .env("RUST_LOG", "info")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start llm-gateway");
        let (tx, logs) = mpsc::unbounded_channel();
        let mut lines = BufReader::new(child.stderr.take().expect("stderr piped")).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let json = serde_json::from_str(&line)
                    .unwrap_or_else(|_| serde_json::json!({ "fields": { "message": line } }));
                if tx.send(json).is_err() {
                    break;
                }
            }
        });
        let mut gateway = Gateway {
            child,
            addr: String::new(),
            logs,
            seen: Vec::new(),
        };
        let listening = gateway.log("llm-gateway listening").await;
        gateway.addr = listening["addr"].as_str().expect("addr").to_string();
        gateway.wait_for_sighup_handler().await;
        gateway
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the gateway is running")
    }

    /// Waits until the reload task has installed its SIGHUP handler.
    async fn wait_for_sighup_handler(&self) {
        e2e_tests::service::wait_until_caught(self.pid(), 1).await;
    }

    /// Sends SIGHUP to the process.
    fn hangup(&self) {
        let status = std::process::Command::new("kill")
            .args(["-s", "HUP", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s HUP failed: {status}");
    }

    /// The fields of the next log line whose message is `message` (earlier lines are skipped).
    async fn log(&mut self, message: &str) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + SHORT;
        loop {
            let line = tokio::time::timeout_at(deadline, self.logs.recv())
                .await
                .unwrap_or_else(|_| panic!("no log {message:?} in time; seen: {:#?}", self.seen))
                .unwrap_or_else(|| panic!("the gateway exited; seen: {:#?}", self.seen));
            self.seen.push(line.to_string());
            if line["fields"]["message"] == message {
                return line["fields"].clone();
            }
        }
    }

    /// A client presenting `token`.
    async fn client(&self, token: &str) -> Client {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect to the gateway");
        GatewayServiceClient::with_interceptor(channel, e2e_tests::Bearer(Some(token.into())))
    }

    /// Whether the process is still running.
    fn running(&mut self) -> bool {
        self.child.try_wait().expect("process status").is_none()
    }
}

async fn get_model(client: &mut Client, model: &str) -> Result<pb::Model, tonic::Status> {
    client
        .get_model(pb::GetModelRequest {
            model: model.into(),
        })
        .await
        .map(|r| r.into_inner().model.expect("a model"))
}

async fn list_models(gateway: &Gateway, token: &str) -> Result<(), tonic::Status> {
    gateway
        .client(token)
        .await
        .list_models(pb::ListModelsRequest::default())
        .await
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_config_file_and_an_invalid_one_keeps_the_running_configuration() {
    let fake = FakeProvider::start().await.expect("fake provider");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config(&fake, "", "")).unwrap();
    let mut gateway = Gateway::start(&path).await;
    let mut client = gateway.client(TOKEN).await;
    assert_eq!(
        get_model(&mut client, NEW_MODEL).await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(
        list_models(&gateway, ROTATED).await.unwrap_err().code(),
        Code::Unauthenticated
    );

    // A valid file: a new model and a new caller token, in force without a restart.
    let reloaded = config(
        &fake,
        &format!("auth_tokens = [\"{ROTATED}\"]"),
        &model_entry(NEW_MODEL),
    );
    std::fs::write(&path, &reloaded).unwrap();
    gateway.hangup();
    gateway.log("SIGHUP: reloading the configuration").await;
    gateway.log("configuration reloaded").await;
    let deadline = Instant::now() + SHORT;
    let model = loop {
        match get_model(&mut client, NEW_MODEL).await {
            Ok(model) => break model,
            Err(e) => {
                assert_eq!(e.code(), Code::NotFound, "{e:?}");
                assert!(Instant::now() < deadline, "{NEW_MODEL} never resolved");
                tokio::time::sleep(POLL).await;
            }
        }
    };
    assert_eq!(model.max_output_tokens, 512);
    list_models(&gateway, ROTATED)
        .await
        .expect("the new token is accepted");
    list_models(&gateway, TOKEN)
        .await
        .expect("the token from the environment stays");
    fake.push(Reply::fixture("openai_chat/text.sse"));
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(generation(NEW_MODEL, "hi")),
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = Vec::new();
    while let Some(ev) = stream.message().await.unwrap() {
        events.push(ev);
    }
    let lines = render(&events);
    assert_eq!(lines[0], "stream_start openai openai/from-sighup attempt=1");
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_eq!(fake.requests()[0].json()["model"], "from-sighup");

    // An invalid file (a caller token too short to be one) also adding a model: refused as a whole, logged with
    // the key, and the running configuration stays.
    std::fs::write(
        &path,
        config(
            &fake,
            &format!("auth_tokens = [\"{ROTATED}\", \"short\"]"),
            &format!(
                "{}\n{}",
                model_entry(NEW_MODEL),
                model_entry("openai/never")
            ),
        ),
    )
    .unwrap();
    gateway.hangup();
    gateway.log("SIGHUP: reloading the configuration").await;
    let failed = gateway
        .log("configuration reload failed; keeping the running configuration")
        .await;
    let error = failed["error"].as_str().expect("error field");
    assert!(error.starts_with("server.auth_tokens: "), "{failed}");
    assert_eq!(
        get_model(&mut client, "openai/never")
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    assert_eq!(
        get_model(&mut client, NEW_MODEL)
            .await
            .unwrap()
            .max_output_tokens,
        512
    );
    list_models(&gateway, ROTATED)
        .await
        .expect("the running tokens stay");
    assert!(
        gateway.running(),
        "SIGHUP never ends the process: {:#?}",
        gateway.seen
    );
}
