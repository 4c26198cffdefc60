//! Starting the benchmarked processes on loopback and describing the machine they ran on.
//!
//! Every benchmark binary starts its children the same way: a free loopback port, the child's stderr to a log file
//! in the run's temporary folder, `kill_on_drop` so a failed run leaves nothing behind, and a wait until the port
//! accepts connections (or the child's first stdout line announces its address).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The model every benchmark asks the gateway for (the paced fake provider behind `allow_unlisted_models`).
pub const MODEL: &str = "bench/paced";
/// The prompt of every benchmark stream.
pub const PROMPT: &str = "Write a short story about a lighthouse keeper.";

/// One gateway `Stream` request for the benchmark prompt, carrying `auth` as its `authorization` metadata.
pub fn stream_request(
    auth: &tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
) -> tonic::Request<llm_proto::gateway::StreamRequest> {
    use llm_proto::gateway as gw;
    let generation = gw::Generation {
        model: MODEL.into(),
        messages: vec![gw::Message {
            role: gw::Role::User as i32,
            parts: vec![gw::Part {
                kind: Some(gw::part::Kind::Text(gw::TextPart {
                    text: PROMPT.into(),
                })),
            }],
        }],
        ..Default::default()
    };
    let mut request = tonic::Request::new(gw::StreamRequest {
        generation: Some(generation),
    });
    request.metadata_mut().insert("authorization", auth.clone());
    request
}

/// The folder holding the benchmarked binaries: `arg` when given, else the folder of the running binary (they are
/// built together).
pub fn bin_dir(arg: Option<&Path>) -> std::path::PathBuf {
    arg.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .unwrap_or_default()
    })
}

/// A free TCP port on 127.0.0.1 (bound and released; the caller binds it next), picked at random below the kernel's
/// range for outgoing connections. A port from that range (what binding port 0 gives) can become the local end of
/// some other process's outgoing connection before the caller binds it ("Address already in use"); below it, only
/// another pick can take it. Port 0's answer when no port below the range is free.
pub fn free_port() -> std::io::Result<u16> {
    use std::hash::{BuildHasher, Hasher};
    const LOWEST: u16 = 10_000;
    let outgoing_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if let Some(span) = outgoing_from.checked_sub(LOWEST).filter(|s| *s >= 1_000) {
        for attempt in 0..200u64 {
            // Randomly keyed per call: a different port each time, in each process.
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(attempt);
            let offset = u16::try_from(h.finish() % u64::from(span)).unwrap_or(0);
            let port = LOWEST + offset;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Spawns `cmd` with stdin closed, stdout discarded and stderr appended to `log`, killed when dropped.
pub fn spawn_logged(mut cmd: Command, log: &Path) -> std::io::Result<Child> {
    let stderr = std::fs::File::create(log)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true);
    cmd.spawn()
}

/// Waits until `addr` accepts TCP connections, or fails after `timeout` naming `what` and its `log`.
pub async fn wait_listening(
    addr: SocketAddr,
    timeout: Duration,
    what: &str,
    log: &Path,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if Instant::now() >= deadline {
            return Err(format!(
                "{what} did not listen on {addr} within {timeout:?}; see {}",
                log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Starts `llm-gateway` (`bin`) on a free loopback port with the benchmarks' configuration, written to `dir`: one
/// `openai_chat` provider at `provider` that serves any model, no in-flight limit worth the name, `token` as the only
/// caller token, `RUST_LOG=info` as in production, and no exporter or listen address inherited from the environment.
/// `writer` names the benchmark in the config's first line. Returns the gRPC address and the HTTP front door's.
/// Fails naming the step that failed.
pub async fn start_gateway(
    bin: &Path,
    provider: &str,
    dir: &Path,
    token: &str,
    writer: &str,
) -> Result<(Child, SocketAddr, SocketAddr), String> {
    start_gateway_with(bin, provider, dir, token, writer, "", "").await
}

/// [`start_gateway`] with `server` appended to the config's `[server]` table and `extra` (whole tables, such as
/// `[limits]`) after the provider.
pub async fn start_gateway_with(
    bin: &Path,
    provider: &str,
    dir: &Path,
    token: &str,
    writer: &str,
    server: &str,
    extra: &str,
) -> Result<(Child, SocketAddr, SocketAddr), String> {
    let port = free_port().map_err(|e| format!("a free port: {e}"))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let http_port = free_port().map_err(|e| format!("a free port: {e}"))?;
    let http_addr = SocketAddr::from(([127, 0, 0, 1], http_port));
    let config = format!(
        r#"# Written by {writer}.
[server]
listen = "{addr}"
http_listen = "{http_addr}"
shutdown_grace_ms = 1000
max_inflight_generations = 100000
{server}

[providers.bench]
protocol = "openai_chat"
base_url = "{provider}/v1"
allow_unlisted_models = true

{extra}
"#
    );
    let path = dir.join("gateway.toml");
    std::fs::write(&path, config).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let log = dir.join("llm-gateway.log");
    let mut cmd = Command::new(bin);
    cmd.arg("--config")
        .arg(&path)
        .env("GATEWAY_AUTH_TOKENS", token)
        .env("RUST_LOG", "info")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("GATEWAY_LISTEN")
        .env_remove("GATEWAY_METRICS_LISTEN")
        .env_remove("GATEWAY_HTTP_LISTEN");
    let child = spawn_logged(cmd, &log).map_err(|e| format!("spawning llm-gateway: {e}"))?;
    wait_listening(addr, Duration::from_secs(20), "llm-gateway", &log).await?;
    wait_listening(
        http_addr,
        Duration::from_secs(20),
        "llm-gateway (HTTP)",
        &log,
    )
    .await?;
    Ok((child, addr, http_addr))
}

/// Starts the `fake-provider` binary serving `chunks` deltas per stream, `interval_ms` apart (0: a burst), and
/// returns it with its base URL.
pub async fn start_fake_provider(
    binary: &Path,
    chunks: usize,
    interval_ms: u64,
    log: &Path,
) -> Result<(Child, String), String> {
    let mut cmd = Command::new(binary);
    fake_provider_args(&mut cmd, chunks, interval_ms);
    spawn_announcing(cmd, log)
        .await
        .map_err(|e| format!("fake-provider: {e}"))
}

/// Adds the paced (or, at `interval_ms` 0, burst) fake provider's arguments to `cmd`: the binary itself or a
/// launcher in front of it.
pub fn fake_provider_args(cmd: &mut Command, chunks: usize, interval_ms: u64) {
    let scenario = if interval_ms == 0 { "burst" } else { "paced" };
    cmd.args(["--listen", "127.0.0.1:0", "--scenario", scenario])
        .args(["--chunks", &chunks.to_string()])
        .args(["--interval-ms", &interval_ms.to_string()]);
}

/// Spawns `cmd` (stderr to `log`, killed when dropped) and returns it with the address its first stdout line
/// announces as `listening on <addr>`.
pub async fn spawn_announcing(mut cmd: Command, log: &Path) -> Result<(Child, String), String> {
    let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| "child has no stdout".to_owned())?;
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .map_err(|_| format!("no address announced in 20 s (log: {})", log.display()))?
    .map_err(|e| format!("reading the child's stdout: {e}"))?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .ok_or_else(|| format!("unexpected first line {line:?} (log: {})", log.display()))?
        .to_owned();
    Ok((child, addr))
}

/// Raises the soft open-files limit to the hard one (children inherit it) and returns the new soft limit.
pub fn raise_nofile() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
    getrlimit(Resource::Nofile).current
}

/// `/proc/loadavg`'s three averages (1, 5, 15 minutes): other work on the machine shows here.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// CPU model, core count and kernel release, for the report's header.
pub fn machine() -> String {
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

/// The opening lines of a run's report: its title, the machine, and the load average at its start and end (other
/// work on the machine shows there).
pub fn run_header(out: &mut String, title: &str, load_start: &str, load_end: &str) {
    use std::fmt::Write as _;
    let _ = writeln!(out, "\n## {title} results\n");
    let _ = writeln!(out, "- machine: {}", machine());
    let _ = writeln!(
        out,
        "- load average (1, 5, 15 min) at start: {load_start}; at end: {load_end}"
    );
}

/// The fake provider's schedule in a report: `chunks` text chunks, one every `interval_ms` (0: all at once).
pub fn schedule(chunks: usize, interval_ms: u64) -> String {
    if interval_ms == 0 {
        format!("{chunks} chunks in a burst (no pacing)")
    } else {
        format!("{chunks} chunks at {interval_ms} ms")
    }
}

/// Parses a plan of `CxR` pairs (`1x10,100x1`: 10 rounds at concurrency 1, one round at 100); a bare `C` is one
/// round.
pub fn parse_plan(plan: &str) -> Result<Vec<(usize, usize)>, String> {
    plan.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (c, r) = p.split_once('x').unwrap_or((p, "1"));
            let c = c
                .trim()
                .parse::<usize>()
                .map_err(|e| format!("concurrency {c:?} in plan: {e}"))?;
            let r = r
                .trim()
                .parse::<usize>()
                .map_err(|e| format!("rounds {r:?} in plan: {e}"))?;
            if c == 0 || r == 0 {
                return Err(format!(
                    "plan entry {p:?}: concurrency and rounds must be at least 1"
                ));
            }
            Ok((c, r))
        })
        .collect()
}

#[cfg(test)]
#[path = "procs_tests.rs"]
mod tests;
