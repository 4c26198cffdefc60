//! Turn order through the real gateway, against fake Anthropic and Gemini servers that validate requests like the
//! real APIs: both refuse a conversation that does not open with a user turn (Anthropic: `first message must use the
//! "user" role`; Gemini: `multiturn requests alternate between user and model`, and a function call turn must follow
//! a user turn). A history that opens with the assistant (a greeting shown before the user typed, a resumed or
//! truncated conversation, a first user turn that was empty) reaches both with a minimal user turn in front, its
//! same-role turns merged, and nothing of it dropped (docs/gateway.md, "Turn order").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use e2e_tests::*;
use fake_provider::validate::check_body;
use fake_provider::{FakeProvider, Protocol, Reply};
use llm_proto::gateway as pb;
use pb::part::Kind;
use pb::stream_response::Event as E;
use serde_json::{Value, json};

const CLAUDE: &str = "anthropic/claude-sonnet-4-5";
const GEMINI: &str = "gemini/gemini-2.5-flash";

/// The text of the user turn the gateway puts first (`LEADING_USER_TEXT` in the adapters).
const LEADING_USER_TEXT: &str = ".";

const GREETING: &str = "Hi! Ask me about the weather anywhere.";

fn message(role: pb::Role, parts: Vec<pb::Part>) -> pb::Message {
    pb::Message {
        role: role as i32,
        parts,
    }
}

fn call(id: &str) -> pb::Part {
    pb::Part {
        kind: Some(Kind::ToolCall(pb::ToolCallPart {
            call_id: id.into(),
            tool_name: "get_weather".into(),
            input_json: r#"{"city":"Paris"}"#.into(),
            provider_metadata: None,
        })),
    }
}

fn result(id: &str) -> pb::Part {
    pb::Part {
        kind: Some(Kind::ToolResult(pb::ToolResultPart {
            call_id: id.into(),
            tool_name: "get_weather".into(),
            output: "18°C, sunny".into(),
            is_error: false,
        })),
    }
}

/// A greeting, then the user's question.
fn greeting_first(model: &str) -> pb::Generation {
    pb::Generation {
        model: model.into(),
        messages: vec![
            message(pb::Role::Assistant, vec![text_part(GREETING)]),
            user("Weather in Paris?"),
        ],
        ..Default::default()
    }
}

/// A resumed tool loop: the greeting, a user turn left empty, then the assistant's call and its result. Once the
/// empty turn is dropped the two assistant turns are consecutive and the conversation opens with the assistant.
fn resumed_tool_loop(model: &str) -> pb::Generation {
    pb::Generation {
        model: model.into(),
        messages: vec![
            message(pb::Role::Assistant, vec![text_part(GREETING)]),
            message(pb::Role::User, vec![text_part("")]),
            message(pb::Role::Assistant, vec![call("toolu_01Paris")]),
            message(pb::Role::Tool, vec![result("toolu_01Paris")]),
        ],
        tools: vec![weather_tool()],
        ..Default::default()
    }
}

/// A gateway whose fake `pick`s validates every request like `protocol` and answers two steps with `fixture`.
async fn validating(
    pick: fn(&Harness) -> &FakeProvider,
    protocol: Protocol,
    fixture: &str,
) -> Harness {
    let h = Harness::start().await;
    let fake = pick(&h);
    fake.validate_requests(protocol);
    fake.push(Reply::fixture(fixture));
    fake.push(Reply::fixture(fixture));
    h
}

/// Streams `g` and asserts the fake accepted the request and the step finished; returns the request's path and body.
async fn accepted(h: &Harness, fake: &FakeProvider, g: pb::Generation) -> (String, Value) {
    let events = h.stream(g).await.expect("stream starts");
    let lines = render(&events);
    assert!(
        fake.rejections().is_empty(),
        "the fake provider refused the request: {:#?}\n{lines:#?}",
        fake.rejections()
    );
    assert!(matches!(terminal(&events), E::StepFinish(_)), "{lines:#?}");
    let req = fake.requests().last().cloned().expect("a request");
    (req.path.clone(), req.json())
}

/// Asserts the check that passed is live: `body` without its first turn (`key` is `messages` or `contents`), which
/// is what the gateway sent before it put a user turn first, is refused with `message`.
fn assert_refused_without_first_turn(
    protocol: Protocol,
    path: &str,
    body: &Value,
    key: &str,
    message: &str,
) {
    let mut b = body.clone();
    b[key].as_array_mut().expect("turns").remove(0);
    let refused = check_body(protocol, path, &b).expect_err("refused without the user turn");
    assert!(refused.message.contains(message), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_gets_a_user_turn_first_and_alternating_roles() {
    let h = validating(|h| &h.anthropic, Protocol::Anthropic, "anthropic/text.sse").await;

    let (path, body) = accepted(&h, &h.anthropic, greeting_first(CLAUDE)).await;
    assert_eq!(
        body["messages"],
        // The prompt-cache policy marks the last two user turns; the one put in front is one of them here.
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": LEADING_USER_TEXT, "cache_control": {"type": "ephemeral"}},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": GREETING}]},
            {"role": "user", "content": [
                {"type": "text", "text": "Weather in Paris?", "cache_control": {"type": "ephemeral"}},
            ]},
        ])
    );
    assert_refused_without_first_turn(
        Protocol::Anthropic,
        &path,
        &body,
        "messages",
        "first message must use the \"user\" role",
    );

    let (path, body) = accepted(&h, &h.anthropic, resumed_tool_loop(CLAUDE)).await;
    let messages = body["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(messages[0]["content"][0]["text"], LEADING_USER_TEXT);
    // The greeting and the call are one assistant turn, nothing dropped; the result answers it right after.
    assert_eq!(messages[1]["content"][0]["text"], GREETING);
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(messages[1]["content"][1]["id"], "toolu_01Paris");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_01Paris");
    assert_refused_without_first_turn(
        Protocol::Anthropic,
        &path,
        &body,
        "messages",
        "first message must use the \"user\" role",
    );
    assert_eq!(h.anthropic.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_gets_a_user_turn_first_before_text_and_before_a_function_call() {
    let h = validating(|h| &h.gemini, Protocol::Gemini, "gemini/text.sse").await;

    let (path, body) = accepted(&h, &h.gemini, greeting_first(GEMINI)).await;
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": LEADING_USER_TEXT}]},
            {"role": "model", "parts": [{"text": GREETING}]},
            {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
        ])
    );
    assert_refused_without_first_turn(
        Protocol::Gemini,
        &path,
        &body,
        "contents",
        "multiturn requests alternate between user and model",
    );

    let (path, body) = accepted(&h, &h.gemini, resumed_tool_loop(GEMINI)).await;
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": LEADING_USER_TEXT}]},
            {"role": "model", "parts": [
                {"text": GREETING},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18°C, sunny"}}},
            ]},
        ])
    );
    assert_refused_without_first_turn(
        Protocol::Gemini,
        &path,
        &body,
        "contents",
        "function call turn comes immediately after a user turn",
    );
    assert_eq!(h.gemini.requests().len(), 2);
}
