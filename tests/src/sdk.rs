//! Runs the vendor SDK scripts in tests/python/ and tests/node/ against a [`Harness`]'s HTTP front door, one
//! scenario per run, and reads back the checks they passed (`ok: <name>` lines).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Instant;

use tokio::io::{AsyncBufReadExt, BufReader};

use fake_provider::FakeProvider;

use crate::clients::{INSTALL, missing_package, python3};
use crate::{CANCEL_NOTICED, Harness, SHORT, TOKEN};

/// What the OpenAI text fixture (`openai_chat/text.sse`) says.
pub const GREETING: &str = "Hello! How can I help you today?";
/// What the Anthropic and Gemini text fixtures say.
pub const FILE_SAYS: &str = "Hello! The file says \"done\".\nAnything else?";

/// The checks the OpenAI SDK scripts' `text` scenario makes, in order: a streamed then a whole completion.
pub const OPENAI_TEXT_CHECKS: [&str; 8] = [
    "stream_text",
    "stream_finish_reason",
    "stream_usage_chunk_last",
    "stream_prompt_tokens",
    "stream_cached_tokens",
    "whole_text",
    "whole_finish_reason",
    "whole_usage",
];

/// The checks the Anthropic SDK script's `text` scenario makes, in order: a streamed then a whole message.
pub const ANTHROPIC_TEXT_CHECKS: [&str; 6] = [
    "stream_text",
    "stream_stop_reason",
    "stream_usage",
    "whole_text",
    "whole_stop_reason",
    "whole_usage",
];

/// Queues the `fixture` reply twice on `fake`: a `text` scenario asks twice, streamed then whole.
pub fn twice(fake: &FakeProvider, fixture: &str) {
    fake.push(fake_provider::Reply::fixture(fixture));
    fake.push(fake_provider::Reply::fixture(fixture));
}

/// One of the SDK scripts.
#[derive(Clone, Copy)]
pub enum Sdk {
    /// tests/python/openai_sdk_test.py, the official `openai` package.
    OpenAi,
    /// tests/python/anthropic_sdk_test.py, the official `anthropic` package.
    Anthropic,
    /// tests/node/openai_sdk_test.mjs, the official `openai` npm package.
    OpenAiNode,
    /// tests/python/openai_responses_test.py, the official `openai` package's Responses API.
    OpenAiResponses,
    /// tests/python/frameworks_test.py: LangChain, the OpenAI Agents SDK and pydantic-ai.
    Frameworks,
    /// tests/node/vercel_ai_test.mjs: the Vercel AI SDK's `openai(model)`.
    VercelAi,
    /// tests/python/calls_sdk_test.py: embeddings and token counts through both SDKs and LangChain.
    Calls,
}

impl Sdk {
    /// The interpreter and the script.
    fn script(self) -> (PathBuf, &'static str) {
        match self {
            Sdk::OpenAi => (
                python3(),
                concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_sdk_test.py"),
            ),
            Sdk::Anthropic => (
                python3(),
                concat!(env!("CARGO_MANIFEST_DIR"), "/python/anthropic_sdk_test.py"),
            ),
            Sdk::OpenAiNode => (
                PathBuf::from("node"),
                concat!(env!("CARGO_MANIFEST_DIR"), "/node/openai_sdk_test.mjs"),
            ),
            Sdk::OpenAiResponses => (
                python3(),
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/python/openai_responses_test.py"
                ),
            ),
            Sdk::Frameworks => (
                python3(),
                concat!(env!("CARGO_MANIFEST_DIR"), "/python/frameworks_test.py"),
            ),
            Sdk::VercelAi => (
                PathBuf::from("node"),
                concat!(env!("CARGO_MANIFEST_DIR"), "/node/vercel_ai_test.mjs"),
            ),
            Sdk::Calls => (
                python3(),
                concat!(env!("CARGO_MANIFEST_DIR"), "/python/calls_sdk_test.py"),
            ),
        }
    }

    /// The base URL the SDK is given: OpenAI's includes `/v1`, Anthropic's does not (as with the vendors'); the calls
    /// script gets the root and gives each client its own.
    fn base_url(self, h: &Harness) -> String {
        match self {
            Sdk::OpenAi
            | Sdk::OpenAiNode
            | Sdk::OpenAiResponses
            | Sdk::Frameworks
            | Sdk::VercelAi => {
                format!("http://{}/v1", h.http_addr)
            }
            Sdk::Anthropic | Sdk::Calls => format!("http://{}", h.http_addr),
        }
    }

    fn command(self, h: &Harness, scenario: &str, env: &[(&str, &str)]) -> tokio::process::Command {
        let (interpreter, script) = self.script();
        let mut cmd = tokio::process::Command::new(interpreter);
        cmd.arg(script)
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
            .unwrap_or_else(|e| panic!("the interpreter did not start ({e}); {INSTALL}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{scenario} failed{}:\n{stdout}\n{stderr}",
            missing_package(&stderr)
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
            .unwrap_or_else(|e| panic!("the interpreter did not start ({e}); {INSTALL}"));
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

    /// Runs the `cancel` scenario on `model`: the script reads the first text delta and closes its stream, while
    /// `fake` (queued with a reply that stalls) would otherwise keep the provider call open until the idle timeout.
    /// Asserts the provider call was closed within [`CANCEL_NOTICED`] of the close.
    pub async fn assert_cancel_ends_the_provider_call(
        self,
        h: &Harness,
        fake: &FakeProvider,
        model: &str,
    ) {
        let (closed, child) = self
            .run_until(h, "cancel", &[("MODEL", model)], "closed_after_first_delta")
            .await;
        let upstream_closed = fake
            .wait_closed(0, SHORT)
            .await
            .expect("provider connection closed");
        let after = upstream_closed.saturating_duration_since(closed);
        assert!(
            after < CANCEL_NOTICED,
            "the provider call outlived the client's close by {after:?}"
        );
        assert!(
            child
                .wait_with_output()
                .await
                .expect("script ends")
                .status
                .success()
        );
    }
}
