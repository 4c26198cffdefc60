//! Fallback models through the real server: a model that fails before any output, after its own retries, hands the
//! generation to the next model (possibly of another protocol); never once output started, never for errors another
//! model would repeat; the final error names every attempt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use e2e_tests::*;
use fake_provider::Reply;
use llm_proto::gateway as pb;
use tonic::Code;

const GPT: &str = "openai/gpt-4o";
const CLAUDE: &str = "anthropic/claude-sonnet-4-5";

fn error_body(dir: &str, name: &str) -> String {
    let path = format!(
        "{}/../shared/fake-provider/fixtures/{dir}/errors/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn with_fallbacks(model: &str, fallbacks: &[&str]) -> pb::Generation {
    pb::Generation {
        fallback_models: fallbacks.iter().map(|f| f.to_string()).collect(),
        ..generation(model, "Say hello")
    }
}

/// What a clean Anthropic text run looks like, minus its `stream_start`.
async fn clean_anthropic_run() -> Vec<String> {
    let h = Harness::start().await;
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let lines = render(&h.stream(generation(CLAUDE, "Say hello")).await.unwrap());
    lines[1..].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_model_falls_back_to_another_protocol_after_its_retries() {
    let h = Harness::start().await;
    h.openai.set_fallback(Reply::json(
        429,
        error_body("openai_chat", "rate_limit.json"),
    ));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let lines = render(&h.stream(with_fallbacks(GPT, &[CLAUDE])).await.unwrap());
    assert_eq!(
        lines[0],
        format!("stream_start anthropic {CLAUDE} attempt=4"),
        "{lines:#?}"
    );
    assert_eq!(
        lines[1..],
        clean_anthropic_run().await[..],
        "the fallback's events, once"
    );
    assert_eq!(
        h.openai.requests().len(),
        3,
        "retries first (max_attempts = 3)"
    );
    let reqs = h.anthropic.requests();
    assert_eq!(reqs.len(), 1);
    // Re-built by the Anthropic adapter: its path, its body shape, its model name.
    assert_eq!(reqs[0].path, "/v1/messages");
    let body = reqs[0].json();
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert!(body["max_tokens"].is_u64(), "{body}");
    assert_eq!(
        reqs[0].header("x-api-key"),
        Some(ANTHROPIC_KEY),
        "the fallback provider's own key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_fallbacks_apply_and_a_request_list_replaces_them() {
    let h = Harness::start_with(&format!("[models.\"{GPT}\"]\nfallbacks = [\"{CLAUDE}\"]\n")).await;
    // Overloaded, and it stays so: the configured fallback serves.
    h.openai.set_fallback(Reply::json(
        503,
        error_body("openai_chat", "server_error.json"),
    ));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let lines = render(&h.stream(generation(GPT, "Say hello")).await.unwrap());
    assert!(
        lines[0].starts_with(&format!("stream_start anthropic {CLAUDE}")),
        "{lines:#?}"
    );
    assert!(lines.last().unwrap().starts_with("step_finish Stop"));

    // The request's own list replaces the configured one: gpt-4o-mini (same provider) instead of Claude.
    h.openai.set_fallback(Reply::fn_reply(|req| {
        if req.json()["model"] == "gpt-4o-mini" {
            Reply::fixture("openai_chat/text.sse")
        } else {
            Reply::json(429, r#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#)
        }
    }));
    let before = h.anthropic.requests().len();
    let lines = render(
        &h.stream(with_fallbacks(GPT, &["openai/gpt-4o-mini"]))
            .await
            .unwrap(),
    );
    assert_eq!(
        lines[0], "stream_start openai openai/gpt-4o-mini attempt=4",
        "{lines:#?}"
    );
    assert_eq!(h.anthropic.requests().len(), before, "Claude not tried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_model_fails_the_error_names_every_attempt() {
    let h = Harness::start().await;
    h.openai.set_fallback(Reply::json(
        429,
        error_body("openai_chat", "rate_limit.json"),
    ));
    h.anthropic
        .set_fallback(Reply::json(529, error_body("anthropic", "overloaded.json")));
    let events = h.stream(with_fallbacks(GPT, &[CLAUDE])).await.unwrap();
    let lines = render(&events);
    assert_eq!(lines.len(), 2, "stream_start and error only: {lines:#?}");
    assert_eq!(
        lines[0],
        format!("stream_start anthropic {CLAUDE} attempt=6")
    );
    let pb::stream_response::Event::Error(e) = terminal(&events) else {
        panic!("{lines:#?}")
    };
    // The last model's error, with every model's failure in the message.
    assert_eq!(e.kind(), pb::ErrorKind::Overloaded);
    assert_eq!(e.http_status, 529);
    assert!(
        e.message
            .starts_with("openai/gpt-4o: rate_limited (429) after 3 attempts: "),
        "{}",
        e.message
    );
    assert!(
        e.message.contains(
            "; anthropic/claude-sonnet-4-5: overloaded (529) after 3 attempts: Overloaded"
        ),
        "{}",
        e.message
    );
    assert!(!e.message.contains(OPENAI_KEY) && !e.message.contains(ANTHROPIC_KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_failures_fall_back_but_request_errors_do_not() {
    // A revoked key or exhausted quota at one provider says nothing about another provider.
    let h = Harness::start().await;
    h.openai.push(Reply::json(
        401,
        r#"{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    ));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let lines = render(&h.stream(with_fallbacks(GPT, &[CLAUDE])).await.unwrap());
    assert_eq!(
        lines[0],
        format!("stream_start anthropic {CLAUDE} attempt=2")
    );

    // The prompt is too long, or the request is invalid: another model would say the same (or the caller must
    // compact), so the error goes straight to the caller.
    for (status, body, kind) in [
        (
            400,
            error_body("openai_chat", "context_length_exceeded.json"),
            "error ContextOverflow",
        ),
        (
            400,
            r#"{"error":{"message":"Invalid value for 'temperature'.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}"#.to_string(),
            "error InvalidRequest",
        ),
    ] {
        let h = Harness::start().await;
        h.openai.push(Reply::json(status, body));
        let lines = render(&h.stream(with_fallbacks(GPT, &[CLAUDE])).await.unwrap());
        assert_eq!(lines[0], format!("stream_start openai {GPT} attempt=1"));
        assert!(lines[1].starts_with(kind), "{lines:#?}");
        assert!(h.anthropic.requests().is_empty(), "{kind}: no fallback");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_falls_back_once_output_started() {
    let h = Harness::start().await;
    h.openai
        .push(Reply::fixture("openai_chat/error_after_200.sse"));
    h.anthropic.push(Reply::fixture("anthropic/text.sse"));
    let lines = render(&h.stream(with_fallbacks(GPT, &[CLAUDE])).await.unwrap());
    assert!(
        lines.iter().any(|l| l.starts_with("text_delta")),
        "{lines:#?}"
    );
    assert!(lines.last().unwrap().starts_with("error "), "{lines:#?}");
    assert_eq!(lines[0], format!("stream_start openai {GPT} attempt=1"));
    assert!(h.anthropic.requests().is_empty());
    assert_eq!(h.openai.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_fallback_lists_are_refused_before_anything_is_sent() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let err = c
        .stream(pb::StreamRequest {
            generation: Some(with_fallbacks(GPT, &["claude\n"])),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("generation.fallback_models[0]"),
        "{}",
        err.message()
    );
    let err = c
        .stream(pb::StreamRequest {
            generation: Some(with_fallbacks(GPT, &["anthropic/claude-sonet-4-5"])),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(
        err.message().contains(CLAUDE),
        "suggests: {}",
        err.message()
    );
    let five = ["a/1", "a/2", "a/3", "a/4", "a/5"];
    let err = c
        .stream(pb::StreamRequest {
            generation: Some(with_fallbacks(GPT, &five)),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(h.openai.requests().is_empty() && h.anthropic.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_during_a_fallback_closes_its_provider_connection_at_once() {
    let h = Harness::start().await;
    h.openai.set_fallback(Reply::json(
        429,
        error_body("openai_chat", "rate_limit.json"),
    ));
    h.anthropic
        .push(Reply::fixture("anthropic/text.sse").stall_after(4));
    let mut client = h.client().await;
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(with_fallbacks(GPT, &[CLAUDE])),
        })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(
        matches!(&first.event, Some(pb::stream_response::Event::StreamStart(s)) if s.model == CLAUDE),
        "{first:?}"
    );
    loop {
        let ev = stream.message().await.unwrap().unwrap();
        if matches!(ev.event, Some(pb::stream_response::Event::TextDelta(_))) {
            break;
        }
    }
    let cancelled_at = Instant::now();
    drop(stream);
    let closed_at = h
        .anthropic
        .wait_closed(0, SHORT)
        .await
        .expect("fallback provider connection closed");
    let after = closed_at.saturating_duration_since(cancelled_at);
    assert!(
        after < CANCEL_NOTICED,
        "upstream closed {after:?} after the cancel"
    );
}
