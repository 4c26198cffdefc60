//! `procbench`: the processor benchmark of docs/benchmarks.md.
//!
//! It starts, on loopback, a private `redis-server` (a free port, no persistence unless `--aof`, so the command
//! counts are the processor's alone) or a Redis Cluster (`--redis`: several deployments, one after the other, the
//! same plan against each), the paced fake provider, `llm-gateway` and `session-processor` configured for them.
//! For each concurrency S of the plan it runs rounds of 2·S workers at once, interleaved: S *session* workers,
//! each creating a session and sending `Prompt`s back to back (the paced reply streams provider → gateway →
//! processor → Redis → the client), and S *direct* workers calling the gateway's `Stream` back to back with the same
//! request. Both halves see the same paced schedule at the same time, so what the session path adds is the
//! difference of the two distributions: time to first text (request sent → first text event), gaps between text
//! events, and time to the last text event.
//!
//! Redis commands come from `INFO commandstats` before and after each concurrency level (summed over a cluster's
//! primaries), divided by the text deltas the sessions delivered (completed prompts × chunks); the report breaks
//! them down per command, with the processor's own count of its Redis requests (round trips). CPU and RSS of every
//! process come from `/proc` (sampled every 20 ms for RSS peaks; a cluster's nodes summed).
//!
//! ```text
//! procbench --plan 1x3,50x1,200x1 --chunks 64 --interval-ms 20
//! procbench --redis standalone,cluster --plan 1x3,200x1
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
    free_port, loadavg, machine, parse_plan, raise_nofile, run_header, schedule, spawn_logged,
    wait_listening,
};
use bench::promtext;
use bench::redisinfo::{self, CommandStats};
use bench::stats::{Summary, ms, ms_diff, summarize};
use clap::Parser;
use deploy::{RedisUnderTest, Setup};
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

mod compare;
mod deploy;
mod fleet;
mod measure;
mod report;
mod streams;

use fleet::*;
use measure::*;
use report::*;
use streams::*;

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
    /// The Redis deployments to run the plan against, one after the other, comma-separated: `standalone` (a
    /// private node), `cluster` (3 primaries started here with `redis-server` and `redis-cli --cluster create`),
    /// `cluster+replicas` (and one replica each), `cluster+replicas+wait` (and `[redis] wait_replicas = 1`).
    #[arg(long, default_value = "standalone")]
    redis: String,
    /// `[redis] wait_timeout_ms` of a `+wait` deployment.
    #[arg(long, default_value_t = 100)]
    wait_timeout_ms: u64,
    /// The `redis-server` to start for `standalone` (a private instance on a free port; a cluster's nodes are
    /// `redis-server` from the PATH).
    #[arg(long, default_value = "redis-server")]
    redis_server: PathBuf,
    /// Use this Redis instead of starting one (with `--redis standalone` only). Its command counts then include
    /// every other client's commands, and its CPU and RSS are not read.
    #[arg(long)]
    redis_url: Option<String>,
    /// Run the session half only: no direct gateway streams beside the sessions, so a burst run
    /// (`--interval-ms 0`) measures the sessions' own saturation throughput; nothing is "added" then.
    #[arg(long)]
    no_direct: bool,
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

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let plan = parse_plan(&args.plan).unwrap_or_else(|e| panic!("--plan: {e}"));
    let setups = Setup::parse_list(&args.redis).unwrap_or_else(|e| panic!("--redis: {e}"));
    if args.redis_url.is_some() && setups.iter().any(|s| s.cluster) {
        panic!("--redis-url measures one external Redis: use it with --redis standalone");
    }
    warn_if_few_files(&plan);
    let bin_dir = bench::procs::bin_dir(args.bin_dir.as_deref());
    let mut runs = Vec::new();
    for setup in setups {
        runs.push(run_setup(&args, &plan, &bin_dir, setup).await);
    }
    write_results(&mut runs, &args);
}

/// The whole plan against one Redis deployment: its processes started, warmed up, measured and stopped.
async fn run_setup(args: &Args, plan: &[(usize, usize)], bin_dir: &Path, setup: Setup) -> SetupRun {
    let dir =
        std::env::temp_dir().join(format!("procbench-{}-{}", std::process::id(), setup.name()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut redis = RedisUnderTest::start(setup, args, &dir).await;
    let services = Services::start(args, bin_dir, &dir, &redis).await;
    let pids: Pids = [
        services.processor.id().into_iter().collect(),
        redis.pids.clone(),
        services.gateway.id().into_iter().collect(),
        services.provider.id().into_iter().collect(),
        vec![std::process::id()],
    ];
    let ctx = services.context(args).await;
    eprintln!(
        "procbench [{}]: provider {}, gateway {}, processor {}, Redis {}; logs in {}",
        setup.name(),
        services.provider_url,
        services.gateway_addr,
        services.processor_addr,
        redis.url,
        dir.display()
    );
    warm_up(&ctx, &pids, &dir, args.no_direct).await;
    let baseline_rss = rss_all(&pids);
    let baseline_anon = processor_anon(&pids);
    let load_start = loadavg();
    let metrics = services.processor_metrics;
    let levels = measure(&ctx, &pids, args, plan, &mut redis, metrics).await;
    let run = RunInfo {
        setup: setup.name(),
        redis: redis.description.clone(),
        baseline_rss,
        baseline_anon,
        load_start,
        load_end: loadavg(),
    };
    drop((services, redis));
    // The logs say why a stream failed: keep them then.
    if levels
        .iter()
        .any(|l| l.session.errors > 0 || l.direct.errors > 0)
    {
        eprintln!(
            "procbench [{}]: some streams failed; the processes' logs are kept in {}",
            setup.name(),
            dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    SetupRun { run, levels }
}

/// One deployment's results.
struct SetupRun {
    run: RunInfo,
    levels: Vec<Level>,
}

/// Warns when the open-files limit is too low for the plan's largest level.
fn warn_if_few_files(plan: &[(usize, usize)]) {
    let max_s = plan.iter().map(|(s, _)| *s).max().unwrap_or(1);
    if let Some(n) = raise_nofile()
        && (n as usize) < max_s * 4 + 256
    {
        eprintln!(
            "procbench: warning: open-files limit {n} is low for {max_s} sessions; raise it (ulimit -n)"
        );
    }
}

/// The fake provider, the gateway and the processor of a run.
struct Services {
    provider: Child,
    provider_url: String,
    gateway: Child,
    gateway_addr: std::net::SocketAddr,
    processor: Child,
    processor_addr: std::net::SocketAddr,
    processor_metrics: std::net::SocketAddr,
}

impl Services {
    async fn start(args: &Args, bin_dir: &Path, dir: &Path, redis: &RedisUnderTest) -> Services {
        let (provider, provider_url) = bench::procs::start_fake_provider(
            &bin_dir.join("fake-provider"),
            args.chunks,
            args.interval_ms,
            &dir.join("fake-provider.log"),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let (gateway, gateway_addr, _) = bench::procs::start_gateway(
            &bin_dir.join("llm-gateway"),
            &provider_url,
            dir,
            GATEWAY_TOKEN,
            "procbench",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let (processor, processor_addr, processor_metrics) =
            start_processor(&bin_dir.join("session-processor"), gateway_addr, redis, dir).await;
        Services {
            provider,
            provider_url,
            gateway,
            gateway_addr,
            processor,
            processor_addr,
            processor_metrics,
        }
    }

    /// Clients of both services, and the reply text every stream must deliver, as the gateway streams it.
    async fn context(&self, args: &Args) -> Arc<Ctx> {
        let mut gateway_clients = Vec::new();
        let mut processor_clients = Vec::new();
        for _ in 0..args.grpc_conns.max(1) {
            gateway_clients.push(
                GatewayServiceClient::new(connect(&self.gateway_addr.to_string()).await)
                    .max_decoding_message_size(usize::MAX),
            );
            processor_clients.push(
                SessionServiceClient::new(connect(&self.processor_addr.to_string()).await)
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
        let (probe, text) = direct_stream(&ctx, 0, None)
            .await
            .unwrap_or_else(|e| panic!("first gateway stream failed: {e}"));
        assert_eq!(
            probe.events, args.chunks,
            "the gateway streamed {} text deltas, expected {}",
            probe.events, args.chunks
        );
        ctx.expected = text;
        Arc::new(ctx)
    }
}

/// Warm-up: connections, allocator pools, script loading (on every primary of a cluster: 8 sessions land on each
/// of 3 shards with near certainty), lazily built state; not recorded.
async fn warm_up(ctx: &Arc<Ctx>, pids: &Pids, dir: &Path, no_direct: bool) {
    let mut warm = Level::new(8, 1, [0; 5]);
    let halves = Halves {
        s: 8,
        per_worker: 1,
        no_direct,
    };
    round(ctx, pids, halves, Duration::ZERO, &mut warm).await;
    assert!(
        warm.session.errors == 0 && warm.direct.errors == 0,
        "warm-up failed: {:?} {:?} (logs in {})",
        warm.session.error_samples,
        warm.direct.error_samples,
        dir.display()
    );
}

/// Every level of the plan, with the Redis commands and prompt phases each one caused.
async fn measure(
    ctx: &Arc<Ctx>,
    pids: &Pids,
    args: &Args,
    plan: &[(usize, usize)],
    redis: &mut RedisUnderTest,
    processor_metrics: std::net::SocketAddr,
) -> Vec<Level> {
    let stream_length = Duration::from_millis(args.interval_ms * args.chunks as u64);
    let mut levels = Vec::new();
    for &(s, rounds) in plan {
        let mut level = Level::new(s, rounds, rss_all(pids));
        let before = redis.command_stats().await;
        let reading = Reading::scrape(processor_metrics).await;
        let started = Instant::now();
        let halves = Halves {
            s,
            per_worker: args.per_worker,
            no_direct: args.no_direct,
        };
        for r in 0..rounds {
            let ramp = stream_length.max(Duration::from_micros(args.ramp_us) * (2 * s) as u32);
            round(ctx, pids, halves, ramp, &mut level).await;
            eprint!("\rprocbench: {s} sessions: round {}/{rounds}", r + 1);
        }
        eprintln!(" ({:.1} s)", started.elapsed().as_secs_f64());
        level.redis = redis.command_stats().await.since(&before);
        (level.phases, level.store) = Reading::scrape(processor_metrics).await.since(&reading);
        levels.push(level);
    }
    levels
}

/// The report on stdout, and the JSON document when `--json` asks for it.
fn write_results(runs: &mut [SetupRun], args: &Args) {
    let mut out = String::new();
    for r in runs.iter_mut() {
        report(&mut r.levels, args, &r.run, &mut out);
    }
    if runs.len() > 1 {
        let sides: Vec<(&RunInfo, &[Level])> =
            runs.iter().map(|r| (&r.run, r.levels.as_slice())).collect();
        compare::side_by_side(&sides, args, &mut out);
    }
    {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }
    if let Some(path) = &args.json {
        let json = match runs {
            [one] => to_json(&mut one.levels, args, &one.run),
            _ => serde_json::json!({
                "setups": runs
                    .iter_mut()
                    .map(|r| to_json(&mut r.levels, args, &r.run))
                    .collect::<Vec<_>>(),
            }),
        };
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json).expect("json") + "\n",
        )
        .expect("write --json file");
    }
}

#[cfg(test)]
mod tests;
