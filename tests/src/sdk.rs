//! Runs the vendor SDK scripts in tests/python/ against a [`Harness`]'s HTTP front door, one scenario per run, and
//! reads back the checks they passed (`ok: <name>` lines).

use std::process::Stdio;
use std::time::Instant;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{Harness, TOKEN};

/// One of the SDK scripts.
#[derive(Clone, Copy)]
pub enum Sdk {
    /// tests/python/openai_sdk_test.py, the official `openai` package.
    OpenAi,
    /// tests/python/anthropic_sdk_test.py, the official `anthropic` package.
    Anthropic,
}

impl Sdk {
    fn script(self) -> &'static str {
        match self {
            Sdk::OpenAi => concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_sdk_test.py"),
            Sdk::Anthropic => concat!(env!("CARGO_MANIFEST_DIR"), "/python/anthropic_sdk_test.py"),
        }
    }

    /// The base URL the SDK is given: OpenAI's includes `/v1`, Anthropic's does not (as with the vendors').
    fn base_url(self, h: &Harness) -> String {
        match self {
            Sdk::OpenAi => format!("http://{}/v1", h.http_addr),
            Sdk::Anthropic => format!("http://{}", h.http_addr),
        }
    }

    fn command(self, h: &Harness, scenario: &str, env: &[(&str, &str)]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("python3");
        cmd.arg(self.script())
            .arg(scenario)
            .env("GATEWAY_HTTP_URL", self.base_url(h))
            .env("GATEWAY_TOKEN", TOKEN)
            .env("PYTHONOPTIMIZE", "2")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `scenario` to its end and returns the names of the checks that held, in order; panics with the script's
    /// output if it failed.
    pub async fn run(self, h: &Harness, scenario: &str, env: &[(&str, &str)]) -> Vec<String> {
        let output = self
            .command(h, scenario, env)
            .output()
            .await
            .expect("python3 runs (install the openai and anthropic packages: see .ci/run)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{scenario} failed:\n{stdout}\n{stderr}"
        );
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix("ok: "))
            .map(str::to_string)
            .collect()
    }

    /// Runs `scenario` and returns when it printed `ok: <signal>`, with that moment; the script then runs on to its
    /// end, which the returned child's `wait` reports.
    pub async fn run_until(
        self,
        h: &Harness,
        scenario: &str,
        env: &[(&str, &str)],
        signal: &str,
    ) -> (Instant, tokio::process::Child) {
        let mut child = self
            .command(h, scenario, env)
            .spawn()
            .expect("python3 runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let wanted = format!("ok: {signal}");
        while let Some(line) = lines.next_line().await.expect("read script output") {
            if line == wanted {
                return (Instant::now(), child);
            }
        }
        let out = child.wait_with_output().await.expect("script ends");
        panic!(
            "{scenario} ended without `{wanted}`:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
