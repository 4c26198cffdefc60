//! One expensive request does not hold up the others on the same connection: a 40 000-tool request prepared beside
//! a paced stream leaves that stream's time to first token and its gaps where they were.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use e2e_tests::*;
use fake_provider::Reply;
use llm_proto::gateway as pb;
use llm_proto::gateway::gateway_service_client::GatewayServiceClient;
use tonic::transport::Channel;

const LIMITS: &str = "[limits]\nmax_tools = 50000\nmax_tool_schema_bytes = 67108864\n";

/// Time to the first text delta, and the longest gap between two text deltas, of one paced stream.
async fn paced_stream(channel: Channel) -> (Duration, Duration) {
    let mut client = GatewayServiceClient::with_interceptor(channel, Bearer(Some(TOKEN.into())));
    let started = Instant::now();
    let mut stream = client
        .stream(pb::StreamRequest {
            generation: Some(generation("openai/gpt-4o", "hi")),
        })
        .await
        .unwrap()
        .into_inner();
    let (mut first, mut last, mut worst) = (None, None, Duration::ZERO);
    while let Some(ev) = stream.message().await.unwrap() {
        if let Some(pb::stream_response::Event::TextDelta(_)) = ev.event {
            let now = Instant::now();
            first.get_or_insert(now - started);
            if let Some(prev) = last {
                worst = worst.max(now - prev);
            }
            last = Some(now);
        }
    }
    (first.unwrap(), worst)
}

fn heavy(n: usize) -> pb::Generation {
    pb::Generation {
        tools: (0..n)
            .map(|i| pb::Tool {
                name: format!("tool_{i}"),
                description: "a tool among many".into(),
                input_schema_json:
                    r#"{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}"#
                        .into(),
                ..Default::default()
            })
            .collect(),
        ..generation("anthropic/claude-sonnet-4-5", "hi")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_40000_tool_request_does_not_move_a_paced_streams_first_token_or_gaps() {
    let h = Harness::start_custom("max_request_bytes = 67108864", LIMITS).await;
    let gap = Duration::from_millis(20);
    for _ in 0..2 {
        h.openai.push(fake_provider::scenario::paced(20, gap));
    }
    h.anthropic
        .set_fallback(Reply::fixture("anthropic/text.sse"));
    let channel = h.channel().await;

    let (alone_ttft, alone_gap) = paced_stream(channel.clone()).await;

    // The heavy request is encoded before the clock starts: its cost on the caller's side is not the gateway's.
    let request = pb::StreamRequest {
        generation: Some(heavy(40_000)),
    };
    let mut heavy_client =
        GatewayServiceClient::with_interceptor(channel.clone(), Bearer(Some(TOKEN.into())))
            .max_encoding_message_size(usize::MAX);
    let heavy_task = tokio::spawn(async move {
        let started = Instant::now();
        let result = heavy_client.stream(request).await.map(|_| ());
        (result, started.elapsed())
    });
    let (busy_ttft, busy_gap) = paced_stream(channel).await;
    let (heavy_result, heavy_took) = heavy_task.await.unwrap();
    heavy_result.unwrap();
    println!(
        "alone: ttft {alone_ttft:?} max gap {alone_gap:?}; beside 40 000 tools: ttft {busy_ttft:?} max gap {busy_gap:?}; \
         heavy request {heavy_took:?}"
    );
    // The suite's bound, not a speed: inline preparation held the stream for seconds, which this still catches on a
    // loaded machine. How much a heavy request costs its neighbours is measured by fairbench (docs/benchmarks.md).
    let slack = CANCEL_NOTICED;
    assert!(
        busy_ttft <= alone_ttft + slack,
        "ttft {busy_ttft:?} vs {alone_ttft:?}"
    );
    assert!(
        busy_gap <= alone_gap + slack,
        "gap {busy_gap:?} vs {alone_gap:?}"
    );
}

/// A call may have 64 KiB of its request in flight by default (so a megabytes upload comes in steps, not as one
/// burst every other call on the connection waits behind), the connection 1 MiB; `server.stream_window_bytes`
/// raises one call's window, and the connection's with it when it is the larger.
#[tokio::test]
async fn one_call_may_send_its_window_ahead_and_the_connection_at_least_a_mebibyte() {
    let h = Harness::start_custom("", "").await;
    assert_eq!(
        e2e_tests::windows::granted(h.addr).await,
        (65_535, 1024 * 1024)
    );
    let h = Harness::start_custom("stream_window_bytes = 262144", "").await;
    assert_eq!(
        e2e_tests::windows::granted(h.addr).await,
        (262_144, 1024 * 1024)
    );
    let h = Harness::start_custom("stream_window_bytes = 4194304", "").await;
    assert_eq!(
        e2e_tests::windows::granted(h.addr).await,
        (4_194_304, 4_194_304)
    );
}
