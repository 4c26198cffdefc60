//! The official `openai` Python SDK, pointed at the gateway's HTTP front door, drives models of every protocol:
//! text streamed and not, parallel tool calls over two turns, JSON Schema output, errors and a cancel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::Harness;
use e2e_tests::sdk::{FILE_SAYS, GREETING, OPENAI_TEXT_CHECKS, Sdk, twice};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_streamed_and_whole_from_an_openai_model() {
    let h = Harness::start().await;
    twice(&h.openai, "openai_chat/text.sse");
    let ran = Sdk::OpenAi
        .run(
            &h,
            "text",
            &[
                ("MODEL", "openai/gpt-4o"),
                ("EXPECT_TEXT", GREETING),
                ("EXPECT_PROMPT_TOKENS", "1234"),
                ("EXPECT_CACHED_TOKENS", "1024"),
            ],
        )
        .await;
    assert_eq!(ran, OPENAI_TEXT_CHECKS);
    let sent = h.openai.requests();
    assert_eq!(sent.len(), 2);
    // The system message reached the provider as the unified request's system instruction.
    assert_eq!(sent[0].json()["messages"][0]["content"], "Be kind.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_from_an_anthropic_model_reports_cached_prompt_tokens() {
    let h = Harness::start().await;
    twice(&h.anthropic, "anthropic/text.sse");
    // 25 uncached + 1210 written to the cache + 3840 read from it.
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TEXT", FILE_SAYS),
        ("EXPECT_PROMPT_TOKENS", "5075"),
        ("EXPECT_CACHED_TOKENS", "3840"),
    ];
    assert_eq!(Sdk::OpenAi.run(&h, "text", &env).await, OPENAI_TEXT_CHECKS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_from_a_gemini_model() {
    let h = Harness::start().await;
    twice(&h.gemini, "gemini/text.sse");
    let env = [
        ("MODEL", "gemini/gemini-2.5-flash"),
        ("EXPECT_TEXT", FILE_SAYS),
        ("EXPECT_PROMPT_TOKENS", "9"),
        ("EXPECT_CACHED_TOKENS", "0"),
    ];
    assert_eq!(Sdk::OpenAi.run(&h, "text", &env).await, OPENAI_TEXT_CHECKS);
}

const TOOL_CHECKS: [&str; 4] = [
    "first_turn_finish_tool_calls",
    "parallel_calls",
    "fragmented_arguments_join",
    "second_turn_answer",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_over_two_turns_on_an_openai_model() {
    let h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/parallel_tools.sse"));
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let env = [
        ("MODEL", "openai/gpt-4o"),
        ("EXPECT_TOOLS", "get_weather,get_time"),
        ("EXPECT_TEXT", GREETING),
    ];
    assert_eq!(Sdk::OpenAi.run(&h, "tools", &env).await, TOOL_CHECKS);
    let second = h.openai.requests()[1].json();
    let tool_messages: Vec<_> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        tool_messages,
        [
            (
                "call_q5Jd0mXb3RkV8tYpL2wNcHsA".to_string(),
                "result 0".to_string()
            ),
            (
                "call_Wm2Yv7Lx0QaB9cTd4NfKhS1e".to_string(),
                "result 1".to_string()
            )
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_over_two_turns_on_an_anthropic_model() {
    let h = Harness::start().await;
    h.anthropic
        .push(Reply::fixture("anthropic/parallel_tools.sse"));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TOOLS", "get_weather,get_weather"),
        ("EXPECT_TEXT", FILE_SAYS),
    ];
    assert_eq!(Sdk::OpenAi.run(&h, "tools", &env).await, TOOL_CHECKS);
    // The results went back to Anthropic as tool_result blocks answering the calls it made.
    let second = h.anthropic.requests()[1].json();
    let results = second["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    let answered: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(answered.len(), 2, "{second}");
    assert!(
        answered.iter().all(|id| id.starts_with("toolu_")),
        "{answered:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_schema_output_is_parsed_by_the_sdk() {
    let h = Harness::start().await;
    h.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-json")
            .text(&["{\"city\":\"Par", "is\",\"population\":2102650}"])
            .finish("stop", Some((30, 12))),
    ));
    assert_eq!(
        Sdk::OpenAi
            .run(&h, "json_schema", &[("MODEL", "openai/gpt-4o")])
            .await,
        ["parsed_output"]
    );
    let sent = h.openai.requests()[0].json();
    assert_eq!(sent["response_format"]["type"], "json_schema", "{sent}");
    assert_eq!(
        sent["response_format"]["json_schema"]["name"], "City",
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_reach_the_sdk_as_its_own_exceptions() {
    let h = Harness::start().await;
    // Longer than the gateway waits (retry.max_retry_after_ms), so it answers at once with the provider's delay.
    let error = r#"{"error":{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
    h.openai.push(
        Reply::json(429, error)
            .header("retry-after", "30")
            .header("x-ratelimit-limit-requests", "500")
            .header("x-ratelimit-remaining-requests", "0")
            .header("x-request-id", "req_rate_limited"),
    );
    let ran = Sdk::OpenAi
        .run(
            &h,
            "errors",
            &[("MODEL", "openai/gpt-4o"), ("EXPECT_ERROR", error)],
        )
        .await;
    assert_eq!(
        ran,
        [
            "rate_limited",
            "retry_after_header",
            "provider_error_object",
            "rate_limit_headers",
            "unknown_model",
            "wrong_key",
            "invalid_field"
        ]
    );
    assert_eq!(
        h.openai.requests().len(),
        1,
        "only the rate-limited call reached the provider"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_stream_cancels_the_provider_call() {
    let h = Harness::start().await;
    // Four events, then silence: only a cancel (or the 3 s idle timeout) ends the provider call.
    h.openai
        .push(Reply::fixture("openai_chat/text.sse").stall_after(4));
    Sdk::OpenAi
        .assert_cancel_ends_the_provider_call(&h, &h.openai, "openai/gpt-4o")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_list_is_the_catalog() {
    let h = Harness::start().await;
    assert_eq!(Sdk::OpenAi.run(&h, "models", &[]).await, ["models_listed"]);
}
