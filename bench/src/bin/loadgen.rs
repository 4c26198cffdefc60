//! `loadgen`: the load generator of docs/benchmarks.md.
//!
//! It starts three processes from the same build: the paced fake provider (`fake-provider --scenario paced`), the
//! floor relay (`floor-relay`) and the gateway (`llm-gateway` with a temporary configuration), all on loopback. Then,
//! for each concurrency C of the plan, it runs rounds of C concurrent workers for each path in turn (direct HTTP to
//! the provider, through the floor, through the gateway; interleaved round by round so drift hits all three alike).
//! Each worker runs a few streams back to back and the workers' starts are spread over one stream's length, so C
//! streams stay open with starts arriving steadily, as under real traffic, rather than as one herd. It records
//! each stream's time to first token (request sent → first text delta) and every gap between text deltas with
//! `std::time::Instant`.
//! It reports the percentiles per path, what the floor and the gateway add to the
//! direct path, the gateway-to-floor ratio, and the CPU and RSS of every process (read from `/proc`).
//!
//! ```text
//! loadgen --plan 1x10,100x1 --chunks 64 --interval-ms 20
//! ```
// A benchmark binary: its report goes to stdout, and a broken set-up (a missing binary, a port that will not bind)
// should stop it loudly at start-up.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bench::procfs;
use bench::stats::{Summary, ms, ms_diff, summarize};
use bytes::{Bytes, BytesMut};
use clap::Parser;
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

/// The bearer token the benchmark gateway accepts.
const TOKEN: &str = "bench-caller-token-0123456789abcdef";
/// The model the requests name: provider `bench`, any model name.
const MODEL: &str = "bench/paced";
const PROMPT: &str = "Write a short story about a lighthouse keeper.";

#[derive(Parser, Debug, Clone)]
#[command(about = "Load generator: direct vs floor relay vs llm-gateway, interleaved in one run")]
struct Args {
    /// Concurrency levels and rounds per path, as `CxR` pairs: `1x10,100x1` runs, for each path, 10 rounds of 1
    /// worker and 1 round of 100 concurrent workers (each worker runs `--per-worker` streams).
    #[arg(long, default_value = "1x10,100x1")]
    plan: String,
    /// Text chunks per response.
    #[arg(long, default_value_t = 64)]
    chunks: usize,
    /// Milliseconds between chunks; 0 is burst mode (no pacing).
    #[arg(long, default_value_t = 20)]
    interval_ms: u64,
    /// Which paths to run, comma-separated: direct, floor, gateway.
    #[arg(long, default_value = "direct,floor,gateway")]
    paths: String,
    /// gRPC connections the streams are spread over (per relay), as a service would keep a few channels.
    #[arg(long, default_value_t = 4)]
    grpc_conns: usize,
    /// Streams each of the C workers runs back to back in a round (closed loop), so C streams stay open.
    #[arg(long, default_value_t = 3)]
    per_worker: usize,
    /// Worker starts are spread evenly over one stream's length (chunks × interval), or over C × this many
    /// microseconds if that is longer, so stream starts arrive steadily instead of as one herd.
    #[arg(long, default_value_t = 100)]
    ramp_us: u64,
    /// Per-stream time limit, in seconds.
    #[arg(long, default_value_t = 120)]
    stream_timeout_s: u64,
    /// Folder holding `fake-provider`, `floor-relay` and `llm-gateway` (default: this binary's folder).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path3 {
    Direct,
    Floor,
    Gateway,
}

impl Path3 {
    fn name(self) -> &'static str {
        match self {
            Path3::Direct => "direct",
            Path3::Floor => "floor",
            Path3::Gateway => "gateway",
        }
    }
}

/// What the streams need: clients and the request bodies.
struct Ctx {
    http: reqwest::Client,
    direct_url: String,
    direct_body: Bytes,
    floor: Vec<GatewayServiceClient<Channel>>,
    gateway: Vec<GatewayServiceClient<Channel>>,
    auth: MetadataValue<Ascii>,
    chunks: usize,
    stream_timeout: Duration,
}

/// One stream's timings, in nanoseconds.
struct StreamRec {
    ttft: u64,
    gaps: Vec<u64>,
}

/// Records text-delta arrivals.
struct Clock {
    sent: Instant,
    last: Option<Instant>,
    ttft: u64,
    gaps: Vec<u64>,
    deltas: usize,
}

impl Clock {
    fn new(chunks: usize) -> Clock {
        Clock {
            sent: Instant::now(),
            last: None,
            ttft: 0,
            gaps: Vec::with_capacity(chunks),
            deltas: 0,
        }
    }

    fn delta(&mut self, at: Instant) {
        match self.last {
            None => self.ttft = nanos(at - self.sent),
            Some(prev) => self.gaps.push(nanos(at - prev)),
        }
        self.last = Some(at);
        self.deltas += 1;
    }

    fn finish(self, done: bool, chunks: usize) -> Result<StreamRec, String> {
        if !done || self.deltas != chunks {
            return Err(format!(
                "incomplete stream: {} of {chunks} text deltas, end marker {}",
                self.deltas,
                if done { "seen" } else { "missing" }
            ));
        }
        Ok(StreamRec {
            ttft: self.ttft,
            gaps: self.gaps,
        })
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// An OpenAI chunk with answer text (the role chunk has `"delta":{"role":...}`, the finish chunk `"delta":{}`).
fn is_content(frame: &[u8]) -> bool {
    const NEEDLE: &[u8] = br#""delta":{"content":""#;
    frame.windows(NEEDLE.len()).any(|w| w == NEEDLE)
}

fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\n\n")
}

async fn direct_stream(ctx: &Ctx) -> Result<StreamRec, String> {
    let mut clock = Clock::new(ctx.chunks);
    let mut response = ctx
        .http
        .post(&ctx.direct_url)
        .header("content-type", "application/json")
        .body(ctx.direct_body.clone())
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status()));
    }
    let mut buf = BytesMut::with_capacity(4096);
    let mut done = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("body: {e}"))? {
        let now = Instant::now();
        buf.extend_from_slice(&chunk);
        while let Some(end) = find_blank_line(&buf) {
            let frame = buf.split_to(end + 2);
            if is_content(&frame) {
                clock.delta(now);
            } else if frame.starts_with(b"data: [DONE]") {
                done = true;
            }
        }
    }
    clock.finish(done, ctx.chunks)
}

async fn grpc_stream(ctx: &Ctx, path: Path3, i: usize) -> Result<StreamRec, String> {
    let clients = if path == Path3::Gateway {
        &ctx.gateway
    } else {
        &ctx.floor
    };
    let mut client = clients[i % clients.len()].clone();
    let generation = pb::Generation {
        model: MODEL.into(),
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::Text(pb::TextPart {
                    text: PROMPT.into(),
                })),
            }],
        }],
        ..Default::default()
    };
    let mut request = tonic::Request::new(pb::StreamRequest {
        generation: Some(generation),
    });
    request
        .metadata_mut()
        .insert("authorization", ctx.auth.clone());
    let mut clock = Clock::new(ctx.chunks);
    let mut stream = client
        .stream(request)
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?
        .into_inner();
    let mut done = false;
    use pb::stream_response::Event as E;
    while let Some(msg) = stream
        .message()
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?
    {
        let now = Instant::now();
        match (path, msg.event) {
            // The floor forwards every frame's data unparsed.
            (Path3::Floor, Some(E::TextDelta(d))) => {
                if is_content(d.delta.as_bytes()) {
                    clock.delta(now);
                } else if d.delta == "[DONE]" {
                    done = true;
                }
            }
            (_, Some(E::TextDelta(_))) => clock.delta(now),
            (_, Some(E::StepFinish(_))) => done = true,
            (_, Some(E::Error(e))) => return Err(format!("error event: {}", e.message)),
            _ => {}
        }
    }
    clock.finish(done, ctx.chunks)
}

async fn one_stream(ctx: &Ctx, path: Path3, i: usize) -> Result<StreamRec, String> {
    let run = async {
        match path {
            Path3::Direct => direct_stream(ctx).await,
            _ => grpc_stream(ctx, path, i).await,
        }
    };
    tokio::time::timeout(ctx.stream_timeout, run)
        .await
        .unwrap_or_else(|_| Err("stream timed out".into()))
}

/// The processes whose CPU and memory are read.
#[derive(Debug, Clone, Copy)]
struct Pids {
    provider: u32,
    floor: u32,
    gateway: u32,
    loadgen: u32,
}

impl Pids {
    fn all(&self) -> [u32; 4] {
        [self.provider, self.floor, self.gateway, self.loadgen]
    }
}

const PROCS: [&str; 4] = ["fake-provider", "floor-relay", "llm-gateway", "loadgen"];

/// Everything measured for one path at one concurrency, over all its rounds.
#[derive(Default)]
struct Agg {
    streams: usize,
    completed: usize,
    errors: usize,
    error_samples: Vec<String>,
    ttft: Vec<u64>,
    gaps: Vec<u64>,
    /// CPU nanoseconds per process (PROCS order) during this path's rounds.
    cpu: [u64; 4],
    /// Peak RSS in KiB per process during this path's rounds.
    rss_peak: [u64; 4],
    /// Wall time of this path's rounds, nanoseconds.
    wall: u64,
}

fn cpu_all(pids: &Pids) -> [u64; 4] {
    pids.all().map(|p| procfs::cpu_ns(p).unwrap_or(0))
}

async fn round(
    ctx: &Arc<Ctx>,
    pids: &Pids,
    path: Path3,
    c: usize,
    per_worker: usize,
    ramp: Duration,
    agg: &mut Agg,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        let pids = *pids;
        tokio::spawn(async move {
            let mut peak = [0u64; 4];
            loop {
                for (slot, pid) in peak.iter_mut().zip(pids.all()) {
                    *slot = (*slot).max(procfs::rss_kib(pid).unwrap_or(0));
                }
                if stop.load(Ordering::Relaxed) {
                    return peak;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let cpu_before = cpu_all(pids);
    let start = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..c {
        let ctx = Arc::clone(ctx);
        let at = start + ramp.mul_f64(i as f64 / c as f64);
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let mut results = Vec::with_capacity(per_worker);
            for _ in 0..per_worker {
                results.push(one_stream(&ctx, path, i).await);
            }
            results
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(r) => results.extend(r),
            Err(e) => results.push(Err(format!("task: {e}"))),
        }
    }
    for result in results {
        agg.streams += 1;
        match result {
            Ok(rec) => {
                agg.completed += 1;
                agg.ttft.push(rec.ttft);
                agg.gaps.extend(rec.gaps);
            }
            Err(e) => {
                agg.errors += 1;
                if agg.error_samples.len() < 5 && !agg.error_samples.contains(&e) {
                    agg.error_samples.push(e);
                }
            }
        }
    }
    agg.wall += nanos(start.elapsed());
    let cpu_after = cpu_all(pids);
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap_or_default();
    for k in 0..4 {
        agg.cpu[k] += cpu_after[k].saturating_sub(cpu_before[k]);
        agg.rss_peak[k] = agg.rss_peak[k].max(peak[k]);
    }
}

/// Starts a child whose first stdout line is `listening on X` and returns it with X.
async fn spawn_announcing(mut cmd: Command, log: &Path) -> (Child, String) {
    let stderr = std::fs::File::create(log).expect("log file");
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn child process");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .expect("child announced its address in time")
    .expect("read child's stdout");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?} (log: {})", log.display()))
        .to_owned();
    (child, addr)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn start_gateway(bin: &Path, provider: &str, dir: &Path) -> (Child, SocketAddr) {
    let port = free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let config = format!(
        r#"# Written by loadgen.
[server]
listen = "{addr}"
shutdown_grace_ms = 1000
max_inflight_generations = 100000

[providers.bench]
protocol = "openai_chat"
base_url = "{provider}/v1"
allow_unlisted_models = true
"#
    );
    let path = dir.join("gateway.toml");
    std::fs::write(&path, config).expect("write gateway config");
    let log = std::fs::File::create(dir.join("llm-gateway.log")).expect("gateway log");
    let child = Command::new(bin)
        .arg("--config")
        .arg(&path)
        .env("GATEWAY_AUTH_TOKENS", TOKEN)
        .env("RUST_LOG", "info")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn llm-gateway");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "llm-gateway did not listen on {addr}; see {}",
            dir.join("llm-gateway.log").display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (child, addr)
}

async fn channels(addr: &str, n: usize) -> Vec<GatewayServiceClient<Channel>> {
    let mut out = Vec::new();
    for _ in 0..n.max(1) {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect");
        out.push(GatewayServiceClient::new(channel).max_decoding_message_size(usize::MAX));
    }
    out
}

/// Raises the soft open-files limit to the hard one (children inherit it): C streams need about 2C descriptors.
fn raise_nofile() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
    getrlimit(Resource::Nofile).current
}

fn parse_plan(plan: &str) -> Vec<(usize, usize)> {
    plan.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (c, r) = p.trim().split_once('x').unwrap_or((p.trim(), "1"));
            (
                c.parse().expect("concurrency in --plan"),
                r.parse().expect("rounds in --plan"),
            )
        })
        .collect()
}

fn parse_paths(s: &str) -> Vec<Path3> {
    s.split(',')
        .map(|p| match p.trim() {
            "direct" => Path3::Direct,
            "floor" => Path3::Floor,
            "gateway" => Path3::Gateway,
            other => panic!("unknown path {other:?} in --paths"),
        })
        .collect()
}

/// `/proc/loadavg`'s three averages: other work on the machine shows here.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    format!("{cpu}, {cores} cores, Linux {kernel}")
}

/// Per-concurrency results of every path.
struct Level {
    c: usize,
    rounds: usize,
    paths: Vec<(Path3, Agg)>,
}

fn summaries(agg: &mut Agg) -> (Summary, Summary) {
    (summarize(&mut agg.ttft), summarize(&mut agg.gaps))
}

fn ratio(gw: f64, floor: f64) -> String {
    if floor <= 0.0 {
        "n/a".into()
    } else {
        format!("{:.2}", gw / floor)
    }
}

fn report(
    levels: &mut [Level],
    args: &Args,
    baseline_rss: &[u64; 4],
    load: &(String, String),
    out: &mut String,
) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "\n## loadgen results\n");
    let _ = writeln!(out, "- machine: {}", machine());
    let _ = writeln!(
        out,
        "- load average (1, 5, 15 min) at start: {}; at end: {}",
        load.0, load.1
    );
    let _ = writeln!(
        out,
        "- provider: {} chunks{}; gRPC connections per relay: {}; {} streams back to back per worker; worker starts spread over max(stream length, C × {} µs)",
        args.chunks,
        if args.interval_ms == 0 {
            " in a burst (no pacing)".to_owned()
        } else {
            format!(" at {} ms", args.interval_ms)
        },
        args.grpc_conns,
        args.per_worker,
        args.ramp_us
    );
    let _ = writeln!(
        out,
        "- idle RSS after warm-up: fake-provider {} KiB, floor-relay {} KiB, llm-gateway {} KiB",
        baseline_rss[0], baseline_rss[1], baseline_rss[2]
    );
    for level in levels.iter_mut() {
        let _ = writeln!(
            out,
            "\n### concurrency {} ({} rounds per path)\n",
            level.c, level.rounds
        );
        let _ = writeln!(
            out,
            "| path | streams | completed | errors | TTFT p50 ms | p99 | max | gap p50 ms | p99 | max |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
        let mut sums = Vec::new();
        for (path, agg) in level.paths.iter_mut() {
            let (t, g) = summaries(agg);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                path.name(),
                agg.streams,
                agg.completed,
                agg.errors,
                ms(t.p50),
                ms(t.p99),
                ms(t.max),
                ms(g.p50),
                ms(g.p99),
                ms(g.max)
            );
            sums.push((*path, t, g));
        }
        let direct = sums.iter().find(|(p, ..)| *p == Path3::Direct).copied();
        if let Some((_, dt, dg)) = direct {
            let _ = writeln!(
                out,
                "\n| added over direct | TTFT p50 ms | p99 | max | gap p50 ms | p99 | max |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|---|---|");
            for (path, t, g) in sums.iter().filter(|(p, ..)| *p != Path3::Direct) {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    path.name(),
                    ms_diff(t.p50, dt.p50),
                    ms_diff(t.p99, dt.p99),
                    ms_diff(t.max, dt.max),
                    ms_diff(g.p50, dg.p50),
                    ms_diff(g.p99, dg.p99),
                    ms_diff(g.max, dg.max)
                );
            }
            let floor = sums.iter().find(|(p, ..)| *p == Path3::Floor).copied();
            let gw = sums.iter().find(|(p, ..)| *p == Path3::Gateway).copied();
            if let (Some((_, ft, fg)), Some((_, gt, gg))) = (floor, gw) {
                let add = |a: u64, b: u64| a as f64 - b as f64;
                let _ = writeln!(
                    out,
                    "| gateway ÷ floor (added) | {} | {} | {} | {} | {} | {} |",
                    ratio(add(gt.p50, dt.p50), add(ft.p50, dt.p50)),
                    ratio(add(gt.p99, dt.p99), add(ft.p99, dt.p99)),
                    ratio(add(gt.max, dt.max), add(ft.max, dt.max)),
                    ratio(add(gg.p50, dg.p50), add(fg.p50, dg.p50)),
                    ratio(add(gg.p99, dg.p99), add(fg.p99, dg.p99)),
                    ratio(add(gg.max, dg.max), add(fg.max, dg.max)),
                );
            }
        }
        let _ = writeln!(
            out,
            "\n| rounds of | process | CPU ms | CPU µs per stream | CPU µs per text delta | text deltas per CPU-second | peak RSS KiB | RSS per open stream KiB |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for (path, agg) in level.paths.iter() {
            let relay = match path {
                Path3::Direct => None,
                Path3::Floor => Some(1),
                Path3::Gateway => Some(2),
            };
            let deltas = (agg.completed * args.chunks) as f64;
            for k in [0usize, 1, 2, 3] {
                if matches!(k, 1 | 2) && relay != Some(k) {
                    continue;
                }
                let cpu = agg.cpu[k] as f64;
                let per_stream = if agg.completed > 0 {
                    format!("{:.1}", cpu / 1e3 / agg.completed as f64)
                } else {
                    "-".into()
                };
                let (per_delta, per_sec) = if deltas > 0.0 && cpu > 0.0 {
                    (
                        format!("{:.2}", cpu / 1e3 / deltas),
                        format!("{:.0}", deltas / (cpu / 1e9)),
                    )
                } else {
                    ("-".into(), "-".into())
                };
                let per_open = if k < 3 {
                    format!(
                        "{:.1}",
                        agg.rss_peak[k].saturating_sub(baseline_rss[k]) as f64 / level.c as f64
                    )
                } else {
                    "-".into()
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.1} | {} | {} | {} | {} | {} |",
                    path.name(),
                    PROCS[k],
                    cpu / 1e6,
                    per_stream,
                    per_delta,
                    per_sec,
                    agg.rss_peak[k],
                    per_open
                );
            }
        }
        for (path, agg) in level.paths.iter() {
            for e in &agg.error_samples {
                let _ = writeln!(out, "\n- {} error: {e}", path.name());
            }
        }
    }
}

fn to_json(levels: &mut [Level], args: &Args) -> serde_json::Value {
    let levels: Vec<serde_json::Value> = levels
        .iter_mut()
        .map(|l| {
            let paths: Vec<serde_json::Value> = l
                .paths
                .iter_mut()
                .map(|(p, agg)| {
                    let (t, g) = summaries(agg);
                    serde_json::json!({
                        "path": p.name(),
                        "streams": agg.streams,
                        "completed": agg.completed,
                        "errors": agg.errors,
                        "errors_sample": agg.error_samples,
                        "ttft_ns": {"n": t.n, "p50": t.p50, "p99": t.p99, "max": t.max},
                        "gap_ns": {"n": g.n, "p50": g.p50, "p99": g.p99, "max": g.max},
                        "cpu_ns": {"fake-provider": agg.cpu[0], "floor-relay": agg.cpu[1], "llm-gateway": agg.cpu[2], "loadgen": agg.cpu[3]},
                        "rss_peak_kib": {"fake-provider": agg.rss_peak[0], "floor-relay": agg.rss_peak[1], "llm-gateway": agg.rss_peak[2], "loadgen": agg.rss_peak[3]},
                        "wall_ns": agg.wall,
                    })
                })
                .collect();
            serde_json::json!({"concurrency": l.c, "rounds": l.rounds, "paths": paths})
        })
        .collect();
    serde_json::json!({
        "machine": machine(),
        "loadavg_end": loadavg(),
        "chunks": args.chunks,
        "interval_ms": args.interval_ms,
        "grpc_conns": args.grpc_conns,
        "per_worker": args.per_worker,
        "plan": args.plan,
        "levels": levels,
    })
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let plan = parse_plan(&args.plan);
    let paths = parse_paths(&args.paths);
    let nofile = raise_nofile();
    let max_c = plan.iter().map(|(c, _)| *c).max().unwrap_or(1);
    if let Some(n) = nofile
        && (n as usize) < max_c * 2 + 256
    {
        eprintln!(
            "loadgen: warning: open-files limit {n} is low for {max_c} streams; raise it (ulimit -n)"
        );
    }
    let bin_dir = args.bin_dir.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .expect("current exe")
            .parent()
            .expect("exe folder")
            .to_path_buf()
    });
    let dir = std::env::temp_dir().join(format!("loadgen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let mut provider_cmd = Command::new(bin_dir.join("fake-provider"));
    provider_cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--scenario",
        if args.interval_ms == 0 {
            "burst"
        } else {
            "paced"
        },
        "--chunks",
        &args.chunks.to_string(),
        "--interval-ms",
        &args.interval_ms.to_string(),
    ]);
    let (provider, provider_url) =
        spawn_announcing(provider_cmd, &dir.join("fake-provider.log")).await;
    let mut floor_cmd = Command::new(bin_dir.join("floor-relay"));
    floor_cmd.args(["--listen", "127.0.0.1:0", "--upstream", &provider_url]);
    let (floor, floor_addr) = spawn_announcing(floor_cmd, &dir.join("floor-relay.log")).await;
    let (gateway, gateway_addr) =
        start_gateway(&bin_dir.join("llm-gateway"), &provider_url, &dir).await;
    let pids = Pids {
        provider: provider.id().expect("provider pid"),
        floor: floor.id().expect("floor pid"),
        gateway: gateway.id().expect("gateway pid"),
        loadgen: std::process::id(),
    };

    // The direct client uses the gateway transport's HTTP settings, so connection reuse is the same on every path.
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(64)
        .build()
        .expect("http client");
    let direct_body = serde_json::json!({
        "model": "paced",
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": true,
        "stream_options": {"include_usage": true},
    })
    .to_string();
    let ctx = Arc::new(Ctx {
        http,
        direct_url: format!("{provider_url}/v1/chat/completions"),
        direct_body: Bytes::from(direct_body),
        floor: channels(&floor_addr, args.grpc_conns).await,
        gateway: channels(&gateway_addr.to_string(), args.grpc_conns).await,
        auth: format!("Bearer {TOKEN}").parse().expect("token header"),
        chunks: args.chunks,
        stream_timeout: Duration::from_secs(args.stream_timeout_s),
    });
    let stream_length = Duration::from_millis(args.interval_ms * args.chunks as u64);

    eprintln!(
        "loadgen: provider {provider_url}, floor {floor_addr}, gateway {gateway_addr}; logs in {}",
        dir.display()
    );
    // Warm-up: connections, allocator pools, lazily built state; not recorded.
    for &path in &paths {
        let mut scratch = Agg::default();
        round(&ctx, &pids, path, 8, 1, Duration::ZERO, &mut scratch).await;
        assert!(
            scratch.errors == 0,
            "warm-up of {} failed: {:?}",
            path.name(),
            scratch.error_samples
        );
    }
    let baseline_rss = pids.all().map(|p| procfs::rss_kib(p).unwrap_or(0));

    let load_start = loadavg();
    let mut levels = Vec::new();
    for &(c, rounds) in &plan {
        let mut aggs: Vec<(Path3, Agg)> = paths.iter().map(|&p| (p, Agg::default())).collect();
        let started = Instant::now();
        for r in 0..rounds {
            for (path, agg) in aggs.iter_mut() {
                let ramp = stream_length.max(Duration::from_micros(args.ramp_us) * c as u32);
                round(&ctx, &pids, *path, c, args.per_worker, ramp, agg).await;
            }
            eprint!("\rloadgen: concurrency {c}: round {}/{rounds}", r + 1);
        }
        eprintln!(" ({:.1} s)", started.elapsed().as_secs_f64());
        levels.push(Level {
            c,
            rounds,
            paths: aggs,
        });
    }

    let mut out = String::new();
    let load = (load_start, loadavg());
    report(&mut levels, &args, &baseline_rss, &load, &mut out);
    {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }
    if let Some(path) = &args.json {
        let json = to_json(&mut levels, &args);
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json).expect("json") + "\n",
        )
        .expect("write --json file");
    }
    drop((provider, floor, gateway));
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_parses() {
        assert_eq!(parse_plan("1x30, 100x3,5"), vec![(1, 30), (100, 3), (5, 1)]);
    }

    #[test]
    fn content_frames_are_told_from_role_and_finish() {
        assert!(is_content(
            br#"data: {"choices":[{"index":0,"delta":{"content":"tok1"}}]}"#
        ));
        assert!(!is_content(
            br#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#
        ));
        assert!(!is_content(
            br#"data: {"choices":[{"index":0,"delta":{}}]}"#
        ));
    }

    #[test]
    fn clock_records_ttft_and_gaps() {
        let mut clock = Clock::new(3);
        let t0 = clock.sent;
        clock.delta(t0 + Duration::from_millis(1));
        clock.delta(t0 + Duration::from_millis(3));
        clock.delta(t0 + Duration::from_millis(6));
        let rec = clock.finish(true, 3).unwrap();
        assert_eq!(rec.ttft, 1_000_000);
        assert_eq!(rec.gaps, vec![2_000_000, 3_000_000]);
        assert!(Clock::new(3).finish(true, 3).is_err());
    }
}
