//! The official `openai` Python SDK's Responses API against the gateway's stateless `POST /v1/responses`, over
//! models of every protocol: text streamed (event types, sequence numbers, usage) and whole, a function call round
//! trip, structured output parsed by the SDK, reasoning items that carry their replay data back to the model, and
//! the refusals of what needs state.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::Harness;
use e2e_tests::sdk::{FILE_SAYS, GREETING, Sdk, twice};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;

const TEXT_CHECKS: [&str; 8] = [
    "stream_starts",
    "stream_completes",
    "sequence_numbers",
    "stream_text",
    "stream_output_text",
    "stream_usage",
    "instructions_echoed",
    "whole_text",
];

async fn text(h: &Harness, model: &str, expect: &str, input_tokens: &str) {
    let env = [
        ("MODEL", model),
        ("EXPECT_TEXT", expect),
        ("EXPECT_INPUT_TOKENS", input_tokens),
    ];
    let ran = Sdk::OpenAiResponses.run(h, "text", &env).await;
    let mut expected = TEXT_CHECKS.to_vec();
    expected.push("whole_usage");
    assert_eq!(ran, expected, "{model}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_from_models_of_three_protocols() {
    let h = Harness::start().await;
    twice(&h.openai, "openai_chat/text.sse");
    text(&h, "openai/gpt-4o", GREETING, "1234").await;
    // The instructions reached the provider as the system message.
    assert_eq!(
        h.openai.requests()[0].json()["messages"][0]["content"],
        "Be kind."
    );
    twice(&h.anthropic, "anthropic/text.sse");
    text(&h, "claude-sonnet-4-5", FILE_SAYS, "5075").await;
    twice(&h.gemini, "gemini/text.sse");
    text(&h, "gemini/gemini-2.5-flash", FILE_SAYS, "9").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_call_round_trip_on_two_protocols() {
    let h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/parallel_tools.sse"));
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    let env = [
        ("MODEL", "openai/gpt-4o"),
        ("EXPECT_TEXT", GREETING),
        ("EXPECT_TOOLS", "get_weather,get_time"),
    ];
    let ran = Sdk::OpenAiResponses.run(&h, "tools", &env).await;
    assert_eq!(
        ran,
        ["function_call", "arguments_streamed", "second_turn_answer"]
    );
    let second = h.openai.requests()[1].json();
    let results: Vec<_> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        results,
        [
            "call_q5Jd0mXb3RkV8tYpL2wNcHsA",
            "call_Wm2Yv7Lx0QaB9cTd4NfKhS1e"
        ]
    );
    // The strict tool reached the provider strict.
    assert_eq!(
        h.openai.requests()[0].json()["tools"][0]["function"]["name"],
        "get_weather"
    );

    h.anthropic
        .push(Reply::fixture("anthropic/thinking_tool_use.sse"));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TEXT", FILE_SAYS),
        ("EXPECT_TOOLS", "get_weather"),
        ("REASONING", "medium"),
    ];
    let ran = Sdk::OpenAiResponses.run(&h, "tools", &env).await;
    assert_eq!(
        ran,
        ["function_call", "arguments_streamed", "second_turn_answer"]
    );
    let second = h.anthropic.requests()[1].json();
    let assistant = &second["messages"][1]["content"];
    // The thinking block went back first, with its signature, as Anthropic requires in a tool loop.
    assert_eq!(assistant[0]["type"], "thinking", "{second}");
    assert!(
        assistant[0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("EpYCCkYIBxgC"),
        "{second}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_is_parsed_by_the_sdk() {
    let h = Harness::start().await;
    h.openai.push(Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-json")
            .text(&["{\"city\":\"Par", "is\",\"population\":2102650}"])
            .finish("stop", Some((30, 12))),
    ));
    let ran = Sdk::OpenAiResponses
        .run(&h, "structured", &[("MODEL", "openai/gpt-4o")])
        .await;
    assert_eq!(ran, ["parsed_output"]);
    let sent = h.openai.requests()[0].json();
    assert_eq!(
        sent["response_format"]["json_schema"]["name"], "City",
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_reasoning_goes_back_to_the_model_that_made_it() {
    let h = Harness::start().await;
    twice(&h.openai, "openai_responses/reasoning.sse");
    let ran = Sdk::OpenAiResponses
        .run(&h, "reasoning", &[("MODEL", "openai/gpt-5-codex")])
        .await;
    assert_eq!(ran, ["reasoning_item", "reasoning_replayed"]);
    let second = h.openai.requests()[1].json();
    let replayed: Vec<_> = second["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .collect();
    assert_eq!(replayed.len(), 1, "{second}");
    assert!(
        replayed[0]["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("gAAAAABpVxqh"),
        "the provider's own encrypted content: {second}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_features_are_refused_and_provider_errors_relayed() {
    let h = Harness::start().await;
    h.openai.push(
        Reply::json(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        )
        .header("retry-after", "30"),
    );
    let ran = Sdk::OpenAiResponses
        .run(&h, "errors", &[("MODEL", "openai/gpt-4o")])
        .await;
    assert_eq!(ran, ["stateful_refused", "rate_limited"]);
    assert_eq!(
        h.openai.requests().len(),
        1,
        "the refused call reached no provider"
    );
}
