//! `loadgen`: the load generator of docs/benchmarks.md.
//!
//! It starts three processes from the same build: the paced fake provider (`fake-provider --scenario paced`), the
//! floor relay (`floor-relay`) and the gateway (`llm-gateway` with a temporary configuration), all on loopback, and,
//! when asked for with `--paths`, the peers installed by `scripts/peers.sh`: LiteLLM's proxy and Portkey's gateway,
//! each pointed at the same fake provider and driven through its OpenAI-compatible HTTP endpoint. Then, for each
//! concurrency C of the plan, it runs rounds of C concurrent workers for each path in turn (direct HTTP to the
//! provider, through the floor, through the gateway, through each peer; interleaved round by round so drift hits all
//! of them alike).
//! Each worker runs a few streams back to back and the workers' starts are spread over one stream's length, so C
//! streams stay open with starts arriving steadily, as under real traffic, rather than as one herd. It records
//! each stream's time to first token (request sent → first text delta) and every gap between text deltas with
//! `std::time::Instant`.
//! It reports the percentiles per path, what each relay adds to the direct path, the gateway-to-floor ratio, each
//! peer's added TTFT as a multiple of the gateway's, and the CPU and RSS of every process (read from `/proc`; a
//! peer's figures are summed over its process tree).
//!
//! ```text
//! loadgen --plan 1x10,100x1 --chunks 64 --interval-ms 20
//! loadgen --plan 1x10,100x1 --paths direct,floor,gateway,gateway-http,litellm,portkey   # after scripts/peers.sh
//! ```
//!
//! Path `gateway-http` is the same gateway process driven through its HTTP front door (OpenAI Chat Completions
//! over SSE), the protocol the peers speak; its added TTFT is also reported as a multiple of the gRPC path's.
//!
//! ```text
//! ```
// A benchmark binary: its report goes to stdout, and a broken set-up (a missing binary, a port that will not bind)
// should stop it loudly at start-up.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{Read as _, Write};
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
use tokio::process::{Child, Command};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

/// The bearer token the benchmark gateway accepts.
const TOKEN: &str = "bench-caller-token-0123456789abcdef";
/// The model the requests name: provider `bench`, any model name.
use bench::procs::PROMPT;
/// The model name the HTTP paths send: the fake provider answers any, and LiteLLM's config lists this one.
const HTTP_MODEL: &str = "paced";
/// The same model through the gateway's HTTP front door: provider `bench` serves any name.
const GATEWAY_HTTP_MODEL: &str = "bench/paced";
/// The upstream API key the peers pass to the fake provider (which checks none).
const UPSTREAM_KEY: &str = "bench-upstream-key";

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Load generator: direct vs floor relay vs llm-gateway (vs LiteLLM and Portkey), interleaved in one run"
)]
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
    /// Which paths to run, comma-separated: direct, floor, gateway, gateway-http (the gateway's HTTP front door), and
    /// the peers litellm and portkey (installed by `scripts/peers.sh`; loadgen starts them itself on loopback, pointed
    /// at the same fake provider).
    #[arg(long, default_value = "direct,floor,gateway")]
    paths: String,
    /// Folder `scripts/peers.sh` installed the peers into (default: `.tools/peers` here, or in the workspace this
    /// binary was built in).
    #[arg(long)]
    peers_dir: Option<PathBuf>,
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

/// One way from the load generator to the fake provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// HTTP straight to the provider.
    Direct,
    /// gRPC through the floor relay.
    Floor,
    /// gRPC through llm-gateway.
    Gateway,
    /// HTTP (OpenAI Chat Completions) through llm-gateway's front door.
    GatewayHttp,
    /// HTTP through LiteLLM's proxy.
    Litellm,
    /// HTTP through Portkey's gateway.
    Portkey,
}

/// The peers, in report order.
const PEERS: [Route; 2] = [Route::Litellm, Route::Portkey];

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Floor => "floor",
            Route::Gateway => "gateway",
            Route::GatewayHttp => "gateway-http",
            Route::Litellm => "litellm",
            Route::Portkey => "portkey",
        }
    }

    /// The relay process this route goes through, by its name in [`Procs`].
    fn process(self) -> Option<&'static str> {
        match self {
            Route::Direct => None,
            Route::Floor => Some("floor-relay"),
            Route::Gateway | Route::GatewayHttp => Some("llm-gateway"),
            Route::Litellm => Some("litellm"),
            Route::Portkey => Some("portkey"),
        }
    }

    fn is_peer(self) -> bool {
        PEERS.contains(&self)
    }
}

/// An OpenAI-compatible streaming endpoint, the headers each request carries and the request body.
struct HttpTarget {
    url: String,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
}

impl HttpTarget {
    fn new(url: String, headers: &[(&'static str, String)], body: &Bytes) -> HttpTarget {
        let mut map = reqwest::header::HeaderMap::new();
        map.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
        for (name, value) in headers {
            map.insert(*name, value.parse().expect("header value"));
        }
        HttpTarget {
            url,
            headers: map,
            body: body.clone(),
        }
    }
}

/// What the streams need: clients and the request bodies.
struct Ctx {
    http: reqwest::Client,
    direct: HttpTarget,
    gateway_http: HttpTarget,
    litellm: Option<HttpTarget>,
    portkey: Option<HttpTarget>,
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

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// An OpenAI chunk with answer text: a `delta` whose `content` is not empty. The role chunk (`"delta":{"role":
/// "assistant","content":""}`, or with `content` first as LiteLLM writes it) and the finish chunk (`"delta":{}`) are
/// not.
fn is_content(frame: &[u8]) -> bool {
    const NEEDLE: &[u8] = br#""content":""#;
    let Some(delta) = find(frame, br#""delta":{"#) else {
        return false;
    };
    let rest = &frame[delta..];
    find(rest, NEEDLE).is_some_and(|at| rest.get(at + NEEDLE.len()).is_some_and(|&b| b != b'"'))
}

/// A frame reporting an error instead of a chunk (how a relay reports a failed upstream mid-stream).
fn is_error(frame: &[u8]) -> bool {
    find(frame, br#""error""#).is_some()
}

/// The length of the first SSE frame in `buf` (through its blank line, LF or CRLF line ends), if it is complete.
fn frame_len(buf: &[u8]) -> Option<usize> {
    let lf = find(buf, b"\n\n").map(|at| at + 2);
    let crlf = find(buf, b"\r\n\r\n").map(|at| at + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The start of a response body or frame, for an error message.
fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// One stream over HTTP: direct to the provider or through a peer. A stream counts only when every text delta and
/// the `[DONE]` marker arrived; otherwise the error says what came instead.
async fn http_stream(ctx: &Ctx, target: &HttpTarget) -> Result<StreamRec, String> {
    let mut clock = Clock::new(ctx.chunks);
    let mut response = ctx
        .http
        .post(&target.url)
        .headers(target.headers.clone())
        .body(target.body.clone())
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    if !response.status().is_success() {
        let status = response.status();
        let body = response.bytes().await.unwrap_or_default();
        return Err(format!("HTTP {status}: {}", excerpt(&body)));
    }
    let mut buf = BytesMut::with_capacity(4096);
    let mut done = false;
    let mut error_frame = None;
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("body: {e}"))? {
        let now = Instant::now();
        buf.extend_from_slice(&chunk);
        while let Some(len) = frame_len(&buf) {
            let frame = buf.split_to(len);
            if is_content(&frame) {
                clock.delta(now);
            } else if frame.starts_with(b"data: [DONE]") {
                done = true;
            } else if error_frame.is_none() && is_error(&frame) {
                error_frame = Some(excerpt(&frame));
            }
        }
    }
    clock
        .finish(done, ctx.chunks)
        .map_err(|e| match error_frame {
            Some(frame) => format!("{e}; error frame: {frame}"),
            None => e,
        })
}

async fn grpc_stream(ctx: &Ctx, path: Route, i: usize) -> Result<StreamRec, String> {
    let clients = if path == Route::Gateway {
        &ctx.gateway
    } else {
        &ctx.floor
    };
    let mut client = clients[i % clients.len()].clone();
    let request = bench::procs::stream_request(&ctx.auth);
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
            (Route::Floor, Some(E::TextDelta(d))) => {
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

async fn one_stream(ctx: &Ctx, path: Route, i: usize) -> Result<StreamRec, String> {
    let run = async {
        match path {
            Route::Direct => http_stream(ctx, &ctx.direct).await,
            Route::GatewayHttp => http_stream(ctx, &ctx.gateway_http).await,
            Route::Litellm | Route::Portkey => {
                let target = if path == Route::Litellm {
                    ctx.litellm.as_ref()
                } else {
                    ctx.portkey.as_ref()
                };
                match target {
                    Some(target) => http_stream(ctx, target).await,
                    None => Err(format!("{} was not started", path.name())),
                }
            }
            Route::Floor | Route::Gateway => grpc_stream(ctx, path, i).await,
        }
    };
    tokio::time::timeout(ctx.stream_timeout, run)
        .await
        .unwrap_or_else(|_| Err("stream timed out".into()))
}

/// A process whose CPU and memory are read; with `tree`, its descendants count too (a peer may fork workers).
#[derive(Debug, Clone)]
struct Proc {
    name: &'static str,
    pid: u32,
    tree: bool,
}

/// The measured processes: the fake provider first, the load generator last, the relays between.
#[derive(Debug, Clone)]
struct Procs(Vec<Proc>);

impl Procs {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|p| p.name == name)
    }

    fn loadgen(&self) -> usize {
        self.0.len() - 1
    }

    /// Each process's pids now: itself, and for a tree its live descendants.
    fn pid_sets(&self) -> Vec<Vec<u32>> {
        let parents = if self.0.iter().any(|p| p.tree) {
            parent_table()
        } else {
            Vec::new()
        };
        self.0
            .iter()
            .map(|p| {
                if p.tree {
                    descendants(p.pid, &parents)
                } else {
                    vec![p.pid]
                }
            })
            .collect()
    }
}

/// (pid, parent pid) of every process, from `/proc/<pid>/stat`.
fn parent_table() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The command name (field 2) may hold spaces; after its closing parenthesis come state, then ppid.
            let ppid = stat[stat.rfind(')')? + 1..]
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// `root` and every process below it in `parents`.
fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(pid, ppid)| *ppid == parent && !out.contains(pid))
                .map(|(pid, _)| *pid)
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    out
}

fn cpu_of(set: &[u32]) -> u64 {
    set.iter().map(|&p| procfs::cpu_ns(p).unwrap_or(0)).sum()
}

fn rss_of(set: &[u32]) -> u64 {
    set.iter().map(|&p| procfs::rss_kib(p).unwrap_or(0)).sum()
}

/// Everything measured for one path at one concurrency, over all its rounds.
#[derive(Default)]
struct Agg {
    streams: usize,
    completed: usize,
    errors: usize,
    error_samples: Vec<String>,
    ttft: Vec<u64>,
    gaps: Vec<u64>,
    /// CPU nanoseconds per process ([`Procs`] order) during this path's rounds.
    cpu: Vec<u64>,
    /// Peak RSS in KiB per process during this path's rounds.
    rss_peak: Vec<u64>,
    /// Wall time of this path's rounds, nanoseconds.
    wall: u64,
}

async fn round(
    ctx: &Arc<Ctx>,
    procs: &Procs,
    path: Route,
    c: usize,
    per_worker: usize,
    ramp: Duration,
    agg: &mut Agg,
) {
    let n = procs.len();
    agg.cpu.resize(n, 0);
    agg.rss_peak.resize(n, 0);
    // A peer's process tree is read once per round: workers it forks at start-up are there by then.
    let sets = procs.pid_sets();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        let sets = sets.clone();
        tokio::spawn(async move {
            let mut peak = vec![0u64; sets.len()];
            loop {
                for (slot, set) in peak.iter_mut().zip(&sets) {
                    *slot = (*slot).max(rss_of(set));
                }
                if stop.load(Ordering::Relaxed) {
                    return peak;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let cpu_before: Vec<u64> = sets.iter().map(|s| cpu_of(s)).collect();
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
    let cpu_after: Vec<u64> = sets.iter().map(|s| cpu_of(s)).collect();
    stop.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap_or_default();
    for k in 0..n {
        agg.cpu[k] += cpu_after[k].saturating_sub(cpu_before[k]);
        agg.rss_peak[k] = agg.rss_peak[k].max(peak.get(k).copied().unwrap_or(0));
    }
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

/// A new LiteLLM master key for this run (LiteLLM wants the `sk-` prefix); never written to the repository.
fn master_key() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("random bytes for the LiteLLM master key");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sk-bench-{hex}")
}

/// The last lines of a log file, for a start-up failure.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Waits until `url` answers any HTTP response; stops loudly if the child exits or the time runs out.
async fn wait_http(child: &mut Child, name: &str, url: &str, log: &Path, limit: Duration) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("http client");
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{name} exited during start-up ({status}); log {}:\n{}",
                log.display(),
                log_tail(log)
            );
        }
        if client.get(url).send().await.is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} did not answer {url} within {limit:?}; log {}:\n{}",
            log.display(),
            log_tail(log)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Starts LiteLLM's proxy from `scripts/peers.sh`'s venv: one worker, on a free loopback port, with a config that
/// points an `openai/…` model at the fake provider, a master key made for this run, the local model cost map (no
/// network), and no debug logging. Returns the child, its base URL and the master key.
async fn start_litellm(peers: &Path, provider: &str, dir: &Path) -> (Child, String, String) {
    let exe = peers.join("litellm/venv/bin/litellm");
    assert!(
        exe.exists(),
        "LiteLLM is not installed at {}: run scripts/peers.sh",
        exe.display()
    );
    let port = free_port();
    let key = master_key();
    let config = format!(
        r#"# Written by loadgen for one run.
model_list:
  - model_name: {HTTP_MODEL}
    litellm_params:
      model: openai/{HTTP_MODEL}
      api_base: {provider}/v1
      api_key: {UPSTREAM_KEY}
litellm_settings:
  set_verbose: false
  request_timeout: 600
general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
"#
    );
    let path = dir.join("litellm.yaml");
    std::fs::write(&path, config).expect("write LiteLLM config");
    let log_path = dir.join("litellm.log");
    let log = std::fs::File::create(&log_path).expect("LiteLLM log");
    let mut child = Command::new(&exe)
        .arg("--config")
        .arg(&path)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--num_workers", "1"])
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_MASTER_KEY", &key)
        .env("LITELLM_LOG", "ERROR")
        .env("LITELLM_MODE", "PRODUCTION")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone().expect("LiteLLM log")))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn LiteLLM");
    let url = format!("http://127.0.0.1:{port}");
    wait_http(
        &mut child,
        "LiteLLM",
        &format!("{url}/health/liveliness"),
        &log_path,
        Duration::from_secs(180),
    )
    .await;
    (child, url, key)
}

/// Loaded before Portkey's `start-server.js`, whose server listens on every interface: binds it to loopback only.
const LOOPBACK_PRELOAD: &str = r#"// Written by loadgen: bind the server to loopback only.
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number') {
    if (args[1] === undefined) args[1] = '127.0.0.1';
    else if (typeof args[1] === 'function') args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
"#;

/// Starts Portkey's gateway from `scripts/peers.sh`'s install with node, `NODE_ENV=production`, headless, on a free
/// loopback port. Each request names the upstream itself (`x-portkey-provider: openai` and
/// `x-portkey-custom-host`). Returns the child and its base URL.
async fn start_portkey(peers: &Path, dir: &Path) -> (Child, String) {
    let script = peers.join("portkey/node_modules/@portkey-ai/gateway/build/start-server.js");
    assert!(
        script.exists(),
        "Portkey's gateway is not installed at {}: run scripts/peers.sh",
        script.display()
    );
    let preload = dir.join("loopback.cjs");
    std::fs::write(&preload, LOOPBACK_PRELOAD).expect("write node preload");
    let port = free_port();
    let log_path = dir.join("portkey.log");
    let log = std::fs::File::create(&log_path).expect("Portkey log");
    let mut child = Command::new("node")
        .arg("--require")
        .arg(&preload)
        .arg(&script)
        .arg(format!("--port={port}"))
        .arg("--headless")
        .env("NODE_ENV", "production")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone().expect("Portkey log")))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn node for Portkey's gateway");
    let url = format!("http://127.0.0.1:{port}");
    wait_http(
        &mut child,
        "Portkey",
        &format!("{url}/"),
        &log_path,
        Duration::from_secs(60),
    )
    .await;
    (child, url)
}

/// What was installed, from `scripts/peers.sh`'s stamp files, and the runtimes' versions.
fn peer_versions(peers: &Path, routes: &[Route]) -> Vec<String> {
    let stamp = |name: &str| {
        std::fs::read_to_string(peers.join(name).join("stamp"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown version".into())
    };
    let version_of = |cmd: &Path| {
        std::process::Command::new(cmd)
            .arg("--version")
            .output()
            .map(|o| {
                let text = if o.stdout.is_empty() {
                    o.stderr
                } else {
                    o.stdout
                };
                String::from_utf8_lossy(&text).trim().to_owned()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    if routes.contains(&Route::Litellm) {
        out.push(format!(
            "litellm: `{}` ({}, 1 uvicorn worker)",
            stamp("litellm"),
            version_of(&peers.join("litellm/venv/bin/python"))
        ));
    }
    if routes.contains(&Route::Portkey) {
        out.push(format!(
            "portkey: `{}` (node {}, NODE_ENV=production)",
            stamp("portkey"),
            version_of(Path::new("node"))
        ));
    }
    out
}

/// SIGKILLs `root`'s descendants (deepest last found first); the root itself goes with `kill_on_drop`.
fn kill_descendants(root: u32) {
    let tree = descendants(root, &parent_table());
    for &pid in tree.iter().skip(1).rev() {
        if let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

fn parse_paths(s: &str) -> Vec<Route> {
    s.split(',')
        .map(|p| match p.trim() {
            "direct" => Route::Direct,
            "floor" => Route::Floor,
            "gateway" => Route::Gateway,
            "gateway-http" => Route::GatewayHttp,
            "litellm" => Route::Litellm,
            "portkey" => Route::Portkey,
            other => panic!("unknown path {other:?} in --paths"),
        })
        .collect()
}

// Process start-up and machine facts shared with procbench (bench/src/procs.rs); a benchmark that cannot start
// its processes or read its plan has nothing to measure, so these stop it with the reason.
async fn spawn_announcing(cmd: Command, log: &Path) -> (Child, String) {
    bench::procs::spawn_announcing(cmd, log)
        .await
        .unwrap_or_else(|e| panic!("starting a child process: {e}"))
}

fn free_port() -> u16 {
    bench::procs::free_port().expect("a free port")
}

fn parse_plan(plan: &str) -> Vec<(usize, usize)> {
    bench::procs::parse_plan(plan).unwrap_or_else(|e| panic!("--plan: {e}"))
}

use bench::procs::{loadavg, machine, raise_nofile};

/// Per-concurrency results of every path.
struct Level {
    c: usize,
    rounds: usize,
    paths: Vec<(Route, Agg)>,
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

/// A path's percentiles at one concurrency, and its streams' outcome.
#[derive(Debug, Clone, Copy)]
struct PathSums {
    route: Route,
    ttft: Summary,
    gap: Summary,
    streams: usize,
    completed: usize,
    errors: usize,
}

/// Added TTFT (path − direct, nanoseconds, signed) at p50 and p99.
fn added_ttft(path: &PathSums, direct: &PathSums) -> (f64, f64) {
    (
        path.ttft.p50 as f64 - direct.ttft.p50 as f64,
        path.ttft.p99 as f64 - direct.ttft.p99 as f64,
    )
}

/// The best peer's added TTFT ÷ the gateway's on route `ours` (gRPC or HTTP), at p50 and p99 (each percentile's
/// best peer separately), with the notes that qualify it (a peer with errors, one that completed nothing). `None`
/// without that route, the direct path or any measured peer.
fn peer_ratio(sums: &[PathSums], ours: Route) -> Option<(Option<f64>, Option<f64>, Vec<String>)> {
    let direct = sums.iter().find(|s| s.route == Route::Direct)?;
    let gateway = sums.iter().find(|s| s.route == ours)?;
    let mut notes = Vec::new();
    let mut best: Option<(f64, f64)> = None;
    for peer in sums.iter().filter(|s| s.route.is_peer()) {
        if peer.errors > 0 {
            notes.push(format!(
                "{} failed {} of {} streams",
                peer.route.name(),
                peer.errors,
                peer.streams
            ));
        }
        if peer.completed == 0 {
            continue;
        }
        let (p50, p99) = added_ttft(peer, direct);
        best = Some(match best {
            None => (p50, p99),
            Some((b50, b99)) => (b50.min(p50), b99.min(p99)),
        });
    }
    if best.is_none() && notes.is_empty() {
        return None;
    }
    let (g50, g99) = added_ttft(gateway, direct);
    let div = |peer: f64, gw: f64| (gw > 0.0).then(|| peer / gw);
    match best {
        Some((b50, b99)) => Some((div(b50, g50), div(b99, g99), notes)),
        None => Some((None, None, notes)),
    }
}

fn times(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| format!("{r:.1}×"))
}

fn report(
    levels: &mut [Level],
    args: &Args,
    procs: &Procs,
    baseline_rss: &[u64],
    peers: &[String],
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
    for peer in peers {
        let _ = writeln!(out, "- peer {peer}");
    }
    let idle: Vec<String> = procs.0[..procs.loadgen()]
        .iter()
        .zip(baseline_rss)
        .map(|(p, rss)| format!("{} {rss} KiB", p.name))
        .collect();
    let _ = writeln!(out, "- idle RSS after warm-up: {}", idle.join(", "));
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
        for (route, agg) in level.paths.iter_mut() {
            let (t, g) = summaries(agg);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                route.name(),
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
            sums.push(PathSums {
                route: *route,
                ttft: t,
                gap: g,
                streams: agg.streams,
                completed: agg.completed,
                errors: agg.errors,
            });
        }
        let find = |r: Route| sums.iter().find(|s| s.route == r).copied();
        if let Some(d) = find(Route::Direct) {
            let (dt, dg) = (d.ttft, d.gap);
            let _ = writeln!(
                out,
                "\n| added over direct | TTFT p50 ms | p99 | max | gap p50 ms | p99 | max |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|---|---|");
            for s in sums.iter().filter(|s| s.route != Route::Direct) {
                let (t, g) = (s.ttft, s.gap);
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    s.route.name(),
                    ms_diff(t.p50, dt.p50),
                    ms_diff(t.p99, dt.p99),
                    ms_diff(t.max, dt.max),
                    ms_diff(g.p50, dg.p50),
                    ms_diff(g.p99, dg.p99),
                    ms_diff(g.max, dg.max)
                );
            }
            let add = |a: u64, b: u64| a as f64 - b as f64;
            // `num ÷ den` of the added figures, all six columns.
            let ratio_row = |label: String, num: &PathSums, den: &PathSums| {
                let (nt, ng, et, eg) = (num.ttft, num.gap, den.ttft, den.gap);
                format!(
                    "| {label} | {} | {} | {} | {} | {} | {} |",
                    ratio(add(nt.p50, dt.p50), add(et.p50, dt.p50)),
                    ratio(add(nt.p99, dt.p99), add(et.p99, dt.p99)),
                    ratio(add(nt.max, dt.max), add(et.max, dt.max)),
                    ratio(add(ng.p50, dg.p50), add(eg.p50, dg.p50)),
                    ratio(add(ng.p99, dg.p99), add(eg.p99, dg.p99)),
                    ratio(add(ng.max, dg.max), add(eg.max, dg.max)),
                )
            };
            if let (Some(f), Some(g)) = (find(Route::Floor), find(Route::Gateway)) {
                let _ = writeln!(
                    out,
                    "{}",
                    ratio_row("gateway ÷ floor (added)".into(), &g, &f)
                );
            }
            if let (Some(h), Some(g)) = (find(Route::GatewayHttp), find(Route::Gateway))
                && h.completed > 0
            {
                let label = "gateway-http ÷ gateway (added; target ≤ 1.25×)".to_string();
                let _ = writeln!(out, "{}", ratio_row(label, &h, &g));
            }
            if let Some(g) = find(Route::Gateway) {
                for peer in PEERS.iter().filter_map(|&r| find(r)) {
                    if peer.completed > 0 {
                        let label = format!("{} ÷ gateway (added)", peer.route.name());
                        let _ = writeln!(out, "{}", ratio_row(label, &peer, &g));
                    }
                }
            }
            for (ours, over) in [
                (Route::Gateway, "gateway's"),
                (Route::GatewayHttp, "gateway-http's"),
            ] {
                let Some((p50, p99, notes)) = peer_ratio(&sums, ours) else {
                    continue;
                };
                let _ = writeln!(
                    out,
                    "\n- best peer's added TTFT ÷ {over} added TTFT at concurrency {}: p50 **{}**, p99 **{}** (target ≥ 30×){}",
                    level.c,
                    times(p50),
                    times(p99),
                    if notes.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", notes.join(", "))
                    }
                );
            }
        }
        let _ = writeln!(
            out,
            "\n| rounds of | process | CPU ms | CPU µs per stream | CPU µs per text delta | text deltas per CPU-second | peak RSS KiB | RSS per open stream KiB |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for (route, agg) in level.paths.iter() {
            let relay = route.process().and_then(|name| procs.index(name));
            let deltas = (agg.completed * args.chunks) as f64;
            let rows = std::iter::once(0)
                .chain(relay)
                .chain(std::iter::once(procs.loadgen()));
            for k in rows {
                let cpu = agg.cpu.get(k).copied().unwrap_or(0) as f64;
                let rss_peak = agg.rss_peak.get(k).copied().unwrap_or(0);
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
                let per_open = if k < procs.loadgen() {
                    format!(
                        "{:.1}",
                        rss_peak.saturating_sub(baseline_rss.get(k).copied().unwrap_or(0)) as f64
                            / level.c as f64
                    )
                } else {
                    "-".into()
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.1} | {} | {} | {} | {} | {} |",
                    route.name(),
                    procs.0[k].name,
                    cpu / 1e6,
                    per_stream,
                    per_delta,
                    per_sec,
                    rss_peak,
                    per_open
                );
            }
        }
        for (route, agg) in level.paths.iter() {
            for e in &agg.error_samples {
                let _ = writeln!(out, "\n- {} error: {e}", route.name());
            }
        }
    }
}

fn to_json(
    levels: &mut [Level],
    args: &Args,
    procs: &Procs,
    peers: &[String],
) -> serde_json::Value {
    let per_proc = |values: &[u64]| -> serde_json::Value {
        procs
            .0
            .iter()
            .zip(values)
            .map(|(p, v)| (p.name.to_owned(), serde_json::Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let levels: Vec<serde_json::Value> = levels
        .iter_mut()
        .map(|l| {
            let mut sums = Vec::new();
            let paths: Vec<serde_json::Value> = l
                .paths
                .iter_mut()
                .map(|(p, agg)| {
                    let (t, g) = summaries(agg);
                    sums.push(PathSums {
                        route: *p,
                        ttft: t,
                        gap: g,
                        streams: agg.streams,
                        completed: agg.completed,
                        errors: agg.errors,
                    });
                    serde_json::json!({
                        "path": p.name(),
                        "streams": agg.streams,
                        "completed": agg.completed,
                        "errors": agg.errors,
                        "errors_sample": agg.error_samples,
                        "ttft_ns": {"n": t.n, "p50": t.p50, "p99": t.p99, "max": t.max},
                        "gap_ns": {"n": g.n, "p50": g.p50, "p99": g.p99, "max": g.max},
                        "cpu_ns": per_proc(&agg.cpu),
                        "rss_peak_kib": per_proc(&agg.rss_peak),
                        "wall_ns": agg.wall,
                    })
                })
                .collect();
            let mut level =
                serde_json::json!({"concurrency": l.c, "rounds": l.rounds, "paths": paths});
            for (ours, key) in [
                (Route::Gateway, "best_peer_added_ttft_over_gateway"),
                (Route::GatewayHttp, "best_peer_added_ttft_over_gateway_http"),
            ] {
                if let Some((p50, p99, notes)) = peer_ratio(&sums, ours) {
                    level[key] = serde_json::json!({"p50": p50, "p99": p99, "notes": notes});
                }
            }
            level
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
        "peers": peers,
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
    let peers_dir = args.peers_dir.clone().unwrap_or_else(|| {
        let here = PathBuf::from(".tools/peers");
        // target/release/loadgen → the workspace root.
        let workspace = bin_dir.ancestors().nth(2).map(|w| w.join(".tools/peers"));
        match workspace {
            Some(w) if !here.exists() && w.exists() => w,
            _ => here,
        }
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
    let (gateway, gateway_addr, gateway_http_addr) = bench::procs::start_gateway(
        &bin_dir.join("llm-gateway"),
        &provider_url,
        &dir,
        TOKEN,
        "loadgen",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let litellm = if paths.contains(&Route::Litellm) {
        Some(start_litellm(&peers_dir, &provider_url, &dir).await)
    } else {
        None
    };
    let portkey = if paths.contains(&Route::Portkey) {
        Some(start_portkey(&peers_dir, &dir).await)
    } else {
        None
    };
    let mut procs = vec![
        Proc {
            name: "fake-provider",
            pid: provider.id().expect("provider pid"),
            tree: false,
        },
        Proc {
            name: "floor-relay",
            pid: floor.id().expect("floor pid"),
            tree: false,
        },
        Proc {
            name: "llm-gateway",
            pid: gateway.id().expect("gateway pid"),
            tree: false,
        },
    ];
    if let Some((child, ..)) = &litellm {
        procs.push(Proc {
            name: "litellm",
            pid: child.id().expect("LiteLLM pid"),
            tree: true,
        });
    }
    if let Some((child, _)) = &portkey {
        procs.push(Proc {
            name: "portkey",
            pid: child.id().expect("Portkey pid"),
            tree: true,
        });
    }
    procs.push(Proc {
        name: "loadgen",
        pid: std::process::id(),
        tree: false,
    });
    let procs = Procs(procs);
    let peers = peer_versions(&peers_dir, &paths);

    // The direct client uses the gateway transport's HTTP settings, so connection reuse is the same on every path;
    // the peers are driven by the same client.
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(64)
        .build()
        .expect("http client");
    // The same Chat Completions request on every HTTP route, naming the model as each one knows it.
    let body = |model: &str| {
        Bytes::from(
            serde_json::json!({
                "model": model,
                "messages": [{"role": "user", "content": PROMPT}],
                "stream": true,
                "stream_options": {"include_usage": true},
            })
            .to_string(),
        )
    };
    let peer_body = body(HTTP_MODEL);
    let ctx = Arc::new(Ctx {
        http,
        direct: HttpTarget::new(
            format!("{provider_url}/v1/chat/completions"),
            &[],
            &peer_body,
        ),
        gateway_http: HttpTarget::new(
            format!("http://{gateway_http_addr}/v1/chat/completions"),
            &[("authorization", format!("Bearer {TOKEN}"))],
            &body(GATEWAY_HTTP_MODEL),
        ),
        litellm: litellm.as_ref().map(|(_, url, key)| {
            HttpTarget::new(
                format!("{url}/v1/chat/completions"),
                &[("authorization", format!("Bearer {key}"))],
                &peer_body,
            )
        }),
        portkey: portkey.as_ref().map(|(_, url)| {
            HttpTarget::new(
                format!("{url}/v1/chat/completions"),
                &[
                    ("x-portkey-provider", "openai".into()),
                    ("x-portkey-custom-host", format!("{provider_url}/v1")),
                    ("authorization", format!("Bearer {UPSTREAM_KEY}")),
                ],
                &peer_body,
            )
        }),
        floor: channels(&floor_addr, args.grpc_conns).await,
        gateway: channels(&gateway_addr.to_string(), args.grpc_conns).await,
        auth: format!("Bearer {TOKEN}").parse().expect("token header"),
        chunks: args.chunks,
        stream_timeout: Duration::from_secs(args.stream_timeout_s),
    });
    let stream_length = Duration::from_millis(args.interval_ms * args.chunks as u64);

    eprintln!(
        "loadgen: provider {provider_url}, floor {floor_addr}, gateway {gateway_addr}{}{}; logs in {}",
        litellm
            .as_ref()
            .map(|(_, url, _)| format!(", litellm {url}"))
            .unwrap_or_default(),
        portkey
            .as_ref()
            .map(|(_, url)| format!(", portkey {url}"))
            .unwrap_or_default(),
        dir.display()
    );
    // Warm-up: connections, allocator pools, lazily built state; not recorded. Our own paths must pass it; a peer
    // that fails it is reported and still measured (its failures count as errors).
    for &path in &paths {
        let mut scratch = Agg::default();
        round(&ctx, &procs, path, 8, 1, Duration::ZERO, &mut scratch).await;
        if scratch.errors > 0 {
            assert!(
                path.is_peer(),
                "warm-up of {} failed: {:?}",
                path.name(),
                scratch.error_samples
            );
            eprintln!(
                "loadgen: warning: warm-up of {}: {} of {} streams failed: {:?}",
                path.name(),
                scratch.errors,
                scratch.streams,
                scratch.error_samples
            );
        }
    }
    let baseline_rss: Vec<u64> = procs.pid_sets().iter().map(|s| rss_of(s)).collect();

    let load_start = loadavg();
    let mut levels = Vec::new();
    for &(c, rounds) in &plan {
        let mut aggs: Vec<(Route, Agg)> = paths.iter().map(|&p| (p, Agg::default())).collect();
        let started = Instant::now();
        for r in 0..rounds {
            for (path, agg) in aggs.iter_mut() {
                let ramp = stream_length.max(Duration::from_micros(args.ramp_us) * c as u32);
                round(&ctx, &procs, *path, c, args.per_worker, ramp, agg).await;
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
    report(
        &mut levels,
        &args,
        &procs,
        &baseline_rss,
        &peers,
        &load,
        &mut out,
    );
    {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }
    if let Some(path) = &args.json {
        let json = to_json(&mut levels, &args, &procs, &peers);
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json).expect("json") + "\n",
        )
        .expect("write --json file");
    }
    for peer in procs.0.iter().filter(|p| p.tree) {
        kill_descendants(peer.pid);
    }
    drop((provider, floor, gateway, litellm, portkey));
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(test)]
mod tests;
