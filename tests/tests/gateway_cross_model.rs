//! One conversation that changes model at every step, through the real gateway, with every fake provider checking
//! each request the way the real provider does (`FakeProvider::validate_requests`): a request the real API would
//! refuse gets that API's 400 and the step ends in an error instead of `step_finish`.
//!
//! The conversation is built step by step as the session-processor builds it: each step's events (reasoning with its
//! provider metadata, text, tool calls with theirs) become the assistant turn, and each call gets a result.
//!
//! 1. Anthropic (claude-sonnet-4-5, thinking on) thinks, signs its thinking and calls `get_weather` (`toolu_…`).
//! 2. Gemini (2.5 Flash) gets that history: the Claude thinking must be gone, the call and its result paired and
//!    named, no foreign id on the wire. It calls `get_weather` twice (ids synthesized by the gateway).
//! 3. OpenAI Chat (gpt-4o): ids within 40 characters, every call answered, `content: null` beside tool calls. Its
//!    reply is a call whose id, `call:weird/id`, is one Anthropic's id rule refuses (compatible servers do send such
//!    ids).
//! 4. OpenAI Responses (gpt-5-codex): every `function_call_output` quotes a `function_call`'s `call_id`.
//! 5. Anthropic again: the step-1 thinking goes back signed (same model), `call:weird/id` is rewritten on the call
//!    and its result alike, and every `tool_use` is answered in the next turn.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use e2e_tests::turns::{fold, results};
use e2e_tests::*;
use fake_provider::openai_sse::ChatStream;
use fake_provider::{FakeProvider, Protocol, Reply};
use llm_proto::gateway as pb;
use pb::part::Kind;
use pb::stream_response::Event as E;
use serde_json::{Value, json};

const CLAUDE: &str = "anthropic/claude-sonnet-4-5";
const GEMINI: &str = "gemini/gemini-2.5-flash";
const GPT4O: &str = "openai/gpt-4o";
const CODEX: &str = "openai/gpt-5-codex";

/// The id a compatible server produced that Anthropic's `^[a-zA-Z0-9_-]+$` refuses.
const WEIRD_ID: &str = "call:weird/id";

/// One step on `model` with the conversation so far; the step must end with `step_finish` and the fake must have
/// refused nothing.
async fn step(
    h: &Harness,
    fake: &FakeProvider,
    model: &str,
    messages: &[pb::Message],
) -> Vec<pb::StreamResponse> {
    let g = pb::Generation {
        model: model.into(),
        system: vec!["You are a travel assistant.".into()],
        messages: messages.to_vec(),
        tools: vec![weather_tool()],
        reasoning: Some(pb::Reasoning {
            effort: pb::reasoning::Effort::Medium as i32,
            budget_tokens: 0,
        }),
        ..Default::default()
    };
    let events = h.stream(g).await.expect("stream starts");
    let lines = render(&events);
    assert!(
        fake.rejections().is_empty(),
        "{model}: the fake provider refused the request: {:#?}\n{lines:#?}",
        fake.rejections()
    );
    assert!(
        matches!(terminal(&events), E::StepFinish(_)),
        "{model}: {lines:#?}"
    );
    events
}

/// The body of the fake's last request.
fn last_body(fake: &FakeProvider) -> Value {
    fake.requests().last().expect("a request").json()
}

/// The OpenAI Chat reply of step 3: a call with an id Anthropic would refuse.
fn weird_call_reply() -> Reply {
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-cross-model-3")
            .created(1_767_225_600)
            .text(&["Checking ", "Lyon too."])
            .tool_call(WEIRD_ID, "get_weather", &["{\"city\":", "\"Lyon\"}"])
            .finish("tool_calls", Some((512, 24))),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_moving_across_four_protocols_passes_every_providers_validation() {
    let h = Harness::start().await;
    h.anthropic.validate_requests(Protocol::Anthropic);
    h.gemini.validate_requests(Protocol::Gemini);
    h.openai.validate_requests(Protocol::OpenaiChat);
    h.openai.validate_requests(Protocol::OpenaiResponses);

    h.anthropic
        .push(Reply::fixture("anthropic/thinking_tool_use.sse"));
    h.gemini.push(Reply::fixture("gemini/parallel_tools.sse"));
    h.openai.push(weird_call_reply());
    h.openai
        .push(Reply::fixture("openai_responses/parallel_tools.sse"));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));

    let mut messages = vec![user("What's the weather in Paris, Tokyo and Lyon?")];

    // Step 1: Claude thinks, signs, and calls a tool.
    let first = fold(&step(&h, &h.anthropic, CLAUDE, &messages).await);
    assert_eq!(first.calls.len(), 1);
    assert_eq!(first.calls[0].call_id, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    let thinking = match &first.assistant.parts[0].kind {
        Some(Kind::Reasoning(r)) => r.clone(),
        other => panic!("step 1 should start with reasoning: {other:?}"),
    };
    let meta = thinking.provider_metadata.clone().expect("signed thinking");
    assert_eq!(
        (meta.protocol.as_str(), meta.model.as_str()),
        ("anthropic", CLAUDE)
    );
    assert!(meta.json.contains("\"signature\":\"EpYC"), "{}", meta.json);
    let body = last_body(&h.anthropic);
    assert_eq!(
        body["thinking"]["type"], "enabled",
        "the first step thinks: {body:#}"
    );
    messages.push(first.assistant.clone());
    messages.push(results(&first.calls));

    // Step 2: Gemini. Claude's thinking is not Gemini's to read; the call and result go back paired and named.
    let second = fold(&step(&h, &h.gemini, GEMINI, &messages).await);
    let body = last_body(&h.gemini);
    let text = body.to_string();
    assert!(!text.contains("EpYC"), "no Anthropic signature: {body:#}");
    assert!(
        !text.contains("The user wants the weather"),
        "no Anthropic thinking: {body:#}"
    );
    assert!(
        !text.contains("toolu_"),
        "a foreign call id never reaches Gemini: {body:#}"
    );
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [
            {"text": "Let me check the weather in Paris."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
        ]})
    );
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": "sunny at {\"city\": \"Paris\"}"}}},
        ]})
    );
    assert_eq!(second.calls.len(), 2);
    messages.push(second.assistant.clone());
    messages.push(results(&second.calls));

    // Step 3: OpenAI Chat. Every call of the history is answered by a tool message before the next turn.
    let third = fold(&step(&h, &h.openai, GPT4O, &messages).await);
    let body = last_body(&h.openai);
    let text = body.to_string();
    assert!(
        !text.contains("EpYC") && !text.contains("reasoning_content"),
        "{body:#}"
    );
    let sent: Vec<&Value> = body["messages"].as_array().unwrap().iter().collect();
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "tool"
        ]
    );
    // Gemini's turn had only calls: `content` is null beside them.
    assert_eq!(sent[4]["content"], Value::Null);
    for call in sent[4]["tool_calls"].as_array().unwrap() {
        assert!(call["id"].as_str().unwrap().len() <= 40, "{call}");
    }
    assert_eq!(third.calls.len(), 1);
    assert_eq!(third.calls[0].call_id, WEIRD_ID);
    messages.push(third.assistant.clone());
    messages.push(results(&third.calls));

    // Step 4: OpenAI Responses. Every output quotes its call's `call_id`, the odd one included.
    let fourth = fold(&step(&h, &h.openai, CODEX, &messages).await);
    let body = last_body(&h.openai);
    let input = body["input"].as_array().unwrap();
    let call_ids: Vec<&str> = input
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    let output_ids: Vec<&str> = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(call_ids, output_ids);
    assert_eq!(call_ids.len(), 4);
    assert!(call_ids.contains(&WEIRD_ID), "{call_ids:?}");
    assert!(
        !input.iter().any(|i| i["type"] == "reasoning"),
        "no foreign reasoning item: {body:#}"
    );
    assert_eq!(fourth.calls.len(), 2);
    messages.push(fourth.assistant.clone());
    messages.push(results(&fourth.calls));

    // Step 5: back on Claude, which gets its own signed thinking back and ids it accepts, still paired.
    step(&h, &h.anthropic, CLAUDE, &messages).await;
    let body = last_body(&h.anthropic);
    assert!(!body.to_string().contains(WEIRD_ID), "{body:#}");
    assert_eq!(
        body["thinking"]["type"], "enabled",
        "the loop opens with Claude's own thinking, so thinking stays on: {body:#}"
    );
    let turns = body["messages"].as_array().unwrap();
    assert_eq!(turns[1]["content"][0]["type"], "thinking");
    assert_eq!(
        turns[1]["content"][0]["signature"],
        serde_json::from_str::<Value>(&meta.json).unwrap()["signature"]
    );
    assert_eq!(turns[1]["content"][0]["thinking"], thinking.text.as_str());
    // The rewritten id is the same on the call and on its result.
    let (call_turn, result_turn) = (&turns[5], &turns[6]);
    let rewritten = call_turn["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use" && b["input"]["city"] == "Lyon")
        .expect("the Lyon call")["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(rewritten, WEIRD_ID);
    assert!(
        result_turn["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["tool_use_id"] == rewritten.as_str()),
        "{result_turn:#}"
    );
    // Five requests in all, none refused.
    assert_eq!(h.anthropic.requests().len(), 2);
    assert_eq!(h.gemini.requests().len(), 1);
    assert_eq!(h.openai.requests().len(), 2);
}

/// The validation is live through the gateway: a request the provider would refuse comes back as the provider's
/// 400, an `invalid_request` error that is not retried. The adapter never builds such a request on its own, so the
/// caller forces one through provider options: JSON output together with tools, which Gemini 2.5 refuses (the
/// adapter refuses `output_format` with tools for that reason, but passes provider options on as given).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_ends_the_step_with_the_providers_invalid_request_error() {
    let mut h = Harness::start().await;
    // The point: a request the provider refuses.
    h.expect_rejections();
    h.gemini.validate_requests(Protocol::Gemini);
    h.gemini.push(Reply::fixture("gemini/text.sse"));
    let g = pb::Generation {
        tools: vec![weather_tool()],
        provider_options_json:
            r#"{"gemini":{"generationConfig":{"responseMimeType":"application/json"}}}"#.into(),
        ..generation(GEMINI, "hi")
    };
    let events = h.stream(g).await.expect("stream starts");
    let lines = render(&events);
    assert_eq!(
        lines,
        [
            "stream_start gemini gemini/gemini-2.5-flash attempt=1",
            "error InvalidRequest retryable=false status=400 retry_after_ms=-1",
        ]
    );
    let E::Error(e) = terminal(&events) else {
        panic!("{lines:#?}")
    };
    assert!(
        e.message
            .contains("Function calling with a response mime type"),
        "{}",
        e.message
    );
    assert_eq!(h.gemini.rejections().len(), 1);
    assert_eq!(h.gemini.requests().len(), 1, "not retried");
}
