//! The demo and benchmark scenarios, in-process and through the binary.

// A failed unwrap is how a test reports an unexpected error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::sse_data;
use fake_provider::{FakeProvider, scenario};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Decoded view of an OpenAI Chat stream.
#[derive(Debug, Default)]
struct Turn {
    text: String,
    tool_name: Option<String>,
    tool_id: Option<String>,
    args: String,
    finish: Option<String>,
    usage: Option<Value>,
    done: bool,
}

fn decode(body: &str) -> Turn {
    let mut turn = Turn::default();
    let datas = sse_data(body);
    let first: Value = serde_json::from_str(&datas[0]).unwrap();
    assert_eq!(
        first["choices"][0]["delta"],
        json!({"role": "assistant", "content": "", "refusal": null})
    );
    for data in datas {
        if data == "[DONE]" {
            turn.done = true;
            continue;
        }
        let chunk: Value = serde_json::from_str(&data).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk");
        if !chunk["usage"].is_null() {
            assert_eq!(chunk["choices"], json!([]));
            turn.usage = Some(chunk["usage"].clone());
        }
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str() {
            turn.text.push_str(t);
        }
        if let Some(call) = delta["tool_calls"].get(0) {
            if let Some(id) = call["id"].as_str() {
                turn.tool_id = Some(id.to_owned());
                turn.tool_name = call["function"]["name"].as_str().map(str::to_owned);
            }
            turn.args
                .push_str(call["function"]["arguments"].as_str().unwrap());
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            turn.finish = Some(f.to_owned());
        }
    }
    turn
}

async fn post_chat(base: &str, path: &str, body: &Value) -> String {
    let resp = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-test")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    resp.text().await.unwrap()
}

#[tokio::test]
async fn demo_scenario_runs_a_two_turn_tool_loop() {
    let fp = FakeProvider::start().await.unwrap();
    fp.set_fallback(scenario::demo());
    let user = json!({"role": "user", "content": "What time is it?"});
    let tools = json!([{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]);
    let first_req = json!({"model": "demo-1", "stream": true, "stream_options": {"include_usage": true}, "messages": [user], "tools": tools});

    let first = decode(&post_chat(&fp.base_url(), "/v1/chat/completions", &first_req).await);
    assert_eq!(first.text, scenario::DEMO_PREAMBLE);
    assert_eq!(first.tool_name.as_deref(), Some("get_time"));
    let args: Value = serde_json::from_str(&first.args).unwrap();
    assert_eq!(args, json!({"timezone": "UTC"}));
    assert_eq!(first.finish.as_deref(), Some("tool_calls"));
    let usage = first.usage.unwrap();
    let prompt = usage["prompt_tokens"].as_u64().unwrap();
    let expected = (serde_json::to_vec(&first_req).unwrap().len() / 4) as u64;
    assert!(prompt.abs_diff(expected) <= 1, "{prompt} vs {expected}");
    assert!(first.done);

    let call_id = first.tool_id.unwrap();
    let second_req = json!({"model": "demo-1", "stream": true, "stream_options": {"include_usage": true}, "tools": tools, "messages": [
        user,
        {"role": "assistant", "content": null, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": "get_time", "arguments": first.args}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "12:00 UTC"}
    ]});
    let second = decode(&post_chat(&fp.base_url(), "/chat/completions", &second_req).await);
    assert_eq!(
        second.text,
        "The tool says: 12:00 UTC. That's all from the demo provider."
    );
    assert_eq!(second.finish.as_deref(), Some("stop"));
    assert!(second.tool_name.is_none());
    assert!(second.done);

    let reqs = fp.wait_requests(2, Duration::from_secs(5)).await;
    assert_eq!(reqs[1].json()["messages"][2]["role"], "tool");
}

#[tokio::test]
async fn demo_scenario_calls_only_a_tool_it_was_offered() {
    let fp = FakeProvider::start().await.unwrap();
    fp.set_fallback(scenario::demo());
    let user = json!({"role": "user", "content": "Hello there demo"});
    for tools in [
        json!([]),
        json!([{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]),
    ] {
        let req = json!({"model": "demo-1", "stream": true, "stream_options": {"include_usage": true}, "messages": [user], "tools": tools});
        let reply = decode(&post_chat(&fp.base_url(), "/v1/chat/completions", &req).await);
        assert!(
            reply.tool_name.is_none(),
            "no tool call: {:?}",
            reply.tool_name
        );
        assert!(reply.text.contains("your 3-word message"), "{}", reply.text);
        assert_eq!(reply.finish.as_deref(), Some("stop"));
        assert!(reply.done);
    }
}

/// Offered `write`, `get_time` and a client tool, the demo calls each once, one per step, in that order (the client
/// tool with the smallest input its schema accepts), then answers quoting the last result.
#[tokio::test]
async fn demo_scenario_walks_the_whole_loop_one_tool_per_step() {
    let fp = FakeProvider::start().await.unwrap();
    fp.set_fallback(scenario::demo());
    let lookup = json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city", "days"]});
    let tools = json!([
        {"type": "function", "function": {"name": "lookup", "parameters": lookup}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}},
    ]);
    let mut messages = vec![json!({"role": "user", "content": "Show me everything"})];
    let mut calls = Vec::new();
    for step in 0..4 {
        let req = json!({"model": "demo-1", "stream": true, "stream_options": {"include_usage": true}, "messages": messages, "tools": tools});
        let reply = decode(&post_chat(&fp.base_url(), "/v1/chat/completions", &req).await);
        let Some(name) = reply.tool_name.clone() else {
            assert_eq!(step, 3, "three calls before the answer");
            assert_eq!(
                reply.text,
                "The tool says: result 2. That's all from the demo provider."
            );
            assert_eq!(reply.finish.as_deref(), Some("stop"));
            break;
        };
        assert_eq!(reply.finish.as_deref(), Some("tool_calls"));
        let args: Value = serde_json::from_str(&reply.args).unwrap();
        calls.push((name.clone(), args));
        let id = reply.tool_id.unwrap();
        messages.push(
            json!({"role": "assistant", "content": reply.text, "tool_calls": [{
            "id": id, "type": "function", "function": {"name": name, "arguments": reply.args}}]}),
        );
        messages
            .push(json!({"role": "tool", "tool_call_id": id, "content": format!("result {step}")}));
    }
    assert_eq!(
        calls,
        [
            (
                "write".to_string(),
                json!({"path": scenario::DEMO_FILE, "content": "Written by the demo provider, so the session's diff has something to show.\n"})
            ),
            ("get_time".to_string(), json!({"timezone": "UTC"})),
            ("lookup".to_string(), json!({"city": "demo", "days": 1})),
        ]
    );
}

#[tokio::test]
async fn demo_scenario_answers_healthz_and_unknown_paths() {
    let fp = FakeProvider::start().await.unwrap();
    fp.set_fallback(scenario::demo());
    let health = reqwest::get(format!("{}/healthz", fp.base_url()))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let missing = reqwest::get(format!("{}/nope", fp.base_url()))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn binary_prints_its_address_and_serves_the_paced_scenario() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fake-provider"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--scenario",
            "paced",
            "--chunks",
            "5",
            "--interval-ms",
            "1",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut first_line = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        BufReader::new(stdout).read_line(&mut first_line),
    )
    .await
    .unwrap()
    .unwrap();
    let base = first_line
        .trim_end()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first_line:?}"))
        .to_owned();
    assert!(base.starts_with("http://127.0.0.1:"));

    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    let body =
        json!({"model": "bench", "stream": true, "messages": [{"role": "user", "content": "go"}]});
    let turn = decode(&post_chat(&base, "/v1/chat/completions", &body).await);
    assert_eq!(turn.text, "tok0 tok1 tok2 tok3 tok4");
    assert_eq!(turn.finish.as_deref(), Some("stop"));
    assert_eq!(turn.usage.unwrap()["completion_tokens"], 5);
    // Not streamed: the same answer as OpenAI's one `chat.completion`.
    let whole = json!({"model": "bench", "messages": [{"role": "user", "content": "go"}]});
    let resp = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(whole.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "application/json");
    let whole: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(whole["object"], "chat.completion");
    assert_eq!(
        whole["choices"][0]["message"]["content"],
        "tok0 tok1 tok2 tok3 tok4"
    );
    assert_eq!(whole["choices"][0]["finish_reason"], "stop");
    assert_eq!(whole["usage"]["completion_tokens"], 5);

    child.start_kill().unwrap();
    child.wait().await.unwrap();
}
