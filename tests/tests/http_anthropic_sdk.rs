//! The official `anthropic` Python SDK, pointed at the gateway's HTTP front door, drives models of every protocol:
//! text streamed and not, signed thinking and tool use over two turns, errors and a cancel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::Harness;
use e2e_tests::sdk::{ANTHROPIC_TEXT_CHECKS, FILE_SAYS, GREETING, Sdk, twice};
use fake_provider::Reply;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_streamed_and_whole_from_an_anthropic_model_with_cache_usage() {
    let h = Harness::start().await;
    twice(&h.anthropic, "anthropic/text.sse");
    // input, cache creation, cache read, output, as the provider reported them.
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TEXT", FILE_SAYS),
        ("EXPECT_USAGE", "25,1210,3840,15"),
    ];
    assert_eq!(
        Sdk::Anthropic.run(&h, "text", &env).await,
        ANTHROPIC_TEXT_CHECKS
    );
    // The model has prompt caching: the request carried cache breakpoints (the system block's among them).
    let sent = h.anthropic.requests()[0].json();
    assert_eq!(
        sent["system"][0]["cache_control"]["type"], "ephemeral",
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_from_an_openai_model_reports_its_cached_tokens_apart() {
    let h = Harness::start().await;
    twice(&h.openai, "openai_chat/text.sse");
    // OpenAI's 1234 prompt tokens, 1024 of them cached: 210 uncached, 0 written, 1024 read.
    let env = [
        ("MODEL", "openai/gpt-4o"),
        ("EXPECT_TEXT", GREETING),
        ("EXPECT_USAGE", "210,0,1024,9"),
    ];
    assert_eq!(
        Sdk::Anthropic.run(&h, "text", &env).await,
        ANTHROPIC_TEXT_CHECKS
    );
    let sent = h.openai.requests()[0].json();
    assert_eq!(sent["messages"][0]["content"], "Be kind.", "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_from_a_gemini_model() {
    let h = Harness::start().await;
    twice(&h.gemini, "gemini/text.sse");
    let env = [
        ("MODEL", "gemini/gemini-2.5-flash"),
        ("EXPECT_TEXT", FILE_SAYS),
        ("EXPECT_USAGE", "9,0,0,12"),
    ];
    assert_eq!(
        Sdk::Anthropic.run(&h, "text", &env).await,
        ANTHROPIC_TEXT_CHECKS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_thinking_round_trips_through_a_two_turn_tool_loop() {
    let h = Harness::start().await;
    h.anthropic
        .push(Reply::fixture("anthropic/thinking_tool_use.sse"));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("THINKING", "1"),
        ("EXPECT_BLOCKS", "thinking,text,tool_use"),
        ("EXPECT_TOOLS", "get_weather"),
        ("EXPECT_SIGNATURE", "EpYCCkYIBxgC"),
        ("EXPECT_TEXT", FILE_SAYS),
    ];
    let ran = Sdk::Anthropic.run(&h, "tools", &env).await;
    assert_eq!(
        ran,
        [
            "first_turn_stop_tool_use",
            "content_blocks",
            "tool_input_joined",
            "tool_names",
            "thinking_signature",
            "second_turn_answer"
        ]
    );
    // The second request replayed the thinking block, signature and all, ahead of the tool call it led to.
    let second = h.anthropic.requests()[1].json();
    let assistant = &second["messages"][1];
    assert_eq!(assistant["role"], "assistant", "{second}");
    assert_eq!(assistant["content"][0]["type"], "thinking", "{second}");
    assert!(
        assistant["content"][0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("EpYCCkYIBxgC"),
        "{second}"
    );
    assert_eq!(second["thinking"]["budget_tokens"], 1024, "{second}");
    let results = &second["messages"][2]["content"];
    assert_eq!(results[0]["type"], "tool_result", "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_from_an_openai_model_over_two_turns() {
    let h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/parallel_tools.sse"));
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let env = [
        ("MODEL", "openai/gpt-4o"),
        ("EXPECT_BLOCKS", "tool_use,tool_use"),
        ("EXPECT_TOOLS", "get_weather,get_time"),
        ("EXPECT_TEXT", GREETING),
    ];
    let ran = Sdk::Anthropic.run(&h, "tools", &env).await;
    assert_eq!(
        ran,
        [
            "first_turn_stop_tool_use",
            "content_blocks",
            "tool_input_joined",
            "tool_names",
            "second_turn_answer"
        ]
    );
    let second = h.openai.requests()[1].json();
    let answered: Vec<&str> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        answered,
        [
            "call_q5Jd0mXb3RkV8tYpL2wNcHsA",
            "call_Wm2Yv7Lx0QaB9cTd4NfKhS1e"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_provider_is_a_529_and_other_errors_their_own_status() {
    let h = Harness::start().await;
    // Every attempt (the gateway retries overloaded ones) is refused the same way.
    let error = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_overloaded"}"#;
    h.anthropic.set_fallback(
        Reply::json(529, error)
            .header("request-id", "req_overloaded")
            .header("anthropic-ratelimit-requests-limit", "50")
            .header("anthropic-ratelimit-requests-remaining", "49"),
    );
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_ERROR", error),
    ];
    let ran = Sdk::Anthropic.run(&h, "errors", &env).await;
    assert_eq!(
        ran,
        [
            "overloaded",
            "provider_error_body",
            "rate_limit_headers",
            "unknown_model",
            "wrong_key"
        ]
    );
    assert_eq!(
        h.anthropic.requests().len(),
        3,
        "the gateway retried before answering"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_stream_cancels_the_provider_call() {
    let h = Harness::start().await;
    // Four events, then silence: only a cancel (or the 3 s idle timeout) ends the provider call.
    h.anthropic
        .push(Reply::fixture("anthropic/text.sse").stall_after(4));
    Sdk::Anthropic
        .assert_cancel_ends_the_provider_call(&h, &h.anthropic, "anthropic/claude-sonnet-4-5")
        .await;
}
