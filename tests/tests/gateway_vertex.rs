//! Google Vertex AI end to end, through the real gRPC server against a fake Vertex endpoint that validates every
//! request strictly (the Gemini or Anthropic rules plus Vertex's own) and accepts only access tokens a fake Google
//! token endpoint issued after verifying the gateway's RS256 JWT against the test service account's public key.
//!
//! For Gemini models and Anthropic models on Vertex: text with usage; parallel tool calls with fragmented arguments
//! (Vertex's `partialArgs` for Gemini, `input_json_delta` for Anthropic) replayed on the next step; reasoning with
//! its signature replayed; a throttle before output retried; an error mid-stream; a context overflow classified; the
//! caller's cancel closing the upstream. Then the tokens: cached, refreshed before expiry, refused
//! with a wrong key, taken from the metadata server, and never echoed back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::turns::{fold, results};
use e2e_tests::vertex::GoogleFakes;
use e2e_tests::*;
use fake_provider::google::METADATA_TOKEN_PATH;
use fake_provider::{FakeProvider, GoogleTokens, Recorded, Reply};
use llm_proto::gateway as pb;

const FLASH: &str = "vertex/gemini-2.5-flash";
const PRO: &str = "vertex/gemini-2.5-pro";
const CLAUDE: &str = "vertex/claude-sonnet-4-5@20250929";
const PREFIX: &str = "/v1/projects/acme-llm-test/locations/us-east5/publishers";

fn fixture_text(name: &str) -> String {
    let path = format!(
        "{}/../shared/fake-provider/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A gateway whose provider `vertex` points at `fake`, with tokens from `oauth`.
struct Vertex {
    h: Harness,
    fake: FakeProvider,
    oauth: FakeProvider,
    tokens: GoogleTokens,
}

impl Vertex {
    /// Service-account credentials (the test key), token URI on the fake token endpoint.
    async fn start() -> Vertex {
        Self::with_google(|g| g.key_settings("service_account.json")).await
    }

    /// `google` settings after project and location, given the fakes.
    async fn with_google(settings: impl FnOnce(&GoogleFakes) -> String) -> Vertex {
        let g = GoogleFakes::start().await;
        let h = Harness::start_with(&g.provider("vertex", "us-east5", &settings(&g))).await;
        Vertex {
            h,
            fake: g.vertex,
            oauth: g.oauth,
            tokens: g.tokens,
        }
    }

    async fn run(&self, g: pb::Generation) -> Vec<String> {
        let lines = render(&self.h.stream(g).await.expect("stream starts"));
        assert!(
            self.fake.rejections().is_empty(),
            "{:?}",
            self.fake.rejections()
        );
        lines
    }

    /// A throttle (`error` body, status 429) then `fixture`: retried once, on the same token.
    async fn throttle_then(&self, model: &str, error: &str, fixture: &str) {
        self.fake.push(Reply::json(429, fixture_text(error)));
        self.fake.push(Reply::fixture(fixture));
        let lines = self.run(generation(model, "Say hello")).await;
        assert_eq!(lines[0], format!("stream_start vertex {model} attempt=2"));
        assert_ends(&lines, "step_finish Stop");
        let reqs = self.fake.requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].body, reqs[1].body);
        assert_eq!(
            reqs[0].header("authorization"),
            reqs[1].header("authorization")
        );
        assert_eq!(
            self.tokens.issued().len(),
            1,
            "the cached token served the retry"
        );
    }
}

/// The stream's last event starts with `prefix`.
fn assert_ends(lines: &[String], prefix: &str) {
    assert!(
        lines.last().is_some_and(|l| l.starts_with(prefix)),
        "{lines:#?}"
    );
}

/// The request reached the model's Vertex endpoint with a token the fake issued, and no API key.
fn assert_vertex_request(req: &Recorded, tokens: &GoogleTokens, path: &str) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, format!("{PREFIX}{path}"));
    let bearer = req.header("authorization").unwrap();
    let token = bearer.strip_prefix("Bearer ").unwrap();
    assert!(tokens.issued().iter().any(|t| t == token), "{bearer}");
    assert_eq!(req.header("x-goog-api-key"), None);
    assert_eq!(req.header("x-api-key"), None);
}

fn gemini_path(model: &str) -> String {
    format!("/google/models/{model}:streamGenerateContent?alt=sse")
}

fn claude_path() -> String {
    "/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict".into()
}

/// The assistant turn a caller sends back after `events`, and the results of its calls when it made any.
fn replay(events: &[pb::StreamResponse]) -> (pb::Message, Option<pb::Message>) {
    let step = fold(events);
    let tool = (!step.calls.is_empty()).then(|| results(&step.calls));
    (step.assistant, tool)
}

fn with_reasoning(mut g: pb::Generation) -> pb::Generation {
    g.reasoning = Some(pb::Reasoning {
        effort: pb::reasoning::Effort::Medium as i32,
        budget_tokens: 0,
    });
    g
}

// ---- Gemini on Vertex -------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_text_with_usage_through_the_validator_and_a_verified_token() {
    let v = Vertex::start().await;
    v.fake.push(Reply::fixture("gemini/text.sse"));
    let lines = v.run(generation(FLASH, "Say hello")).await;
    assert_eq!(
        lines,
        [
            "stream_start vertex vertex/gemini-2.5-flash attempt=1",
            "step_start",
            "text_start t0",
            "text_delta t0 \"Hello\"",
            "text_delta t0 \"! The file says \\\"done\\\".\"",
            "text_delta t0 \"\\nAnything else?\"",
            "text_end t0",
            "step_finish Stop raw=STOP in=9 cr=0 cw=0 out=12 rs=0 total=21 cost=32700 id=kWTPaJL8GovS7M8PmeTTgAk model=gemini-2.5-flash",
        ],
        "{lines:#?}"
    );
    let reqs = v.fake.requests();
    assert_eq!(reqs.len(), 1);
    assert_vertex_request(&reqs[0], &v.tokens, &gemini_path("gemini-2.5-flash"));
    assert_eq!(
        reqs[0].json()["contents"],
        serde_json::json!([{"role": "user", "parts": [{"text": "Say hello"}]}])
    );
    // One grant, verified: the fake refused nothing.
    assert_eq!(v.tokens.issued().len(), 1);
    assert!(v.tokens.refusals().is_empty(), "{:?}", v.tokens.refusals());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_streamed_arguments_become_two_whole_calls_and_replay() {
    let v = Vertex::start().await;
    v.fake
        .push(Reply::fixture("vertex_gemini/partial_args.sse").split_every(37));
    v.fake.push(Reply::fixture("gemini/text.sse"));
    let first = v.h.stream(tools_generation(PRO)).await.unwrap();
    let lines = render(&first);
    let id = "call_vGXPaPm2KJiF-O4P8ZvS4Ak";
    let boston = r#"{"location":"Boston, MA","unit":"celsius","days":3}"#;
    let sf = r#"{"location":"San Francisco, CA","days":3,"alerts":true}"#;
    assert_eq!(
        lines[1..],
        [
            "step_start".to_string(),
            format!("tool_input_start {id}_0 get_weather"),
            format!("tool_input_delta {id}_0 {boston:?}"),
            format!("tool_input_end {id}_0"),
            format!("tool_call {id}_0 get_weather {boston}"),
            format!("tool_input_start {id}_1 get_weather"),
            format!("tool_input_delta {id}_1 {sf:?}"),
            format!("tool_input_end {id}_1"),
            format!("tool_call {id}_1 get_weather {sf}"),
            "step_finish ToolCalls raw=STOP in=61 cr=0 cw=0 out=44 rs=82 total=187 cost=1336250 id=vGXPaPm2KJiF-O4P8ZvS4Ak model=gemini-3-pro-preview".to_string(),
        ],
        "{lines:#?}"
    );
    assert_well_formed(&lines);

    let (assistant, results) = replay(&first);
    let mut next = tools_generation(PRO);
    next.messages.push(assistant);
    next.messages.extend(results);
    let lines = v.run(next).await;
    assert_ends(&lines, "step_finish Stop");
    let body = v.fake.requests()[1].json();
    let model_turn = &body["contents"][1];
    assert_eq!(model_turn["role"], "model");
    assert_eq!(
        model_turn["parts"][0]["functionCall"],
        serde_json::json!({"name": "get_weather", "args": {"location": "Boston, MA", "unit": "celsius", "days": 3}})
    );
    assert!(
        model_turn["parts"][0]["thoughtSignature"]
            .as_str()
            .unwrap()
            .starts_with("CiQBjz1r"),
        "{model_turn:#}"
    );
    assert_eq!(
        model_turn["parts"][1]["functionCall"]["args"]["alerts"],
        true
    );
    assert_eq!(body["contents"][2]["parts"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_reasoning_signature_is_replayed_on_the_next_request() {
    let v = Vertex::start().await;
    v.fake
        .push(Reply::fixture("gemini/reasoning.sse").split_every(11));
    v.fake.push(Reply::fixture("gemini/text.sse"));
    let first = v.h.stream(generation(PRO, "Think first")).await.unwrap();
    let lines = render(&first);
    let signed = lines
        .iter()
        .find(|l| l.starts_with("reasoning_end r1"))
        .unwrap();
    assert!(signed.contains("gemini|vertex/gemini-2.5-pro|"), "{signed}");
    let (assistant, _) = replay(&first);
    let mut next = generation(PRO, "Think first");
    next.messages.push(assistant);
    next.messages.push(user("And twice that?"));
    v.run(next).await;
    let body = v.fake.requests()[1].json().to_string();
    assert!(
        body.contains("\"thoughtSignature\":\"CsYCAdHtim9k"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_throttle_before_output_is_retried_with_the_same_token() {
    let v = Vertex::start().await;
    v.throttle_then(
        FLASH,
        "vertex_gemini/errors/rate_limit_429.json",
        "gemini/text.sse",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_error_mid_stream_keeps_the_output_and_is_not_retried() {
    let v = Vertex::start().await;
    v.fake.push(Reply::fixture("gemini/error_after_200.sse"));
    let lines = v.run(generation(FLASH, "hi")).await;
    assert_well_formed(&lines);
    assert_eq!(
        lines[2..],
        [
            "text_start t0",
            "text_delta t0 \"Here is the first part\"",
            "text_delta t0 \" of the answer\"",
            "error Overloaded retryable=true status=0 retry_after_ms=-1",
        ],
        "{lines:#?}"
    );
    assert_eq!(v.fake.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_context_overflow_is_classified_and_not_retried() {
    let v = Vertex::start().await;
    v.fake.push(Reply::json(
        400,
        fixture_text("vertex_gemini/errors/context_overflow.json"),
    ));
    let lines = v.run(generation(FLASH, "a very long prompt")).await;
    assert_eq!(
        lines,
        [
            "stream_start vertex vertex/gemini-2.5-flash attempt=1",
            "error ContextOverflow retryable=false status=400 retry_after_ms=-1",
        ]
    );
    assert_eq!(v.fake.requests().len(), 1);
}

/// `events`: how many events of `fixture` to send before stalling, the first text delta included.
async fn cancel_closes_upstream(v: &Vertex, model: &str, fixture: &str, events: usize) {
    v.fake.push(Reply::fixture(fixture).stall_after(events));
    let stream = v.h.open_stream(generation(model, "hi")).await;
    let after = cancel_after_first_delta(stream, &v.fake).await;
    assert!(
        after < CANCEL_NOTICED,
        "{model}: upstream closed {after:?} after the cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_closes_the_vertex_connection() {
    let v = Vertex::start().await;
    cancel_closes_upstream(&v, FLASH, "gemini/text.sse", 2).await;
    let v = Vertex::start().await;
    cancel_closes_upstream(&v, CLAUDE, "vertex_anthropic/text.sse", 4).await;
}

// ---- Anthropic on Vertex ----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_text_with_usage_has_the_version_in_the_body_and_no_model() {
    let v = Vertex::start().await;
    v.fake.push(Reply::fixture("vertex_anthropic/text.sse"));
    let lines = v.run(generation(CLAUDE, "Say hello")).await;
    assert_eq!(
        lines,
        [
            "stream_start vertex vertex/claude-sonnet-4-5@20250929 attempt=1",
            "step_start",
            "text_start 0",
            "text_delta 0 \"Hello\"",
            "text_delta 0 \" from Vertex AI!\"",
            "text_end 0",
            "step_finish Stop raw=end_turn in=14 cr=0 cw=0 out=9 rs=0 total=23 cost=177000 id=msg_vrtx_01PmT8wqZk3yHcRbN5sLfD2e model=claude-sonnet-4-5-20250929",
        ],
        "{lines:#?}"
    );
    let req = &v.fake.requests()[0];
    assert_vertex_request(req, &v.tokens, &claude_path());
    let body = req.json();
    assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
    assert_eq!(body.get("model"), None);
    assert_eq!(body["stream"], true);
    assert_eq!(req.header("anthropic-version"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_parallel_tool_calls_with_fragmented_arguments_replay() {
    let v = Vertex::start().await;
    v.fake
        .push(Reply::fixture("anthropic/parallel_tools.sse").split_every(23));
    v.fake.push(Reply::fixture("vertex_anthropic/text.sse"));
    let first = v.h.stream(tools_generation(CLAUDE)).await.unwrap();
    let lines = render(&first);
    assert_well_formed(&lines);
    let calls: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("tool_call "))
        .collect();
    assert_eq!(calls.len(), 2, "{lines:#?}");
    assert!(
        lines
            .iter()
            .filter(|l| l.starts_with("tool_input_delta"))
            .count()
            > 2,
        "arguments arrive in fragments: {lines:#?}"
    );
    assert_ends(&lines, "step_finish ToolCalls");

    let (assistant, results) = replay(&first);
    let mut next = tools_generation(CLAUDE);
    next.messages.push(assistant);
    next.messages.extend(results);
    let lines = v.run(next).await;
    assert_ends(&lines, "step_finish Stop");
    let body = v.fake.requests()[1].json();
    let uses: Vec<&serde_json::Value> = body["messages"][1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert_eq!(uses.len(), 2, "{body:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_thinking_signature_is_replayed_on_the_next_request() {
    let v = Vertex::start().await;
    v.fake.push(Reply::fixture("anthropic/reasoning.sse"));
    v.fake.push(Reply::fixture("vertex_anthropic/text.sse"));
    let first =
        v.h.stream(with_reasoning(generation(CLAUDE, "What is 27 * 453?")))
            .await
            .unwrap();
    let lines = render(&first);
    let end = lines
        .iter()
        .find(|l| l.starts_with("reasoning_end"))
        .unwrap();
    assert!(
        end.contains("anthropic|vertex/claude-sonnet-4-5@20250929|"),
        "{end}"
    );
    let (assistant, _) = replay(&first);
    let mut next = with_reasoning(generation(CLAUDE, "What is 27 * 453?"));
    next.messages.push(assistant);
    next.messages.push(user("And twice that?"));
    v.run(next).await;
    let body = v.fake.requests()[1].json();
    let thinking = &body["messages"][1]["content"][0];
    assert_eq!(thinking["type"], "thinking", "{body:#}");
    assert!(
        thinking["signature"]
            .as_str()
            .unwrap()
            .starts_with("EqQBCgIYAhIM"),
        "{thinking:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_throttle_before_output_is_retried_with_the_same_token() {
    let v = Vertex::start().await;
    v.throttle_then(
        CLAUDE,
        "vertex_anthropic/errors/rate_limit_429.json",
        "vertex_anthropic/text.sse",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_error_mid_stream_and_context_overflow_are_typed() {
    let v = Vertex::start().await;
    v.fake.push(Reply::fixture("anthropic/error_after_200.sse"));
    let lines = v.run(generation(CLAUDE, "hi")).await;
    assert_well_formed(&lines);
    assert!(
        lines.iter().any(|l| l.starts_with("text_delta")),
        "{lines:#?}"
    );
    assert_ends(&lines, "error ");
    assert_eq!(
        v.fake.requests().len(),
        1,
        "no retry once output reached the caller"
    );

    v.fake.push(Reply::json(
        400,
        fixture_text("anthropic/errors/prompt_too_long.json"),
    ));
    let lines = v.run(generation(CLAUDE, "a very long prompt")).await;
    assert_eq!(
        lines[1..],
        ["error ContextOverflow retryable=false status=400 retry_after_ms=-1"],
        "{lines:#?}"
    );
    assert_eq!(v.fake.requests().len(), 2);
}

// ---- Tokens -----------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_cached_while_it_has_time_left_and_replaced_before_it_expires() {
    let v = Vertex::start().await;
    // The first token lives 200 s: less than the 5-minute refresh margin, so it serves the request that fetched it
    // and is replaced before the next one, while the fake would still accept it. The second lives an hour.
    v.tokens.next_lifetime(200);
    for _ in 0..3 {
        v.fake.push(Reply::fixture("gemini/text.sse"));
        let lines = v.run(generation(FLASH, "Say hello")).await;
        assert_ends(&lines, "step_finish Stop");
    }
    let issued = v.tokens.issued();
    assert_eq!(issued.len(), 2, "{issued:?}");
    let bearers: Vec<String> = v
        .fake
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap().to_string())
        .collect();
    assert_eq!(
        bearers,
        [
            format!("Bearer {}", issued[0]),
            format!("Bearer {}", issued[1]),
            format!("Bearer {}", issued[1]),
        ]
    );
    assert!(v.tokens.accepts(&issued[0]), "replaced before it expired");
    assert_eq!(v.oauth.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_provider_refuses_is_dropped_and_the_next_request_gets_a_new_one() {
    let v = Vertex::start().await;
    v.fake.push(Reply::fixture("gemini/text.sse"));
    assert_ends(
        &v.run(generation(FLASH, "Say hello")).await,
        "step_finish Stop",
    );
    // Revoked server-side while the gateway still holds it as valid for an hour.
    v.tokens.revoke_all();
    let lines = v.run(generation(FLASH, "Say hello")).await;
    assert_ends(&lines, "error Auth retryable=false status=401");
    v.fake.push(Reply::fixture("gemini/text.sse"));
    assert_ends(
        &v.run(generation(FLASH, "Say hello")).await,
        "step_finish Stop",
    );
    let issued = v.tokens.issued();
    assert_eq!(issued.len(), 2, "{issued:?}");
    let last = v
        .fake
        .requests()
        .last()
        .unwrap()
        .header("authorization")
        .unwrap()
        .to_string();
    assert_eq!(last, format!("Bearer {}", issued[1]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_signed_with_the_wrong_key_is_an_auth_error_that_reaches_no_model() {
    let v = Vertex::with_google(|g| g.key_settings("service_account_wrong_key.json")).await;
    let events = v.h.stream(generation(FLASH, "Say hello")).await.unwrap();
    let lines = render(&events);
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("error Auth retryable=false"),
        "{lines:#?}"
    );
    assert_eq!(v.tokens.refusals(), ["Invalid JWT Signature."]);
    assert!(v.fake.requests().is_empty());
    let pb::stream_response::Event::Error(e) = terminal(&events) else {
        panic!("not an error");
    };
    assert!(e.message.contains("invalid_grant"), "{}", e.message);
    assert!(
        !e.message.contains("eyJ"),
        "no assertion in the message: {}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_come_from_the_metadata_server_on_google_cloud() {
    let v = Vertex::with_google(|g| {
        let host = g.oauth.addr();
        format!(r#"credentials = "metadata_server", metadata_host = "{host}""#)
    })
    .await;
    v.fake.push(Reply::fixture("vertex_anthropic/text.sse"));
    let lines = v.run(generation(CLAUDE, "Say hello")).await;
    assert_ends(&lines, "step_finish Stop");
    let asked = v.oauth.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].method, "GET");
    assert_eq!(asked[0].path, METADATA_TOKEN_PATH);
    assert_eq!(asked[0].header("metadata-flavor"), Some("Google"));
    assert_vertex_request(&v.fake.requests()[0], &v.tokens, &claude_path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_token_echoed_by_the_provider_never_reaches_the_caller() {
    let v = Vertex::start().await;
    // A 400 whose body quotes the bearer token back, in several forms.
    v.fake.push(Reply::fn_reply(|req| {
        let token = req
            .header("authorization")
            .unwrap_or_default()
            .trim_start_matches("Bearer ")
            .to_string();
        let body = serde_json::json!({"error": {
            "code": 400,
            "message": format!("bad token {token} / {} / {}", token.to_uppercase(), token.replace('-', "%2D")),
            "status": "INVALID_ARGUMENT",
        }});
        Reply::json(400, body.to_string())
    }));
    let events = v.h.stream(generation(FLASH, "Say hello")).await.unwrap();
    let pb::stream_response::Event::Error(e) = terminal(&events) else {
        panic!("not an error");
    };
    let token = &v.tokens.issued()[0];
    let secret = token.trim_start_matches("ya29.");
    for text in [&e.message, &e.provider_body] {
        assert!(
            !text.to_lowercase().contains(&secret.to_lowercase()),
            "{text}"
        );
        assert!(!text.contains("fake%2Dprovider"), "{text}");
    }
    assert!(
        e.provider_body.contains("[REDACTED]"),
        "{}",
        e.provider_body
    );
}
