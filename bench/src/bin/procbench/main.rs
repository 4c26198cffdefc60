//! `procbench`: the processor benchmark of docs/benchmarks.md.
//!
//! It starts, on loopback, a private `redis-server` (a free port, no persistence unless `--aof`, so the command
//! counts are the processor's alone), the paced fake provider, `llm-gateway` and `session-processor` configured for
//! them. For each concurrency S of the plan it runs rounds of 2·S workers at once, interleaved: S *session* workers,
//! each creating a session and sending `Prompt`s back to back (the paced reply streams provider → gateway →
//! processor → Redis → the client), and S *direct* workers calling the gateway's `Stream` back to back with the same
//! request. Both halves see the same paced schedule at the same time, so what the session path adds is the
//! difference of the two distributions: time to first text (request sent → first text event), gaps between text
//! events, and time to the last text event.
//!
//! Redis commands come from `INFO commandstats` before and after each concurrency level, divided by the text
//! deltas the sessions delivered (completed prompts × chunks); the report breaks them down per command. CPU and RSS
//! of every process come from `/proc` (sampled every 20 ms for RSS peaks).
//!
//! ```text
//! procbench --plan 1x3,50x1,200x1 --chunks 64 --interval-ms 20
//! ```
// A benchmark binary: its report goes to stdout, and a broken set-up (a missing binary, a port that will not bind)
// should stop it loudly at start-up.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bench::procfs;
use bench::procs::{
    free_port, loadavg, machine, parse_plan, raise_nofile, spawn_announcing, spawn_logged,
    wait_listening,
};
use bench::promtext;
use bench::redisinfo::{self, CommandStats};
use bench::stats::{Summary, ms, ms_diff, summarize};
use clap::Parser;
use llm_proto::gateway as gw;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use llm_proto::sessions as spb;
use llm_proto::sessions::session_service_client::SessionServiceClient;
use tokio::process::{Child, Command};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

/// The bearer token the benchmark gateway accepts (from the direct workers and from the processor).
const GATEWAY_TOKEN: &str = "bench-caller-token-0123456789abcdef";
/// The bearer token the benchmark processor accepts.
const PROCESSOR_TOKEN: &str = "procbench-caller-token-0123456789abcdef";
/// The model both halves ask for: provider `bench` (the paced fake), any model name.
use bench::procs::{MODEL, PROMPT};

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Processor benchmark: sessions through session-processor + llm-gateway + Redis vs direct gateway streams, interleaved in one run"
)]
struct Args {
    /// Concurrency levels and rounds, as `SxR` pairs: `1x3,200x1` runs 3 rounds of 1 session worker (+ 1 direct
    /// gateway worker) and 1 round of 200 + 200. Each worker runs `--per-worker` streams back to back.
    #[arg(long, default_value = "1x3,50x1,200x1")]
    plan: String,
    /// Text chunks per response.
    #[arg(long, default_value_t = 64)]
    chunks: usize,
    /// Milliseconds between chunks (the paced schedule); 0 is burst mode.
    #[arg(long, default_value_t = 20)]
    interval_ms: u64,
    /// Prompts (session workers) or gateway streams (direct workers) each worker runs back to back; a session
    /// worker sends all its prompts to one session, so later prompts carry history.
    #[arg(long, default_value_t = 2)]
    per_worker: usize,
    /// gRPC connections each client (to the gateway, to the processor) spreads its streams over.
    #[arg(long, default_value_t = 4)]
    grpc_conns: usize,
    /// Worker starts are spread over one stream's length (chunks × interval), or over 2·S × this many
    /// microseconds if that is longer, so streams start steadily instead of as one herd.
    #[arg(long, default_value_t = 100)]
    ramp_us: u64,
    /// Per-stream time limit, in seconds (a paced stream takes chunks × interval; 64 × 20 ms = 1.3 s).
    #[arg(long, default_value_t = 20)]
    stream_timeout_s: u64,
    /// The `redis-server` to start (a private instance on a free port).
    #[arg(long, default_value = "redis-server")]
    redis_server: PathBuf,
    /// Use this Redis instead of starting one. Its command counts then include every other client's commands,
    /// and its CPU and RSS are not read.
    #[arg(long)]
    redis_url: Option<String>,
    /// Run the private Redis with `appendonly yes` and `appendfsync everysec` (default: no persistence).
    #[arg(long)]
    aof: bool,
    /// Folder holding `fake-provider`, `llm-gateway` and `session-processor` (default: this binary's folder).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Which half of a round a worker belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Half {
    /// Prompts through session-processor.
    Session,
    /// `Stream` calls straight to llm-gateway.
    Direct,
}

/// Clients and what the streams need.
struct Ctx {
    gateway: Vec<GatewayServiceClient<Channel>>,
    processor: Vec<SessionServiceClient<Channel>>,
    gateway_auth: MetadataValue<Ascii>,
    processor_auth: MetadataValue<Ascii>,
    /// The reply text every stream must deliver (learnt from a first direct stream).
    expected: String,
    stream_timeout: Duration,
}

/// One stream's timings, in nanoseconds, and how many text events carried its text.
struct StreamRec {
    ttft: u64,
    gaps: Vec<u64>,
    last: u64,
    events: usize,
}

/// Records text-event arrivals and the text they carry.
struct Clock {
    sent: Instant,
    last: Option<Instant>,
    ttft: u64,
    gaps: Vec<u64>,
    events: usize,
    text: String,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            sent: Instant::now(),
            last: None,
            ttft: 0,
            gaps: Vec::with_capacity(64),
            events: 0,
            text: String::new(),
        }
    }

    fn text(&mut self, at: Instant, delta: &str) {
        match self.last {
            None => self.ttft = nanos(at - self.sent),
            Some(prev) => self.gaps.push(nanos(at - prev)),
        }
        self.last = Some(at);
        self.events += 1;
        self.text.push_str(delta);
    }

    /// How far the stream got, for errors.
    fn progress(&self) -> String {
        format!(
            "{} text events, {} bytes of text",
            self.events,
            self.text.len()
        )
    }

    /// The record, if the end marker arrived and the text is the expected one (`None`: anything non-empty).
    fn finish(self, done: bool, expected: Option<&str>) -> Result<(StreamRec, String), String> {
        let complete = match expected {
            Some(e) => self.text == e,
            None => !self.text.is_empty(),
        };
        if !done || !complete {
            return Err(format!(
                "incomplete stream: {} text events, {} of {} bytes of text, end marker {}",
                self.events,
                self.text.len(),
                expected.map_or(0, str::len),
                if done { "seen" } else { "missing" }
            ));
        }
        let last = self.last.map_or(0, |l| nanos(l - self.sent));
        Ok((
            StreamRec {
                ttft: self.ttft,
                gaps: self.gaps,
                last,
                events: self.events,
            },
            self.text,
        ))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn status(s: &tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

/// One `Stream` call straight to the gateway; `expected` `None` accepts any text (the first probe).
async fn direct_stream(
    ctx: &Ctx,
    i: usize,
    expected: Option<&str>,
) -> Result<(StreamRec, String), String> {
    let mut client = ctx.gateway[i % ctx.gateway.len()].clone();
    let request = bench::procs::stream_request(&ctx.gateway_auth);
    let mut clock = Clock::new();
    let mut stream = client
        .stream(request)
        .await
        .map_err(|s| status(&s))?
        .into_inner();
    let mut done = false;
    use gw::stream_response::Event as E;
    let deadline = tokio::time::Instant::now() + ctx.stream_timeout;
    loop {
        let Ok(next) = tokio::time::timeout_at(deadline, stream.message()).await else {
            return Err(format!(
                "gateway stream timed out after {:?}: {}",
                ctx.stream_timeout,
                clock.progress()
            ));
        };
        let Some(msg) = next.map_err(|s| status(&s))? else {
            break;
        };
        let now = Instant::now();
        match msg.event {
            Some(E::TextDelta(d)) => clock.text(now, &d.delta),
            Some(E::StepFinish(_)) => done = true,
            Some(E::Error(e)) => return Err(format!("error event: {}", e.message)),
            _ => {}
        }
    }
    clock.finish(done, expected)
}

/// Creates a session for a session worker.
async fn create_session(ctx: &Ctx, i: usize) -> Result<String, String> {
    let mut client = ctx.processor[i % ctx.processor.len()].clone();
    let mut request = tonic::Request::new(spb::CreateSessionRequest::default());
    request
        .metadata_mut()
        .insert("authorization", ctx.processor_auth.clone());
    let session = client
        .create_session(request)
        .await
        .map_err(|s| format!("CreateSession: {}", status(&s)))?
        .into_inner()
        .session
        .ok_or_else(|| "CreateSession returned no session".to_owned())?;
    Ok(session.id)
}

/// One `Prompt` through the processor, read up to its `done` event.
async fn session_prompt(ctx: &Ctx, i: usize, session_id: &str) -> Result<StreamRec, String> {
    let mut client = ctx.processor[i % ctx.processor.len()].clone();
    let mut request = tonic::Request::new(spb::PromptRequest {
        session_id: session_id.into(),
        parts: vec![spb::PromptPart {
            kind: Some(spb::prompt_part::Kind::Text(PROMPT.into())),
        }],
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("authorization", ctx.processor_auth.clone());
    let mut clock = Clock::new();
    let mut stream = client
        .prompt(request)
        .await
        .map_err(|s| format!("Prompt: {}", status(&s)))?
        .into_inner();
    let mut done = false;
    use spb::session_event::Event as E;
    let deadline = tokio::time::Instant::now() + ctx.stream_timeout;
    // The kinds of the last few events, for a stream that stalls.
    let mut recent: Vec<&'static str> = Vec::new();
    loop {
        let Ok(next) = tokio::time::timeout_at(deadline, stream.message()).await else {
            return Err(format!(
                "Prompt stream of session {session_id} timed out after {:?}: {}, no `done`; last events: {}",
                ctx.stream_timeout,
                clock.progress(),
                if recent.is_empty() {
                    "none".to_owned()
                } else {
                    recent.join(", ")
                }
            ));
        };
        let Some(msg) = next.map_err(|s| status(&s))? else {
            break;
        };
        let now = Instant::now();
        let event = msg.event.and_then(|e| e.event);
        if recent.len() == 4 {
            recent.remove(0);
        }
        recent.push(event_name(event.as_ref()));
        match event {
            Some(E::PartDelta(d)) => clock.text(now, &d.delta),
            Some(E::Error(e)) => return Err(format!("session error: {:?} {}", e.kind, e.message)),
            Some(E::Done(_)) => {
                done = true;
                break;
            }
            _ => {}
        }
    }
    clock.finish(done, Some(&ctx.expected)).map(|(rec, _)| rec)
}

/// What the processor says about a session whose prompt stalled: its status and its messages.
async fn session_state(ctx: &Ctx, i: usize, session_id: &str) -> String {
    let mut client = ctx.processor[i % ctx.processor.len()].clone();
    let mut get = tonic::Request::new(spb::GetSessionRequest {
        session_id: session_id.into(),
    });
    get.metadata_mut()
        .insert("authorization", ctx.processor_auth.clone());
    let state = match client.get_session(get).await {
        Ok(r) => r
            .into_inner()
            .session
            .and_then(|s| s.status)
            .map_or("no status".to_owned(), |st| {
                format!("status {:?}", st.kind())
            }),
        Err(s) => format!("GetSession: {}", status(&s)),
    };
    let mut list = tonic::Request::new(spb::ListMessagesRequest {
        session_id: session_id.into(),
        ..Default::default()
    });
    list.metadata_mut()
        .insert("authorization", ctx.processor_auth.clone());
    let messages = match client.list_messages(list).await {
        Ok(r) => {
            let roles: Vec<String> = r
                .into_inner()
                .messages
                .iter()
                .map(|m| {
                    let role = if m.role == spb::Role::User as i32 {
                        "user"
                    } else {
                        "assistant"
                    };
                    if m.completed_at.is_some() {
                        format!("{role} (completed)")
                    } else {
                        role.to_owned()
                    }
                })
                .collect();
            format!("messages: [{}]", roles.join(", "))
        }
        Err(s) => format!("ListMessages: {}", status(&s)),
    };
    format!("session {state}, {messages}")
}

/// A session event's kind, as the proto names it.
fn event_name(event: Option<&spb::session_event::Event>) -> &'static str {
    use spb::session_event::Event as E;
    match event {
        None => "empty",
        Some(E::MessageUpdated(_)) => "message_updated",
        Some(E::PartUpdated(_)) => "part_updated",
        Some(E::PartDelta(_)) => "part_delta",
        Some(E::Status(_)) => "status",
        Some(E::Error(_)) => "error",
        Some(E::ToolCallAwaiting(_)) => "tool_call_awaiting",
        Some(E::PermissionAsked(_)) => "permission_asked",
        Some(E::Done(_)) => "done",
    }
}

async fn with_timeout<T>(
    limit: Duration,
    f: impl Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| Err(format!("timed out after {limit:?}")))
}

/// A session worker: one session, `per_worker` prompts back to back.
async fn session_worker(ctx: &Ctx, i: usize, per_worker: usize) -> Vec<Result<StreamRec, String>> {
    let id = match with_timeout(ctx.stream_timeout, create_session(ctx, i)).await {
        Ok(id) => id,
        Err(e) => return (0..per_worker).map(|_| Err(e.clone())).collect(),
    };
    let mut out = Vec::with_capacity(per_worker);
    for n in 0..per_worker {
        // The stream enforces its own deadline (and says how far it got); this is the backstop.
        let limit = ctx.stream_timeout + Duration::from_secs(5);
        let r = with_timeout(limit, session_prompt(ctx, i, &id)).await;
        let r = match r {
            Err(e) if e.contains("timed out") => Err(format!(
                "prompt {} of {per_worker}: {e}; {}",
                n + 1,
                session_state(ctx, i, &id).await
            )),
            other => other,
        };
        out.push(r);
    }
    out
}

/// A direct worker: `per_worker` gateway streams back to back.
async fn direct_worker(ctx: &Ctx, i: usize, per_worker: usize) -> Vec<Result<StreamRec, String>> {
    let mut out = Vec::with_capacity(per_worker);
    for _ in 0..per_worker {
        let limit = ctx.stream_timeout + Duration::from_secs(5);
        let r = with_timeout(limit, direct_stream(ctx, i, Some(&ctx.expected))).await;
        out.push(r.map(|(rec, _)| rec));
    }
    out
}

/// The processes whose CPU and memory are read, in [`PROCS`] order; 0 for one that is not ours (external Redis).
const PROCS: [&str; 5] = [
    "session-processor",
    "redis-server",
    "llm-gateway",
    "fake-provider",
    "procbench",
];
const PROCESSOR: usize = 0;
const REDIS: usize = 1;

fn cpu_all(pids: &[u32; 5]) -> [u64; 5] {
    pids.map(|p| {
        if p == 0 {
            0
        } else {
            procfs::cpu_ns(p).unwrap_or(0)
        }
    })
}

fn rss_all(pids: &[u32; 5]) -> [u64; 5] {
    pids.map(|p| {
        if p == 0 {
            0
        } else {
            procfs::rss_kib(p).unwrap_or(0)
        }
    })
}

/// The streams of one half over all rounds of a level.
#[derive(Default)]
struct Agg {
    streams: usize,
    completed: usize,
    errors: usize,
    error_samples: Vec<String>,
    ttft: Vec<u64>,
    gaps: Vec<u64>,
    last: Vec<u64>,
    events: usize,
}

impl Agg {
    fn add(&mut self, result: Result<StreamRec, String>) {
        self.streams += 1;
        match result {
            Ok(rec) => {
                self.completed += 1;
                self.ttft.push(rec.ttft);
                self.gaps.extend(rec.gaps);
                self.last.push(rec.last);
                self.events += rec.events;
            }
            Err(e) => {
                self.errors += 1;
                if self.error_samples.len() < 5 && !self.error_samples.contains(&e) {
                    self.error_samples.push(e);
                }
            }
        }
    }
}

/// Everything measured at one concurrency.
struct Level {
    s: usize,
    rounds: usize,
    session: Agg,
    direct: Agg,
    /// CPU nanoseconds per process during the level's rounds.
    cpu: [u64; 5],
    /// Peak RSS (KiB) per process during the level's rounds.
    rss_peak: [u64; 5],
    /// RSS (KiB) per process when the level started.
    rss_start: [u64; 5],
    /// Wall time of the level's rounds, nanoseconds.
    wall: u64,
    /// Redis commands executed during the level.
    redis: CommandStats,
    /// The processor's own timing of its prompts' critical path during the level (`session_processor_prompt_phase`).
    phases: promtext::Totals,
}

impl Level {
    fn new(s: usize, rounds: usize, rss_start: [u64; 5]) -> Level {
        Level {
            s,
            rounds,
            session: Agg::default(),
            direct: Agg::default(),
            cpu: [0; 5],
            rss_peak: [0; 5],
            rss_start,
            wall: 0,
            redis: CommandStats::default(),
            phases: promtext::Totals::new(),
        }
    }

    /// Text deltas the sessions delivered: each completed prompt carried the gateway's `chunks` deltas.
    fn session_deltas(&self, chunks: usize) -> u64 {
        (self.session.completed * chunks) as u64
    }
}

/// One round: S session workers and S direct workers, alternating, starts spread over `ramp`.
async fn round(
    ctx: &Arc<Ctx>,
    pids: &[u32; 5],
    s: usize,
    per_worker: usize,
    ramp: Duration,
    level: &mut Level,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        let pids = *pids;
        tokio::spawn(async move {
            let mut peak = [0u64; 5];
            loop {
                for (slot, rss) in peak.iter_mut().zip(rss_all(&pids)) {
                    *slot = (*slot).max(rss);
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
    let workers = 2 * s;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..workers {
        let ctx = Arc::clone(ctx);
        let at = start + ramp.mul_f64(i as f64 / workers as f64);
        let half = if i % 2 == 0 {
            Half::Session
        } else {
            Half::Direct
        };
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let results = match half {
                Half::Session => session_worker(&ctx, i / 2, per_worker).await,
                Half::Direct => direct_worker(&ctx, i / 2, per_worker).await,
            };
            (half, results)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((half, results)) => {
                let agg = match half {
                    Half::Session => &mut level.session,
                    Half::Direct => &mut level.direct,
                };
                for r in results {
                    agg.add(r);
                }
            }
            Err(e) => level.session.add(Err(format!("worker task: {e}"))),
        }
    }
    level.wall += nanos(start.elapsed());
    let cpu_after = cpu_all(pids);
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap_or_default();
    for k in 0..5 {
        level.cpu[k] += cpu_after[k].saturating_sub(cpu_before[k]);
        level.rss_peak[k] = level.rss_peak[k].max(peak[k]);
    }
}

/// The private Redis: a free port, no RDB snapshots, AOF only with `--aof`.
async fn start_redis(bin: &Path, aof: bool, dir: &Path) -> (Child, String) {
    let port = free_port().expect("a free port");
    let log = dir.join("redis-server.log");
    let mut cmd = Command::new(bin);
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", if aof { "yes" } else { "no" }])
        .args(["--appendfsync", "everysec"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(&log);
    let child = spawn_logged(cmd, &dir.join("redis-server.stderr")).unwrap_or_else(|e| {
        panic!(
            "spawn {}: {e} (install redis-server or pass --redis-server / --redis-url)",
            bin.display()
        )
    });
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(addr, Duration::from_secs(20), "redis-server", &log)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (child, format!("redis://{addr}"))
}

async fn start_processor(
    bin: &Path,
    gateway: SocketAddr,
    redis_url: &str,
    dir: &Path,
) -> (Child, SocketAddr, SocketAddr) {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port().expect("a free port")));
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port().expect("a free port")));
    let workspaces = dir.join("workspaces");
    std::fs::create_dir_all(&workspaces).expect("workspace root");
    // A key prefix of its own, in case `--redis-url` points at a shared Redis.
    let prefix = format!("procbench:{}:", std::process::id());
    let config = format!(
        r#"# Written by procbench.
[server]
listen = "{addr}"
shutdown_grace_ms = 1000

[gateway]
url = "http://{gateway}"
step_timeout_ms = 120000

[redis]
url = "{redis_url}"
prefix = "{prefix}"

[titles]
enabled = false

[agents.default]
role_prompt = "You are a benchmark agent."
model = "{MODEL}"
tools = []
"#
    );
    let path = dir.join("processor.toml");
    std::fs::write(&path, config).expect("write processor config");
    let log = dir.join("session-processor.log");
    let mut cmd = Command::new(bin);
    // The environment overrides the file: set what the file says, so a developer's REDIS_URL or GATEWAY_URL cannot
    // point the benchmark elsewhere.
    cmd.arg("--config")
        .arg(&path)
        .env("PROCESSOR_AUTH_TOKENS", PROCESSOR_TOKEN)
        .env("GATEWAY_TOKEN", GATEWAY_TOKEN)
        .env("GATEWAY_URL", format!("http://{gateway}"))
        .env("REDIS_URL", redis_url)
        .env("PROCESSOR_LISTEN", addr.to_string())
        .env("PROCESSOR_WORKSPACE_ROOT", &workspaces)
        .env("RUST_LOG", "info")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("PROCESSOR_METRICS_LISTEN", metrics.to_string())
        .env_remove("PROCESSOR_CONFIG");
    let child = spawn_logged(cmd, &log).expect("spawn session-processor");
    wait_listening(addr, Duration::from_secs(30), "session-processor", &log)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (child, addr, metrics)
}

/// The processor's prompt-phase histogram totals, from its `/metrics`.
async fn prompt_phases(metrics: SocketAddr) -> promtext::Totals {
    let text = promtext::scrape(metrics)
        .await
        .unwrap_or_else(|e| panic!("scrape the processor's metrics: {e}"));
    promtext::histogram_totals(&text, "session_processor_prompt_phase_seconds", "phase")
}

/// One line of the report: the mean time from a prompt reaching the processor's engine to the end of each phase.
fn phases_line(phases: &promtext::Totals) -> String {
    let mean = |phase: &str| match phases.get(phase) {
        Some((sum, n)) if *n > 0 => format!("{:.3} ms", sum * 1e3 / *n as f64),
        _ => "-".into(),
    };
    let prompts = phases.get("begun").map_or(0, |(_, n)| *n);
    format!(
        "Critical path, the processor's own clock (mean over {prompts} prompts, from the prompt reaching the engine): lease, user message and history stored/read **{}**; gateway call started **{}**; first gateway event **{}**",
        mean("begun"),
        mean("gateway_called"),
        mean("first_event")
    )
}

async fn connect(addr: &str) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .tcp_nodelay(true)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

fn per_thousand(n: u64, deltas: u64) -> String {
    if deltas == 0 {
        "-".into()
    } else {
        format!("{:.1}", n as f64 * 1000.0 / deltas as f64)
    }
}

fn per_unit(n: u64, units: usize) -> String {
    if units == 0 {
        "-".into()
    } else {
        format!("{:.2}", n as f64 / units as f64)
    }
}

/// Header facts of the run.
struct RunInfo {
    redis: String,
    baseline_rss: [u64; 5],
    load_start: String,
    load_end: String,
}

fn summaries(agg: &mut Agg) -> (Summary, Summary, Summary) {
    (
        summarize(&mut agg.ttft),
        summarize(&mut agg.gaps),
        summarize(&mut agg.last),
    )
}

fn report(levels: &mut [Level], args: &Args, run: &RunInfo, out: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "\n## procbench results\n");
    let _ = writeln!(out, "- machine: {}", machine());
    let _ = writeln!(
        out,
        "- load average (1, 5, 15 min) at start: {}; at end: {}",
        run.load_start, run.load_end
    );
    let _ = writeln!(
        out,
        "- provider: {} chunks{}; {} prompts (session workers) or streams (direct workers) back to back per worker; {} gRPC connections per client; worker starts spread over max(stream length, 2·S × {} µs)",
        args.chunks,
        if args.interval_ms == 0 {
            " in a burst (no pacing)".to_owned()
        } else {
            format!(" at {} ms", args.interval_ms)
        },
        args.per_worker,
        args.grpc_conns,
        args.ramp_us
    );
    let _ = writeln!(out, "- Redis: {}", run.redis);
    let _ = writeln!(
        out,
        "- idle RSS after warm-up: session-processor {} KiB, redis-server {} KiB, llm-gateway {} KiB",
        run.baseline_rss[PROCESSOR], run.baseline_rss[REDIS], run.baseline_rss[2]
    );
    for level in levels.iter_mut() {
        let _ = writeln!(
            out,
            "\n### {} concurrent sessions + {} direct gateway streams ({} round{}, {:.1} s)\n",
            level.s,
            level.s,
            level.rounds,
            if level.rounds == 1 { "" } else { "s" },
            level.wall as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "| path | streams | completed | errors | text events per stream | first text p50 ms | p99 | max | gap p50 ms | p99 | max | last text p50 ms | p99 | max |"
        );
        let _ = writeln!(
            out,
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        let mut sums = Vec::new();
        for (name, agg) in [
            ("session (processor)", &mut level.session),
            ("direct (gateway)", &mut level.direct),
        ] {
            let (t, g, l) = summaries(agg);
            let per_stream = if agg.completed > 0 {
                format!("{:.1}", agg.events as f64 / agg.completed as f64)
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {per_stream} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                agg.streams,
                agg.completed,
                agg.errors,
                ms(t.p50),
                ms(t.p99),
                ms(t.max),
                ms(g.p50),
                ms(g.p99),
                ms(g.max),
                ms(l.p50),
                ms(l.p99),
                ms(l.max)
            );
            sums.push((t, g, l));
        }
        let ((st, sg, sl), (dt, dg, dl)) = (sums[0], sums[1]);
        let _ = writeln!(
            out,
            "| **added by the processor** | | | | | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            ms_diff(st.p50, dt.p50),
            ms_diff(st.p99, dt.p99),
            ms_diff(st.max, dt.max),
            ms_diff(sg.p50, dg.p50),
            ms_diff(sg.p99, dg.p99),
            ms_diff(sg.max, dg.max),
            ms_diff(sl.p50, dl.p50),
            ms_diff(sl.p99, dl.p99),
            ms_diff(sl.max, dl.max)
        );

        let deltas = level.session_deltas(args.chunks);
        let all_deltas = deltas + (level.direct.completed * args.chunks) as u64;
        let _ = writeln!(
            out,
            "\n| process | CPU ms | CPU µs per delta | peak RSS KiB | RSS growth per open session KiB |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for (k, name) in PROCS.iter().enumerate() {
            // The processor and Redis serve the session half only; the others serve (or read) both halves.
            let d = if k <= REDIS { deltas } else { all_deltas };
            let per_delta = if d > 0 && level.cpu[k] > 0 {
                format!("{:.2}", level.cpu[k] as f64 / 1e3 / d as f64)
            } else {
                "-".into()
            };
            // Redis keeps what the sessions stored, so its growth is taken from the level's start; the processes
            // that keep nothing per session are measured from their idle RSS after the warm-up.
            let base = if k == REDIS {
                level.rss_start[k]
            } else {
                run.baseline_rss[k]
            };
            let growth = if k <= REDIS && level.rss_peak[k] > 0 {
                format!(
                    "{:.1}",
                    level.rss_peak[k].saturating_sub(base) as f64 / level.s as f64
                )
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "| {name} | {:.1} | {per_delta} | {} | {growth} |",
                level.cpu[k] as f64 / 1e6,
                if level.rss_peak[k] > 0 {
                    level.rss_peak[k].to_string()
                } else {
                    "-".into()
                }
            );
        }

        let total = level.redis.total();
        let prompts = level.session.streams;
        let _ = writeln!(
            out,
            "\nRedis: {total} commands executed for {deltas} text deltas delivered in {} completed prompts ({} sessions): **{} per 1 000 deltas**, {} per prompt; of them {} script calls (EVALSHA/EVAL/FCALL; the commands a script runs are counted as well)\n",
            level.session.completed,
            level.s * level.rounds,
            per_thousand(total, deltas),
            per_unit(total, prompts),
            level.redis.script_calls()
        );
        let _ = writeln!(out, "{}\n", phases_line(&level.phases));
        let _ = writeln!(out, "| command | calls | per prompt | per 1 000 deltas |");
        let _ = writeln!(out, "|---|---|---|---|");
        for (name, n) in level.redis.ranked() {
            let _ = writeln!(
                out,
                "| {name} | {n} | {} | {} |",
                per_unit(n, prompts),
                per_thousand(n, deltas)
            );
        }
        for (name, agg) in [("session", &level.session), ("direct", &level.direct)] {
            for e in &agg.error_samples {
                let _ = writeln!(out, "\n- {name} error: {e}");
            }
        }
    }
}

fn to_json(levels: &mut [Level], args: &Args, run: &RunInfo) -> serde_json::Value {
    let levels: Vec<serde_json::Value> = levels
        .iter_mut()
        .map(|l| {
            let deltas = l.session_deltas(args.chunks);
            let half = |agg: &mut Agg| {
                let (t, g, last) = summaries(agg);
                serde_json::json!({
                    "streams": agg.streams,
                    "completed": agg.completed,
                    "errors": agg.errors,
                    "errors_sample": agg.error_samples,
                    "text_events": agg.events,
                    "first_text_ns": {"n": t.n, "p50": t.p50, "p99": t.p99, "max": t.max},
                    "gap_ns": {"n": g.n, "p50": g.p50, "p99": g.p99, "max": g.max},
                    "last_text_ns": {"n": last.n, "p50": last.p50, "p99": last.p99, "max": last.max},
                })
            };
            let session = half(&mut l.session);
            let direct = half(&mut l.direct);
            let named = |v: &[u64; 5]| -> serde_json::Value {
                PROCS
                    .iter()
                    .zip(v)
                    .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
                    .collect::<serde_json::Map<_, _>>()
                    .into()
            };
            serde_json::json!({
                "sessions": l.s,
                "rounds": l.rounds,
                "session": session,
                "direct": direct,
                "session_deltas": deltas,
                "redis_commands": l.redis.0,
                "redis_commands_total": l.redis.total(),
                "redis_script_calls": l.redis.script_calls(),
                "redis_commands_per_1000_deltas": if deltas > 0 { l.redis.total() as f64 * 1000.0 / deltas as f64 } else { 0.0 },
                "cpu_ns": named(&l.cpu),
                "rss_peak_kib": named(&l.rss_peak),
                "rss_start_kib": named(&l.rss_start),
                "wall_ns": l.wall,
                "prompt_phases_mean_ms": l.phases.iter().map(|(k, (sum, n))| {
                    (k.clone(), serde_json::json!(if *n > 0 { sum * 1e3 / *n as f64 } else { 0.0 }))
                }).collect::<serde_json::Map<_, _>>(),
            })
        })
        .collect();
    serde_json::json!({
        "machine": machine(),
        "loadavg_start": run.load_start,
        "loadavg_end": run.load_end,
        "redis": run.redis,
        "chunks": args.chunks,
        "interval_ms": args.interval_ms,
        "per_worker": args.per_worker,
        "grpc_conns": args.grpc_conns,
        "plan": args.plan,
        "idle_rss_kib": PROCS.iter().zip(run.baseline_rss).map(|(k, v)| ((*k).to_owned(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        "levels": levels,
    })
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let plan = parse_plan(&args.plan).unwrap_or_else(|e| panic!("--plan: {e}"));
    let max_s = plan.iter().map(|(s, _)| *s).max().unwrap_or(1);
    if let Some(n) = raise_nofile()
        && (n as usize) < max_s * 4 + 256
    {
        eprintln!(
            "procbench: warning: open-files limit {n} is low for {max_s} sessions; raise it (ulimit -n)"
        );
    }
    let bin_dir = args.bin_dir.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .expect("current exe")
            .parent()
            .expect("exe folder")
            .to_path_buf()
    });
    let dir = std::env::temp_dir().join(format!("procbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");

    let (redis, redis_url) = match &args.redis_url {
        Some(url) => (None, url.clone()),
        None => {
            let (child, url) = start_redis(&args.redis_server, args.aof, &dir).await;
            (Some(child), url)
        }
    };
    let mut redis_conn = redis::Client::open(redis_url.as_str())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("connect to Redis at {redis_url}: {e}"));
    let redis_version = redisinfo::info_section(&mut redis_conn, "server")
        .await
        .ok()
        .and_then(|t| redisinfo::info_field(&t, "redis_version").map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    let redis_desc = match &redis {
        Some(_) => format!(
            "private redis-server {redis_version} on {redis_url}, {}",
            if args.aof {
                "AOF on (appendfsync everysec)"
            } else {
                "no persistence"
            }
        ),
        None => format!(
            "external Redis {redis_version} at {redis_url} (command counts include other clients)"
        ),
    };

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
    let (provider, provider_url) = spawn_announcing(provider_cmd, &dir.join("fake-provider.log"))
        .await
        .unwrap_or_else(|e| panic!("fake-provider: {e}"));
    let (gateway, gateway_addr, _) = bench::procs::start_gateway(
        &bin_dir.join("llm-gateway"),
        &provider_url,
        &dir,
        GATEWAY_TOKEN,
        "procbench",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let (processor, processor_addr, processor_metrics) = start_processor(
        &bin_dir.join("session-processor"),
        gateway_addr,
        &redis_url,
        &dir,
    )
    .await;
    let pids: [u32; 5] = [
        processor.id().expect("processor pid"),
        redis.as_ref().and_then(Child::id).unwrap_or(0),
        gateway.id().expect("gateway pid"),
        provider.id().expect("provider pid"),
        std::process::id(),
    ];

    let mut gateway_clients = Vec::new();
    let mut processor_clients = Vec::new();
    for _ in 0..args.grpc_conns.max(1) {
        gateway_clients.push(
            GatewayServiceClient::new(connect(&gateway_addr.to_string()).await)
                .max_decoding_message_size(usize::MAX),
        );
        processor_clients.push(
            SessionServiceClient::new(connect(&processor_addr.to_string()).await)
                .max_decoding_message_size(usize::MAX),
        );
    }
    let mut ctx = Ctx {
        gateway: gateway_clients,
        processor: processor_clients,
        gateway_auth: format!("Bearer {GATEWAY_TOKEN}")
            .parse()
            .expect("token header"),
        processor_auth: format!("Bearer {PROCESSOR_TOKEN}")
            .parse()
            .expect("token header"),
        expected: String::new(),
        stream_timeout: Duration::from_secs(args.stream_timeout_s),
    };
    eprintln!(
        "procbench: provider {provider_url}, gateway {gateway_addr}, processor {processor_addr}, Redis {redis_url}; logs in {}",
        dir.display()
    );
    // The reply text every stream must deliver, as the gateway streams it.
    let (probe, text) = direct_stream(&ctx, 0, None)
        .await
        .unwrap_or_else(|e| panic!("first gateway stream failed: {e}"));
    assert_eq!(
        probe.events, args.chunks,
        "the gateway streamed {} text deltas, expected {}",
        probe.events, args.chunks
    );
    ctx.expected = text;
    let ctx = Arc::new(ctx);

    // Warm-up: connections, allocator pools, script loading, lazily built state; not recorded.
    let mut warm = Level::new(8, 1, [0; 5]);
    round(&ctx, &pids, 8, 1, Duration::ZERO, &mut warm).await;
    assert!(
        warm.session.errors == 0 && warm.direct.errors == 0,
        "warm-up failed: {:?} {:?} (logs in {})",
        warm.session.error_samples,
        warm.direct.error_samples,
        dir.display()
    );
    let baseline_rss = rss_all(&pids);

    let stream_length = Duration::from_millis(args.interval_ms * args.chunks as u64);
    let load_start = loadavg();
    let mut levels = Vec::new();
    for &(s, rounds) in &plan {
        let mut level = Level::new(s, rounds, rss_all(&pids));
        let before = redisinfo::command_stats(&mut redis_conn)
            .await
            .expect("INFO commandstats");
        let phases_before = prompt_phases(processor_metrics).await;
        let started = Instant::now();
        for r in 0..rounds {
            let ramp = stream_length.max(Duration::from_micros(args.ramp_us) * (2 * s) as u32);
            round(&ctx, &pids, s, args.per_worker, ramp, &mut level).await;
            eprint!("\rprocbench: {s} sessions: round {}/{rounds}", r + 1);
        }
        eprintln!(" ({:.1} s)", started.elapsed().as_secs_f64());
        let after = redisinfo::command_stats(&mut redis_conn)
            .await
            .expect("INFO commandstats");
        level.redis = after.since(&before);
        level.phases = promtext::since(&prompt_phases(processor_metrics).await, &phases_before);
        levels.push(level);
    }

    let run = RunInfo {
        redis: redis_desc,
        baseline_rss,
        load_start,
        load_end: loadavg(),
    };
    let mut out = String::new();
    report(&mut levels, &args, &run, &mut out);
    {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }
    if let Some(path) = &args.json {
        let json = to_json(&mut levels, &args, &run);
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json).expect("json") + "\n",
        )
        .expect("write --json file");
    }
    drop((processor, gateway, provider, redis));
    // The logs say why a stream failed: keep them then.
    if levels
        .iter()
        .any(|l| l.session.errors > 0 || l.direct.errors > 0)
    {
        eprintln!(
            "procbench: some streams failed; the processes' logs are kept in {}",
            dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod tests;
