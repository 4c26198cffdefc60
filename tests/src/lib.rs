//! End-to-end test kit: the real llm-gateway server on a loopback port, wired to fake providers that speak each
//! provider's wire format, and a gRPC client that authenticates like a real caller.
//!
//! Test kit code: failing loudly on a broken set-up is the point, hence `expect`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

pub mod azure;
pub mod clients;
pub mod cluster;
pub mod faults;
pub mod front_door;
pub mod leaks;
pub mod logs;
pub mod monitor;
pub mod otlp;
pub mod processor;
pub mod procs;
pub use service_kit::raw;
pub mod sdk;
pub mod service;
pub mod stack;
pub mod turns;
pub mod vertex;
pub mod windows;

use std::net::SocketAddr;
use std::time::Duration;

use fake_provider::FakeProvider;
use llm_gateway::config::{Config, ConfigError};
use llm_gateway::generate::Gateway;
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use tokio::sync::oneshot;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// The bearer token the test gateway accepts.
pub const TOKEN: &str = "e2e-caller-token-0123456789";
/// The OpenAI key the test gateway holds; it must never reach a caller.
pub const OPENAI_KEY: &str = "sk-e2e-openai-secret-key-000";
/// The Anthropic key the test gateway holds; it must never reach a caller.
pub const ANTHROPIC_KEY: &str = "sk-ant-e2e-secret-key-111";
/// The Gemini key the test gateway holds; it must never reach a caller.
pub const GEMINI_KEY: &str = "AIza-e2e-gemini-secret-key-222";
/// The AWS key pair every harness's environment carries, for `bedrock` providers: the fake Bedrock verifies
/// signatures with this secret ([`fake_provider::validate::bedrock::TEST_SECRET_ACCESS_KEY`]).
pub const AWS_ACCESS_KEY_ID: &str = fake_provider::validate::bedrock::TEST_ACCESS_KEY_ID;
/// See [`AWS_ACCESS_KEY_ID`].
pub const AWS_SECRET_ACCESS_KEY: &str = fake_provider::validate::bedrock::TEST_SECRET_ACCESS_KEY;
/// The session token of the harness's temporary AWS credentials.
pub const AWS_SESSION_TOKEN: &str = "IQoJb3JpZ2luX2VjE2e2eSessionToken333";

/// A client that sends the bearer token on every call.
pub type Client = GatewayServiceClient<InterceptedService<Channel, Bearer>>;

/// Adds `authorization: Bearer <token>`.
#[derive(Clone)]
pub struct Bearer(pub Option<String>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(t) = &self.0 {
            let v = format!("Bearer {t}")
                .parse()
                .map_err(|_| tonic::Status::internal("bad token"))?;
            req.metadata_mut().insert("authorization", v);
        }
        Ok(req)
    }
}

/// A running gateway with one fake provider per protocol.
pub struct Harness {
    /// Where the gateway listens.
    pub addr: SocketAddr,
    /// Where the gateway's Prometheus `/metrics` listener is.
    pub metrics_addr: SocketAddr,
    /// Where the gateway's HTTP front door (OpenAI- and Anthropic-compatible endpoints) listens.
    pub http_addr: SocketAddr,
    /// The running gateway, e.g. to [`Gateway::reload`] it.
    pub gateway: Gateway,
    /// Fake OpenAI-compatible server behind provider `openai`.
    pub openai: FakeProvider,
    /// Fake Anthropic server behind provider `anthropic`.
    pub anthropic: FakeProvider,
    /// Fake Gemini server behind provider `gemini`.
    pub gemini: FakeProvider,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    metrics_server: Option<tokio::task::JoinHandle<()>>,
    http_server: Option<tokio::task::JoinHandle<()>>,
    /// Set by [`Harness::expect_rejections`].
    rejections_expected: bool,
}

/// Config used by every harness: short retry delays so fault tests finish fast. The idle timeout (3 s) is long enough
/// that a loaded machine never trips it by accident, and longer than [`CANCEL_NOTICED`], so an upstream closed within
/// that bound was closed by the cancel, not by the timeout.
pub const BASE_CONFIG: &str = r#"
[server]
listen = "127.0.0.1:0"
shutdown_grace_ms = 2000
max_request_bytes = 1048576
# SERVER_EXTRA

[timeouts]
connect_ms = 2000
first_byte_ms = 2000
idle_ms = 3000
total_ms = 20000

[retry]
max_attempts = 3
base_delay_ms = 5
max_delay_ms = 20
max_retry_after_ms = 2000

[providers.openai]
protocol = "openai_chat"
base_url = "OPENAI_URL/v1"
api_key_env = "E2E_OPENAI_KEY"

[providers.anthropic]
protocol = "anthropic"
base_url = "ANTHROPIC_URL"
api_key_env = "E2E_ANTHROPIC_KEY"

[providers.gemini]
protocol = "gemini"
base_url = "GEMINI_URL"
api_key_env = "E2E_GEMINI_KEY"
"#;

impl Harness {
    /// Starts two fake providers and a gateway configured with [`BASE_CONFIG`].
    pub async fn start() -> Harness {
        Self::start_with("").await
    }

    /// Like [`Harness::start`], with `extra` TOML appended to the config.
    pub async fn start_with(extra: &str) -> Harness {
        Self::start_custom("", extra).await
    }

    /// Like [`Harness::start_with`], with `server` lines added to the config's `[server]` table.
    pub async fn start_custom(server: &str, extra: &str) -> Harness {
        let openai = FakeProvider::start().await.expect("fake openai");
        let anthropic = FakeProvider::start().await.expect("fake anthropic");
        let gemini = FakeProvider::start().await.expect("fake gemini");
        // The keys the gateway's configuration gives each provider: a request with another is refused.
        openai.require_api_key(OPENAI_KEY);
        anthropic.require_api_key(ANTHROPIC_KEY);
        gemini.require_api_key(GEMINI_KEY);
        let config = config_for(&openai, &anthropic, &gemini, server, extra)
            .unwrap_or_else(|e| panic!("config invalid: {e}"));
        let gateway = Gateway::new(config).expect("gateway");
        let metrics_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind metrics");
        let metrics_addr = metrics_listener.local_addr().expect("metrics addr");
        let metrics_server = tokio::spawn(llm_gateway::metrics::serve(
            gateway.metrics(),
            metrics_listener,
            std::future::pending(),
        ));
        let http_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind http");
        let http_addr = http_listener.local_addr().expect("http addr");
        let http_server = tokio::spawn(llm_gateway::http::serve(
            gateway.clone(),
            http_listener,
            std::future::pending(),
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel::<()>();
        let running = gateway.clone();
        let server = tokio::spawn(async move {
            let shutdown = async move {
                let _ = rx.await;
            };
            if let Err(e) = llm_gateway::server::run(running, listener, shutdown).await {
                panic!("gateway server failed: {e}");
            }
        });
        Harness {
            addr,
            metrics_addr,
            http_addr,
            gateway,
            openai,
            anthropic,
            gemini,
            shutdown: Some(tx),
            server: Some(server),
            metrics_server: Some(metrics_server),
            http_server: Some(http_server),
            rejections_expected: false,
        }
    }

    /// A configuration like the running one's (same fake providers and keys) with `server` lines and `extra` TOML
    /// added, for [`Gateway::reload`]; the error names the key.
    pub fn config(&self, server: &str, extra: &str) -> Result<Config, ConfigError> {
        config_for(&self.openai, &self.anthropic, &self.gemini, server, extra)
    }

    /// The body of `GET /metrics`.
    pub async fn scrape_metrics(&self) -> String {
        scrape_metrics(self.metrics_addr).await
    }

    /// A channel to the gateway.
    pub async fn channel(&self) -> Channel {
        tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
            .expect("endpoint")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect to gateway")
    }

    /// An authenticated client.
    pub async fn client(&self) -> Client {
        GatewayServiceClient::with_interceptor(self.channel().await, Bearer(Some(TOKEN.into())))
    }

    /// A client that presents `token` (or none).
    pub async fn client_with_token(&self, token: Option<&str>) -> Client {
        GatewayServiceClient::with_interceptor(
            self.channel().await,
            Bearer(token.map(String::from)),
        )
    }

    /// Opens a streamed generation and returns its events as they come (for tests that cancel it).
    pub async fn open_stream(
        &self,
        generation: pb::Generation,
    ) -> tonic::Streaming<pb::StreamResponse> {
        let mut client = self.client().await;
        client
            .stream(pb::StreamRequest {
                generation: Some(generation),
            })
            .await
            .expect("stream starts")
            .into_inner()
    }

    /// Runs a streamed generation to its end and returns every event.
    pub async fn stream(
        &self,
        generation: pb::Generation,
    ) -> Result<Vec<pb::StreamResponse>, tonic::Status> {
        let mut client = self.client().await;
        let mut stream = client
            .stream(pb::StreamRequest {
                generation: Some(generation),
            })
            .await?
            .into_inner();
        let mut events = Vec::new();
        while let Some(ev) = stream.message().await? {
            events.push(ev);
        }
        Ok(events)
    }

    /// Starts the graceful shutdown (as SIGTERM would) and returns the server task to await.
    pub fn begin_shutdown(&mut self) -> tokio::task::JoinHandle<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.server.take().expect("server running")
    }
}

impl Harness {
    /// Lets the fakes refuse requests without failing the test: for a test whose point is a request a provider
    /// refuses.
    pub fn expect_rejections(&mut self) {
        self.rejections_expected = true;
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.abort();
        }
        if let Some(s) = self.metrics_server.take() {
            s.abort();
        }
        if let Some(s) = self.http_server.take() {
            s.abort();
        }
        // Every test checks what the fakes checked: a request a real provider would have refused fails it, unless
        // the test said it sends one (and a test already failing is not failed twice).
        if !self.rejections_expected && !std::thread::panicking() {
            let refused: Vec<String> = [&self.openai, &self.anthropic, &self.gemini]
                .iter()
                .flat_map(|f| f.rejections())
                .map(|r| r.to_string())
                .collect();
            assert!(
                refused.is_empty(),
                "a fake provider refused requests a real one would refuse:\n{}",
                refused.join("\n")
            );
        }
    }
}

/// [`BASE_CONFIG`] pointed at these fakes, with `server` lines in `[server]` and `extra` appended, validated with
/// the test keys.
fn config_for(
    openai: &FakeProvider,
    anthropic: &FakeProvider,
    gemini: &FakeProvider,
    server: &str,
    extra: &str,
) -> Result<Config, ConfigError> {
    // `server` lines may replace the base's request limit.
    let base = if server.contains("max_request_bytes") {
        BASE_CONFIG.replace("max_request_bytes = 1048576\n", "")
    } else {
        BASE_CONFIG.to_string()
    };
    let text = format!("{base}\n{extra}")
        .replace("# SERVER_EXTRA", server)
        .replace("OPENAI_URL", &openai.base_url())
        .replace("ANTHROPIC_URL", &anthropic.base_url())
        .replace("GEMINI_URL", &gemini.base_url());
    let file = Config::parse(&text)?;
    let env = [
        ("GATEWAY_AUTH_TOKENS", TOKEN),
        ("E2E_OPENAI_KEY", OPENAI_KEY),
        ("E2E_ANTHROPIC_KEY", ANTHROPIC_KEY),
        ("E2E_GEMINI_KEY", GEMINI_KEY),
        ("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", AWS_SECRET_ACCESS_KEY),
        ("AWS_SESSION_TOKEN", AWS_SESSION_TOKEN),
        ("AWS_REGION", fake_provider::validate::bedrock::TEST_REGION),
        (azure::AZURE_KEY_ENV, fake_provider::azure::TEST_API_KEY),
        (
            azure::ENTRA_SECRET_ENV,
            fake_provider::azure::TEST_CLIENT_SECRET,
        ),
    ];
    Config::from_file(file, &env)
}

/// A user text message.
pub fn user(text: &str) -> pb::Message {
    pb::Message {
        role: pb::Role::User as i32,
        parts: vec![text_part(text)],
    }
}

/// A text part.
pub fn text_part(text: &str) -> pb::Part {
    pb::Part {
        kind: Some(pb::part::Kind::Text(pb::TextPart { text: text.into() })),
    }
}

/// A generation for `model` with one user message.
pub fn generation(model: &str, prompt: &str) -> pb::Generation {
    pb::Generation {
        model: model.into(),
        messages: vec![user(prompt)],
        ..Default::default()
    }
}

/// A weather tool with a JSON Schema.
pub fn weather_tool() -> pb::Tool {
    pb::Tool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema_json:
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
                .into(),
        ..Default::default()
    }
}

/// A time tool with a JSON Schema.
pub fn time_tool() -> pb::Tool {
    pb::Tool {
        name: "get_time".into(),
        description: "Time in a timezone".into(),
        input_schema_json: r#"{"type":"object","properties":{"timezone":{"type":"string"}}}"#
            .into(),
        ..Default::default()
    }
}

/// A generation asking for the weather in two cities with [`weather_tool`] and [`time_tool`] offered: the
/// parallel-tools scenario (the fixtures call the tools their request offers, as a model would).
pub fn tools_generation(model: &str) -> pb::Generation {
    pb::Generation {
        tools: vec![weather_tool(), time_tool()],
        ..generation(model, "Weather in Paris and Tokyo?")
    }
}

/// Asserts a [`render`]ed stream is well formed: `stream_start` first, exactly one terminal event (`step_finish` or
/// `error`) at the end, and on success every opened text, reasoning and tool-input block closed.
pub fn assert_well_formed(lines: &[String]) {
    assert!(lines[0].starts_with("stream_start"), "{lines:#?}");
    let last = lines.last().expect("at least one event");
    assert!(
        last.starts_with("step_finish") || last.starts_with("error"),
        "{lines:#?}"
    );
    let terminals = lines
        .iter()
        .filter(|l| l.starts_with("step_finish") || l.starts_with("error "))
        .count();
    assert_eq!(terminals, 1, "{lines:#?}");
    if last.starts_with("step_finish") {
        for (open, close) in [
            ("text_start ", "text_end "),
            ("reasoning_start ", "reasoning_end "),
            ("tool_input_start ", "tool_input_end "),
        ] {
            for l in lines.iter().filter(|l| l.starts_with(open)) {
                let id = l[open.len()..].split(' ').next().unwrap_or_default();
                assert!(
                    lines.iter().any(|c| c.starts_with(&format!("{close}{id}"))),
                    "{l} never closed: {lines:#?}"
                );
            }
        }
    }
}

/// Reads `stream` until a text delta arrives (so the provider request is certainly open), drops it, and returns
/// how long after the drop `fake` saw its first request's connection close.
pub async fn cancel_after_first_delta(
    mut stream: tonic::Streaming<pb::StreamResponse>,
    fake: &fake_provider::FakeProvider,
) -> Duration {
    loop {
        let ev = stream
            .message()
            .await
            .expect("stream ok")
            .expect("a text delta before the end");
        if matches!(ev.event, Some(pb::stream_response::Event::TextDelta(_))) {
            break;
        }
    }
    let cancelled_at = std::time::Instant::now();
    drop(stream);
    let closed_at = fake
        .wait_closed(0, SHORT)
        .await
        .expect("provider connection closed");
    closed_at.saturating_duration_since(cancelled_at)
}

/// [`cancel_after_first_delta`], asserting the provider connection closed within [`CANCEL_NOTICED`].
pub async fn assert_cancel_closes_upstream(
    stream: tonic::Streaming<pb::StreamResponse>,
    fake: &fake_provider::FakeProvider,
) {
    let after = cancel_after_first_delta(stream, fake).await;
    assert!(
        after < CANCEL_NOTICED,
        "upstream closed {after:?} after the cancel"
    );
}

/// Reasoning at `effort`, with the provider's default budget.
pub fn reasoning(effort: pb::reasoning::Effort) -> pb::Reasoning {
    pb::Reasoning {
        effort: effort as i32,
        budget_tokens: 0,
    }
}

/// One compact line per event, so tests compare whole sequences at a glance.
pub fn render(events: &[pb::StreamResponse]) -> Vec<String> {
    use pb::stream_response::Event as E;
    events
        .iter()
        .map(|ev| match &ev.event {
            None => "none".into(),
            Some(E::StreamStart(s)) => format!("stream_start {} {} attempt={}", s.provider, s.model, s.attempt),
            Some(E::StepStart(_)) => "step_start".into(),
            Some(E::TextStart(t)) => format!("text_start {}", t.id),
            Some(E::TextDelta(d)) => format!("text_delta {} {:?}", d.id, d.delta),
            Some(E::TextEnd(t)) => format!("text_end {}", t.id),
            Some(E::ReasoningStart(r)) => format!("reasoning_start {}", r.id),
            Some(E::ReasoningDelta(d)) => format!("reasoning_delta {} {:?}", d.id, d.delta),
            Some(E::ReasoningEnd(r)) => format!(
                "reasoning_end {} {}",
                r.id,
                r.provider_metadata.as_ref().map(|m| format!("{}|{}|{}", m.protocol, m.model, m.json)).unwrap_or_default()
            ),
            Some(E::ToolInputStart(t)) => format!("tool_input_start {} {}", t.call_id, t.tool_name),
            Some(E::ToolInputDelta(d)) => format!("tool_input_delta {} {:?}", d.call_id, d.delta),
            Some(E::ToolInputEnd(t)) => format!("tool_input_end {}", t.call_id),
            Some(E::ToolCall(c)) => format!("tool_call {} {} {}", c.call_id, c.tool_name, c.input_json),
            Some(E::StepFinish(f)) => {
                let u = f.usage.unwrap_or_default();
                let c = f.cost.unwrap_or_default();
                format!(
                    "step_finish {:?} raw={} in={} cr={} cw={} out={} rs={} total={} cost={} id={} model={}",
                    pb::FinishReason::try_from(f.finish_reason).unwrap_or_default(),
                    f.raw_finish_reason,
                    u.input_tokens,
                    u.cache_read_tokens,
                    u.cache_write_tokens,
                    u.output_tokens,
                    u.reasoning_tokens,
                    u.total_tokens,
                    c.total_nano_usd,
                    f.response_id,
                    f.response_model
                )
            }
            Some(E::Error(e)) => format!(
                "error {:?} retryable={} status={} retry_after_ms={}",
                pb::ErrorKind::try_from(e.kind).unwrap_or_default(),
                e.retryable,
                e.http_status,
                e.retry_after.map(|d| d.seconds * 1000 + i64::from(d.nanos) / 1_000_000).unwrap_or(-1)
            ),
            Some(E::KeepAlive(_)) => "keep_alive".into(),
        })
        .collect()
}

/// The last event, which must be a terminal one.
pub fn terminal(events: &[pb::StreamResponse]) -> &pb::stream_response::Event {
    events
        .last()
        .and_then(|e| e.event.as_ref())
        .expect("at least one event")
}

/// Upper bound for waits on explicit signals (a request arriving, a connection closing); never a sleep.
pub const SHORT: Duration = Duration::from_secs(5);

/// How soon after a caller's cancel the provider connection must be seen closed for a test to count it as closed *by
/// the cancel*: generous for a loaded machine, and shorter than the harness's idle timeout (3 s), which would
/// otherwise close a stalled upstream. How fast the close is belongs to the benchmarks, not to the tests.
pub const CANCEL_NOTICED: Duration = Duration::from_secs(2);

/// The body of `GET /metrics` from a Prometheus listener at `addr` (asserted to be a 200 in OpenMetrics text).
pub async fn scrape_metrics(addr: SocketAddr) -> String {
    llm_telemetry::metrics_http::scrape(addr)
        .await
        .expect("scrape /metrics")
}
