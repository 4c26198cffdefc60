//! Over real sockets: a fake asked for no stream answers with the whole JSON body the scripted stream amounts to,
//! the provider's headers on it, and asked for a stream replays the stream.

// A failed unwrap is how a test reports an unexpected error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fake_provider::{FakeProvider, Reply};
use serde_json::{Value, json};

fn recorded(path: &str) -> Value {
    let full = format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_slice(&std::fs::read(full).unwrap()).unwrap()
}

async fn post(
    fp: &FakeProvider,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(format!("{}{path}", fp.base_url()))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap()
}

async fn json_of(resp: reqwest::Response) -> Value {
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    serde_json::from_str(&resp.text().await.unwrap()).unwrap()
}

#[tokio::test]
async fn openai_chat_without_stream_gets_the_chat_completion_and_with_it_the_stream() {
    let fp = FakeProvider::start().await.unwrap();
    let auth = [("authorization", "Bearer sk-test")];
    let mut body =
        json!({"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "Hi"}]});
    fp.push(Reply::fixture("openai_chat/text.sse"));
    let resp = post(&fp, "/v1/chat/completions", &auth, &body).await;
    assert_eq!(resp.headers()["x-ratelimit-remaining-requests"], "9999");
    assert!(resp.headers().contains_key("x-request-id"));
    assert_eq!(json_of(resp).await, recorded("openai_chat/text.json"));

    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    fp.push(Reply::fixture("openai_chat/text.sse"));
    let resp = post(&fp, "/v1/chat/completions", &auth, &body).await;
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert!(resp.text().await.unwrap().ends_with("data: [DONE]\n\n"));
    assert!(fp.rejections().is_empty(), "{:?}", fp.rejections());
}

#[tokio::test]
async fn anthropic_without_stream_gets_the_message() {
    let fp = FakeProvider::start().await.unwrap();
    fp.push(Reply::fixture("anthropic/thinking_tool_use.sse"));
    let body = json!({
        "model": "claude-sonnet-4-5", "max_tokens": 2048,
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "Weather in Paris?"}]
    });
    let headers = [
        ("x-api-key", "sk-ant-test"),
        ("anthropic-version", "2023-06-01"),
    ];
    let resp = post(&fp, "/v1/messages", &headers, &body).await;
    assert!(
        resp.headers()
            .contains_key("anthropic-ratelimit-requests-remaining")
    );
    assert_eq!(
        json_of(resp).await,
        recorded("anthropic/thinking_tool_use.json")
    );
    assert!(fp.rejections().is_empty(), "{:?}", fp.rejections());
}

#[tokio::test]
async fn gemini_generate_content_gets_one_response_and_a_stream_without_sse_the_array() {
    let fp = FakeProvider::start().await.unwrap();
    let key = [("x-goog-api-key", "test-key")];
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]});
    fp.push(Reply::fixture("gemini/text.sse"));
    let whole = json_of(
        post(
            &fp,
            "/v1beta/models/gemini-2.5-flash:generateContent",
            &key,
            &body,
        )
        .await,
    )
    .await;
    assert_eq!(
        whole["candidates"][0]["content"]["parts"],
        json!([{"text": "Hello! The file says \"done\".\nAnything else?"}])
    );
    fp.push(Reply::fixture("gemini/text.sse"));
    let array = post(
        &fp,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        &key,
        &body,
    )
    .await;
    assert_eq!(json_of(array).await, recorded("gemini/text.json"));
    assert!(fp.rejections().is_empty(), "{:?}", fp.rejections());
}

#[tokio::test]
async fn a_truncated_stream_asked_for_whole_is_refused_as_a_broken_script() {
    let fp = FakeProvider::start().await.unwrap();
    fp.push(Reply::fixture("openai_chat/truncated.sse"));
    let body = json!({"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "Hi"}]});
    let resp = post(
        &fp,
        "/v1/chat/completions",
        &[("authorization", "Bearer sk-test")],
        &body,
    )
    .await;
    assert_eq!(resp.status(), 500);
    let refused = fp.rejections();
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].message.contains("the stream ends before"),
        "{}",
        refused[0].message
    );
}
