//! The fake provider over real loopback sockets.

// A failed unwrap is how a test reports an unexpected error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::RawClient;
use fake_provider::{FakeProvider, Reply};

const WAIT: Duration = Duration::from_secs(5);

fn fixture_bytes(path: &str) -> Vec<u8> {
    std::fs::read(format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// A fake for the tests of the wire (bytes, pacing, faults), which send bodies no API would take.
async fn wire_fake() -> FakeProvider {
    let fp = FakeProvider::start().await.unwrap();
    fp.skip_validation(
        "these tests are of the wire: replayed bytes, pacing and faults, not request rules",
    );
    fp
}

async fn get(fp: &FakeProvider, path: &str) -> RawClient {
    let mut c = RawClient::connect(fp.addr()).await;
    c.send("POST", path, &[("content-type", "application/json")], b"{}")
        .await;
    c
}

#[tokio::test]
async fn fixture_is_replayed_byte_exactly_one_chunk_per_event() {
    let fp = wire_fake().await;
    fp.push(Reply::fixture("selftest/openai-text.sse"));
    let mut c = get(&fp, "/v1/chat/completions").await;
    let head = c.read_head().await.unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("text/event-stream"));
    assert_eq!(head.header("cache-control"), Some("no-cache"));
    assert_eq!(head.header("transfer-encoding"), Some("chunked"));
    let chunks = c.chunks().await.unwrap();
    let expected = fixture_bytes("selftest/openai-text.sse");
    assert_eq!(chunks.concat(), expected);
    assert_eq!(chunks.len(), 6, "one chunk per SSE event");
    assert!(chunks.iter().all(|c| c.ends_with(b"\n\n")));
}

#[tokio::test]
async fn crlf_fixture_with_trailing_bare_json_keeps_every_byte() {
    let fp = wire_fake().await;
    fp.push(Reply::fixture("selftest/gemini-crlf-trailing-error.sse"));
    let mut c = get(&fp, "/v1beta/models/g:streamGenerateContent?alt=sse").await;
    c.read_head().await.unwrap();
    let chunks = c.chunks().await.unwrap();
    assert_eq!(
        chunks.concat(),
        fixture_bytes("selftest/gemini-crlf-trailing-error.sse")
    );
    assert_eq!(chunks.len(), 3);
    assert!(chunks[0].ends_with(b"\r\n\r\n"));
    assert!(chunks[2].starts_with(b"{\n  \"error\""));
}

#[tokio::test]
async fn reqwest_reads_the_fixture_unchanged() {
    let fp = wire_fake().await;
    fp.push(Reply::fixture("selftest/anthropic-text.sse"));
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/messages", fp.base_url()))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.bytes().await.unwrap();
    assert_eq!(body, fixture_bytes("selftest/anthropic-text.sse"));
}

#[tokio::test]
async fn pacing_keeps_order_and_gaps() {
    let gap = Duration::from_millis(40);
    let fp = wire_fake().await;
    fp.push(Reply::sse("data: 1\n\ndata: 2\n\ndata: 3\n\n").pace(gap));
    let mut c = get(&fp, "/").await;
    c.read_head().await.unwrap();
    let mut got = Vec::new();
    while let Some(chunk) = c.next_chunk().await.unwrap() {
        got.push(chunk);
    }
    let bodies: Vec<&[u8]> = got.iter().map(|(b, _)| &b[..]).collect();
    assert_eq!(
        bodies,
        [&b"data: 1\n\n"[..], b"data: 2\n\n", b"data: 3\n\n"]
    );
    for pair in got.windows(2) {
        let observed = pair[1].1 - pair[0].1;
        // Read-side jitter can shrink an observed gap a little, never much.
        assert!(
            observed >= gap - Duration::from_millis(10),
            "gap {observed:?}"
        );
    }
}

#[tokio::test]
async fn split_every_writes_small_chunks() {
    let body = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
    let fp = wire_fake().await;
    fp.push(Reply::sse(body).split_every(5));
    let mut c = get(&fp, "/").await;
    c.read_head().await.unwrap();
    let chunks = c.chunks().await.unwrap();
    assert_eq!(chunks.concat(), body.as_bytes());
    assert!(chunks.iter().all(|c| c.len() <= 5));
    // 15-byte event → 3 pieces, 14-byte event → 3 pieces: pieces never
    // straddle two events.
    assert_eq!(chunks.len(), 6);
    assert_eq!(&chunks[2][..], b":1}\n\n");
}

#[tokio::test]
async fn crlf_rewrites_line_endings_idempotently() {
    let fp = wire_fake().await;
    fp.push(Reply::sse("data: 1\n\ndata: 2\n\n").crlf());
    fp.push(Reply::sse("data: 1\r\n\r\ndata: 2\r\n\r\n").crlf());
    for _ in 0..2 {
        let mut c = get(&fp, "/").await;
        c.read_head().await.unwrap();
        let chunks = c.chunks().await.unwrap();
        assert_eq!(
            chunks,
            vec![
                Bytes::from_static(b"data: 1\r\n\r\n"),
                Bytes::from_static(b"data: 2\r\n\r\n")
            ]
        );
    }
}

#[tokio::test]
async fn reset_after_is_a_connection_reset_for_the_client() {
    let fp = wire_fake().await;
    fp.push(
        Reply::sse("data: 1\n\ndata: 2\n\ndata: 3\n\n")
            .pace(Duration::from_millis(20))
            .reset_after(2),
    );
    let mut c = get(&fp, "/").await;
    c.read_head().await.unwrap();
    assert_eq!(
        &c.next_chunk().await.unwrap().unwrap().0[..],
        b"data: 1\n\n"
    );
    assert_eq!(
        &c.next_chunk().await.unwrap().unwrap().0[..],
        b"data: 2\n\n"
    );
    let err = c.next_chunk().await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{err}");
}

#[tokio::test]
async fn reset_after_surfaces_as_an_error_in_reqwest() {
    let fp = wire_fake().await;
    fp.push(Reply::sse("data: 1\n\ndata: 2\n\n").reset_after(1));
    let mut resp = reqwest::Client::new()
        .post(fp.base_url())
        .body("{}")
        .send()
        .await
        .unwrap();
    let mut result = Ok(());
    loop {
        match resp.chunk().await {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    assert!(result.is_err(), "a reset stream must not end cleanly");
}

#[tokio::test]
async fn json_reset_after_zero_sends_no_response() {
    let fp = wire_fake().await;
    fp.push(Reply::json(200, "{}").reset_after(0));
    let mut c = get(&fp, "/").await;
    let err = c.read_head().await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{err}");
}

#[tokio::test]
async fn stall_then_client_drop_is_noticed_quickly() {
    let fp = wire_fake().await;
    fp.push(Reply::sse("data: 1\n\ndata: 2\n\n").stall_after(1));
    let mut c = get(&fp, "/").await;
    c.read_head().await.unwrap();
    assert_eq!(
        &c.next_chunk().await.unwrap().unwrap().0[..],
        b"data: 1\n\n"
    );
    // The stall is an absence of bytes, which only a bounded wait can show.
    let more = tokio::time::timeout(Duration::from_millis(100), c.next_chunk()).await;
    assert!(more.is_err(), "stalled stream produced {more:?}");
    assert!(fp.wait_closed(0, Duration::ZERO).await.is_none());

    let dropped_at = Instant::now();
    drop(c);
    // The stall never ends by itself: a close seen at all was caused by the drop.
    let closed_at = fp.wait_closed(0, WAIT).await.expect("close noticed");
    assert!(closed_at >= dropped_at);
}

#[tokio::test]
async fn client_drop_between_paced_events_is_noticed() {
    let fp = wire_fake().await;
    fp.push(Reply::sse("data: 1\n\ndata: 2\n\n").pace(Duration::from_secs(30)));
    let mut c = get(&fp, "/").await;
    c.read_head().await.unwrap();
    c.next_chunk().await.unwrap().unwrap();
    let dropped_at = Instant::now();
    drop(c);
    // The next event is 30 s away, longer than the wait: a close seen within it was caused by the drop.
    let closed_at = fp.wait_closed(0, WAIT).await.expect("close noticed");
    assert!(closed_at >= dropped_at);
}

#[tokio::test]
async fn json_reply_status_headers_and_body() {
    let body =
        "{\n  \"error\": {\n    \"message\": \"slow down\",\n    \"type\": \"tokens\"\n  }\n}";
    let fp = wire_fake().await;
    fp.push(
        Reply::json(429, body)
            .header("retry-after-ms", "1500")
            .header("x-request-id", "req_123"),
    );
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", fp.base_url()))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    let h = resp.headers();
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(h["retry-after-ms"], "1500");
    assert_eq!(h["x-request-id"], "req_123");
    assert_eq!(resp.text().await.unwrap(), body);
}

#[tokio::test]
async fn requests_are_recorded_and_replies_taken_in_order() {
    let fp = wire_fake().await;
    fp.push(Reply::json(200, r#"{"n":1}"#));
    fp.push(Reply::json(201, r#"{"n":2}"#));
    let client = reqwest::Client::new();
    let before = Instant::now();
    let mut statuses = Vec::new();
    for i in 0..3 {
        let resp = client
            .post(format!("{}/v1/messages?beta=true", fp.base_url()))
            .header("X-Api-Key", "sk-test")
            .header("anthropic-version", "2023-06-01")
            .body(serde_json::json!({"model": "m", "i": i}).to_string())
            .send()
            .await
            .unwrap();
        statuses.push((resp.status().as_u16(), resp.text().await.unwrap()));
    }
    assert_eq!(statuses[0], (200, r#"{"n":1}"#.to_owned()));
    assert_eq!(statuses[1], (201, r#"{"n":2}"#.to_owned()));
    // The queue is empty by then: the default fallback answers.
    assert_eq!(statuses[2].0, 500);
    assert!(statuses[2].1.contains("fake-provider: no scripted reply"));

    let reqs = fp.wait_requests(3, WAIT).await;
    assert_eq!(reqs.len(), 3);
    assert_eq!(fp.requests().len(), 3);
    for (i, r) in reqs.iter().enumerate() {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/messages?beta=true");
        assert_eq!(r.header("x-api-key"), Some("sk-test"));
        assert_eq!(r.header("Anthropic-Version"), Some("2023-06-01"));
        assert!(r.headers.iter().all(|(n, _)| *n == n.to_ascii_lowercase()));
        assert_eq!(r.json()["i"], i);
        assert!(r.received_at >= before);
    }
    assert!(reqs[0].received_at <= reqs[1].received_at);
}

#[tokio::test]
async fn set_fallback_replaces_the_default() {
    let fp = wire_fake().await;
    fp.set_fallback(Reply::json(503, r#"{"error":"overloaded"}"#));
    let resp = reqwest::get(fp.base_url()).await.unwrap();
    assert_eq!(resp.status(), 503);
}

#[tokio::test]
async fn fn_reply_decides_per_request() {
    let fp = wire_fake().await;
    fp.set_fallback(
        Reply::fn_reply(|req| {
            let who = req.json()["who"].as_str().unwrap_or("nobody").to_owned();
            Reply::sse(format!("data: hello {who}\n\n"))
        })
        .header("x-fn", "yes"),
    );
    let client = reqwest::Client::new();
    for who in ["ann", "bob"] {
        let resp = client
            .post(fp.base_url())
            .body(serde_json::json!({ "who": who }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["x-fn"], "yes");
        assert_eq!(resp.text().await.unwrap(), format!("data: hello {who}\n\n"));
    }
}

#[tokio::test]
async fn keep_alive_serves_several_requests_and_tracks_their_close() {
    let fp = wire_fake().await;
    fp.push(Reply::sse("data: a\n\n"));
    fp.push(Reply::json(200, "{}"));
    let mut c = RawClient::connect(fp.addr()).await;
    c.send("POST", "/one", &[], b"1").await;
    assert_eq!(c.read_head().await.unwrap().status, 200);
    assert_eq!(c.chunks().await.unwrap().concat(), b"data: a\n\n");
    c.send("POST", "/two", &[], b"2").await;
    let head = c.read_head().await.unwrap();
    assert_eq!(&c.content_length_body(&head).await.unwrap()[..], b"{}");
    let reqs = fp.wait_requests(2, WAIT).await;
    assert_eq!(reqs[1].path, "/two");
    assert_eq!(&reqs[1].body[..], b"2");

    drop(c);
    let first = fp.wait_closed(0, WAIT).await;
    let second = fp.wait_closed(1, WAIT).await;
    assert!(first.is_some());
    assert_eq!(first, second, "both requests rode the same connection");
}

#[tokio::test]
async fn connection_close_is_honoured() {
    let fp = wire_fake().await;
    fp.push(Reply::json(200, "{}"));
    let mut c = RawClient::connect(fp.addr()).await;
    c.send("GET", "/", &[("connection", "close")], b"").await;
    let head = c.read_head().await.unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(&c.content_length_body(&head).await.unwrap()[..], b"{}");
    // The server ends the connection after the reply, with nothing more on it; bounded, so a server that keeps
    // the connection open fails the test instead of hanging it.
    let ended = tokio::time::timeout(WAIT, c.read_to_end()).await;
    assert!(
        matches!(ended, Ok(Ok(()))),
        "connection still open: {ended:?}"
    );
    assert!(c.buf.is_empty(), "bytes after the reply: {:?}", c.buf);
}

#[tokio::test]
async fn chunked_request_bodies_are_refused() {
    let fp = wire_fake().await;
    let mut c = RawClient::connect(fp.addr()).await;
    c.send("POST", "/", &[("transfer-encoding", "chunked")], b"")
        .await;
    assert_eq!(c.read_head().await.unwrap().status, 411);
    assert!(fp.requests().is_empty());
}

#[tokio::test]
async fn shutdown_closes_stalled_connections() {
    let fp = wire_fake().await;
    fp.push(Reply::sse("data: 1\n\n").stall_after(0));
    let mut c = get(&fp, "/").await;
    c.read_head().await.unwrap();
    fp.wait_requests(1, WAIT).await;
    fp.shutdown();
    let ended = tokio::time::timeout(WAIT, c.next_chunk()).await;
    assert!(matches!(ended, Ok(Err(_))), "{ended:?}");
}

#[tokio::test]
async fn delay_holds_back_the_whole_reply() {
    let fp = wire_fake().await;
    fp.push(Reply::json(200, "{}").delay(Duration::from_millis(80)));
    let mut c = get(&fp, "/").await;
    let sent = Instant::now();
    c.read_head().await.unwrap();
    assert!(sent.elapsed() >= Duration::from_millis(70));
}

/// Whatever fixtures exist (other crates author most of them), the server
/// must hand each back unchanged, event by event.
#[tokio::test]
async fn every_sse_fixture_round_trips() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "sse") {
                out.push(path);
            }
        }
    }
    let root = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures"));
    let mut files = Vec::new();
    walk(&root, &mut files);
    assert!(!files.is_empty());
    let fp = wire_fake().await;
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap().to_str().unwrap();
        fp.push(Reply::fixture(rel));
        let mut c = get(&fp, "/").await;
        c.read_head().await.unwrap();
        let chunks = c.chunks().await.unwrap();
        assert_eq!(chunks.concat(), std::fs::read(file).unwrap(), "{rel}");
    }
}

#[tokio::test]
async fn json_fixture_serves_the_file() {
    let fp = wire_fake().await;
    fp.push(Reply::json_fixture(503, "selftest/openai-text.sse"));
    let resp = reqwest::get(fp.base_url()).await.unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(
        resp.bytes().await.unwrap(),
        fixture_bytes("selftest/openai-text.sse")
    );
}
