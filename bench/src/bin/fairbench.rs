//! `fairbench`: does one expensive request hold up the other streams on the same connection? (docs/benchmarks.md,
//! "Fairness").
//!
//! It starts the paced fake provider and `llm-gateway` from the same build as processes on loopback, opens ONE gRPC
//! connection (as the processor multiplexes every session over one; `--separate-connections` gives the heavy and
//! refused requests a second one), and runs, round by round:
//!
//! - **alone**: one paced stream (`--chunks` deltas `--interval-ms` apart): its time to first text and largest gap;
//! - **start beside**: the same stream sent at the same instant as a request carrying `--tools` tools, on the same
//!   connection: how much the heavy request's arrival and preparation moves the stream's first text;
//! - **mid beside**: the heavy request sent once the paced stream has its third delta: how much it widens a gap of a
//!   stream already flowing;
//! - **refused**: a request with `--refuse-tools` tools, over the gateway's `max_tools`: the time until the caller
//!   holds its `RESOURCE_EXHAUSTED`, and, apart, what encoding such a request costs the caller itself.
//!
//! The heavy requests are built and cloned before the clock starts and go to a second fake provider process (model
//! `heavy/paced`), so reading a 4 MB body never delays the provider pacing the measured stream: what moves is the
//! gateway's doing. Each heavy request's own stream is dropped once its first event arrives. The gateway's CPU time
//! over the heavy rounds is read from `/proc`.
//!
//! ```text
//! fairbench --rounds 200 --tools 40000 --refuse-tools 100000 [--separate-connections]
//! ```
// A benchmark binary: its report goes to stdout, and a broken set-up should stop it loudly at start-up.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bench::procs::{self, PROMPT};
use bench::stats::{Summary, ms, summarize};
use clap::Parser;
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use prost::Message as _;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

/// The bearer token the benchmark gateway accepts.
const TOKEN: &str = "fairbench-caller-token-0123456789abcdef";
/// The gateway's limits for the run: the heavy request fits under them, the refused one does not.
const LIMITS: &str = "[limits]\nmax_tools = 50000\nmax_tool_schema_bytes = 67108864\n";
/// The model of the heavy and refused requests: the second provider.
const HEAVY_MODEL: &str = "heavy/paced";
/// Room for a 40 000-tool request (about 4 MB encoded) and a 100 000-tool one (about 11 MB).
const SERVER: &str = "max_request_bytes = 67108864";

#[derive(Parser, Debug)]
#[command(
    about = "Fairness: a paced stream alone and beside a request with many tools, on one connection"
)]
struct Args {
    /// Rounds of each case.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Tools in the heavy request (under the gateway's `max_tools` of 50 000).
    #[arg(long, default_value_t = 40_000)]
    tools: usize,
    /// Tools in the refused request (over `max_tools`).
    #[arg(long, default_value_t = 100_000)]
    refuse_tools: usize,
    /// Text chunks of the paced stream.
    #[arg(long, default_value_t = 20)]
    chunks: usize,
    /// Milliseconds between the paced stream's chunks.
    #[arg(long, default_value_t = 20)]
    interval_ms: u64,
    /// Send the heavy and refused requests on a second connection to the gateway instead of the paced stream's: tells
    /// what the shared connection costs (HTTP/2 flow control, one socket) from what the shared process costs.
    #[arg(long)]
    separate_connections: bool,
    /// Folder holding `fake-provider` and `llm-gateway` (default: this binary's folder).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

/// What one paced stream saw: time to its first text delta and its largest gap between two text deltas.
#[derive(Debug, Clone, Copy)]
struct Paced {
    ttft: Duration,
    max_gap: Duration,
}

/// The paced stream's connection, and the one the heavy and refused requests go on (the same one by default).
struct Channels {
    paced: Channel,
    heavy: Channel,
}

/// Runs one paced stream; when `heavy` is given, sends it at `at`: at the stream's start, or once the stream has its
/// third text delta.
async fn paced(
    channels: &Channels,
    auth: &MetadataValue<Ascii>,
    heavy: Option<(Vec<u8>, HeavyAt)>,
) -> (Paced, Option<Duration>) {
    let mut client = GatewayServiceClient::new(channels.paced.clone());
    let mut heavy = heavy.map(|(request, at)| (Some(request), at));
    let mut heavy_task = None;
    let mut launch = |heavy: &mut Option<(Option<Vec<u8>>, HeavyAt)>, now: HeavyAt| {
        if let Some((request, at)) = heavy
            && *at == now
            && let Some(request) = request.take()
        {
            heavy_task = Some(tokio::spawn(send_heavy(
                channels.heavy.clone(),
                auth.clone(),
                request,
            )));
        }
    };
    let started = Instant::now();
    launch(&mut heavy, HeavyAt::Start);
    let mut stream = client
        .stream(procs::stream_request(auth))
        .await
        .expect("paced stream")
        .into_inner();
    let (mut first, mut last, mut worst, mut deltas) = (None, None, Duration::ZERO, 0);
    while let Some(event) = stream.message().await.expect("paced stream event") {
        if let Some(pb::stream_response::Event::TextDelta(_)) = event.event {
            let now = Instant::now();
            first.get_or_insert(now - started);
            if let Some(prev) = last {
                worst = worst.max(now - prev);
            }
            last = Some(now);
            deltas += 1;
            if deltas == 3 {
                launch(&mut heavy, HeavyAt::Third);
            }
        }
    }
    let heavy_took = match heavy_task {
        Some(task) => Some(task.await.expect("heavy task")),
        None => None,
    };
    let result = Paced {
        ttft: first.expect("the paced stream had text"),
        max_gap: worst,
    };
    (result, heavy_took)
}

/// When the heavy request is sent, relative to the paced stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeavyAt {
    Start,
    Third,
}

/// Sends the heavy request (already encoded) and returns the time until its first event arrived; its stream is then
/// dropped.
async fn send_heavy(channel: Channel, auth: MetadataValue<Ascii>, request: Vec<u8>) -> Duration {
    let started = Instant::now();
    let mut stream = raw_call(channel, &auth, request)
        .await
        .expect("the heavy request is accepted")
        .into_inner();
    stream.message().await.expect("heavy request's first event");
    started.elapsed()
}

/// A `Stream` call whose request was encoded ahead of time: the caller's connection only copies its bytes, so the
/// caller's own encoding cannot delay the measured stream sharing the connection.
async fn raw_call(
    channel: Channel,
    auth: &MetadataValue<Ascii>,
    request: Vec<u8>,
) -> Result<tonic::Response<tonic::codec::Streaming<()>>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut request = tonic::Request::new(request);
    request.metadata_mut().insert("authorization", auth.clone());
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/llm.gateway.v1.GatewayService/Stream",
    );
    grpc.server_streaming(request, path, service_kit::raw::RawCodec)
        .await
}

/// A `Stream` request for the benchmark prompt offering `n` small tools.
fn with_tools(n: usize) -> pb::StreamRequest {
    let tools = (0..n)
        .map(|i| pb::Tool {
            name: format!("tool_{i}"),
            description: "a tool among many".into(),
            input_schema_json:
                r#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}"#.into(),
            ..Default::default()
        })
        .collect();
    pb::StreamRequest {
        generation: Some(pb::Generation {
            model: HEAVY_MODEL.into(),
            messages: vec![pb::Message {
                role: pb::Role::User as i32,
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::Text(pb::TextPart {
                        text: PROMPT.into(),
                    })),
                }],
            }],
            tools,
            ..Default::default()
        }),
    }
}

/// Sends `request` (encoded, over `max_tools`) and returns the time until the caller holds the refusal.
async fn refused(channel: &Channel, auth: &MetadataValue<Ascii>, request: Vec<u8>) -> Duration {
    let started = Instant::now();
    let status = raw_call(channel.clone(), auth, request)
        .await
        .expect_err("refused");
    let took = started.elapsed();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    took
}

fn nanos(d: &[Duration]) -> Summary {
    let mut v: Vec<u64> = d.iter().map(|d| d.as_nanos() as u64).collect();
    summarize(&mut v)
}

fn row(name: &str, s: Summary) {
    println!(
        "| {name} | {} | {} | {} | {} |",
        s.n,
        ms(s.p50),
        ms(s.p99),
        ms(s.max)
    );
}

/// Every sample of one run.
#[derive(Default)]
struct Samples {
    alone: Vec<Paced>,
    start: Vec<Paced>,
    mid: Vec<Paced>,
    heavy_first_event: Vec<Duration>,
    refused: Vec<Duration>,
    heavy_cpu_ns: u64,
}

async fn run(
    args: &Args,
    channels: &Channels,
    auth: &MetadataValue<Ascii>,
    gateway_pid: u32,
) -> Samples {
    let heavy = with_tools(args.tools).encode_to_vec();
    let refuse = with_tools(args.refuse_tools).encode_to_vec();
    let mut s = Samples::default();
    for _ in 0..3 {
        paced(channels, auth, None).await; // warm-up: connections to the provider, caches
    }
    for _ in 0..args.rounds {
        s.alone.push(paced(channels, auth, None).await.0);
        for at in [HeavyAt::Start, HeavyAt::Third] {
            let request = heavy.clone();
            let cpu = bench::procfs::cpu_ns(gateway_pid).unwrap_or(0);
            let (p, took) = paced(channels, auth, Some((request, at))).await;
            s.heavy_cpu_ns += bench::procfs::cpu_ns(gateway_pid)
                .unwrap_or(0)
                .saturating_sub(cpu);
            s.heavy_first_event.extend(took);
            match at {
                HeavyAt::Start => s.start.push(p),
                HeavyAt::Third => s.mid.push(p),
            }
        }
        s.refused
            .push(refused(&channels.heavy, auth, refuse.clone()).await);
    }
    s
}

fn report(args: &Args, s: &Samples, encode: Duration, heavy_bytes: usize, refuse_bytes: usize) {
    println!(
        "machine: {}; load average before the run: {}",
        procs::machine(),
        procs::loadavg()
    );
    println!(
        "paced stream: {} chunks {} ms apart; heavy request: {} tools ({} bytes encoded); refused request: {} tools ({} bytes); {}",
        args.chunks,
        args.interval_ms,
        args.tools,
        heavy_bytes,
        args.refuse_tools,
        refuse_bytes,
        if args.separate_connections {
            "the heavy and refused requests on a connection of their own"
        } else {
            "one connection for all"
        }
    );
    println!();
    println!("| case (ms) | n | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    let ttft = |v: &[Paced]| nanos(&v.iter().map(|p| p.ttft).collect::<Vec<_>>());
    let gap = |v: &[Paced]| nanos(&v.iter().map(|p| p.max_gap).collect::<Vec<_>>());
    row("first text, alone", ttft(&s.alone));
    row(
        "first text, heavy request sent at the same instant",
        ttft(&s.start),
    );
    row("largest gap, alone", gap(&s.alone));
    row("largest gap, heavy request sent mid-stream", gap(&s.mid));
    row(
        "largest gap, heavy request sent at the start",
        gap(&s.start),
    );
    row(
        "heavy request: its own first event",
        nanos(&s.heavy_first_event),
    );
    row(
        "refused request: RESOURCE_EXHAUSTED in the caller's hands",
        nanos(&s.refused),
    );
    println!();
    let heavy_n = s.heavy_first_event.len().max(1) as u64;
    println!(
        "gateway CPU per heavy round (the heavy request and the paced stream beside it): {} ms; the caller's own \
         encoding of one refused request (done before the runs; requests go out pre-encoded): {} ms",
        ms(s.heavy_cpu_ns / heavy_n),
        ms(encode.as_nanos() as u64)
    );
}

/// The provider of the heavy requests, under SCHED_IDLE (`chrt --idle 0`): it stands for a provider on another
/// machine, so its reading of each 4 MB body must not take this machine's cores from the gateway and the caller being
/// measured (docs/benchmarks.md, "Fairness": at normal priority the first text's p99 beside the heavy request was
/// +6.6 ms against +4.0 and +5.6 with it idle).
async fn start_heavy_provider(
    bin_dir: &std::path::Path,
    args: &Args,
    dir: &std::path::Path,
) -> (tokio::process::Child, String) {
    let mut cmd = tokio::process::Command::new("chrt");
    cmd.args(["--idle", "0"]).arg(bin_dir.join("fake-provider"));
    procs::fake_provider_args(&mut cmd, args.chunks, args.interval_ms);
    procs::spawn_announcing(cmd, &dir.join("fake-provider-heavy.log"))
        .await
        .unwrap_or_else(|e| panic!("heavy fake-provider: {e}"))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let bin_dir = bench::procs::bin_dir(args.bin_dir.as_deref());
    let dir = std::env::temp_dir().join(format!("fairbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("run folder");
    let (_provider, provider_url) = procs::start_fake_provider(
        &bin_dir.join("fake-provider"),
        args.chunks,
        args.interval_ms,
        &dir.join("fake-provider.log"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let (_heavy_provider, heavy_url) = start_heavy_provider(&bin_dir, &args, &dir).await;
    let heavy_provider = format!(
        "[providers.heavy]\nprotocol = \"openai_chat\"\nbase_url = \"{heavy_url}/v1\"\nallow_unlisted_models = true\n\n{LIMITS}"
    );
    let (gateway, addr, _) = procs::start_gateway_with(
        &bin_dir.join("llm-gateway"),
        &provider_url,
        &dir,
        TOKEN,
        "fairbench",
        SERVER,
        &heavy_provider,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let gateway_pid = gateway.id().expect("gateway pid");
    let connect = || async {
        Channel::from_shared(format!("http://{addr}"))
            .expect("address")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect to the gateway")
    };
    let paced = connect().await;
    let heavy = if args.separate_connections {
        connect().await
    } else {
        paced.clone()
    };
    let channels = Channels { paced, heavy };
    let auth: MetadataValue<Ascii> = format!("Bearer {TOKEN}").parse().expect("token");

    let refuse = with_tools(args.refuse_tools);
    let encode_started = Instant::now();
    let refuse_bytes = refuse.encode_to_vec().len();
    let encode = encode_started.elapsed();
    let heavy_bytes = with_tools(args.tools).encoded_len();

    let samples = run(&args, &channels, &auth, gateway_pid).await;
    report(&args, &samples, encode, heavy_bytes, refuse_bytes);
    let _ = std::fs::remove_dir_all(&dir);
}
