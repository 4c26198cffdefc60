//! Upstreams that answer as real ones sometimes do, through both doors: a whole JSON response to a streaming
//! request (several OpenAI-compatible servers ignore `stream: true`) is decoded as the complete answer, the same one
//! its stream would have given; a 2xx body no adapter can read (an HTML page from a proxy) is a typed error, never
//! an empty success.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::front_door::{post, request, send};
use e2e_tests::sdk::{ANTHROPIC_TEXT_CHECKS, FILE_SAYS, GREETING, OPENAI_TEXT_CHECKS, Sdk};
use e2e_tests::*;
use fake_provider::{FakeProvider, Reply};
use llm_proto::gateway as pb;

/// Each protocol's whole-response fixture, the stream fixture it is the twin of, and a model served over it.
const TWINS: [(&str, &str, &str); 5] = [
    ("openai", "openai_chat/text", "openai/gpt-4o"),
    ("openai", "openai_chat/parallel_tools", "openai/gpt-4o"),
    ("openai", "openai_responses/reasoning", "openai/gpt-5-codex"),
    (
        "anthropic",
        "anthropic/thinking_tool_use",
        "anthropic/claude-sonnet-4-5",
    ),
    ("gemini", "gemini/text", "gemini/gemini-2.5-flash"),
];

fn fake<'h>(h: &'h Harness, name: &str) -> &'h FakeProvider {
    match name {
        "openai" => &h.openai,
        "anthropic" => &h.anthropic,
        _ => &h.gemini,
    }
}

/// What a caller can act on in a rendered stream: the text and reasoning (deltas joined per block), the tool calls
/// (arguments as JSON values) and the finish line. Delta boundaries differ between a stream and a whole body.
fn content(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in lines {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "text_delta" | "reasoning_delta" => {
                let (id, delta) = rest.split_once(' ').unwrap();
                let delta: String = serde_json::from_str(delta).unwrap();
                let key = format!("{kind} {id} ");
                match out.last_mut() {
                    Some(last) if last.starts_with(&key) => last.push_str(&delta),
                    _ => out.push(format!("{key}{delta}")),
                }
            }
            "tool_call" => {
                let mut fields = rest.splitn(3, ' ');
                let (id, name, args) = (
                    fields.next().unwrap(),
                    fields.next().unwrap(),
                    fields.next().unwrap(),
                );
                let args: serde_json::Value = serde_json::from_str(args).unwrap();
                out.push(format!("tool_call {id} {name} {args}"));
            }
            "step_finish" | "error" | "reasoning_end" => out.push(line.clone()),
            _ => {}
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_answer_to_a_streaming_request_is_the_answer_its_stream_would_be() {
    let h = Harness::start().await;
    for (provider, fixture, model) in TWINS {
        let fake = fake(&h, provider);
        let before = fake.requests().len();
        fake.push(Reply::fixture(&format!("{fixture}.sse")));
        fake.push(Reply::json_fixture(200, &format!("{fixture}.json")));
        let g = || tools_generation(model);
        let streamed = render(&h.stream(g()).await.unwrap());
        let whole = render(&h.stream(g()).await.unwrap());
        assert_well_formed(&whole);
        assert!(
            streamed.last().unwrap().starts_with("step_finish"),
            "{streamed:#?}"
        );
        assert_eq!(content(&whole), content(&streamed), "{fixture}");
        // One request each: neither answer was retried.
        assert_eq!(fake.requests().len(), before + 2, "{fixture}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_gets_the_whole_answer_streamed_and_not() {
    let h = Harness::start().await;
    for _ in 0..2 {
        h.openai
            .push(Reply::json_fixture(200, "openai_chat/text.json"));
    }
    let env = [
        ("MODEL", "openai/gpt-4o"),
        ("EXPECT_TEXT", GREETING),
        ("EXPECT_PROMPT_TOKENS", "1234"),
        ("EXPECT_CACHED_TOKENS", "1024"),
    ];
    let ran = Sdk::OpenAi.run(&h, "text", &env).await;
    assert_eq!(ran, OPENAI_TEXT_CHECKS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_gets_the_whole_answer_streamed_and_not() {
    let h = Harness::start().await;
    for _ in 0..2 {
        h.anthropic
            .push(Reply::json_fixture(200, "anthropic/text.json"));
    }
    let env = [
        ("MODEL", "anthropic/claude-sonnet-4-5"),
        ("EXPECT_TEXT", FILE_SAYS),
        ("EXPECT_USAGE", "25,1210,3840,15"),
    ];
    let ran = Sdk::Anthropic.run(&h, "text", &env).await;
    assert_eq!(ran, ANTHROPIC_TEXT_CHECKS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_page_under_200_is_a_typed_error_through_both_doors() {
    let h = Harness::start().await;
    let page = "<!DOCTYPE html><html><body><h1>Sign in to the proxy</h1></body></html>";
    for _ in 0..2 {
        h.openai
            .push(Reply::json(200, page).header("content-type", "text/html; charset=utf-8"));
    }
    let events = h.stream(generation("openai/gpt-4o", "hi")).await.unwrap();
    let Some(pb::stream_response::Event::Error(e)) = &events.last().unwrap().event else {
        panic!("{:#?}", render(&events));
    };
    assert_eq!(e.kind(), pb::ErrorKind::ProviderError);
    assert!(e.message.contains("text/html"), "{}", e.message);
    assert_eq!(e.provider_body, page);
    // Not retried: the same request would get the same page.
    assert_eq!(h.openai.requests().len(), 1);

    let chat = r#"{"model":"openai/gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;
    let (status, _, body) = send(
        h.http_addr,
        false,
        request("POST", "/v1/chat/completions", Some(TOKEN), chat),
    )
    .await;
    assert!(status.is_server_error(), "{status} {body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("text/html"),
        "{body}"
    );
}

const CHAT_TO: &str = r#"{"model":"MODEL","messages":[{"role":"user","content":"hi"}]}"#;
const MESSAGES_TO: &str =
    r#"{"model":"MODEL","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_protocols_error_keeps_its_status_and_what_clients_act_on() {
    let h = Harness::start().await;
    // An Anthropic overflow through the OpenAI door: the code truncate-and-retry logic keys on.
    h.anthropic.push(Reply::json(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208656 tokens > 200000 maximum"},"request_id":"req_1"}"#,
    ));
    let chat = CHAT_TO.replace("MODEL", "anthropic/claude-sonnet-4-5");
    let (status, _, body) = post(h.http_addr, "/v1/chat/completions", &chat).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "context_length_exceeded", "{body}");
    assert_eq!(body["error"]["param"], "messages", "{body}");
    // An OpenAI overflow through the Anthropic door: Anthropic's words for it.
    h.openai.push(Reply::json(
        400,
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    ));
    let messages = MESSAGES_TO.replace("MODEL", "openai/gpt-4o");
    let (status, _, body) = post(h.http_addr, "/v1/messages", &messages).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("prompt is too long: This model's"),
        "{body}"
    );
    // A provider's 500 stays a 500 through both doors (after the gateway's own retries).
    let gemini_500 =
        r#"{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}"#;
    h.gemini.set_fallback(Reply::json(500, gemini_500));
    let chat = CHAT_TO.replace("MODEL", "gemini/gemini-2.5-flash");
    let messages = MESSAGES_TO.replace("MODEL", "gemini/gemini-2.5-flash");
    let (status, _, body) = post(h.http_addr, "/v1/chat/completions", &chat).await;
    assert_eq!(
        (status, &body["error"]["type"]),
        (500, &"server_error".into()),
        "{body}"
    );
    let (status, _, body) = post(h.http_addr, "/v1/messages", &messages).await;
    assert_eq!(
        (status, &body["error"]["type"]),
        (500, &"api_error".into()),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_answer_carries_the_providers_rate_limit_headers() {
    let h = Harness::start().await;
    h.openai.push(
        Reply::fixture("openai_chat/text.sse")
            .header("x-ratelimit-remaining-tokens", "149984")
            .header("x-request-id", "req_ok"),
    );
    let chat =
        r#"{"model":"openai/gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let (status, headers, _) = send(
        h.http_addr,
        false,
        request("POST", "/v1/chat/completions", Some(TOKEN), chat),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-ratelimit-remaining-tokens"], "149984");
    assert_eq!(headers["x-request-id"], "req_ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_path_is_a_404_that_names_no_model() {
    let h = Harness::start().await;
    let (status, _, body) = post(h.http_addr, "/v1/chat/complete", "{}").await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], serde_json::Value::Null, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let (status, _, body) = post(h.http_addr, "/v1/messages/nope", "{}").await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["type"], "not_found_error", "{body}");
}

/// What a proxy in front of a provider answers: its own page, in its own media type.
fn proxy_page(status: u16, title: &str) -> Reply {
    let page = format!(
        "<html><head><title>{status} {title}</title></head><body><center><h1>{status} {title}</h1></center><hr><center>nginx</center></body></html>\n"
    );
    Reply::json(status, page).header("content-type", "text/html")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxys_pages_and_unreadable_media_types_are_typed_errors_through_both_doors() {
    let chat = CHAT_TO.replace("MODEL", "openai/gpt-4o");
    let messages = MESSAGES_TO.replace("MODEL", "openai/gpt-4o");
    // (what the upstream answers, the gRPC error kind, the doors' status, OpenAI's type, Anthropic's type)
    let cases = [
        (
            proxy_page(502, "Bad Gateway"),
            pb::ErrorKind::ProviderError,
            502,
            "server_error",
            "api_error",
        ),
        (
            proxy_page(413, "Request Entity Too Large"),
            pb::ErrorKind::ContextOverflow,
            413,
            "invalid_request_error",
            "request_too_large",
        ),
        (
            Reply::json(200, "{\"a\":1}\n{\"b\":2}\n")
                .header("content-type", "application/x-ndjson"),
            pb::ErrorKind::ProviderError,
            502,
            "server_error",
            "api_error",
        ),
    ];
    for (reply, kind, status, openai_type, anthropic_type) in cases {
        let h = Harness::start().await;
        h.openai.set_fallback(reply);
        let events = h.stream(generation("openai/gpt-4o", "hi")).await.unwrap();
        let Some(pb::stream_response::Event::Error(e)) = &events.last().unwrap().event else {
            panic!("{:#?}", render(&events));
        };
        assert_eq!(e.kind(), kind, "{e:?}");
        assert!(
            !e.message.contains('<'),
            "no HTML in the message: {}",
            e.message
        );
        let (got, _, body) = post(h.http_addr, "/v1/chat/completions", &chat).await;
        assert_eq!(
            (got, body["error"]["type"].as_str()),
            (status, Some(openai_type)),
            "{body}"
        );
        let (got, _, body) = post(h.http_addr, "/v1/messages", &messages).await;
        assert_eq!(
            (got, body["error"]["type"].as_str()),
            (status, Some(anthropic_type)),
            "{body}"
        );
    }
}

/// An Anthropic stream that pings before its first content (held: nothing has started), and twice within a second
/// once its text has begun.
const PINGING: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_ping\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_keep_alives_reach_the_caller_once_the_answer_started() {
    let h = Harness::start().await;
    h.anthropic.push(Reply::sse(PINGING));
    let events = h
        .stream(generation("anthropic/claude-sonnet-4-5", "hi"))
        .await
        .unwrap();
    let lines = render(&events);
    let kept: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.event, Some(pb::stream_response::Event::KeepAlive(_))))
        .map(|(i, _)| i)
        .collect();
    // The ping before any content is held (a retry could still replace the attempt); of the two after it began,
    // the second comes within 5 s of the first.
    assert_eq!(kept.len(), 1, "{lines:#?}");
    assert!(
        lines[..kept[0]].iter().any(|l| l.starts_with("text_start")),
        "{lines:#?}"
    );
    // The doors relay it in their own words: an SSE comment for OpenAI clients, a ping for Anthropic's.
    h.anthropic.push(Reply::sse(PINGING));
    let chat = r#"{"model":"anthropic/claude-sonnet-4-5","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let (status, _, body) = send(
        h.http_addr,
        false,
        request("POST", "/v1/chat/completions", Some(TOKEN), chat),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body.matches(": keep-alive\n\n").count(), 1, "{body}");
    h.anthropic.push(Reply::sse(PINGING));
    let messages = r#"{"model":"anthropic/claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let (status, _, body) = send(
        h.http_addr,
        false,
        request("POST", "/v1/messages", Some(TOKEN), messages),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body.matches("event: ping\n").count(), 1, "{body}");
}
