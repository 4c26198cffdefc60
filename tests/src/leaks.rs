//! What the secrets suites share: the gateway as a process at `RUST_LOG=debug` with OTLP export and metrics on, and
//! the search of everything operators read (log lines, spans, the metrics page, the caller's replies) for
//! distinctive, lower-cased pieces of the credentials in play, in any letter case.

use std::path::Path;

use crate::otlp::{OtlpReceiver, Span};
use crate::service::{ServiceProcess, free_port};

/// A configuration file in `dir` for the traced gateway: any port, fast retries, then `providers`.
pub fn replica_config(dir: &Path, providers: &str) -> std::path::PathBuf {
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!("[server]\nlisten = \"127.0.0.1:0\"\n[retry]\nbase_delay_ms = 5\n{providers}"),
    )
    .expect("write the gateway config");
    config
}

/// The gateway binary `replica` (the test's `env!("CARGO_BIN_EXE_gateway_replica")`) started from `config` with
/// `caller_token` and the extra `env`, exporting spans to `otlp`; returns the process and the address of its
/// `/metrics` listener.
pub async fn traced_gateway(
    replica: &str,
    config: &Path,
    otlp: &OtlpReceiver,
    caller_token: &str,
    env: &[(&str, &str)],
) -> (ServiceProcess, String) {
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = tokio::process::Command::new(replica);
    cmd.arg(config)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint())
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env("OTEL_SERVICE_NAME", "llm-gateway")
        .env("RUST_LOG", "debug")
        .env("GATEWAY_AUTH_TOKENS", caller_token)
        .env("GATEWAY_METRICS_LISTEN", &metrics_addr);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let gw = crate::service::start(cmd, "llm-gateway listening on ")
        .await
        .expect("the gateway starts");
    (gw, metrics_addr)
}

/// The `cores` found in `text`, compared in lower case.
pub fn found_in(cores: &[String], text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    cores
        .iter()
        .filter(|c| lower.contains(c.as_str()))
        .cloned()
        .collect()
}

/// Every place a core appears: `log: …`, `span …`, `metrics: …`, `reply: …`. Asserts first that the log was at
/// debug level, so a quiet log cannot pass for a clean one.
pub fn scan(
    cores: &[String],
    lines: &[String],
    spans: &[Span],
    metrics: &str,
    replies: &[String],
) -> Vec<String> {
    assert!(
        lines.iter().any(|l| l.contains("DEBUG")),
        "the log was not at debug level"
    );
    let mut found = Vec::new();
    for line in lines {
        for leak in found_in(cores, line) {
            found.push(format!("log: {leak} in {line}"));
        }
    }
    for span in spans {
        for leak in found_in(cores, &format!("{} {:?}", span.name, span.raw)) {
            found.push(format!("span {}: {leak}", span.name));
        }
    }
    for leak in found_in(cores, metrics) {
        found.push(format!("metrics: {leak}"));
    }
    for reply in replies {
        for leak in found_in(cores, reply) {
            found.push(format!("reply: {leak} in {reply}"));
        }
    }
    found
}
