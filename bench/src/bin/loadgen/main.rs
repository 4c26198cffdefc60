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
//! over SSE), the protocol the peers speak; its added TTFT is also reported as a multiple of the gRPC path's. Path
//! `gateway-responses` is the same door speaking the OpenAI Responses API (typed SSE events), reported the same way.
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

mod peers;
mod report;
mod streams;
mod tree;

use peers::*;
use report::*;
use streams::*;
use tree::*;
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
    /// Which paths to run, comma-separated: direct, floor, gateway, gateway-http (the gateway's HTTP front door, Chat
    /// Completions), gateway-responses (the same door, the Responses API), and
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
    /// HTTP (OpenAI Responses) through llm-gateway's front door.
    GatewayResponses,
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
            Route::GatewayResponses => "gateway-responses",
            Route::Litellm => "litellm",
            Route::Portkey => "portkey",
        }
    }

    /// The relay process this route goes through, by its name in [`Procs`].
    fn process(self) -> Option<&'static str> {
        match self {
            Route::Direct => None,
            Route::Floor => Some("floor-relay"),
            Route::Gateway | Route::GatewayHttp | Route::GatewayResponses => Some("llm-gateway"),
            Route::Litellm => Some("litellm"),
            Route::Portkey => Some("portkey"),
        }
    }

    fn is_peer(self) -> bool {
        PEERS.contains(&self)
    }
}

fn parse_paths(s: &str) -> Vec<Route> {
    s.split(',')
        .map(|p| match p.trim() {
            "direct" => Route::Direct,
            "floor" => Route::Floor,
            "gateway" => Route::Gateway,
            "gateway-http" => Route::GatewayHttp,
            "gateway-responses" => Route::GatewayResponses,
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

use bench::procs::{loadavg, machine, raise_nofile, run_header, schedule};

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let plan = parse_plan(&args.plan);
    let paths = parse_paths(&args.paths);
    warn_if_few_files(&plan);
    let (bin_dir, peers_dir) = folders(&args);
    let dir = std::env::temp_dir().join(format!("loadgen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let fleet = Fleet::start(&args, &paths, &bin_dir, &peers_dir, &dir).await;
    let procs = fleet.procs();
    let peers = peer_versions(&peers_dir, &paths);
    let ctx = fleet.context(&args).await;
    eprintln!("loadgen: {}; logs in {}", fleet.addresses(), dir.display());
    warm_up(&ctx, &procs, &paths).await;
    let baseline_rss: Vec<u64> = procs.pid_sets().iter().map(|s| rss_of(s)).collect();

    let load_start = loadavg();
    let mut levels = measure(&ctx, &procs, &args, &plan, &paths).await;
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
    drop(fleet);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Warns when the open-files limit is too low for the plan's largest level.
fn warn_if_few_files(plan: &[(usize, usize)]) {
    let nofile = raise_nofile();
    let max_c = plan.iter().map(|(c, _)| *c).max().unwrap_or(1);
    if let Some(n) = nofile
        && (n as usize) < max_c * 2 + 256
    {
        eprintln!(
            "loadgen: warning: open-files limit {n} is low for {max_c} streams; raise it (ulimit -n)"
        );
    }
}

/// The folder of the binaries (loadgen's own by default) and of the peers' installation.
fn folders(args: &Args) -> (PathBuf, PathBuf) {
    let bin_dir = bench::procs::bin_dir(args.bin_dir.as_deref());
    let peers_dir = args.peers_dir.clone().unwrap_or_else(|| {
        let here = PathBuf::from(".tools/peers");
        // target/release/loadgen → the workspace root.
        let workspace = bin_dir.ancestors().nth(2).map(|w| w.join(".tools/peers"));
        match workspace {
            Some(w) if !here.exists() && w.exists() => w,
            _ => here,
        }
    });
    (bin_dir, peers_dir)
}

/// Every process of a run: the fake provider, the floor relay, the gateway and the peers asked for.
struct Fleet {
    provider: (Child, String),
    floor: (Child, String),
    /// The gateway, its gRPC address and its HTTP front door's.
    gateway: (Child, std::net::SocketAddr, std::net::SocketAddr),
    litellm: Option<(Child, String, String)>,
    portkey: Option<(Child, String)>,
}

impl Fleet {
    async fn start(
        args: &Args,
        paths: &[Route],
        bin_dir: &Path,
        peers_dir: &Path,
        dir: &Path,
    ) -> Fleet {
        let provider = bench::procs::start_fake_provider(
            &bin_dir.join("fake-provider"),
            args.chunks,
            args.interval_ms,
            &dir.join("fake-provider.log"),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let provider_url = provider.1.clone();
        let mut floor_cmd = Command::new(bin_dir.join("floor-relay"));
        floor_cmd.args(["--listen", "127.0.0.1:0", "--upstream", &provider_url]);
        let floor = spawn_announcing(floor_cmd, &dir.join("floor-relay.log")).await;
        let gateway = bench::procs::start_gateway(
            &bin_dir.join("llm-gateway"),
            &provider_url,
            dir,
            TOKEN,
            "loadgen",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let litellm = match paths.contains(&Route::Litellm) {
            true => Some(start_litellm(peers_dir, &provider_url, dir).await),
            false => None,
        };
        let portkey = match paths.contains(&Route::Portkey) {
            true => Some(start_portkey(peers_dir, dir).await),
            false => None,
        };
        Fleet {
            provider,
            floor,
            gateway,
            litellm,
            portkey,
        }
    }

    /// The processes whose CPU and memory the report shows, loadgen itself last.
    fn procs(&self) -> Procs {
        let proc = |name, child: &Child, tree| Proc {
            name,
            pid: child.id().expect("child pid"),
            tree,
        };
        let mut procs = vec![
            proc("fake-provider", &self.provider.0, false),
            proc("floor-relay", &self.floor.0, false),
            proc("llm-gateway", &self.gateway.0, false),
        ];
        if let Some((child, ..)) = &self.litellm {
            procs.push(proc("litellm", child, true));
        }
        if let Some((child, _)) = &self.portkey {
            procs.push(proc("portkey", child, true));
        }
        procs.push(Proc {
            name: "loadgen",
            pid: std::process::id(),
            tree: false,
        });
        Procs(procs)
    }

    /// The clients and targets of every path.
    async fn context(&self, args: &Args) -> Arc<Ctx> {
        let provider_url = &self.provider.1;
        // The direct client uses the gateway transport's HTTP settings, so connection reuse is the same on every
        // path; the peers are driven by the same client.
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
        Arc::new(Ctx {
            http,
            direct: HttpTarget::new(
                format!("{provider_url}/v1/chat/completions"),
                &[],
                &peer_body,
            ),
            gateway_http: HttpTarget::new(
                format!("http://{}/v1/chat/completions", self.gateway.2),
                &[("authorization", format!("Bearer {TOKEN}"))],
                &body(GATEWAY_HTTP_MODEL),
            ),
            gateway_responses: HttpTarget::new(
                format!("http://{}/v1/responses", self.gateway.2),
                &[("authorization", format!("Bearer {TOKEN}"))],
                &Bytes::from(
                    serde_json::json!({
                        "model": GATEWAY_HTTP_MODEL,
                        "input": PROMPT,
                        "stream": true,
                    })
                    .to_string(),
                ),
            )
            .speaking(Dialect::Responses),
            litellm: self.litellm.as_ref().map(|(_, url, key)| {
                HttpTarget::new(
                    format!("{url}/v1/chat/completions"),
                    &[("authorization", format!("Bearer {key}"))],
                    &peer_body,
                )
            }),
            portkey: self.portkey.as_ref().map(|(_, url)| {
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
            floor: channels(&self.floor.1, args.grpc_conns).await,
            gateway: channels(&self.gateway.1.to_string(), args.grpc_conns).await,
            auth: format!("Bearer {TOKEN}").parse().expect("token header"),
            chunks: args.chunks,
            stream_timeout: Duration::from_secs(args.stream_timeout_s),
        })
    }

    fn addresses(&self) -> String {
        let mut out = format!(
            "provider {}, floor {}, gateway {}",
            self.provider.1, self.floor.1, self.gateway.1
        );
        if let Some((_, url, _)) = &self.litellm {
            out.push_str(&format!(", litellm {url}"));
        }
        if let Some((_, url)) = &self.portkey {
            out.push_str(&format!(", portkey {url}"));
        }
        out
    }
}

/// Warm-up: connections, allocator pools, lazily built state; not recorded. Our own paths must pass it; a peer that
/// fails it is reported and still measured (its failures count as errors).
async fn warm_up(ctx: &Arc<Ctx>, procs: &Procs, paths: &[Route]) {
    for &path in paths {
        let mut scratch = Agg::default();
        round(ctx, procs, path, 8, 1, Duration::ZERO, &mut scratch).await;
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
}

/// Every level of the plan: its rounds, each path in turn within a round.
async fn measure(
    ctx: &Arc<Ctx>,
    procs: &Procs,
    args: &Args,
    plan: &[(usize, usize)],
    paths: &[Route],
) -> Vec<Level> {
    let stream_length = Duration::from_millis(args.interval_ms * args.chunks as u64);
    let mut levels = Vec::new();
    for &(c, rounds) in plan {
        let mut aggs: Vec<(Route, Agg)> = paths.iter().map(|&p| (p, Agg::default())).collect();
        let started = Instant::now();
        for r in 0..rounds {
            for (path, agg) in aggs.iter_mut() {
                let ramp = stream_length.max(Duration::from_micros(args.ramp_us) * c as u32);
                round(ctx, procs, *path, c, args.per_worker, ramp, agg).await;
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
    levels
}

#[cfg(test)]
mod tests;
