//! Agent frameworks, unchanged but for the base URL and key their documentation says to set, against the gateway's
//! HTTP front door with bare model names: LangChain (Chat Completions, and Anthropic Messages), the OpenAI Agents SDK
//! with its default provider and pydantic-ai's `openai:` models (both the Responses API). Each does text, a tool
//! round trip, structured output and an error (tests/python/frameworks_test.py).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::Harness;
use e2e_tests::sdk::{FILE_SAYS, GREETING, Sdk};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;

/// The bare name of the OpenAI model the fake answers for.
const MODEL: &str = "gpt-4o";

fn text() -> Reply {
    Reply::fixture("openai_chat/text.sse")
}

/// One call of `name` with `args`, streamed in two fragments.
fn call(name: &str, args: &str) -> Reply {
    let (a, b) = args.split_at(args.len() / 2);
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-call")
            .tool_call("call_w1", name, &[a, b])
            .finish("tool_calls", Some((40, 12))),
    )
}

const PARIS: &str = r#"{"city":"Paris","population":2102650}"#;

fn json_answer() -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-json")
            .text(&[&PARIS[..10], &PARIS[10..]])
            .finish("stop", Some((30, 12))),
    )
}

fn rate_limited() -> Reply {
    Reply::json(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
    )
    // A short delay, honoured by the frameworks' own retries as by the gateway's.
    .header("retry-after-ms", "10")
}

async fn run(h: &Harness, scenario: &str, model: &str, expect: &str) -> Vec<String> {
    run_on(Sdk::Frameworks, h, scenario, model, expect).await
}

async fn run_on(sdk: Sdk, h: &Harness, scenario: &str, model: &str, expect: &str) -> Vec<String> {
    let env = [("MODEL", model), ("EXPECT_TEXT", expect)];
    sdk.run(h, scenario, &env).await
}

/// The error scenario last: every attempt (the framework's own retries included) is rate limited.
async fn rate_limited_run(h: &Harness, scenario: &str) -> Vec<String> {
    h.openai.set_fallback(rate_limited());
    run(h, scenario, MODEL, "").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain() {
    let h = Harness::start().await;
    h.openai.push(text());
    h.openai.push(text());
    assert_eq!(
        run(&h, "langchain_text", MODEL, GREETING).await,
        ["invoke_text", "stream_text"]
    );
    h.openai.push(call("get_weather", r#"{"city":"Paris"}"#));
    h.openai.push(text());
    assert_eq!(
        run(&h, "langchain_tools", MODEL, GREETING).await,
        ["tool_call", "tool_round_trip"]
    );
    h.openai.push(json_answer());
    assert_eq!(
        run(&h, "langchain_structured", MODEL, "").await,
        ["structured_output"]
    );
    let sent = h.openai.requests().last().unwrap().json();
    assert_eq!(sent["response_format"]["type"], "json_schema", "{sent}");
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    assert_eq!(
        run(&h, "langchain_anthropic", "claude-sonnet-4-5", FILE_SAYS).await,
        ["anthropic_text"]
    );
    assert_eq!(
        rate_limited_run(&h, "langchain_error").await,
        ["rate_limited"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_agents_sdk() {
    let h = Harness::start().await;
    h.openai.push(text());
    assert_eq!(
        run(&h, "agents_text", MODEL, GREETING).await,
        ["agent_text"]
    );
    assert_eq!(
        h.openai.requests()[0].json()["messages"][0]["content"],
        "Be kind."
    );
    h.openai.push(call("get_weather", r#"{"city":"Paris"}"#));
    h.openai.push(text());
    assert_eq!(
        run(&h, "agents_tools", MODEL, GREETING).await,
        ["agent_tool_ran", "agent_tool_round_trip"]
    );
    h.openai.push(json_answer());
    assert_eq!(
        run(&h, "agents_structured", MODEL, "").await,
        ["agent_structured_output"]
    );
    assert_eq!(
        rate_limited_run(&h, "agents_error").await,
        ["agent_rate_limited"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pydantic_ai() {
    let h = Harness::start().await;
    h.openai.push(text());
    assert_eq!(
        run(&h, "pydantic_ai_text", MODEL, GREETING).await,
        ["pydantic_ai_text"]
    );
    h.openai.push(call("get_weather", r#"{"city":"Paris"}"#));
    h.openai.push(text());
    assert_eq!(
        run(&h, "pydantic_ai_tools", MODEL, GREETING).await,
        ["pydantic_ai_tool_ran", "pydantic_ai_tool_round_trip"]
    );
    // pydantic-ai's default output mode asks for a `final_result` tool call.
    h.openai.push(call("final_result", PARIS));
    assert_eq!(
        run(&h, "pydantic_ai_structured", MODEL, "").await,
        ["pydantic_ai_structured_output"]
    );
    assert_eq!(
        rate_limited_run(&h, "pydantic_ai_error").await,
        ["pydantic_ai_rate_limited"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vercel_ai_sdk() {
    let h = Harness::start().await;
    let vercel = |scenario, expect| run_on(Sdk::VercelAi, &h, scenario, MODEL, expect);
    h.openai.push(text());
    h.openai.push(text());
    // openai_chat/text.sse's prompt tokens, as the Responses API's input tokens.
    let env = [
        ("MODEL", MODEL),
        ("EXPECT_TEXT", GREETING),
        ("EXPECT_INPUT_TOKENS", "1234"),
    ];
    assert_eq!(
        Sdk::VercelAi.run(&h, "text", &env).await,
        ["generate_text", "generate_usage", "stream_text"]
    );
    h.openai.push(call("get_weather", r#"{"city":"Paris"}"#));
    h.openai.push(text());
    assert_eq!(
        vercel("tools", GREETING).await,
        ["tool_ran", "tool_round_trip"]
    );
    h.openai.push(json_answer());
    assert_eq!(vercel("structured", "").await, ["structured_output"]);
    h.openai.set_fallback(rate_limited());
    assert_eq!(vercel("error", "").await, ["rate_limited"]);
}
