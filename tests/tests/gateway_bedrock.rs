//! The Bedrock Converse adapter end to end, through the real gRPC server against a fake Bedrock that verifies every
//! request's SigV4 signature with the test secret and checks the Converse body, and replays byte-exact
//! eventstream fixtures (`shared/fake-provider/fixtures/bedrock/*.es`, written from their `.jsonl` sources by
//! `scripts/bedrock_fixtures.py`): text with usage and cache counts; parallel tool calls with fragmented arguments
//! and their results sent back; reasoning whose signature is replayed on the next request; throttles before output
//! retried (HTTP 429, then an exception frame); an exception mid-stream; context overflows classified; the caller
//! cancelling; the AWS secret and session token never reaching an error; and a model without streaming tool use
//! (Llama) answered through the non-streaming Converse when tools are sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_tests::*;
use fake_provider::{FakeProvider, Protocol, Reply};
use llm_proto::gateway as pb;

const NOVA: &str = "bedrock/us.amazon.nova-lite-v1:0";
const CLAUDE: &str = "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const LLAMA: &str = "bedrock/us.meta.llama3-3-70b-instruct-v1:0";
/// The signature in `reasoning.jsonl`.
const SIGNATURE: &str = "EqQBCkYIBhgCIkB3wI6b0oFakeSignatureForTestsOnlyAAAA==";

/// A harness whose `bedrock` provider is a validating fake Bedrock, signed with the harness's AWS credentials.
async fn start() -> (Harness, FakeProvider) {
    let fake = FakeProvider::start().await.unwrap();
    fake.validate_requests(Protocol::Bedrock);
    let extra = format!(
        "[providers.bedrock]\nprotocol = \"bedrock\"\nbase_url = \"{}\"\n",
        fake.base_url()
    );
    (Harness::start_with(&extra).await, fake)
}

fn fixture(name: &str) -> Reply {
    Reply::eventstream_fixture(&format!("bedrock/{name}.es"))
}

/// A Bedrock HTTP error: the JSON `message` and the error type in `x-amzn-errortype`, as the service sends them.
fn http_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(
        status,
        serde_json::json!({ "message": message }).to_string(),
    )
    .header(
        "x-amzn-errortype",
        &format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
    )
}

async fn run(h: &Harness, g: pb::Generation) -> Vec<String> {
    render(&h.stream(g).await.expect("stream starts"))
}

fn assert_accepted(fake: &FakeProvider) {
    assert_eq!(
        fake.rejections(),
        vec![],
        "the fake Bedrock refused a request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_with_usage_from_a_signed_request() {
    let (h, fake) = start().await;
    fake.push(fixture("text").split_every(5));
    let lines = run(&h, generation(NOVA, "Say hello")).await;
    assert_eq!(
        lines[..7],
        [
            format!("stream_start bedrock {NOVA} attempt=1"),
            "step_start".into(),
            "text_start 0".into(),
            "text_delta 0 \"Hello\"".into(),
            "text_delta 0 \" from\"".into(),
            "text_delta 0 \" Bedrock.\"".into(),
            "text_end 0".into(),
        ],
        "{lines:#?}"
    );
    assert!(
        lines[7].starts_with(
            "step_finish Stop raw=end_turn in=18 cr=1024 cw=256 out=7 rs=0 total=1305 cost="
        ),
        "{lines:#?}"
    );
    assert_eq!(lines.len(), 8);
    assert_well_formed(&lines);
    assert_accepted(&fake);
    let reqs = fake.requests();
    let req = &reqs[0];
    assert_eq!(
        req.path,
        "/model/us.amazon.nova-lite-v1%3A0/converse-stream"
    );
    assert_eq!(
        req.header("accept"),
        Some("application/vnd.amazon.eventstream")
    );
    assert!(
        req.header("authorization")
            .unwrap()
            .starts_with(&format!("AWS4-HMAC-SHA256 Credential={AWS_ACCESS_KEY_ID}/"))
    );
    assert_eq!(req.header("x-amz-security-token"), Some(AWS_SESSION_TOKEN));
    assert_eq!(
        req.json()["messages"],
        serde_json::json!([{"role": "user", "content": [{"text": "Say hello"}, {"cachePoint": {"type": "default"}}]}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_with_fragmented_arguments_then_their_results() {
    let (h, fake) = start().await;
    fake.push(fixture("parallel_tools").split_every(7));
    fake.push(fixture("text"));
    let first = h.stream(tools_generation(CLAUDE)).await.unwrap();
    let lines = render(&first);
    assert_well_formed(&lines);
    let calls: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("tool_call "))
        .collect();
    assert_eq!(
        calls,
        [
            "tool_call tooluse_kZJMlvQmRJ6eAyJE5GIl7Q get_weather {\"city\": \"Paris\"}",
            "tool_call tooluse_9xQ2rT0bS1uV3wY5zA7cD get_weather {\"city\": \"Tokyo\"}",
        ]
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("tool_input_delta "))
            .count(),
        5
    );
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("step_finish ToolCalls raw=tool_use"),
        "{lines:#?}"
    );

    let calls = turns::calls(&first);
    let mut next = tools_generation(CLAUDE);
    next.messages.push(turns::calls_turn(&calls));
    next.messages.push(turns::results(&calls));
    let lines = run(&h, next).await;
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_accepted(&fake);
    let body = fake.requests()[1].json();
    let turns = body["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(
        turns[1]["content"][0]["toolUse"]["toolUseId"],
        "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"
    );
    assert_eq!(
        turns[2]["content"][0]["toolResult"]["toolUseId"],
        "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"
    );
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"]["name"],
        "get_weather"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_signature_is_replayed_on_the_next_request() {
    let (h, fake) = start().await;
    fake.push(fixture("reasoning"));
    fake.push(fixture("text"));
    let mut g = generation(CLAUDE, "17 * 23?");
    g.reasoning = Some(pb::Reasoning {
        effort: pb::reasoning::Effort::Low as i32,
        budget_tokens: 0,
    });
    let first = h.stream(g.clone()).await.unwrap();
    let lines = render(&first);
    assert_well_formed(&lines);
    assert!(
        lines.contains(&"reasoning_delta 0 \"The user wants 17 * 23. \"".to_string()),
        "{lines:#?}"
    );
    let (text, metadata) = first
        .iter()
        .find_map(|e| match &e.event {
            Some(pb::stream_response::Event::ReasoningEnd(r)) => Some(r.provider_metadata.clone()),
            _ => None,
        })
        .map(|m| ("The user wants 17 * 23. 17 * 23 = 391.".to_string(), m))
        .unwrap();
    let metadata = metadata.unwrap();
    assert_eq!(
        (metadata.protocol.as_str(), metadata.model.as_str()),
        ("bedrock", CLAUDE)
    );
    assert!(metadata.json.contains(SIGNATURE), "{}", metadata.json);
    let first_body = fake.requests()[0].json();
    assert_eq!(
        first_body["additionalModelRequestFields"]["thinking"],
        serde_json::json!({"type": "enabled", "budget_tokens": 2048})
    );

    g.messages.push(pb::Message {
        role: pb::Role::Assistant as i32,
        parts: vec![
            pb::Part {
                kind: Some(pb::part::Kind::Reasoning(pb::ReasoningPart {
                    text: text.clone(),
                    provider_metadata: Some(metadata),
                })),
            },
            text_part("17 × 23 = 391."),
        ],
    });
    g.messages.push(user("And 18 * 23?"));
    let lines = run(&h, g).await;
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_accepted(&fake);
    let body = fake.requests()[1].json();
    assert_eq!(
        body["messages"][1]["content"][0],
        serde_json::json!({"reasoningContent": {"reasoningText": {"text": text, "signature": SIGNATURE}}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttles_before_output_are_retried() {
    let (h, fake) = start().await;
    fake.push(http_error(
        429,
        "ThrottlingException",
        "Too many requests, please wait before trying again.",
    ));
    // A 200 whose first message is a throttling exception: still nothing reached the caller.
    fake.push(fixture("throttle_first"));
    fake.push(fixture("text"));
    let lines = run(&h, generation(NOVA, "hi")).await;
    assert_eq!(
        lines[0],
        format!("stream_start bedrock {NOVA} attempt=3"),
        "{lines:#?}"
    );
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_eq!(fake.requests().len(), 3);
    assert_accepted(&fake);
    // Each attempt is signed afresh over the same body.
    let reqs = fake.requests();
    assert_eq!(reqs[0].body, reqs[2].body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_mid_stream_ends_the_stream_with_its_error() {
    let (h, fake) = start().await;
    fake.push(fixture("error_after_output"));
    let lines = run(&h, generation(NOVA, "hi")).await;
    assert_eq!(
        lines,
        [
            format!("stream_start bedrock {NOVA} attempt=1"),
            "step_start".into(),
            "text_start 0".into(),
            "text_delta 0 \"Partial answer\"".into(),
            "error ProviderError retryable=true status=0 retry_after_ms=-1".into(),
        ]
    );
    // Output had started: no retry.
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflows_are_classified_and_not_retried() {
    let (h, fake) = start().await;
    fake.push(http_error(
        400,
        "ValidationException",
        "Input is too long for requested model.",
    ));
    let lines = run(&h, generation(CLAUDE, "a very long prompt")).await;
    assert_eq!(
        lines,
        [
            format!("stream_start bedrock {CLAUDE} attempt=1"),
            "error ContextOverflow retryable=false status=400 retry_after_ms=-1".into(),
        ]
    );
    fake.push(fixture("validation_overflow"));
    let lines = run(&h, generation(CLAUDE, "a very long prompt")).await;
    assert_eq!(
        lines.last().unwrap(),
        "error ContextOverflow retryable=false status=0 retry_after_ms=-1"
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_cancelling_closes_the_provider_connection() {
    let (h, fake) = start().await;
    fake.push(fixture("text").stall_after(3));
    let mut client = h.client().await;
    let stream = client
        .stream(pb::StreamRequest {
            generation: Some(generation(NOVA, "hi")),
        })
        .await
        .unwrap()
        .into_inner();
    let after = cancel_after_first_delta(stream, &fake).await;
    // Closed by the cancel, not by a timeout; how fast is the benchmarks' to measure.
    assert!(
        after < CANCEL_NOTICED,
        "upstream closed {after:?} after the cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_secret_and_session_token_never_reach_an_error() {
    let (h, fake) = start().await;
    let echo = format!(
        "The security token {AWS_SESSION_TOKEN} included in the request is invalid (secret {AWS_SECRET_ACCESS_KEY})."
    );
    fake.push(http_error(403, "UnrecognizedClientException", &echo));
    let events = h.stream(generation(NOVA, "hi")).await.unwrap();
    let lines = render(&events);
    assert_eq!(
        lines.last().unwrap(),
        "error Auth retryable=false status=403 retry_after_ms=-1"
    );
    // A mid-stream exception echoing them, after output started.
    let mut frames = std::fs::read(format!(
        "{}/../shared/fake-provider/fixtures/bedrock/text.es",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    frames.truncate(first_two_messages(&frames));
    frames.extend(exception_frame(
        &serde_json::json!({ "message": echo }).to_string(),
    ));
    fake.push(Reply::eventstream(frames));
    let mut all = events;
    all.extend(h.stream(generation(NOVA, "hi")).await.unwrap());
    let shown = format!("{all:?}");
    for secret in [AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
    assert!(shown.contains("[REDACTED]"), "{shown}");
}

/// The byte length of the first two eventstream messages of `bytes`.
fn first_two_messages(bytes: &[u8]) -> usize {
    let len = |at: usize| {
        u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize
    };
    let first = len(0);
    first + len(first)
}

/// A `modelStreamErrorException` frame with this JSON payload.
fn exception_frame(payload: &str) -> Vec<u8> {
    llm_gateway::adapter::framing::eventstream::encode(
        &[
            (":exception-type", "modelStreamErrorException"),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        payload.as_bytes(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_on_a_model_without_streaming_tool_use_go_through_converse() {
    let (h, fake) = start().await;
    // Scripted as the stream; the fake answers `converse` with the whole Converse body it amounts to (the recorded
    // `converse_tools.json`, which the fake's own tests check it builds).
    fake.push(fixture("converse_tools"));
    fake.push(fixture("text"));
    let lines = run(&h, tools_generation(LLAMA)).await;
    assert_well_formed(&lines);
    let call = |id: &str, city: &str| {
        [
            format!("tool_input_start {id} get_weather"),
            format!("tool_input_delta {id} \"{{\\\"city\\\":\\\"{city}\\\"}}\""),
            format!("tool_input_end {id}"),
            format!("tool_call {id} get_weather {{\"city\":\"{city}\"}}"),
        ]
    };
    let mut want = vec![
        format!("stream_start bedrock {LLAMA} attempt=1"),
        "step_start".into(),
        "text_start 0".into(),
        "text_delta 0 \"I will look up the weather in both cities.\"".into(),
        "text_end 0".into(),
    ];
    want.extend(call("tooluse_Q3f8sKxUTNe0pYw1bH2aJg", "Paris"));
    want.extend(call("tooluse_m7LrV2dXQcWk9Zt4yFhN5A", "Tokyo"));
    // 470 tokens at Llama 3.3's $0.72 per MTok either way.
    want.push("step_finish ToolCalls raw=tool_use in=412 cr=0 cw=0 out=58 rs=0 total=470 cost=338400 id= model=".into());
    assert_eq!(lines, want, "{lines:#?}");
    // Without tools the same model streams.
    let lines = run(&h, generation(LLAMA, "hi")).await;
    assert!(
        lines.last().unwrap().starts_with("step_finish Stop"),
        "{lines:#?}"
    );
    assert_accepted(&fake);
    let reqs = fake.requests();
    assert_eq!(
        reqs[0].path,
        "/model/us.meta.llama3-3-70b-instruct-v1%3A0/converse"
    );
    assert_eq!(reqs[0].header("accept"), Some("application/json"));
    assert!(reqs[0].json().get("toolConfig").is_some());
    assert_eq!(
        reqs[1].path,
        "/model/us.meta.llama3-3-70b-instruct-v1%3A0/converse-stream"
    );

    // Told the model streams tools, the gateway would send them to ConverseStream, which Bedrock refuses.
    let fake2 = FakeProvider::start().await.unwrap();
    fake2.validate_requests(Protocol::Bedrock);
    let config = format!(
        "[providers.bedrock]\nprotocol = \"bedrock\"\nbase_url = \"{}\"\n[models.\"{LLAMA}\"]\ncapabilities = {{ streaming_tool_use = true }}\n",
        fake2.base_url()
    );
    let h2 = Harness::start_with(&config).await;
    let lines = run(&h2, tools_generation(LLAMA)).await;
    assert_eq!(
        lines.last().unwrap(),
        "error InvalidRequest retryable=false status=400 retry_after_ms=-1"
    );
    assert_eq!(
        fake2.rejections()[0].message,
        "This model doesn't support tool use in streaming mode."
    );
}
