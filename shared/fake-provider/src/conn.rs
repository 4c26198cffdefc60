//! One accepted connection: hand-rolled HTTP/1.1 request parsing and reply
//! writing, with the client watched for disconnects the whole time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::sync::watch;

use crate::reply::{Plan, Step};
use crate::{Recorded, State, wait_shutdown};

/// Larger request heads are refused; real clients send a few KiB.
const MAX_HEAD: usize = 64 * 1024;
/// Larger bodies are refused so a runaway client cannot exhaust memory.
const MAX_BODY: usize = 256 * 1024 * 1024;
/// How long to wait for the client's FIN after we closed our side.
const LINGER_FOR_CLIENT_CLOSE: Duration = Duration::from_secs(10);

enum Incoming {
    Request {
        rec: Recorded,
        keep_alive: bool,
    },
    /// The client closed (or the socket failed) at this instant.
    Closed(Instant),
    /// The request cannot be served; answer with this status and close.
    Reject(u16, &'static str),
}

enum Sent {
    Complete,
    ClientGone(Instant),
    Reset,
    Shutdown,
}

enum End {
    Complete,
    Stall,
    Reset,
}

pub(crate) async fn serve(
    mut stream: TcpStream,
    state: Arc<State>,
    conn: u64,
    mut shutdown: watch::Receiver<bool>,
) {
    // Bytes read but not yet consumed; carries pipelined requests over from
    // the reads done while a reply was being written.
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        let incoming = tokio::select! {
            incoming = read_request(&mut stream, &mut buf) => incoming,
            () = wait_shutdown(&mut shutdown) => return,
        };
        let (rec, keep_alive) = match incoming {
            Incoming::Request { rec, keep_alive } => (rec, keep_alive),
            Incoming::Closed(at) => {
                state.mark_closed(conn, at);
                return;
            }
            Incoming::Reject(status, message) => {
                let reply = crate::Reply::json(status, crate::reply::error_json(message))
                    .header("connection", "close");
                let _ = send(&mut stream, &mut buf, &reply.plan(), &mut shutdown).await;
                return;
            }
        };
        let index = state.record(conn, rec.clone());
        let plan = state.reply_for(&rec).plan();
        let sent = send(&mut stream, &mut buf, &plan, &mut shutdown).await;
        let ended = match &sent {
            Sent::ClientGone(at) => *at,
            _ => Instant::now(),
        };
        state.mark_ended(index, ended);
        match sent {
            Sent::Complete if keep_alive && !plan.close => {}
            Sent::Complete => {
                close_gracefully(stream, &state, conn, &mut shutdown).await;
                return;
            }
            Sent::ClientGone(at) => {
                state.mark_closed(conn, at);
                return;
            }
            Sent::Reset => {
                // With a zero linger, close() discards unsent data and
                // sends RST instead of FIN; dropping the stream closes it.
                let _ = stream.set_zero_linger();
                drop(stream);
                return;
            }
            Sent::Shutdown => return,
        }
    }
}

/// Reads one request (head and `Content-Length` body) from `buf`, reading
/// more from the socket as needed.
async fn read_request(stream: &mut TcpStream, buf: &mut BytesMut) -> Incoming {
    let mut scanned = 0;
    let head_end = loop {
        // RFC 9112 §2.2: ignore empty lines before a request line (some
        // clients send a stray CRLF after a body).
        while buf.starts_with(b"\r\n") {
            let _ = buf.split_to(2);
            scanned = 0;
        }
        if let Some(pos) = find(&buf[scanned..], b"\r\n\r\n") {
            break scanned + pos + 4;
        }
        scanned = buf.len().saturating_sub(3);
        if buf.len() > MAX_HEAD {
            return Incoming::Reject(431, "fake-provider: request head too large");
        }
        if !fill(stream, buf).await {
            return Incoming::Closed(Instant::now());
        }
    };
    let head = buf.split_to(head_end);
    let Some((method, path, version, headers)) = parse_head(&head) else {
        return Incoming::Reject(400, "fake-provider: malformed request head");
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    if header("transfer-encoding").is_some() {
        return Incoming::Reject(
            411,
            "fake-provider: chunked request bodies are not supported; send Content-Length",
        );
    }
    let len = match header("content-length").map(str::parse::<usize>) {
        None => 0,
        Some(Ok(n)) if n <= MAX_BODY => n,
        Some(Ok(_)) => return Incoming::Reject(413, "fake-provider: request body too large"),
        Some(Err(_)) => return Incoming::Reject(400, "fake-provider: bad content-length"),
    };
    if buf.len() < len
        && header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        && stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .is_err()
    {
        return Incoming::Closed(Instant::now());
    }
    while buf.len() < len {
        if !fill(stream, buf).await {
            return Incoming::Closed(Instant::now());
        }
    }
    let body = buf.split_to(len).freeze();
    let connection = header("connection").unwrap_or("").to_ascii_lowercase();
    let keep_alive = if version == "HTTP/1.0" {
        connection.contains("keep-alive")
    } else {
        !connection.contains("close")
    };
    Incoming::Request {
        rec: Recorded {
            method,
            path,
            headers,
            body,
            received_at: Instant::now(),
        },
        keep_alive,
    }
}

/// Reads more bytes into `buf`; false once the client closed or the socket
/// failed.
async fn fill<R: AsyncReadExt + Unpin>(reader: &mut R, buf: &mut BytesMut) -> bool {
    // `read_buf` only offers the spare capacity; without reserving it would
    // read tiny slices once the buffer is full.
    buf.reserve(16 * 1024);
    matches!(reader.read_buf(buf).await, Ok(n) if n > 0)
}

type Head = (String, String, String, Vec<(String, String)>);

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next().filter(|m| !m.is_empty())?.to_owned();
    let path = request_line.next().filter(|p| !p.is_empty())?.to_owned();
    let version = request_line.next().filter(|v| v.starts_with("HTTP/1."))?;
    if request_line.next().is_some() {
        return None;
    }
    let mut headers = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        // Obsolete line folding (a line starting with whitespace) was
        // removed from HTTP; treating it as an error is what RFC 9112 allows.
        if line.starts_with([' ', '\t']) {
            return None;
        }
        let (name, value) = line.split_once(':')?;
        if name.is_empty() || name.ends_with([' ', '\t']) {
            return None;
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    Some((method, path, version.to_owned(), headers))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Writes a reply while reading from the client at the same time, so a
/// disconnect is seen during writes, paced sleeps and stalls alike.
async fn send(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    plan: &Plan,
    shutdown: &mut watch::Receiver<bool>,
) -> Sent {
    let (mut rd, mut wr) = stream.split();
    let writer = run_steps(&mut wr, &plan.steps);
    let reader = watch_client(&mut rd, buf);
    tokio::pin!(writer, reader);
    let end = tokio::select! {
        end = &mut writer => end,
        at = &mut reader => return Sent::ClientGone(at),
        () = wait_shutdown(shutdown) => return Sent::Shutdown,
    };
    match end {
        Ok(End::Complete) => Sent::Complete,
        Ok(End::Reset) => Sent::Reset,
        Ok(End::Stall) => tokio::select! {
            at = &mut reader => Sent::ClientGone(at),
            () = wait_shutdown(shutdown) => Sent::Shutdown,
        },
        // A failed write is the other way a vanished client shows up.
        Err(_) => Sent::ClientGone(Instant::now()),
    }
}

async fn run_steps(wr: &mut WriteHalf<'_>, steps: &[Step]) -> std::io::Result<End> {
    for step in steps {
        match step {
            Step::Write(bytes) => wr.write_all(bytes).await?,
            Step::Sleep(d) => tokio::time::sleep(*d).await,
            Step::Stall => return Ok(End::Stall),
            Step::Reset => return Ok(End::Reset),
        }
    }
    Ok(End::Complete)
}

/// Resolves when the client closes; whatever it sends meanwhile (a
/// pipelined request) is kept in `buf` for the next `read_request`.
async fn watch_client(rd: &mut ReadHalf<'_>, buf: &mut BytesMut) -> Instant {
    while fill(rd, buf).await {}
    Instant::now()
}

/// Ends a connection from our side (the client asked for `connection:
/// close`, or the reply did), then waits briefly for the client's own close
/// so `wait_closed` still gets an instant.
async fn close_gracefully(
    mut stream: TcpStream,
    state: &State,
    conn: u64,
    shutdown: &mut watch::Receiver<bool>,
) {
    if stream.shutdown().await.is_err() {
        state.mark_closed(conn, Instant::now());
        return;
    }
    let mut sink = BytesMut::new();
    let (mut rd, _wr) = stream.split();
    tokio::select! {
        closed = tokio::time::timeout(LINGER_FOR_CLIENT_CLOSE, watch_client(&mut rd, &mut sink)) => {
            if let Ok(at) = closed {
                state.mark_closed(conn, at);
            }
        }
        () = wait_shutdown(shutdown) => {}
    }
}
