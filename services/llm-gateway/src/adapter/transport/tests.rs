use super::*;
use crate::adapter::HttpRequest;
use crate::event::Finish;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

// ---- RetryPolicy ----

fn retryable() -> ProviderError {
    ProviderError::new(ErrorKind::Overloaded, "busy")
}

#[test]
fn defaults() {
    let t = Timeouts::default();
    assert_eq!(
        (t.connect, t.first_byte, t.idle, t.total),
        (
            Duration::from_secs(10),
            Duration::from_secs(60),
            Duration::from_secs(60),
            Duration::from_secs(600)
        )
    );
    let p = RetryPolicy::default();
    assert_eq!(p.max_attempts, 3);
    assert_eq!(p.base_delay, Duration::from_millis(500));
    assert_eq!(p.max_delay, Duration::from_secs(8));
    assert_eq!(p.max_retry_after, Duration::from_secs(60));
}

#[test]
fn retry_backoff_jitter_within_half_to_full_and_capped() {
    let policy = RetryPolicy {
        max_attempts: 40,
        base_delay: Duration::from_millis(100),
        max_delay: Duration::from_secs(1),
        max_retry_after: Duration::from_secs(60),
    };
    let err = retryable();
    for attempt in 1..40u32 {
        let full = Duration::from_millis(100)
            .saturating_mul(1u32 << (attempt - 1).min(31))
            .min(Duration::from_secs(1));
        for _ in 0..200 {
            let d = policy.delay(attempt, &err).unwrap();
            assert!(
                d >= full / 2 && d <= full,
                "attempt {attempt}: {d:?} not in [{:?}, {full:?}]",
                full / 2
            );
        }
    }
    // The jitter actually varies.
    let samples: std::collections::HashSet<_> = (0..50).map(|_| policy.delay(3, &err)).collect();
    assert!(samples.len() > 1);
}

#[test]
fn retry_uses_provider_delay_exactly_unless_too_long() {
    let policy = RetryPolicy::default();
    let mut err = retryable();
    err.retry_after = Some(Duration::from_millis(1574));
    assert_eq!(policy.delay(1, &err), Some(Duration::from_millis(1574)));
    err.retry_after = Some(Duration::from_secs(60));
    assert_eq!(policy.delay(2, &err), Some(Duration::from_secs(60)));
    err.retry_after = Some(Duration::from_secs(61));
    assert_eq!(policy.delay(1, &err), None);
}

#[test]
fn retry_none_when_not_retryable_or_attempts_exhausted() {
    let policy = RetryPolicy::default();
    let auth = ProviderError::new(ErrorKind::Auth, "bad key");
    assert_eq!(policy.delay(1, &auth), None);
    assert!(policy.delay(2, &retryable()).is_some());
    assert_eq!(policy.delay(3, &retryable()), None);
    let once = RetryPolicy {
        max_attempts: 1,
        ..policy
    };
    assert_eq!(once.delay(1, &retryable()), None);
}

#[test]
fn duration_formatting() {
    assert_eq!(fmt_duration(Duration::from_secs(30)), "30s");
    assert_eq!(fmt_duration(Duration::from_millis(200)), "200ms");
}

#[test]
fn secrets_include_bearer_credential_and_query() {
    let auth = [("authorization", "Bearer sk-1".to_string())];
    assert_eq!(
        secrets_of(&auth, "http://h/p?key=abc"),
        vec!["Bearer sk-1", "sk-1", "key=abc"]
    );
}

// ---- transport against a raw loopback HTTP/1.1 server ----

/// A request as the test server saw it.
#[derive(Debug)]
struct Seen {
    head: String,
    body: Vec<u8>,
}

async fn read_request(sock: &mut TcpStream) -> Seen {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let n = sock.read(&mut tmp).await.unwrap();
        assert!(n > 0, "client closed before sending a full request");
        buf.extend_from_slice(&tmp[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(buf[..end].to_vec()).unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .unwrap_or(0);
            let mut body = buf[end + 4..].to_vec();
            while body.len() < len {
                let n = sock.read(&mut tmp).await.unwrap();
                assert!(n > 0);
                body.extend_from_slice(&tmp[..n]);
            }
            return Seen { head, body };
        }
    }
}

/// Serves one connection with `handler`; returns the base URL.
async fn serve<F, Fut>(handler: F) -> String
where
    F: FnOnce(TcpStream, Seen) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let seen = read_request(&mut sock).await;
        handler(sock, seen).await;
    });
    format!("http://{addr}/v1/")
}

fn chunk(data: &str) -> Vec<u8> {
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

fn request() -> HttpRequest {
    HttpRequest {
        path: "/chat/completions".to_string(),
        headers: vec![("anthropic-version".to_string(), "2023-06-01".to_string())],
        body: serde_json::json!({"model": "m", "stream": true}),
    }
}

fn auth() -> Vec<(&'static str, String)> {
    vec![("authorization", "Bearer sk-test-secret".to_string())]
}

fn timeouts(idle_ms: u64, total_ms: u64) -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_millis(idle_ms),
        total: Duration::from_millis(total_ms),
    }
}

/// Records what reached it; `end` finishes the stream.
#[derive(Default)]
struct Recorder {
    frames: Vec<(String, String)>,
    bare: Vec<String>,
    wholes: Vec<String>,
    ended: bool,
}

impl Decoder for Recorder {
    fn frame(&mut self, event: &str, data: &str, out: &mut Vec<Event>) {
        self.frames.push((event.to_string(), data.to_string()));
        out.push(Event::TextDelta {
            id: event.to_string(),
            delta: data.to_string(),
        });
    }

    fn bare_json(&mut self, json: &str, _out: &mut Vec<Event>) {
        self.bare.push(json.to_string());
    }

    fn whole(&mut self, json: &str, _out: &mut Vec<Event>) {
        self.wholes.push(json.to_string());
    }

    fn end(&mut self, out: &mut Vec<Event>) {
        self.ended = true;
        out.push(Event::Finish(Finish::default()));
    }

    fn is_done(&self) -> bool {
        self.ended
    }

    fn restart(&self) -> Box<dyn Decoder> {
        Box::new(Recorder::default())
    }
}

#[tokio::test]
async fn sends_json_with_headers_and_classifies_429_retry_after_ms() {
    let (seen_tx, seen_rx) = oneshot::channel();
    let base = serve(|mut sock, seen| async move {
            let body = r#"{"error":{"message":"Rate limit reached. Please try again in 9s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
            let reply = format!(
                "HTTP/1.1 429 Too Many Requests\r\nretry-after-ms: 1500\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(reply.as_bytes()).await.unwrap();
            let _ = seen_tx.send(seen);
        })
        .await;
    let transport = Transport::new(timeouts(1000, 5000)).unwrap();
    let err = transport
        .open(&base, &auth(), &request())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::RateLimited);
    assert!(err.retryable);
    assert_eq!(err.http_status, Some(429));
    assert_eq!(err.retry_after, Some(Duration::from_millis(1500)));
    assert_eq!(err.message, "Rate limit reached. Please try again in 9s.");

    let seen = seen_rx.await.unwrap();
    let head = seen.head.to_ascii_lowercase();
    assert!(
        head.starts_with("post /v1/chat/completions http/1.1\r\n"),
        "{head}"
    );
    for line in [
        "authorization: bearer sk-test-secret",
        "accept: text/event-stream",
        "content-type: application/json",
        "anthropic-version: 2023-06-01",
    ] {
        assert!(head.contains(line), "missing {line:?} in {head}");
    }
    let body: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(body, request().body);
}

#[tokio::test]
async fn error_body_is_redacted() {
    let base = serve(|mut sock, _| async move {
            let body = r#"{"error":{"message":"Incorrect API key provided: sk-test-secret.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
            let reply = format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(reply.as_bytes()).await.unwrap();
        })
        .await;
    let transport = Transport::new(timeouts(1000, 5000)).unwrap();
    let err = transport
        .open(&base, &auth(), &request())
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.retryable), (ErrorKind::Auth, false));
    assert_eq!(err.message, "Incorrect API key provided: [REDACTED].");
    assert!(!err.provider_body.contains("sk-test-secret"));
}

#[tokio::test]
async fn chunked_sse_split_mid_frame_reaches_decoder() {
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let base = serve(|mut sock, _| async move {
        sock.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sock.write_all(&chunk(": OPENROUTER PROCESSING\n\ndata: {\"a\":1}\n\nda"))
            .await
            .unwrap();
        // Hold the rest back until the client has processed the first read, so the split is real.
        let _ = go_rx.await;
        sock.write_all(&chunk("ta: {\"b\":2}\n\n")).await.unwrap();
        sock.write_all(b"0\r\n\r\n").await.unwrap();
    })
    .await;
    let transport = Transport::new(timeouts(2000, 10_000)).unwrap();
    let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
    assert_eq!(stream.status(), 200);
    let mut decoder = Recorder::default();
    let mut out = Vec::new();
    // The gRPC layer drives these futures from spawned tasks: they must be `Send`.
    fn assert_send<T: Send>(_: &T) {}
    assert_send(&stream.pump(&mut decoder, &mut out));
    assert_send(&transport.open(&base, &[], &request()));
    while decoder.frames.is_empty() {
        assert!(stream.pump(&mut decoder, &mut out).await.unwrap());
    }
    assert_eq!(
        decoder.frames,
        vec![(String::new(), "{\"a\":1}".to_string())]
    );
    go_tx.send(()).unwrap();
    while stream.pump(&mut decoder, &mut out).await.unwrap() {}
    assert_eq!(
        decoder.frames,
        vec![
            (String::new(), "{\"a\":1}".to_string()),
            (String::new(), "{\"b\":2}".to_string())
        ]
    );
    assert!(decoder.ended);
    assert_eq!(out.last(), Some(&Event::Finish(Finish::default())));
    // Ended streams stay ended.
    assert!(!stream.pump(&mut decoder, &mut out).await.unwrap());
}

#[tokio::test]
async fn content_length_body_with_bare_json_and_unterminated_frame() {
    let base = serve(|mut sock, _| async move {
        let body =
            "event: e\r\ndata: x\r\n\r\n{\n  \"error\": {\n    \"code\": 503\n  }\n}\ndata: [DONE]";
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        sock.write_all(reply.as_bytes()).await.unwrap();
    })
    .await;
    let transport = Transport::new(timeouts(2000, 10_000)).unwrap();
    let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
    let mut decoder = Recorder::default();
    let mut out = Vec::new();
    while stream.pump(&mut decoder, &mut out).await.unwrap() {}
    assert_eq!(
        decoder.frames,
        vec![
            ("e".to_string(), "x".to_string()),
            (String::new(), "[DONE]".to_string())
        ]
    );
    assert_eq!(
        decoder.bare,
        vec!["{\n  \"error\": {\n    \"code\": 503\n  }\n}".to_string()]
    );
    assert!(decoder.ended);
}

#[tokio::test]
async fn idle_timeout_fires_when_server_stalls() {
    let (hold_tx, hold_rx) = oneshot::channel::<()>();
    let base = serve(|mut sock, _| async move {
        sock.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sock.write_all(&chunk("data: x\n\n")).await.unwrap();
        // Never write again; keep the socket open until the test is over.
        let _ = hold_rx.await;
    })
    .await;
    let transport = Transport::new(timeouts(200, 10_000)).unwrap();
    let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
    let mut decoder = Recorder::default();
    let mut out = Vec::new();
    while decoder.frames.is_empty() {
        assert!(stream.pump(&mut decoder, &mut out).await.unwrap());
    }
    let started = std::time::Instant::now();
    let err = stream.pump(&mut decoder, &mut out).await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!((err.kind, err.retryable), (ErrorKind::Timeout, true));
    assert_eq!(err.message, "no data for 200ms");
    assert!(!decoder.ended);
    drop(hold_tx);
}

#[tokio::test]
async fn total_timeout_bounds_the_stream() {
    let (hold_tx, hold_rx) = oneshot::channel::<()>();
    let base = serve(|mut sock, _| async move {
        sock.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sock.write_all(&chunk("data: x\n\n")).await.unwrap();
        let _ = hold_rx.await;
    })
    .await;
    let transport = Transport::new(timeouts(10_000, 300)).unwrap();
    let started = std::time::Instant::now();
    let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
    let mut decoder = Recorder::default();
    let mut out = Vec::new();
    let err = loop {
        match stream.pump(&mut decoder, &mut out).await {
            Ok(true) => {}
            Ok(false) => panic!("body ended"),
            Err(e) => break e,
        }
    };
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert_eq!(err.message, "generation exceeded total timeout of 300ms");
    drop(hold_tx);
}

#[tokio::test]
async fn first_byte_timeout_when_headers_never_come() {
    let (hold_tx, hold_rx) = oneshot::channel::<()>();
    let base = serve(|sock, _| async move {
        // Keep the connection open, silent, until the test is over.
        let _sock = sock;
        let _ = hold_rx.await;
    })
    .await;
    let transport = Transport::new(Timeouts {
        first_byte: Duration::from_millis(200),
        ..timeouts(1000, 10_000)
    })
    .unwrap();
    let err = transport
        .open(&base, &auth(), &request())
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.retryable), (ErrorKind::Timeout, true));
    assert_eq!(err.message, "first byte timeout after 200ms");
    drop(hold_tx);
}

#[tokio::test]
async fn a_whole_json_answer_may_take_longer_than_the_first_byte_timeout() {
    // Headers 300 ms after the request, first-byte timeout 100 ms: a stream times out, a whole answer (Converse)
    // is bounded by the total timeout (10 s) instead.
    let late = || {
        serve(|mut sock, _| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let body = r#"{"ok":true}"#;
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes()).await;
        })
    };
    let transport = Transport::new(Timeouts {
        first_byte: Duration::from_millis(100),
        ..timeouts(1000, 10_000)
    })
    .unwrap();
    let base = late().await;
    let json = Opening {
        framing: Framing::Json,
        signer: None,
    };
    let mut stream = transport
        .open_with(&base, &auth(), &request().encode(), json)
        .await
        .unwrap();
    let mut decoder = Recorder::default();
    let mut out = Vec::new();
    while stream.pump(&mut decoder, &mut out).await.unwrap() {}
    assert_eq!(decoder.wholes, [r#"{"ok":true}"#]);

    let base = late().await;
    let err = transport
        .open(&base, &auth(), &request())
        .await
        .unwrap_err();
    assert_eq!(err.message, "first byte timeout after 100ms");
}

#[tokio::test]
async fn connection_lost_mid_stream_is_network() {
    let base = serve(|mut sock, _| async move {
        sock.write_all(SSE_HEAD.as_bytes()).await.unwrap();
        sock.write_all(&chunk("data: x\n\n")).await.unwrap();
        // Close without the terminating zero-length chunk.
        drop(sock);
    })
    .await;
    let transport = Transport::new(timeouts(2000, 10_000)).unwrap();
    let mut stream = transport.open(&base, &auth(), &request()).await.unwrap();
    let mut decoder = Recorder::default();
    let mut out = Vec::new();
    let err = loop {
        match stream.pump(&mut decoder, &mut out).await {
            Ok(true) => {}
            Ok(false) => panic!("truncated body reported as a clean end"),
            Err(e) => break e,
        }
    };
    assert_eq!((err.kind, err.retryable), (ErrorKind::Network, true));
    assert!(
        err.message.starts_with("connection lost mid-stream"),
        "{}",
        err.message
    );
    assert_eq!(decoder.frames.len(), 1);
}

#[tokio::test]
async fn connect_refused_is_network_without_url() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let transport = Transport::new(timeouts(1000, 5000)).unwrap();
    let base = format!("http://{addr}/v1?key=query-secret");
    let err = transport
        .open(&base, &auth(), &request())
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.retryable), (ErrorKind::Network, true));
    assert!(!err.message.contains("query-secret"), "{}", err.message);
    assert!(!err.message.contains("127.0.0.1"), "{}", err.message);
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let base = serve(|mut sock, _| async move {
            sock.write_all(
                b"HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:1/elsewhere\r\ncontent-length: 0\r\n\r\n",
            )
            .await
            .unwrap();
        })
        .await;
    let transport = Transport::new(timeouts(1000, 5000)).unwrap();
    let err = transport
        .open(&base, &auth(), &request())
        .await
        .unwrap_err();
    assert_eq!(err.http_status, Some(302));
    assert!(!err.retryable);
    assert_eq!(err.message, "HTTP 302 (Found)");
}

#[tokio::test]
async fn invalid_auth_value_is_rejected_without_echo() {
    let transport = Transport::new(timeouts(1000, 5000)).unwrap();
    let auth = vec![("x-api-key", "bad\nkey".to_string())];
    let err = transport
        .open("http://127.0.0.1:1", &auth, &request())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth);
    assert!(!err.message.contains("bad"));
}

/// A server answering 200 with `content_type` (none when `None`) and `body`.
async fn answering(content_type: Option<&'static str>, body: &'static str) -> String {
    serve(move |mut sock, _| async move {
        let ct = content_type
            .map(|c| format!("content-type: {c}\r\n"))
            .unwrap_or_default();
        let reply = format!(
            "HTTP/1.1 200 OK\r\n{ct}content-length: {}\r\n\r\n{body}",
            body.len()
        );
        sock.write_all(reply.as_bytes()).await.unwrap();
    })
    .await
}

async fn pumped(base: &str) -> Result<Recorder, ProviderError> {
    let transport = Transport::new(timeouts(2000, 10_000)).unwrap();
    let mut stream = transport.open(base, &auth(), &request()).await?;
    let mut decoder = Recorder::default();
    let mut out = Vec::new();
    while stream.pump(&mut decoder, &mut out).await? {}
    Ok(decoder)
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_reaches_the_decoder_whole() {
    let body = "{\n  \"id\": \"chatcmpl-1\",\n  \"object\": \"chat.completion\"\n}\n";
    for ct in [
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        None,
    ] {
        let decoder = pumped(&answering(ct, body).await).await.unwrap();
        assert_eq!(decoder.wholes, [body], "{ct:?}");
        assert!(
            decoder.frames.is_empty() && decoder.bare.is_empty(),
            "{ct:?}"
        );
    }
    // No content type and a body that is not JSON: read as the stream that was asked for.
    let decoder = pumped(&answering(None, "data: a\n\n").await).await.unwrap();
    assert_eq!(decoder.frames, [(String::new(), "a".to_string())]);
}

#[tokio::test]
async fn a_200_in_a_media_type_no_adapter_reads_is_a_typed_error_keeping_the_body() {
    let page = "<html><body>Please sign in to the proxy</body></html>";
    let err = pumped(&answering(Some("text/html; charset=utf-8"), page).await)
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind, ErrorKind::ProviderError);
    assert_eq!(err.http_status, Some(200));
    assert!(!err.retryable);
    assert!(err.message.contains("`text/html`"), "{}", err.message);
    assert_eq!(err.provider_body, page);
}
