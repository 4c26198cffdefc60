//! The checks every request of an API gets before its body's rules, and what every fake does by default.

use serde_json::{Value, json};

use super::tests::api_headers;
use super::*;
use crate::FakeProvider;

fn request(path: &str, headers: &[(&str, &str)], body: &Value) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: path.into(),
        headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
        body: body.to_string().into_bytes().into(),
        received_at: std::time::Instant::now(),
    }
}

fn chat() -> Value {
    json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
}

fn anthropic() -> Value {
    json!({"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
}

#[test]
fn a_request_without_the_apis_credential_or_version_is_refused_as_the_api_does() {
    let r = check(Protocol::OpenaiChat, &request("/v1/chat/completions", &[], &chat())).unwrap_err();
    assert_eq!(r.status, 401);
    assert!(r.message.contains("didn't provide an API key"), "{r}");
    let r = check(Protocol::Anthropic, &request("/v1/messages", &[("anthropic-version", "2023-06-01")], &anthropic()))
        .unwrap_err();
    assert_eq!(r.status, 401);
    assert!(r.body().contains("authentication_error"), "{}", r.body());
    let r = check(Protocol::Anthropic, &request("/v1/messages", &[("x-api-key", "k")], &anthropic())).unwrap_err();
    assert_eq!((r.status, r.message.as_str()), (400, "anthropic-version: header is required"));
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let r = check(Protocol::Gemini, &request("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", &[], &gemini))
        .unwrap_err();
    assert_eq!(r.status, 403);
    assert!(r.body().contains("PERMISSION_DENIED"), "{}", r.body());
    // The key in the query is Google's other way.
    let path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=AIza";
    check(Protocol::Gemini, &request(path, &[], &gemini)).unwrap();
}

#[test]
fn a_wrong_key_is_refused_when_the_fake_knows_the_right_one() {
    let req = request("/v1/chat/completions", &[("authorization", "Bearer sk-wrong")], &chat());
    check(Protocol::OpenaiChat, &req).unwrap();
    let r = check_keyed(Protocol::OpenaiChat, &req, Some("sk-right")).unwrap_err();
    assert_eq!((r.status, r.code.as_deref()), (401, Some("invalid_api_key")));
}

#[test]
fn an_unknown_top_level_field_is_refused_in_each_apis_words() {
    let headers: Vec<(String, String)> = api_headers();
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let mut body = chat();
    body["surprise"] = json!(1);
    let r = check(Protocol::OpenaiChat, &request("/v1/chat/completions", &headers, &body)).unwrap_err();
    assert_eq!(r.message, "Unrecognized request argument supplied: surprise");
    let mut body = anthropic();
    body["surprise"] = json!(1);
    let r = check(Protocol::Anthropic, &request("/v1/messages", &headers, &body)).unwrap_err();
    assert_eq!(r.message, "surprise: Extra inputs are not permitted");
    // A compatible server takes parameters of its own.
    let mut body = chat();
    body["safe_prompt"] = json!(true);
    check(Protocol::MistralChat, &request("/v1/chat/completions", &headers, &body)).unwrap();
}

async fn post(fp: &FakeProvider, path: &str, body: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", fp.base_url()))
        .header("content-type", "application/json");
    for (name, value) in api_headers() {
        request = request.header(name, value);
    }
    request.body(body.to_string()).send().await.unwrap()
}

#[tokio::test]
async fn every_fake_checks_by_path_and_answers_with_the_apis_headers() {
    let fp = FakeProvider::start().await.unwrap();
    fp.push(Reply::fixture("openai_chat/text.sse"));
    let refused = post(&fp, "/v1/chat/completions", &json!({"messages": []})).await;
    assert_eq!(refused.status(), 400);
    let answered = post(&fp, "/v1/chat/completions", &chat()).await;
    assert_eq!(answered.status(), 200);
    for header in ["x-request-id", "x-ratelimit-remaining-requests", "x-ratelimit-reset-tokens"] {
        assert!(answered.headers().contains_key(header), "{header}: {:?}", answered.headers());
    }
    assert_eq!(fp.rejections().len(), 1);
    fp.skip_validation("this part of the test is of the opt-out");
    fp.push(Reply::fixture("openai_chat/text.sse"));
    assert_eq!(post(&fp, "/v1/chat/completions", &json!({})).await.status(), 200);
}

#[tokio::test]
async fn a_scripted_call_of_a_tool_the_request_did_not_offer_is_refused() {
    let fp = FakeProvider::start().await.unwrap();
    fp.push(Reply::fixture("openai_chat/parallel_tools.sse"));
    let mut body = chat();
    body["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
    let answered = post(&fp, "/v1/chat/completions", &body).await;
    assert_eq!(answered.status(), 500);
    let rejections = fp.rejections();
    assert_eq!(rejections.len(), 1);
    assert!(rejections[0].message.contains("`get_time`"), "{}", rejections[0]);
    // Offered both, the same reply is answered.
    fp.push(Reply::fixture("openai_chat/parallel_tools.sse"));
    body["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}));
    assert_eq!(post(&fp, "/v1/chat/completions", &body).await.status(), 200);
}
