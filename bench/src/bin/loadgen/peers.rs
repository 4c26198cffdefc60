//! Starting the peers (LiteLLM, Portkey) from .tools/peers and reading their versions.

use super::*;

/// A new LiteLLM master key for this run (LiteLLM wants the `sk-` prefix); never written to the repository.
pub(super) fn master_key() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("random bytes for the LiteLLM master key");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sk-bench-{hex}")
}

/// The last lines of a log file, for a start-up failure.
pub(super) fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Waits until `url` answers any HTTP response; stops loudly if the child exits or the time runs out.
pub(super) async fn wait_http(
    child: &mut Child,
    name: &str,
    url: &str,
    log: &Path,
    limit: Duration,
) {
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
pub(super) async fn start_litellm(
    peers: &Path,
    provider: &str,
    dir: &Path,
) -> (Child, String, String) {
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
pub(super) const LOOPBACK_PRELOAD: &str = r#"// Written by loadgen: bind the server to loopback only.
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
pub(super) async fn start_portkey(peers: &Path, dir: &Path) -> (Child, String) {
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
pub(super) fn peer_versions(peers: &Path, routes: &[Route]) -> Vec<String> {
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
