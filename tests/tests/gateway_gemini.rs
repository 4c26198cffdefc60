//! The Gemini adapter end to end, through the real gRPC server against the fake Gemini provider replaying
//! wire-exact fixtures (`shared/fake-provider/fixtures/gemini/`): text with usage, parallel tool calls and their
//! replay, reasoning then text with the thought signature kept, the bare error object after HTTP 200, a 429 whose
//! retry delay is only in the body, 503 then success, context overflow, truncated and malformed streams, a stall,
//! and the caller cancelling. Streams are replayed with CRLF framing as Gemini sends it and converted to LF.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use e2e_tests::*;
use fake_provider::{Recorded, Reply};
use llm_proto::gateway as pb;

const FLASH: &str = "gemini/gemini-2.5-flash";
const PRO: &str = "gemini/gemini-2.5-pro";

/// The fixture file's bytes as text.
fn fixture_text(name: &str) -> String {
    let path = format!(
        "{}/../shared/fake-provider/fixtures/gemini/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The fixture as recorded: CRLF framing.
fn crlf(name: &str) -> Reply {
    Reply::fixture(&format!("gemini/{name}"))
}

/// The fixture with every CRLF turned into LF, the framing the other providers use.
fn lf(name: &str) -> Reply {
    Reply::sse(fixture_text(name).replace("\r\n", "\n"))
}

/// Both framings of a fixture, labelled for assertion messages.
fn both_framings(name: &str) -> [(&'static str, Reply); 2] {
    [("crlf", crlf(name)), ("lf", lf(name))]
}

/// The request went to the streaming endpoint of the model, authenticated by header only: the key is never in the
/// URL, and no other credential header is sent.
fn assert_request_shape(req: &Recorded, model_name: &str) {
    assert_eq!(req.method, "POST");
    assert_eq!(
        req.path,
        format!("/v1beta/models/{model_name}:streamGenerateContent?alt=sse")
    );
    assert_eq!(req.header("x-goog-api-key"), Some(GEMINI_KEY));
    assert!(!req.path.contains(GEMINI_KEY), "{}", req.path);
    assert!(!req.path.contains("key="), "{}", req.path);
    assert_eq!(req.header("authorization"), None);
}

async fn run(h: &Harness, g: pb::Generation) -> Vec<String> {
    render(&h.stream(g).await.expect("stream starts"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_with_usage_in_both_framings() {
    for (framing, reply) in both_framings("text.sse") {
        let h = Harness::start().await;
        h.gemini.push(reply);
        let lines = run(&h, generation(FLASH, "Say hello")).await;
        assert_eq!(lines, expected::TEXT, "{framing}: {lines:#?}");
        assert_well_formed(&lines);
        let reqs = h.gemini.requests();
        assert_eq!(reqs.len(), 1);
        assert_request_shape(&reqs[0], "gemini-2.5-flash");
        assert_eq!(
            reqs[0].json()["contents"],
            serde_json::json!([{"role": "user", "parts": [{"text": "Say hello"}]}])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_in_both_framings_split_mid_frame() {
    for (framing, reply) in both_framings("parallel_tools.sse") {
        let h = Harness::start().await;
        h.gemini.push(reply.split_every(7));
        let events = h.stream(tools_generation(FLASH)).await.unwrap();
        let lines = render(&events);
        assert_eq!(lines, expected::PARALLEL_TOOLS, "{framing}: {lines:#?}");
        assert_well_formed(&lines);
        // Only the first call carried a signature; it rides on that call's metadata.
        let calls: Vec<&pb::ToolCall> = events
            .iter()
            .filter_map(|e| match &e.event {
                Some(pb::stream_response::Event::ToolCall(c)) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 2);
        let first = calls[0].provider_metadata.as_ref().unwrap();
        assert_eq!(
            (first.protocol.as_str(), first.model.as_str()),
            ("gemini", FLASH)
        );
        assert!(
            first.json.starts_with(r#"{"thought_signature":"CtIDAVSo"#),
            "{}",
            first.json
        );
        assert_eq!(calls[1].provider_metadata, None);
        let body = h.gemini.requests()[0].json();
        assert_eq!(
            body["tools"][0]["functionDeclarations"][0]["name"],
            "get_weather"
        );
    }
}

/// The next step of the tool loop, built from the first step's events as the processor would: the calls (with
/// their metadata) go back as the assistant turn, then one result per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_go_back_paired_with_the_signature_and_without_synthesized_ids() {
    let h = Harness::start().await;
    h.gemini.push(crlf("parallel_tools.sse"));
    h.gemini.push(crlf("text.sse"));
    let first = h.stream(tools_generation(FLASH)).await.unwrap();
    let calls = turns::calls(&first);
    let mut results = turns::results(&calls);
    // Results in reverse order: the gateway puts them back in call order.
    results.parts.reverse();
    let mut next = tools_generation(FLASH);
    next.messages.push(turns::calls_turn(&calls));
    next.messages.push(results);
    let lines = run(&h, next).await;
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );

    let body = h.gemini.requests()[1].json();
    let contents = &body["contents"];
    assert_eq!(contents.as_array().unwrap().len(), 3, "{contents:#}");
    let model_turn = &contents[1];
    assert_eq!(model_turn["role"], "model");
    assert!(
        model_turn["parts"][0]["thoughtSignature"]
            .as_str()
            .unwrap()
            .starts_with("CtIDAVSo")
    );
    assert_eq!(
        model_turn["parts"][0]["functionCall"],
        serde_json::json!({"name": "get_weather", "args": {"city": "Paris"}})
    );
    assert_eq!(
        contents[2],
        serde_json::json!({"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": "sunny at {\"city\":\"Paris\"}"}}},
            {"functionResponse": {"name": "get_weather", "response": {"output": "sunny at {\"city\":\"Tokyo\",\"unit\":\"celsius\"}"}}},
        ]})
    );
    assert!(!body.to_string().contains("call_3GXPaOKvDcmV7M8P6YbA2QQ"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_then_text_keeps_the_thought_signature() {
    for (framing, reply) in both_framings("reasoning.sse") {
        let h = Harness::start().await;
        h.gemini.push(reply.split_every(11));
        let lines = run(&h, generation(PRO, "Think first")).await;
        assert_eq!(lines, expected::REASONING, "{framing}: {lines:#?}");
        assert_well_formed(&lines);
        assert_request_shape(&h.gemini.requests()[0], "gemini-2.5-pro");
        assert_eq!(
            h.gemini.requests()[0].json()["generationConfig"],
            serde_json::json!({"thinkingConfig": {"includeThoughts": true}})
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_after_200_as_a_bare_object_keeps_the_output_and_is_typed() {
    for (framing, reply) in both_framings("error_after_200.sse") {
        let h = Harness::start().await;
        h.gemini.push(reply);
        let lines = run(&h, generation(FLASH, "hi")).await;
        assert_well_formed(&lines);
        assert_eq!(
            lines[1..],
            [
                "step_start",
                "text_start t0",
                "text_delta t0 \"Here is the first part\"",
                "text_delta t0 \" of the answer\"",
                "error Overloaded retryable=true status=0 retry_after_ms=-1",
            ],
            "{framing}: {lines:#?}"
        );
        assert_eq!(
            h.gemini.requests().len(),
            1,
            "{framing}: no retry once output reached the caller"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_error_before_any_output_is_retried_without_duplicates() {
    let h = Harness::start().await;
    h.gemini.push(crlf("error_first.sse"));
    h.gemini.push(crlf("text.sse"));
    let lines = run(&h, generation(FLASH, "Say hello")).await;
    assert_well_formed(&lines);
    assert_eq!(
        lines[0],
        "stream_start gemini gemini/gemini-2.5-flash attempt=2"
    );
    assert_eq!(lines[1..], expected::TEXT[1..], "{lines:#?}");
    assert_eq!(h.gemini.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_with_a_body_retry_delay_waits_that_long_then_succeeds() {
    let h = Harness::start().await;
    // No `retry-after` header: Gemini puts the hint only in `RetryInfo.retryDelay` ("1s").
    h.gemini
        .push(Reply::json(429, fixture_text("errors/rate_limit_429.json")));
    h.gemini.push(crlf("text.sse"));
    let lines = run(&h, generation(FLASH, "Say hello")).await;
    assert_well_formed(&lines);
    assert_eq!(
        lines[0],
        "stream_start gemini gemini/gemini-2.5-flash attempt=2"
    );
    let reqs = h.gemini.requests();
    assert_eq!(reqs.len(), 2, "retried exactly once");
    assert_eq!(
        reqs[0].body, reqs[1].body,
        "the retry sends the same request"
    );
    let waited = reqs[1].received_at - reqs[0].received_at;
    assert!(
        waited >= Duration::from_secs(1),
        "waited {waited:?}, Gemini asked for 1s"
    );
    assert_eq!(
        lines[1..],
        expected::TEXT[1..],
        "nothing duplicated: {lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_then_success() {
    let h = Harness::start().await;
    h.gemini.push(Reply::json(
        503,
        fixture_text("errors/unavailable_503.json"),
    ));
    h.gemini.push(crlf("text.sse"));
    let lines = run(&h, generation(FLASH, "Say hello")).await;
    assert_well_formed(&lines);
    assert_eq!(
        lines[0],
        "stream_start gemini gemini/gemini-2.5-flash attempt=2"
    );
    assert_eq!(lines[1..], expected::TEXT[1..], "{lines:#?}");
    assert_eq!(h.gemini.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_is_recognised_and_not_retried() {
    let h = Harness::start().await;
    h.gemini.push(Reply::json(
        400,
        fixture_text("errors/context_overflow.json"),
    ));
    let lines = run(&h, generation(FLASH, "a very long prompt")).await;
    assert_eq!(
        lines,
        [
            "stream_start gemini gemini/gemini-2.5-flash attempt=1",
            "error ContextOverflow retryable=false status=400 retry_after_ms=-1",
        ]
    );
    assert_eq!(h.gemini.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_and_malformed_streams_become_typed_errors() {
    for (fixture, kind) in [
        ("truncated.sse", "error Network retryable=true"),
        ("malformed.sse", "error ProviderError retryable=false"),
    ] {
        let h = Harness::start().await;
        h.gemini.set_fallback(crlf(fixture));
        let lines = run(&h, generation(FLASH, "hi")).await;
        assert_well_formed(&lines);
        assert!(
            lines.last().unwrap().starts_with(kind),
            "{fixture}: {lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with("text_delta")),
            "{fixture}: the output before the failure is kept: {lines:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_ends_with_a_timeout_error() {
    let h = Harness::start().await;
    h.gemini.push(crlf("text.sse").stall_after(2));
    let started = Instant::now();
    let lines = run(&h, generation(FLASH, "hi")).await;
    assert!(
        lines.last().unwrap().starts_with("error Timeout"),
        "{lines:#?}"
    );
    // idle_ms = 3000 in the test config: the stall is cut at the idle timeout, not the total one.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(h.gemini.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_cancelling_closes_the_provider_connection() {
    let h = Harness::start().await;
    h.gemini.push(crlf("text.sse").stall_after(2));
    let stream = h.open_stream(generation(FLASH, "hi")).await;
    let after = cancel_after_first_delta(stream, &h.gemini).await;
    assert!(
        after < CANCEL_NOTICED,
        "upstream closed {after:?} after the cancel"
    );
}

/// Expected event sequences, written from the fixtures by hand: every delta, id and usage figure below can be found
/// in the fixture file it belongs to, and the costs follow from the bundled catalog's Gemini prices.
mod expected {
    /// 9 prompt + 12 output tokens at $0.30 / $2.50 per MTok = 2700 + 30000 nano-USD.
    pub const TEXT: &[&str] = &[
        "stream_start gemini gemini/gemini-2.5-flash attempt=1",
        "step_start",
        "text_start t0",
        "text_delta t0 \"Hello\"",
        "text_delta t0 \"! The file says \\\"done\\\".\"",
        "text_delta t0 \"\\nAnything else?\"",
        "text_end t0",
        "step_finish Stop raw=STOP in=9 cr=0 cw=0 out=12 rs=0 total=21 cost=32700 id=kWTPaJL8GovS7M8PmeTTgAk model=gemini-2.5-flash",
    ];
    /// 74 prompt tokens at $0.30, 38 output + 91 thought tokens at $2.50 = 22200 + 322500 nano-USD.
    pub const PARALLEL_TOOLS: &[&str] = &[
        "stream_start gemini gemini/gemini-2.5-flash attempt=1",
        "step_start",
        "tool_input_start call_3GXPaOKvDcmV7M8P6YbA2QQ_0 get_weather",
        "tool_input_delta call_3GXPaOKvDcmV7M8P6YbA2QQ_0 \"{\\\"city\\\":\\\"Paris\\\"}\"",
        "tool_input_end call_3GXPaOKvDcmV7M8P6YbA2QQ_0",
        "tool_call call_3GXPaOKvDcmV7M8P6YbA2QQ_0 get_weather {\"city\":\"Paris\"}",
        "tool_input_start call_3GXPaOKvDcmV7M8P6YbA2QQ_1 get_weather",
        "tool_input_delta call_3GXPaOKvDcmV7M8P6YbA2QQ_1 \"{\\\"city\\\":\\\"Tokyo\\\",\\\"unit\\\":\\\"celsius\\\"}\"",
        "tool_input_end call_3GXPaOKvDcmV7M8P6YbA2QQ_1",
        "tool_call call_3GXPaOKvDcmV7M8P6YbA2QQ_1 get_weather {\"city\":\"Tokyo\",\"unit\":\"celsius\"}",
        "step_finish ToolCalls raw=STOP in=74 cr=0 cw=0 out=38 rs=91 total=203 cost=344700 id=3GXPaOKvDcmV7M8P6YbA2QQ model=gemini-2.5-flash",
    ];
    /// 266 uncached prompt tokens at $1.25, 1024 cached at $0.125, 12 + 196 output tokens at $10 per MTok
    /// = 332500 + 128000 + 2080000 nano-USD.
    pub const REASONING: &[&str] = &[
        "stream_start gemini gemini/gemini-2.5-pro attempt=1",
        "step_start",
        "reasoning_start r0",
        "reasoning_delta r0 \"**Calculating the product**\\n\\nThe user asks for 27 × 453. I'll split 453 into 400 + 53.\\n\\n\"",
        "reasoning_delta r0 \"27 × 400 = 10800 and 27 × 53 = 1431, so the total is 12231.\"",
        "reasoning_end r0 ",
        "text_start t0",
        "text_delta t0 \"27 × 453 = **12,231**.\"",
        "text_end t0",
        "reasoning_start r1",
        "reasoning_end r1 gemini|gemini/gemini-2.5-pro|{\"thought_signature\":\"CsYCAdHtim9kR3vX1qB8nZ4cL7wE2yT5uJ0pM6sD9fG3hK1aV8oN2iQ4bW7xC5zF0eY3tR6lU9jP1mS4dH8gA2kO5vB7nX0cZ3qE6wT9yL1uI4fJ7pM0sD2hG5aK8oV1bN3iQ6xC9zF2eY4tR7lU0jP3mS6dH9gA1kO4vB==\"}",
        "step_finish Stop raw=STOP in=266 cr=1024 cw=0 out=12 rs=196 total=1498 cost=2540500 id=Q2fPaNfmIbGe7M8Pq5mL8Q0 model=gemini-2.5-pro",
    ];
}
