//! The HTTP front door as a plain HTTP client sees it: HTTP/1.1 and HTTP/2 (prior knowledge) on one port, the
//! same metrics as gRPC generations, and the answers for paths and methods it does not serve.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::front_door::{request, send};
use e2e_tests::{Harness, TOKEN};
use fake_provider::Reply;

const CHAT: &str =
    r#"{"model":"openai/gpt-4o","stream":true,"messages":[{"role":"user","content":"Hi"}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_http_versions_stream_on_one_port_and_count_in_the_metrics() {
    let h = Harness::start().await;
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    for h2 in [false, true] {
        let (status, headers, body) = send(
            h.http_addr,
            h2,
            request("POST", "/v1/chat/completions", Some(TOKEN), CHAT),
        )
        .await;
        assert_eq!(status, 200, "h2={h2} {body}");
        assert_eq!(headers["content-type"], "text/event-stream");
        assert!(body.contains(r#""content":"Hello""#), "h2={h2} {body}");
        assert!(body.ends_with("data: [DONE]\n\n"), "h2={h2} {body}");
    }
    let metrics = h.scrape_metrics().await;
    let line =
        r#"llm_gateway_requests_total{provider="openai",model="openai/gpt-4o",outcome="ok"} 2"#;
    assert!(
        metrics.lines().any(|l| l == line),
        "missing {line}\n{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unserved_paths_methods_and_missing_tokens_get_their_own_status() {
    let h = Harness::start().await;
    let (status, headers, body) = send(
        h.http_addr,
        false,
        request("POST", "/v1/chat/completions", None, CHAT),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(headers["www-authenticate"], "Bearer");
    let (status, _, body) = send(
        h.http_addr,
        false,
        request(
            "POST",
            "/v1/messages",
            Some("wrong-token-wrong-token"),
            "{}",
        ),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains(r#""type":"authentication_error""#), "{body}");
    let (status, _, body) = send(
        h.http_addr,
        false,
        request("POST", "/v1/embed", Some(TOKEN), "{}"),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("/v1/chat/completions"), "{body}");
    // A Responses body without `input` is the caller's mistake, named.
    let (status, _, body) = send(
        h.http_addr,
        false,
        request(
            "POST",
            "/v1/responses",
            Some(TOKEN),
            r#"{"model":"openai/gpt-4o"}"#,
        ),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains(r#""param":"input""#), "{body}");
    let (status, _, _) = send(
        h.http_addr,
        false,
        request("GET", "/v1/chat/completions", Some(TOKEN), ""),
    )
    .await;
    assert_eq!(status, 405);
    let (status, _, body) = send(
        h.http_addr,
        true,
        request("POST", "/v1/chat/completions", Some(TOKEN), "{not json"),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains(r#""param":"body""#), "{body}");
    let (status, _, body) = send(
        h.http_addr,
        false,
        request("GET", "/v1/models/openai%2Fgpt-4o", Some(TOKEN), ""),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""id":"openai/gpt-4o""#), "{body}");
    assert!(h.openai.requests().is_empty(), "nothing reached a provider");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_is_served_and_one_over_the_request_limit_is_413() {
    let h = Harness::start().await;
    h.openai.push(Reply::fixture("openai_chat/text.sse"));
    // Above the size the front door parses off the async workers, under the harness's 1 MiB limit.
    let large = format!(
        r#"{{"model":"openai/gpt-4o","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(600_000)
    );
    let (status, _, body) = send(
        h.http_addr,
        false,
        request("POST", "/v1/chat/completions", Some(TOKEN), &large),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""object":"chat.completion""#), "{body}");
    assert_eq!(
        h.openai.requests()[0].json()["messages"][0]["content"]
            .as_str()
            .unwrap()
            .len(),
        600_000
    );
    // The harness allows 1 MiB.
    let big = format!(
        r#"{{"model":"openai/gpt-4o","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(1_100_000)
    );
    let (status, _, body) = send(
        h.http_addr,
        false,
        request("POST", "/v1/chat/completions", Some(TOKEN), &big),
    )
    .await;
    assert_eq!(status, 413, "{body}");
}

/// An error found after translation (by validation, or by the model's adapter) names the field the caller sent, in
/// each endpoint's own terms, never the unified request's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_found_after_translation_name_the_callers_own_field() {
    let h = Harness::start().await;
    let chat = r#"{"model":"openai/gpt-4o","messages":[{"role":"user","content":"x"}],
        "tools":[{"type":"function","function":{"name":"f","parameters":"not a schema"}}]}"#;
    let (status, _, body) =
        e2e_tests::front_door::post(h.http_addr, "/v1/chat/completions", chat).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["param"], "tools[0].function.parameters",
        "{body}"
    );
    let messages = r#"{"model":"anthropic/claude-sonnet-4-5","max_tokens":100000000,
        "messages":[{"role":"user","content":"x"}]}"#;
    let (status, _, body) =
        e2e_tests::front_door::post(h.http_addr, "/v1/messages", messages).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("max_tokens: "), "{body}");
    let responses = r#"{"model":"openai/gpt-4o","input":[{"role":"user","content":[
        {"type":"input_text","text":"look"},
        {"type":"input_image","image_url":"data:image/p\u0001ng;base64,AAAA"}]}]}"#;
    let (status, _, body) =
        e2e_tests::front_door::post(h.http_addr, "/v1/responses", responses).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "input[0].content", "{body}");
    assert!(h.openai.requests().is_empty() && h.anthropic.requests().is_empty());
}
