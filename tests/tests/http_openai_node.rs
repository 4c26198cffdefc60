//! The official `openai` npm package, pointed at the gateway's HTTP front door: text streamed and whole, tool calls
//! over two turns through the SDK's own accumulator, and a rate limit with its delay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::Harness;
use e2e_tests::sdk::{FILE_SAYS, GREETING, Sdk, twice};
use fake_provider::Reply;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_streamed_and_whole_from_an_anthropic_model() {
    let h = Harness::start().await;
    twice(&h.anthropic, "anthropic/text.sse");
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TEXT", FILE_SAYS),
        // Anthropic's input, cache writes and cache reads of anthropic/text.sse: 25 + 1210 + 3840.
        ("EXPECT_PROMPT_TOKENS", "5075"),
    ];
    assert_eq!(
        Sdk::OpenAiNode.run(&h, "text", &env).await,
        ["stream_text", "stream_usage", "whole_text"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_over_two_turns_on_an_openai_model() {
    let h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/parallel_tools.sse"));
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let env = [
        ("MODEL", "openai/gpt-4o"),
        ("EXPECT_TEXT", GREETING),
        ("EXPECT_TOOLS", "get_weather,get_time"),
    ];
    assert_eq!(
        Sdk::OpenAiNode.run(&h, "tools", &env).await,
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
        Sdk::OpenAiNode
            .run(&h, "errors", &[("MODEL", "openai/gpt-4o")])
            .await,
        ["rate_limited", "retry_after_header"]
    );
}
