//! The official `openai` npm package, pointed at the gateway's HTTP front door: text streamed and whole, tool calls
//! over two turns through the SDK's own accumulator, and a rate limit with its delay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::{Harness, TOKEN};
use fake_provider::Reply;

const GREETING: &str = "Hello! How can I help you today?";
const FILE_SAYS: &str = "Hello! The file says \"done\".\nAnything else?";

/// Runs `scenario` of tests/node/openai_sdk_test.mjs and returns the checks that held.
async fn run(h: &Harness, scenario: &str, env: &[(&str, &str)]) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/node/openai_sdk_test.mjs");
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(script)
        .arg(scenario)
        .env("GATEWAY_HTTP_URL", format!("http://{}/v1", h.http_addr))
        .env("GATEWAY_TOKEN", TOKEN);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let output = cmd
        .output()
        .await
        .expect("node runs (install the openai package in tests/node: see .ci/run)");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_streamed_and_whole_from_an_anthropic_model() {
    let h = Harness::start().await;
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TEXT", FILE_SAYS),
    ];
    assert_eq!(
        run(&h, "text", &env).await,
        ["stream_text", "stream_usage", "whole_text"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_over_two_turns_on_an_openai_model() {
    let h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/parallel_tools.sse"));
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let env = [("MODEL", "openai/gpt-4o"), ("EXPECT_TEXT", GREETING)];
    assert_eq!(
        run(&h, "tools", &env).await,
        [
            "first_turn_finish_tool_calls",
            "arguments_joined",
            "second_turn_answer"
        ]
    );
    let second = h.openai.requests()[1].json();
    let tool_messages = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(tool_messages, 2, "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_is_the_sdks_rate_limit_error() {
    let h = Harness::start().await;
    h.openai.push(
        Reply::json(429, r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#)
            .header("retry-after", "30"),
    );
    assert_eq!(
        run(&h, "errors", &[("MODEL", "openai/gpt-4o")]).await,
        ["rate_limited", "retry_after_header"]
    );
}
