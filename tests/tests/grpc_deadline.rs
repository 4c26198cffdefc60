//! Server-side `grpc-timeout` on both services (docs/operations.md, "gRPC conventions"): a call still running when
//! the caller's deadline passes ends with `DEADLINE_EXCEEDED` from the server — before the handler answered (a
//! unary call waiting on a slow provider) and in the middle of a stream — and the work behind it stops.
//!
//! The calls go over a plain HTTP/2 client that sends the `grpc-timeout` header and enforces nothing itself, so the
//! status read here is the one the server sent (a gRPC library would end the call on its own timer as well).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use e2e_tests::faults::{assert_settled, create, slow_answer};
use e2e_tests::processor::{PROCESSOR_TOKEN, Product, prompt};
use e2e_tests::{TOKEN, generation};
use fake_provider::Reply;
use fake_provider::openai_sse::ChatStream;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use llm_proto::gateway as gpb;
use llm_proto::sessions as spb;
use prost::Message;

/// What the server sent for one call.
#[derive(Debug)]
struct Answer {
    /// `grpc-status`, from the trailers or from a trailers-only response's headers.
    status: String,
    /// Messages received before the status.
    messages: usize,
    /// Call start → status.
    elapsed: Duration,
}

/// One gRPC call of `path` with `message`, `grpc-timeout: timeout` (when given) and `token`.
async fn call(
    addr: SocketAddr,
    path: &str,
    token: &str,
    message: &impl Message,
    timeout: Option<&str>,
) -> Answer {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .unwrap();
    tokio::spawn(conn);
    let bytes = message.encode_to_vec();
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(&bytes);
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"));
    if let Some(t) = timeout {
        req = req.header("grpc-timeout", t);
    }
    let started = Instant::now();
    let res = sender
        .send_request(req.body(Full::new(Bytes::from(frame))).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    if let Some(status) = res.headers().get("grpc-status") {
        return Answer {
            status: status.to_str().unwrap().to_string(),
            messages: 0,
            elapsed: started.elapsed(),
        };
    }
    let mut body = res.into_body();
    let (mut data, mut status) = (Vec::new(), None);
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        if let Some(d) = frame.data_ref() {
            data.extend_from_slice(d);
        } else if let Some(t) = frame.trailers_ref() {
            status = t
                .get("grpc-status")
                .map(|v| v.to_str().unwrap().to_string());
        }
    }
    let elapsed = started.elapsed();
    let mut buf = Bytes::from(data);
    let mut messages = 0;
    while buf.remaining() >= 5 {
        buf.advance(1);
        let len = usize::try_from(buf.get_u32()).unwrap();
        buf.advance(len);
        messages += 1;
    }
    Answer {
        status: status.expect("trailers with grpc-status"),
        messages,
        elapsed,
    }
}

fn paced(chunks: usize, gap: Duration) -> Reply {
    let words: Vec<String> = (0..chunks).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    Reply::sse(
        ChatStream::new("gpt-4o-2024-08-06", "chatcmpl-deadline")
            .text(&words)
            .finish("stop", Some((10, 40))),
    )
    .pace(gap)
}

/// The value of the unlabelled gauge `name` in a scrape.
fn gauge(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

const GENERATE: &str = "/llm.gateway.v1.GatewayService/Generate";
const STREAM: &str = "/llm.gateway.v1.GatewayService/Stream";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_ends_calls_past_their_grpc_timeout_with_deadline_exceeded() {
    let p = Product::start("").await;
    let gw = p.gateway.addr;

    // Unary, the provider answering only after 10 s: the server answers DEADLINE_EXCEEDED at 300 ms.
    p.gateway
        .openai
        .push(paced(1, Duration::ZERO).delay(Duration::from_secs(10)));
    let req = gpb::GenerateRequest {
        generation: Some(generation("openai/gpt-4o", "Hi")),
    };
    let a = call(gw, GENERATE, TOKEN, &req, Some("300m")).await;
    assert_eq!(a.status, "4", "{a:?}");
    assert!(a.elapsed >= Duration::from_millis(300), "{a:?}");
    assert!(a.elapsed < Duration::from_secs(5), "{a:?}");

    // The same call with a deadline it meets succeeds: the status above came from the deadline.
    p.gateway.openai.push(paced(2, Duration::from_millis(10)));
    let a = call(gw, GENERATE, TOKEN, &req, Some("20S")).await;
    assert_eq!((a.status.as_str(), a.messages), ("0", 1), "{a:?}");

    // A stream of 40 chunks 100 ms apart (4 s) with a 1.5 s deadline: some events, then DEADLINE_EXCEEDED trailers.
    p.gateway.openai.push(paced(40, Duration::from_millis(100)));
    let req = gpb::StreamRequest {
        generation: Some(generation("openai/gpt-4o", "Hi")),
    };
    let a = call(gw, STREAM, TOKEN, &req, Some("1500m")).await;
    assert_eq!(a.status, "4", "{a:?}");
    assert!(a.messages >= 1, "events before the deadline: {a:?}");
    assert!(a.elapsed >= Duration::from_millis(1500), "{a:?}");
    assert!(a.elapsed < Duration::from_millis(3500), "{a:?}");

    // The generation stopped with the call: nothing stays in flight (the provider would stream for 4 s).
    let mut inflight = gauge(
        &p.gateway.scrape_metrics().await,
        "llm_gateway_inflight_generations",
    );
    for _ in 0..50 {
        if inflight == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        inflight = gauge(
            &p.gateway.scrape_metrics().await,
            "llm_gateway_inflight_generations",
        );
    }
    assert_eq!(inflight, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processor_ends_streams_past_their_grpc_timeout_with_deadline_exceeded() {
    let p = Product::start("").await;
    let mut c = p.client().await;
    let id = create(&mut c).await;

    // Subscribe on an idle session waits for events that never come: DEADLINE_EXCEEDED at 300 ms.
    let sub = spb::SubscribeRequest {
        session_id: id.clone(),
        after_event_id: String::new(),
    };
    let path = "/llm.sessions.v1.SessionService/Subscribe";
    let a = call(p.addr, path, PROCESSOR_TOKEN, &sub, Some("300m")).await;
    assert_eq!(a.status, "4", "{a:?}");
    assert!(a.elapsed >= Duration::from_millis(300), "{a:?}");
    assert!(a.elapsed < Duration::from_secs(5), "{a:?}");

    // A prompt answered over 2 s, read with a 1 s deadline: its first events, then DEADLINE_EXCEEDED. The
    // prompt itself is the session's and goes on (the call was only its view), so it is answered all the same.
    p.gateway.openai.push(slow_answer());
    let path = "/llm.sessions.v1.SessionService/Prompt";
    let a = call(
        p.addr,
        path,
        PROCESSOR_TOKEN,
        &prompt(&id, "Take your time"),
        Some("1S"),
    )
    .await;
    assert_eq!(a.status, "4", "{a:?}");
    assert!(a.messages >= 1, "events before the deadline: {a:?}");
    assert!(a.elapsed >= Duration::from_secs(1), "{a:?}");
    assert_settled(&mut c, &id).await;
}
