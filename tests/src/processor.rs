//! The whole product on loopback: fake providers → llm-gateway → session-processor (real Redis), and a sessions
//! client.

use std::sync::Arc;

use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use session_processor::config::Config as ProcessorConfig;
use session_processor::engine::{Engine, gateway_client};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::{Bearer, Harness, TOKEN};

/// A sessions client that sends the bearer token.
pub type SessionsClient = SessionServiceClient<InterceptedService<Channel, Bearer>>;

/// The caller token of the test processor (the unnamed tenant's: `PROCESSOR_AUTH_TOKENS`).
pub const PROCESSOR_TOKEN: &str = "e2e-processor-token-0123456789";
/// The operator token of the test processor (`PROCESSOR_OPERATOR_TOKENS`): every tenant's sessions.
pub const OPERATOR_TOKEN: &str = "e2e-operator-token-0123456789";

/// Redis for tests: `REDIS_URL` or the loopback default.
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A gateway harness plus a session-processor wired to it, with its own Redis key prefix and workspace root.
pub struct Product {
    /// The gateway and its fake providers.
    pub gateway: Harness,
    /// Where the processor listens.
    pub addr: std::net::SocketAddr,
    /// The processor's engine (storage access for assertions).
    pub engine: Arc<Engine>,
    /// Workspace root of this test.
    pub workspaces: tempfile::TempDir,
    /// Whether dropping the product checks every session it holds (see [`check_sessions`]); a test that leaves a
    /// session broken on purpose turns it off and says why.
    pub check_on_drop: bool,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Product {
    /// Checks every session of the test (unless the test already failed or opted out), then stops the processor.
    fn drop(&mut self) {
        if self.check_on_drop && !std::thread::panicking() {
            let addr = self.addr;
            // A thread and runtime of its own: drop cannot await, and the processor keeps running on the test
            // runtime's workers meanwhile.
            let checked = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the checks")
                    .block_on(check_sessions(addr))
            })
            .join();
            if let Err(failure) = checked {
                self.server.abort();
                std::panic::resume_unwind(failure);
            }
        }
        self.server.abort();
    }
}

/// What must hold for every session a test leaves behind, whatever the test did: Diagnose healthy (its checks
/// include every part closed, one step-finish per step-start, each message's cost the sum of its steps' and the
/// session's the sum of its messages'). Waits (bounded) for loops still running to end first.
pub async fn check_sessions(addr: std::net::SocketAddr) {
    let mut c = client_at(&addr.to_string(), OPERATOR_TOKEN).await;
    let mut page_token = String::new();
    loop {
        let page = c
            .list_sessions(spb::ListSessionsRequest {
                page_token: page_token.clone(),
                ..Default::default()
            })
            .await
            .expect("list sessions")
            .into_inner();
        for s in &page.sessions {
            check_session(&mut c, &s.id).await;
        }
        if page.next_page_token.is_empty() {
            return;
        }
        page_token = page.next_page_token;
    }
}

async fn check_session(c: &mut SessionsClient, session_id: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let report = loop {
        let report = diagnose(c, session_id).await;
        if !report.lease_held || std::time::Instant::now() > deadline {
            break report;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    if report.healthy {
        return;
    }
    let messages = c
        .list_messages(spb::ListMessagesRequest {
            session_id: session_id.into(),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().messages)
        .unwrap_or_default();
    let outline: Vec<String> = messages.iter().map(outline).collect();
    panic!(
        "session {session_id} left unhealthy: {:?}\nits messages:\n{}",
        report.checks.iter().filter(|c| !c.ok).collect::<Vec<_>>(),
        outline.join("\n")
    );
}

/// One line per message for failure reports: id, role, finish, cost and its parts' kinds.
pub fn outline(m: &spb::Message) -> String {
    let kinds: Vec<String> = m
        .parts
        .iter()
        .map(|p| match &p.kind {
            Some(spb::part::Kind::StepFinish(f)) => format!("step_finish({})", f.cost_nano_usd),
            Some(k) => format!("{k:?}")
                .split('(')
                .next()
                .unwrap_or("?")
                .to_lowercase(),
            None => "none".into(),
        })
        .collect();
    format!(
        "  {} {:?} finish={:?} cost={} error={:?} parts=[{}]",
        m.id,
        m.role(),
        m.finish,
        m.cost_nano_usd,
        m.error.as_ref().map(|e| e.kind()),
        kinds.join(", ")
    )
}

/// Agents used by the tests, appended to the processor config.
pub const AGENTS: &str = r#"
[agents.default]
role_prompt = "You are a test agent."
model = "openai/gpt-4o"
tools = ["read", "write", "list"]
max_steps = 8
doom_loop = "deny"
client_tool_timeout_ms = 5000
permission_timeout_ms = 2000
step_retries = 1
permissions = [{ tool = "write", decision = "allow" }]
"#;

/// Where and how [`start_processor`] starts a processor.
#[derive(Debug, Clone, Default)]
pub struct ProcessorSetup {
    /// The gateway's gRPC address (`host:port`).
    pub gateway: String,
    /// Redis URL; [`redis_url`] when empty.
    pub redis: String,
    /// Lines added to the processor's `[server]` table (e.g. `max_streams_per_tenant = 2`).
    pub server_lines: String,
    /// Lines added to the processor's `[gateway]` table (e.g. `default_model = "…"`).
    pub gateway_lines: String,
    /// Lines added to the `[redis]` table (e.g. a `lease_ttl_ms`, replacing the default 1500).
    pub redis_lines: String,
    /// TOML appended after [`AGENTS`].
    pub extra: String,
    /// Run the recovery sweep (every half lease ttl), as the service does.
    pub recovery: bool,
    /// The Redis key prefix; a fresh one when empty (a second replica of the same deployment passes the first's).
    pub prefix: String,
    /// Serve on these runtimes (`session_processor::runtimes::serve`, as the binary does) instead of on the test's
    /// own runtime alone.
    pub runtimes: Option<session_processor::runtimes::Runtimes>,
    /// Stops serving when cancelled (never, when absent); the serving task then ends.
    pub shutdown: Option<tokio_util::sync::CancellationToken>,
}

/// A session-processor served in this process.
pub struct Processor {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// Its engine.
    pub engine: Arc<Engine>,
    /// Its workspace root.
    pub workspaces: tempfile::TempDir,
    /// The serving task.
    pub server: tokio::task::JoinHandle<()>,
}

/// Starts a processor (its own Redis key prefix and workspace root; titles off unless `extra` has a `[titles]`
/// table, since a title call is one more request to the fake provider, racing the loop's).
pub async fn start_processor(setup: ProcessorSetup) -> Processor {
    let workspaces = tempfile::tempdir().expect("tempdir");
    let prefix = if setup.prefix.is_empty() {
        format!("e2e:{}:", session_processor::ids::new("t"))
    } else {
        setup.prefix.clone()
    };
    let titles = if setup.extra.contains("[titles]") {
        ""
    } else {
        "[titles]\nenabled = false\n"
    };
    let lease = if setup.redis_lines.contains("lease_ttl_ms") {
        ""
    } else {
        "lease_ttl_ms = 1500\n"
    };
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{}\n[gateway]\nurl = \"http://{}\"\nstep_timeout_ms = 20000\n{}\n[redis]\nprefix = \"{prefix}\"\n{lease}{}\n{titles}{AGENTS}\n{}",
        setup.server_lines, setup.gateway, setup.gateway_lines, setup.redis_lines, setup.extra
    );
    let file = ProcessorConfig::parse(&text).expect("processor config parses");
    let redis = if setup.redis.is_empty() {
        redis_url()
    } else {
        setup.redis.clone()
    };
    let root = workspaces.path().to_string_lossy().to_string();
    let env = [
        ("PROCESSOR_AUTH_TOKENS", PROCESSOR_TOKEN),
        ("PROCESSOR_OPERATOR_TOKENS", OPERATOR_TOKEN),
        ("GATEWAY_TOKEN", TOKEN),
        ("REDIS_URL", redis.as_str()),
        ("PROCESSOR_WORKSPACE_ROOT", root.as_str()),
    ];
    let config = Arc::new(
        ProcessorConfig::from_file(file, std::path::Path::new("."), &env)
            .expect("processor config valid"),
    );
    let store = session_processor::app::open_store(&config)
        .await
        .expect("redis (set REDIS_URL)");
    let client =
        gateway_client(&config.gateway_url, &config.gateway_token).expect("gateway client");
    let engine = Engine::new(store, client, config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let e = engine.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    if setup.recovery {
        tokio::spawn(
            engine
                .clone()
                .recover(engine.config().lease_ttl / 2, stop.clone()),
        );
    }
    // The sweep stops with the server task (dropped when the test aborts it).
    let guard = stop.drop_guard();
    let (runtimes, shutdown) = (setup.runtimes, setup.shutdown.clone());
    let server = tokio::spawn(async move {
        let _guard = guard;
        let shutdown = async move {
            match shutdown {
                Some(token) => token.cancelled_owned().await,
                None => std::future::pending().await,
            }
        };
        match runtimes {
            Some(r) => session_processor::runtimes::serve(e, listener, shutdown, r)
                .await
                .expect("processor serves"),
            None => session_processor::server::run(e, listener, shutdown)
                .await
                .expect("processor serves"),
        }
    });
    Processor {
        addr,
        engine,
        workspaces,
        server,
    }
}

impl Processor {
    /// An authenticated sessions client.
    pub async fn client(&self) -> SessionsClient {
        client_at(&self.addr.to_string(), PROCESSOR_TOKEN).await
    }
}

/// A plaintext gRPC channel to `addr`.
pub async fn channel(addr: std::net::SocketAddr) -> Channel {
    channel_at(&addr.to_string()).await
}

async fn channel_at(addr: &str) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect")
}

impl Product {
    /// Waits at most `bound` for the processor to stop serving (after its [`ProcessorSetup::shutdown`]): whether it
    /// ended, and without a panic. Its sessions are then not checked on drop (nothing serves them any more): a test
    /// checks them before the stop.
    pub async fn stopped(&mut self, bound: std::time::Duration) -> bool {
        self.check_on_drop = false;
        matches!(
            tokio::time::timeout(bound, &mut self.server).await,
            Ok(Ok(()))
        )
    }

    /// Starts the gateway harness and a processor with [`AGENTS`] (plus `extra` TOML).
    pub async fn start(extra: &str) -> Product {
        Self::start_with("", extra).await
    }

    /// Like [`Product::start`], with `gateway_extra` TOML appended to the gateway's config (e.g. a small
    /// `[models."openai/tiny"]` catalog entry).
    pub async fn start_with(gateway_extra: &str, extra: &str) -> Product {
        Self::start_setup(
            gateway_extra,
            ProcessorSetup {
                extra: extra.into(),
                ..Default::default()
            },
        )
        .await
    }

    /// The gateway harness (with `gateway_extra`) and a processor set up as `setup` says (its `gateway` is
    /// replaced by the harness's address).
    pub async fn start_setup(gateway_extra: &str, setup: ProcessorSetup) -> Product {
        Self::start_all("", gateway_extra, setup).await
    }

    /// Like [`Product::start_setup`], with `gateway_server` lines added to the gateway's `[server]` table (a
    /// `max_request_bytes` there replaces the harness's 1 MiB).
    pub async fn start_all(
        gateway_server: &str,
        gateway_extra: &str,
        setup: ProcessorSetup,
    ) -> Product {
        let gateway = Harness::start_custom(gateway_server, gateway_extra).await;
        // Strict providers: a request a real provider would refuse (after a resume, a compaction or a model
        // switch) gets that provider's 400, so the test sees it.
        gateway
            .openai
            .validate_requests(fake_provider::Protocol::OpenaiChat);
        gateway
            .anthropic
            .validate_requests(fake_provider::Protocol::Anthropic);
        gateway
            .gemini
            .validate_requests(fake_provider::Protocol::Gemini);
        let p = start_processor(ProcessorSetup {
            gateway: gateway.addr.to_string(),
            ..setup
        })
        .await;
        Product {
            gateway,
            addr: p.addr,
            engine: p.engine,
            workspaces: p.workspaces,
            check_on_drop: true,
            server: p.server,
        }
    }

    /// An authenticated sessions client.
    pub async fn client(&self) -> SessionsClient {
        self.client_with_token(PROCESSOR_TOKEN).await
    }

    /// A new session of the default agent on workspace `workspace` (`""`: none).
    pub async fn session_on(&self, workspace: &str) -> spb::Session {
        let req = spb::CreateSessionRequest {
            workspace: workspace.into(),
            ..Default::default()
        };
        create_session(&mut self.client().await, req).await
    }

    /// The directory of `tenant`'s workspace `name` (`""`: the unnamed tenant's, directly under the root).
    pub fn workspace(&self, tenant: &str, name: &str) -> std::path::PathBuf {
        session_processor::tools::workspace_dir(self.workspaces.path(), tenant, name)
            .expect("a workspace name")
    }

    /// A sessions client that presents the operator token.
    pub async fn operator(&self) -> SessionsClient {
        self.client_with_token(OPERATOR_TOKEN).await
    }

    /// A sessions client that presents `token` (e.g. a tenant's).
    pub async fn client_with_token(&self, token: &str) -> SessionsClient {
        client_at(&self.addr.to_string(), token).await
    }
}

/// Creates a session and returns it.
pub async fn create_session(
    client: &mut SessionsClient,
    req: spb::CreateSessionRequest,
) -> spb::Session {
    client
        .create_session(req)
        .await
        .expect("create session")
        .into_inner()
        .session
        .expect("session")
}

/// A text prompt.
pub fn prompt(session_id: &str, text: &str) -> spb::PromptRequest {
    spb::PromptRequest {
        session_id: session_id.into(),
        parts: vec![spb::PromptPart {
            kind: Some(spb::prompt_part::Kind::Text(text.into())),
        }],
        ..Default::default()
    }
}

/// Reads a `Prompt` or `Compact` stream up to and including its `done` event (20 s at most), with `event` taking
/// the session event out of each response; see [`until_done_within`].
pub async fn until_done<T>(
    stream: &mut tonic::Streaming<T>,
    event: impl Fn(T) -> Option<spb::SessionEvent>,
) -> Vec<spb::session_event::Event> {
    until_done_within(stream, event, std::time::Duration::from_secs(20)).await
}

/// Reads a stream until its first `done` (within `bound`), returning every event, and checks what every stream
/// of the product promises: event ids strictly increase, and [`assert_stream_invariants`] holds. Panics when the
/// stream ends without a `done` or does not reach one in time.
pub async fn until_done_within<T>(
    stream: &mut tonic::Streaming<T>,
    event: impl Fn(T) -> Option<spb::SessionEvent>,
    bound: std::time::Duration,
) -> Vec<spb::session_event::Event> {
    let mut events = Vec::new();
    let mut last_id: Option<(u64, u64)> = None;
    let ended = tokio::time::timeout(bound, async {
        loop {
            let Some(response) = stream.message().await.expect("stream stays readable") else {
                panic!("the stream ended without a done: {events:?}");
            };
            let Some(session_event) = event(response) else {
                continue;
            };
            if session_event.event_id.is_empty() {
                // Only the terminal done of a stream whose log stayed unreadable is outside the log.
                assert!(
                    matches!(
                        &session_event.event,
                        Some(spb::session_event::Event::Done(d))
                            if d.stopped_by() == spb::StopReason::StorageUnavailable
                    ),
                    "only a storage-unavailable done has no id: {session_event:?}"
                );
            } else {
                let id = event_id(&session_event.event_id);
                assert!(
                    last_id < Some(id),
                    "event ids increase: {} came after {last_id:?}",
                    session_event.event_id
                );
                last_id = Some(id);
            }
            let Some(ev) = session_event.event else {
                continue;
            };
            let done = matches!(ev, spb::session_event::Event::Done(_));
            events.push(ev);
            if done {
                return;
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stream ends with a terminal event within {bound:?}; it had: {events:?}"
    );
    assert_stream_invariants(&events);
    events
}

/// Every event of a `Prompt` stream up to its end (not only to its first `done`: a queued prompt's stream goes
/// on to the `done` of the run that answers it), within `bound`.
pub async fn until_end(
    stream: &mut tonic::Streaming<spb::PromptResponse>,
    bound: std::time::Duration,
) -> Vec<spb::session_event::Event> {
    let mut events = Vec::new();
    let ended = tokio::time::timeout(bound, async {
        while let Some(r) = stream.message().await.expect("the stream stays readable") {
            events.extend(r.event.and_then(|e| e.event));
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stream ends within {bound:?}: {events:?}"
    );
    events
}

/// An event id, `<ms>-<seq>`, as a pair that orders like the ids.
pub fn event_id(id: &str) -> (u64, u64) {
    let parsed = id
        .split_once('-')
        .and_then(|(ms, seq)| Some((ms.parse().ok()?, seq.parse().ok()?)));
    parsed.unwrap_or_else(|| panic!("event id {id:?} is not <ms>-<seq>"))
}

/// Sends `req` and reads its events up to `done`.
pub async fn prompt_until_done(
    client: &mut SessionsClient,
    req: spb::PromptRequest,
) -> Vec<spb::session_event::Event> {
    let mut stream = client.prompt(req).await.expect("prompt").into_inner();
    until_done(&mut stream, |r| r.event).await
}

/// Every message of a session, with parts.
pub async fn messages(client: &mut SessionsClient, session_id: &str) -> Vec<spb::Message> {
    client
        .list_messages(spb::ListMessagesRequest {
            session_id: session_id.into(),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .expect("list messages")
        .into_inner()
        .messages
}

/// The session as GetSession returns it.
pub async fn get_session(client: &mut SessionsClient, session_id: &str) -> spb::Session {
    client
        .get_session(spb::GetSessionRequest {
            session_id: session_id.into(),
        })
        .await
        .expect("get session")
        .into_inner()
        .session
        .expect("session")
}

/// The invariants of one prompt's event stream: exactly one terminal `done`, and it comes last; each part's final
/// state published once (no part published twice in the same state); each step-finish part published once.
pub fn assert_stream_invariants(events: &[spb::session_event::Event]) {
    use spb::session_event::Event as SE;
    let dones = events.iter().filter(|e| matches!(e, SE::Done(_))).count();
    assert_eq!(dones, 1, "exactly one done: {events:?}");
    assert!(
        matches!(events.last(), Some(SE::Done(_))),
        "done comes last: {events:?}"
    );
    let mut seen: Vec<&spb::Part> = Vec::new();
    for e in events {
        if let SE::PartUpdated(p) = e {
            assert!(
                !seen.contains(&p),
                "part {} published twice in the same state",
                p.id
            );
            if matches!(p.kind, Some(spb::part::Kind::StepFinish(_))) {
                assert!(
                    !seen.iter().any(|s| s.id == p.id),
                    "step-finish {} published twice",
                    p.id
                );
            }
            seen.push(p);
        }
    }
}

/// The `done` of a stream (its last event).
pub fn done_of(events: &[spb::session_event::Event]) -> spb::Done {
    match events.last() {
        Some(spb::session_event::Event::Done(d)) => d.clone(),
        other => panic!("the stream did not end with done: {other:?}"),
    }
}

/// Diagnose of a session, asserted healthy (every failing check is in the message).
pub async fn assert_healthy(
    client: &mut SessionsClient,
    session_id: &str,
) -> spb::DiagnoseResponse {
    let report = diagnose(client, session_id).await;
    assert!(
        report.healthy,
        "unhealthy: {:?}",
        report.checks.iter().filter(|c| !c.ok).collect::<Vec<_>>()
    );
    report
}

/// Diagnose of a session.
pub async fn diagnose(client: &mut SessionsClient, session_id: &str) -> spb::DiagnoseResponse {
    client
        .diagnose(spb::DiagnoseRequest {
            session_id: session_id.into(),
        })
        .await
        .expect("diagnose")
        .into_inner()
}

/// A gpt-4o chat reply calling `name` (call id `call`) with its arguments streamed in `args` fragments, then
/// finishing with `tool_calls` and `usage` (input, output tokens).
pub fn tool_call_reply(
    id: &str,
    call: &str,
    name: &str,
    args: &[&str],
    usage: (u64, u64),
) -> fake_provider::Reply {
    fake_provider::Reply::sse(
        fake_provider::openai_sse::ChatStream::new("gpt-4o-2024-08-06", id)
            .tool_call(call, name, args)
            .finish("tool_calls", Some(usage)),
    )
}

/// A gpt-4o chat reply streaming `words`, then finishing with `stop` and `usage` (input, output tokens).
pub fn text_reply(id: &str, words: &[&str], usage: (u64, u64)) -> fake_provider::Reply {
    fake_provider::Reply::sse(
        fake_provider::openai_sse::ChatStream::new("gpt-4o-2024-08-06", id)
            .text(words)
            .finish("stop", Some(usage)),
    )
}

/// An OpenAI chat reply of `(call id, tool, input)` tool calls.
pub fn tool_calls_reply(
    id: &str,
    calls: &[(&str, &str, serde_json::Value)],
) -> fake_provider::Reply {
    let mut stream = fake_provider::openai_sse::ChatStream::new("gpt-4o-2024-08-06", id);
    let args: Vec<String> = calls.iter().map(|(_, _, a)| a.to_string()).collect();
    for ((call, tool, _), args) in calls.iter().zip(&args) {
        stream = stream.tool_call(call, tool, &[args.as_str()]);
    }
    fake_provider::Reply::sse(stream.finish("tool_calls", Some((50, 10))))
}

/// A plaintext sessions client for a processor at `addr` (`host:port`) that presents `token`.
pub async fn client_at(addr: &str, token: &str) -> SessionsClient {
    SessionServiceClient::with_interceptor(channel_at(addr).await, Bearer(Some(token.into())))
}
