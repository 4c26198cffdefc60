//! Starting the private redis-server (standalone) and the session-processor a run measures.

use super::*;

/// The private Redis: a free port, no RDB snapshots, AOF only with `--aof`.
pub(super) async fn start_redis(bin: &Path, aof: bool, dir: &Path) -> (Child, String) {
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

pub(super) async fn start_processor(
    bin: &Path,
    gateway: SocketAddr,
    redis: &RedisUnderTest,
    dir: &Path,
) -> (Child, SocketAddr, SocketAddr) {
    let redis_url = redis.url.as_str();
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
{}

[titles]
enabled = false

[agents.default]
role_prompt = "You are a benchmark agent."
model = "{MODEL}"
tools = []
"#,
        redis.config_lines
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
        .env_remove("REDIS_MODE")
        .env_remove("REDIS_SENTINEL_MASTER")
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
