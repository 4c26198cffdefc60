//! `[limits]` and hostile input through the real gateway: a provider line that never ends, huge deltas, requests
//! with too many tools, malformed protobuf, and the validation rules that need the resolved model.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::time::{Duration, Instant};

use e2e_tests::*;
use fake_provider::Reply;
use llm_proto::gateway as pb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic_types::StatusExt;

/// Peak resident memory of this process (`VmHWM`), in KiB. nextest runs every test in its own process, so the
/// growth of this figure during a test is what that test made the in-process gateway hold.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A provider that answers every request with `200 text/event-stream` and then `total` bytes of one line that
/// never ends (`data: xxxx…`), written from one reused 64 KiB buffer, so the test itself holds no copy of it.
async fn endless_line_provider(total: usize) -> (String, tokio::task::JoinHandle<usize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut head = vec![0u8; 64 * 1024];
        let _ = sock.read(&mut head).await.unwrap();
        sock.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: ",
        )
        .await
        .unwrap();
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0;
        while sent < total {
            if sock.write_all(&chunk).await.is_err() {
                break; // the gateway closed the connection
            }
            sent += chunk.len();
        }
        sent
    });
    (url, task)
}

#[tokio::test]
async fn a_300_mb_line_ends_the_stream_with_a_typed_error_and_memory_stays_bounded() {
    const TOTAL: usize = 300 * 1024 * 1024;
    let (url, provider) = endless_line_provider(TOTAL).await;
    let extra = format!(
        "[limits]\nmax_sse_event_bytes = 4194304\n\n[providers.raw]\nprotocol = \"openai_chat\"\nbase_url = \"{url}\"\nallow_unlisted_models = true\n"
    );
    let h = Harness::start_with(&extra).await;
    let before = peak_rss_kib();
    let events = h.stream(generation("raw/any", "hi")).await.unwrap();
    let grown_mib = peak_rss_kib().saturating_sub(before) / 1024;
    let pb::stream_response::Event::Error(e) = terminal(&events) else {
        panic!("{:?}", render(&events));
    };
    assert_eq!(e.kind, pb::ErrorKind::ProviderError as i32);
    assert!(e.message.contains("max_sse_event_bytes"), "{}", e.message);
    assert!(!e.retryable);
    // The gateway stopped reading and closed the connection long before the provider was done.
    let sent = tokio::time::timeout(Duration::from_secs(30), provider)
        .await
        .unwrap()
        .unwrap();
    assert!(sent < TOTAL, "the provider could write all {sent} bytes");
    println!(
        "300 MB line: peak RSS grew by {grown_mib} MiB; the provider wrote {sent} bytes before the close"
    );
    // Without the cap this grew by ~600 MiB; with it, the 4 MiB buffer (doubled while it grew) plus reads.
    assert!(grown_mib < 64, "peak RSS grew by {grown_mib} MiB");
}

/// An OpenAI Chat chunk carrying `content`.
fn chat_chunk(content: &str) -> String {
    let delta = serde_json::json!({
        "id": "chatcmpl-limits", "object": "chat.completion.chunk", "created": 1767225600, "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]
    });
    format!("data: {delta}\n\n")
}

#[tokio::test]
async fn a_large_delta_reaches_the_caller_as_bounded_messages() {
    let h = Harness::start_with("[limits]\nmax_delta_bytes = 4096\n").await;
    let text: String = (0..300_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let finish = r#"data: {"id":"chatcmpl-limits","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}

data: [DONE]

"#;
    h.openai
        .push(Reply::sse(format!("{}{finish}", chat_chunk(&text))));
    let events = h.stream(generation("openai/gpt-4o", "hi")).await.unwrap();
    let mut joined = String::new();
    let mut deltas = 0;
    for ev in &events {
        if let Some(pb::stream_response::Event::TextDelta(d)) = &ev.event {
            assert!(d.delta.len() <= 4096, "{}", d.delta.len());
            joined.push_str(&d.delta);
            deltas += 1;
        }
    }
    assert_eq!(joined, text);
    assert!(deltas >= 300_000 / 4096, "{deltas}");
    assert!(matches!(
        terminal(&events),
        pb::stream_response::Event::StepFinish(_)
    ));
}

fn tools(n: usize) -> Vec<pb::Tool> {
    (0..n)
        .map(|i| pb::Tool {
            name: format!("tool_{i}"),
            description: String::new(),
            input_schema_json: r#"{"type":"object"}"#.into(),
            ..Default::default()
        })
        .collect()
}

#[tokio::test]
async fn a_hundred_thousand_tools_are_refused_fast_before_any_provider_work() {
    let h = Harness::start_custom("max_request_bytes = 67108864", "").await;
    let mut c = h.client().await;
    let g = pb::Generation {
        tools: tools(100_000),
        ..generation("openai/gpt-4o", "hi")
    };
    let started = Instant::now();
    let err = c
        .stream(pb::StreamRequest {
            generation: Some(g),
        })
        .await
        .unwrap_err();
    let took = started.elapsed();
    println!(
        "100 000 tools refused in {took:?} (client encode, transfer, server decode and count)"
    );
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message().contains("limits.max_tools"),
        "{}",
        err.message()
    );
    // The refusal itself is a count; this bound (debug build, loaded machine, 3 MB encoded and decoded) only says it
    // did not parse the schemas. docs/benchmarks.md has the measured figure.
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(h.openai.requests().is_empty());
}

#[tokio::test]
async fn bytes_that_are_not_a_request_are_invalid_argument() {
    let h = Harness::start().await;
    // Field 1 (`generation`) holding field 1 (`model`) with bytes that are not UTF-8; then a message cut short.
    // Each again at 100 kB, past the size at which the codec hands a request over undecoded.
    let varint = |mut n: usize| {
        let mut out = Vec::new();
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out
    };
    let large_not_utf8 = {
        let model = [vec![0x0a], varint(100_000), vec![0xff; 100_000]].concat();
        [vec![0x0a], varint(model.len()), model].concat()
    };
    let large_cut_short = [vec![0x0a], varint(200_000), vec![0x0a; 100_000]].concat();
    let bodies = [
        vec![0x0a, 0x04, 0x0a, 0x02, 0xff, 0xfe],
        vec![0x0a, 0x10, b'x'],
        large_not_utf8,
        large_cut_short,
    ];
    for path in ["Stream", "Generate", "GetModel"] {
        for body in &bodies {
            let mut grpc = tonic::client::Grpc::new(h.channel().await);
            grpc.ready().await.unwrap();
            let mut request = tonic::Request::new(body.clone());
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
            let path = tonic::codegen::http::uri::PathAndQuery::try_from(format!(
                "/llm.gateway.v1.GatewayService/{path}"
            ))
            .unwrap();
            let e = if path.path().ends_with("Stream") {
                grpc.server_streaming(request, path, e2e_tests::raw::RawCodec)
                    .await
                    .map(|_| ())
                    .unwrap_err()
            } else {
                grpc.unary(request, path, e2e_tests::raw::RawCodec)
                    .await
                    .map(|_| ())
                    .unwrap_err()
            };
            assert_eq!(
                e.code(),
                Code::InvalidArgument,
                "{} bytes: {e:?}",
                body.len()
            );
        }
    }
}

/// The field a refusal names.
fn field_of(err: &tonic::Status) -> String {
    err.get_error_details()
        .bad_request()
        .and_then(|b| b.field_violations.first().map(|v| v.field.clone()))
        .unwrap_or_default()
}

fn tool_turns(first: &str, second_call: Option<&str>, result: &str) -> Vec<pb::Message> {
    let call = |id: &str| pb::Part {
        kind: Some(pb::part::Kind::ToolCall(pb::ToolCallPart {
            call_id: id.into(),
            tool_name: "get_weather".into(),
            input_json: "{}".into(),
            provider_metadata: None,
        })),
    };
    let mut calls = vec![call(first)];
    calls.extend(second_call.map(call));
    vec![
        user("weather?"),
        pb::Message {
            role: pb::Role::Assistant as i32,
            parts: calls,
        },
        pb::Message {
            role: pb::Role::Tool as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::ToolResult(pb::ToolResultPart {
                    call_id: result.into(),
                    tool_name: "get_weather".into(),
                    output: "sunny".into(),
                    is_error: false,
                })),
            }],
        },
    ]
}

#[tokio::test]
async fn each_header_url_enum_range_and_id_rule_is_refused_naming_its_field() {
    let h = Harness::start().await;
    let mut c = h.client().await;
    let base = || generation("openai/gpt-4o", "hi");
    let with_header = |name: &str| pb::Generation {
        extra_headers: [(name.to_string(), "x".to_string())].into_iter().collect(),
        ..base()
    };
    let file = |media: &str, url: &str| pb::Generation {
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                kind: Some(pb::part::Kind::File(pb::FilePart {
                    media_type: media.into(),
                    filename: String::new(),
                    source: Some(pb::file_part::Source::Url(url.into())),
                })),
            }],
        }],
        ..base()
    };
    let mut cases: Vec<(pb::Generation, String)> = ["te", "upgrade", "expect", "keep-alive"]
        .into_iter()
        .map(|n| (with_header(n), format!("generation.extra_headers[{n}]")))
        .collect();
    cases.push((
        file("image/png", "https://example.com/a.png\r\nx-injected: 1"),
        "generation.messages[0].parts[0].file.url".into(),
    ));
    cases.push((
        file("image/png\r\nx-injected: 1", "https://example.com/a.png"),
        "generation.messages[0].parts[0].file.media_type".into(),
    ));
    let mut role = base();
    role.messages[0].role = 99;
    cases.push((role, "generation.messages[0].role".into()));
    cases.push((
        pb::Generation {
            tool_choice: Some(pb::ToolChoice {
                mode: 99,
                tool_name: String::new(),
                ..Default::default()
            }),
            ..base()
        },
        "generation.tool_choice.mode".into(),
    ));
    cases.push((
        pb::Generation {
            reasoning: Some(pb::Reasoning {
                effort: 1,
                budget_tokens: 1,
            }),
            ..generation("anthropic/claude-sonnet-4-5", "hi")
        },
        "generation.reasoning.budget_tokens".into(),
    ));
    cases.push((
        pb::Generation {
            sampling: Some(pb::Sampling {
                max_output_tokens: Some(u32::MAX),
                ..Default::default()
            }),
            ..base()
        },
        "generation.sampling.max_output_tokens".into(),
    ));
    cases.push((
        pb::Generation {
            tools: vec![weather_tool()],
            messages: tool_turns("call_1", Some("call_1"), "call_1"),
            ..base()
        },
        "generation.messages[1].parts[1].tool_call.call_id".into(),
    ));
    cases.push((
        pb::Generation {
            tools: vec![weather_tool()],
            messages: tool_turns("call_1", None, "call_9"),
            ..base()
        },
        "generation.messages[2].parts[0].tool_result.call_id".into(),
    ));
    for (g, field) in cases {
        let err = c
            .stream(pb::StreamRequest {
                generation: Some(g),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err:?}");
        assert_eq!(field_of(&err), field, "{}", err.message());
    }
    assert!(h.openai.requests().is_empty());
    assert!(h.anthropic.requests().is_empty());
}

#[tokio::test]
async fn errors_echoing_huge_values_stay_readable() {
    let h = Harness::start_custom("max_request_bytes = 4194304", "").await;
    let mut c = h.client().await;
    // An unknown model of 400 characters (under the id limit): NOT_FOUND, the id cut in the message and details.
    let model = format!("openai/{}", "m".repeat(400));
    let err = c
        .stream(pb::StreamRequest {
            generation: Some(generation(&model, "hi")),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().len() < 2048, "{}", err.message().len());
    // 10 000-character model, 100 000-character session id: refused, and the caller can read the refusal.
    let long_model = generation(&format!("openai/{}", "m".repeat(10_000)), "hi");
    let long_session = pb::Generation {
        context: Some(pb::RequestContext {
            session_id: "s".repeat(100_000),
            ..Default::default()
        }),
        ..generation("openai/gpt-4o", "hi")
    };
    for (g, field) in [
        (long_model, "generation.model"),
        (long_session, "generation.context.session_id"),
    ] {
        let err = c
            .stream(pb::StreamRequest {
                generation: Some(g),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert_eq!(field_of(&err), field);
        assert!(err.details().len() < 4096);
    }
}
