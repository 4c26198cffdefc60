//! A deliberately tiny HTTP/1.1 client on raw sockets: unlike reqwest it
//! exposes each chunk of a chunked body as the server wrote it, with its
//! arrival time, and reports resets verbatim.

#![allow(dead_code)] // each test binary uses a different subset

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct RawClient {
    stream: TcpStream,
    pub buf: BytesMut,
}

#[derive(Debug)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> RawClient {
        RawClient {
            stream: TcpStream::connect(addr).await.unwrap(),
            buf: BytesMut::new(),
        }
    }

    pub async fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut req = format!("{method} {path} HTTP/1.1\r\nhost: test\r\n");
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.stream.write_all(&bytes).await.unwrap();
    }

    async fn fill(&mut self) -> io::Result<()> {
        self.buf.reserve(8192);
        match self.stream.read_buf(&mut self.buf).await? {
            0 => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed",
            )),
            _ => Ok(()),
        }
    }

    async fn line(&mut self) -> io::Result<String> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf.split_to(pos + 2);
                return Ok(String::from_utf8_lossy(&line[..pos]).into_owned());
            }
            self.fill().await?;
        }
    }

    pub async fn read_head(&mut self) -> io::Result<Head> {
        let status_line = self.line().await?;
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let line = self.line().await?;
            if line.is_empty() {
                return Ok(Head { status, headers });
            }
            let (n, v) = line.split_once(':').unwrap();
            headers.push((n.to_ascii_lowercase(), v.trim().to_owned()));
        }
    }

    /// The next chunk's data with the instant it was complete; `None` after
    /// the terminating zero-length chunk.
    pub async fn next_chunk(&mut self) -> io::Result<Option<(Bytes, Instant)>> {
        let size_line = self.line().await?;
        let size = usize::from_str_radix(size_line.trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_line:?}"));
        while self.buf.len() < size + 2 {
            self.fill().await?;
        }
        let at = Instant::now();
        let data = self.buf.split_to(size).freeze();
        assert_eq!(&self.buf[..2], b"\r\n", "chunk not followed by CRLF");
        self.buf.advance(2);
        Ok((size > 0).then_some((data, at)))
    }

    /// All chunks until the terminator.
    pub async fn chunks(&mut self) -> io::Result<Vec<Bytes>> {
        let mut out = Vec::new();
        while let Some((chunk, _)) = self.next_chunk().await? {
            out.push(chunk);
        }
        Ok(out)
    }

    pub async fn content_length_body(&mut self, head: &Head) -> io::Result<Bytes> {
        let len: usize = head.header("content-length").unwrap().parse().unwrap();
        while self.buf.len() < len {
            self.fill().await?;
        }
        Ok(self.buf.split_to(len).freeze())
    }

    /// Waits for the server to end the connection; returns how it ended.
    pub async fn read_to_end(&mut self) -> io::Result<()> {
        loop {
            match self.fill().await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }
}

/// `data:` payloads of an SSE body (LF framing).
pub fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|event| {
            event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_owned)
        })
        .collect()
}
