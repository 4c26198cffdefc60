//! `cancelbench`: how long after a caller cancels a generation the provider's connection is closed, per protocol
//! (docs/benchmarks.md, "Cancel latency").
//!
//! It starts `llm-gateway` from the same build as a process on loopback, with one provider per protocol (OpenAI Chat
//! Completions and Responses, Anthropic Messages, Gemini, Bedrock Converse, and Gemini and Claude on Vertex AI), each
//! a fake provider inside this process that checks every request as the real API does (keys, AWS signatures, Google
//! tokens). Each round streams a generation until its first text delta arrives, with the provider holding the rest of
//! its answer back, then drops the stream: the figure is the time from that drop to the instant the provider read
//! end-of-file on the connection, both taken on this process's monotonic clock.
//!
//! ```text
//! cancelbench --rounds 200
//! ```
// A benchmark binary: its report goes to stdout, and a broken set-up should stop it loudly at start-up.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bench::procs;
use bench::stats::{ms, summarize};
use clap::Parser;
use fake_provider::validate::bedrock::{TEST_ACCESS_KEY_ID, TEST_REGION, TEST_SECRET_ACCESS_KEY};
use fake_provider::{FakeProvider, GoogleTokens, Protocol, Reply};
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

/// The bearer token the benchmark gateway accepts.
const TOKEN: &str = "cancelbench-caller-token-0123456789abcdef";
/// The provider keys the gateway is given (any non-empty key passes the fakes).
const KEY: &str = "cancelbench-provider-key";
/// How long a round waits for the provider to see the close before the run fails.
const CLOSE_BOUND: Duration = Duration::from_secs(10);

#[derive(Parser, Debug)]
#[command(
    about = "Cancel latency: caller's cancel to the provider's connection closed, per protocol"
)]
struct Args {
    /// Measured rounds per protocol (after 3 warm-up rounds).
    #[arg(long, default_value_t = 50)]
    rounds: usize,
    /// Folder holding `llm-gateway` (default: this binary's folder).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

/// One protocol's case: the model asked for, the fake behind it, and the scripted answer (held back after its first
/// text delta).
struct Case {
    name: &'static str,
    model: &'static str,
    fake: FakeProvider,
    reply: Reply,
}

/// The fakes, one per provider of the gateway's configuration.
struct Fakes {
    openai: FakeProvider,
    anthropic: FakeProvider,
    gemini: FakeProvider,
    bedrock: FakeProvider,
    vertex: FakeProvider,
    oauth: FakeProvider,
}

impl Fakes {
    async fn start() -> Fakes {
        let start = || async { FakeProvider::start().await.expect("a fake provider") };
        let (openai, anthropic, gemini, bedrock, vertex, oauth) = (
            start().await,
            start().await,
            start().await,
            start().await,
            start().await,
            start().await,
        );
        bedrock.validate_requests(Protocol::Bedrock);
        let tokens = GoogleTokens::test_account();
        oauth.set_fallback(tokens.endpoint());
        vertex.require_google_token(&tokens);
        vertex.validate_requests(Protocol::VertexGemini);
        vertex.validate_requests(Protocol::VertexAnthropic);
        for fake in [&openai, &anthropic, &gemini, &bedrock, &vertex] {
            fake.require_api_key(KEY);
        }
        Fakes {
            openai,
            anthropic,
            gemini,
            bedrock,
            vertex,
            oauth,
        }
    }

    fn config(&self, addr: SocketAddr, http: SocketAddr) -> String {
        let key_file = format!(
            "{}/../shared/fake-provider/fixtures/vertex/service_account.json",
            env!("CARGO_MANIFEST_DIR")
        );
        format!(
            r#"# Written by cancelbench.
[server]
listen = "{addr}"
http_listen = "{http}"
shutdown_grace_ms = 1000

[providers.openai]
protocol = "openai_chat"
base_url = "{openai}/v1"
api_key_env = "CANCELBENCH_KEY"

[providers.anthropic]
protocol = "anthropic"
base_url = "{anthropic}"
api_key_env = "CANCELBENCH_KEY"

[providers.gemini]
protocol = "gemini"
base_url = "{gemini}"
api_key_env = "CANCELBENCH_KEY"

[providers.bedrock]
protocol = "bedrock"
base_url = "{bedrock}"

[providers.vertex]
protocol = "vertex_gemini"
base_url = "{vertex}"
google = {{ project = "acme-llm-bench", location = "us-east5", credentials_file = "{key_file}", token_uri = "{oauth}/token" }}
"#,
            openai = self.openai.base_url(),
            anthropic = self.anthropic.base_url(),
            gemini = self.gemini.base_url(),
            bedrock = self.bedrock.base_url(),
            vertex = self.vertex.base_url(),
            oauth = self.oauth.base_url(),
        )
    }

    /// Each protocol's case; `stall_after` counts the events up to and including the first text delta.
    fn cases(&self) -> Vec<Case> {
        let case = |name, model, fake: &FakeProvider, reply: Reply| Case {
            name,
            model,
            fake: fake.clone(),
            reply,
        };
        vec![
            case(
                "OpenAI Chat Completions",
                "openai/gpt-4o",
                &self.openai,
                Reply::fixture("openai_chat/text.sse").stall_after(3),
            ),
            case(
                "OpenAI Responses",
                "openai/gpt-5-codex",
                &self.openai,
                Reply::fixture("openai_responses/text.sse").stall_after(5),
            ),
            case(
                "Anthropic Messages",
                "anthropic/claude-sonnet-4-5",
                &self.anthropic,
                Reply::fixture("anthropic/text.sse").stall_after(4),
            ),
            case(
                "Gemini",
                "gemini/gemini-2.5-flash",
                &self.gemini,
                Reply::fixture("gemini/text.sse").stall_after(2),
            ),
            case(
                "Bedrock Converse",
                "bedrock/us.amazon.nova-lite-v1:0",
                &self.bedrock,
                Reply::eventstream_fixture("bedrock/text.es").stall_after(3),
            ),
            case(
                "Vertex AI, Gemini",
                "vertex/gemini-2.5-flash",
                &self.vertex,
                Reply::fixture("gemini/text.sse").stall_after(2),
            ),
            case(
                "Vertex AI, Claude",
                "vertex/claude-sonnet-4-5@20250929",
                &self.vertex,
                Reply::fixture("vertex_anthropic/text.sse").stall_after(4),
            ),
        ]
    }
}

/// Starts `llm-gateway` with `config`, the benchmark's caller token, the provider key and the test AWS credentials.
async fn start_gateway(
    bin: &Path,
    dir: &Path,
    fakes: &Fakes,
) -> (tokio::process::Child, SocketAddr) {
    let free = || SocketAddr::from(([127, 0, 0, 1], procs::free_port().expect("a free port")));
    let (addr, http) = (free(), free());
    let path = dir.join("gateway.toml");
    std::fs::write(&path, fakes.config(addr, http)).expect("the gateway's config");
    let log = dir.join("llm-gateway.log");
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg("--config")
        .arg(&path)
        .env("GATEWAY_AUTH_TOKENS", TOKEN)
        .env("CANCELBENCH_KEY", KEY)
        .env("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", TEST_SECRET_ACCESS_KEY)
        .env("AWS_REGION", TEST_REGION)
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .env("RUST_LOG", "info")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("GATEWAY_LISTEN")
        .env_remove("GATEWAY_METRICS_LISTEN")
        .env_remove("GATEWAY_HTTP_LISTEN");
    let child = procs::spawn_logged(cmd, &log).expect("spawning llm-gateway");
    procs::wait_listening(addr, Duration::from_secs(20), "llm-gateway", &log)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (child, addr)
}

/// One round: the generation streamed to its first text delta, then dropped; the time until the provider saw the
/// connection close.
async fn round(channel: &Channel, auth: &MetadataValue<Ascii>, case: &Case) -> Duration {
    let index = case.fake.requests().len();
    case.fake.push(case.reply.clone());
    let mut request = tonic::Request::new(pb::StreamRequest {
        generation: Some(pb::Generation {
            model: case.model.into(),
            messages: vec![pb::Message {
                role: pb::Role::User as i32,
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::Text(pb::TextPart {
                        text: procs::PROMPT.into(),
                    })),
                }],
            }],
            ..Default::default()
        }),
    });
    request.metadata_mut().insert("authorization", auth.clone());
    let mut stream = GatewayServiceClient::new(channel.clone())
        .stream(request)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name))
        .into_inner();
    loop {
        let event = stream
            .message()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.name))
            .unwrap_or_else(|| panic!("{}: the stream ended before its first text", case.name));
        match event.event {
            Some(pb::stream_response::Event::TextDelta(_)) => break,
            Some(pb::stream_response::Event::Error(e)) => panic!("{}: {e:?}", case.name),
            _ => {}
        }
    }
    let cancelled = Instant::now();
    drop(stream);
    let closed = case
        .fake
        .wait_closed(index, CLOSE_BOUND)
        .await
        .unwrap_or_else(|| panic!("{}: the provider's connection stayed open", case.name));
    assert!(
        case.fake.rejections().is_empty(),
        "{}: {:?}",
        case.name,
        case.fake.rejections()
    );
    // Closed before the cancel would be some other close (a timeout, a fault): not what is measured.
    assert!(
        closed >= cancelled,
        "{}: the provider's connection closed before the cancel",
        case.name
    );
    closed - cancelled
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let bin_dir = procs::bin_dir(args.bin_dir.as_deref());
    let dir = std::env::temp_dir().join(format!("cancelbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("run folder");
    let fakes = Fakes::start().await;
    let (_gateway, addr) = start_gateway(&bin_dir.join("llm-gateway"), &dir, &fakes).await;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("address")
        .tcp_nodelay(true)
        .connect()
        .await
        .expect("connect to the gateway");
    let auth: MetadataValue<Ascii> = format!("Bearer {TOKEN}").parse().expect("token");
    println!(
        "machine: {}; load average before the run: {}",
        procs::machine(),
        procs::loadavg()
    );
    println!(
        "{} rounds per protocol after 3 warm-up rounds; from dropping the gRPC stream after its first text delta to \
         the provider reading end-of-file",
        args.rounds
    );
    println!();
    println!("| protocol (ms) | n | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    for case in fakes.cases() {
        for _ in 0..3 {
            round(&channel, &auth, &case).await;
        }
        let mut samples = Vec::with_capacity(args.rounds);
        for _ in 0..args.rounds {
            samples.push(round(&channel, &auth, &case).await.as_nanos() as u64);
        }
        let s = summarize(&mut samples);
        println!(
            "| {} | {} | {} | {} | {} |",
            case.name,
            s.n,
            ms(s.p50),
            ms(s.p99),
            ms(s.max)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
