//! The real `llm-gateway` binary with its HTTP front door turned on (`GATEWAY_HTTP_LISTEN`), and a plain HTTP/1.1
//! POST to it, and a plain HTTP client for any front door: what the suites that drive the front door without a
//! vendor SDK share.

use std::path::Path;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::service::{self, ServiceProcess};

/// A gateway process serving its front door on `http_port`; its config folder lives as long as it does.
pub struct FrontDoor {
    pub process: ServiceProcess,
    pub http_port: u16,
    _dir: tempfile::TempDir,
}

/// Starts `binary` (the suite's `CARGO_BIN_EXE_gateway_main`) with `config` as its gateway.toml, the front door on a
/// free port, the kit's caller token, no trace export, then `env` (which may turn export on).
pub async fn start(binary: &Path, config: &str, env: &[(&str, &str)]) -> FrontDoor {
    let dir = tempfile::tempdir().expect("config folder");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config).expect("write the config");
    let http_port = service::free_port();
    let mut cmd = tokio::process::Command::new(binary);
    cmd.arg("--config")
        .arg(&path)
        .env("GATEWAY_AUTH_TOKENS", crate::TOKEN)
        .env("E2E_OPENAI_KEY", crate::OPENAI_KEY)
        .env("GATEWAY_HTTP_LISTEN", format!("127.0.0.1:{http_port}"))
        // The binary's "listening" line is an info log.
        .env("RUST_LOG", "info")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .envs(env.iter().copied());
    let process = service::start(cmd, "llm-gateway listening")
        .await
        .expect("the gateway starts");
    FrontDoor {
        process,
        http_port,
        _dir: dir,
    }
}

impl FrontDoor {
    /// POSTs `body` (JSON) to `path` over a new HTTP/1.1 connection, with the kit's bearer token and `headers`.
    pub async fn post_json(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &'static [u8],
    ) -> http::Response<hyper::body::Incoming> {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", self.http_port))
            .await
            .expect("connect to the front door");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("HTTP/1.1 handshake");
        tokio::spawn(conn);
        let mut request = http::Request::post(format!("http://front-door{path}"))
            .header("authorization", format!("Bearer {}", crate::TOKEN))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from_static(body)))
            .expect("a valid request");
        sender
            .send_request(request)
            .await
            .expect("the front door answers")
    }
}

/// Sends one request over a fresh connection (HTTP/2 with prior knowledge when `h2`) and returns the status, the
/// headers and the whole body.
pub async fn send(
    addr: std::net::SocketAddr,
    h2: bool,
    req: http::Request<Full<Bytes>>,
) -> (http::StatusCode, http::HeaderMap, String) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    let resp = if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    };
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

pub fn request(
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::builder()
        .method(method)
        .uri(format!("http://front-door{path}"))
        .header("content-type", "application/json");
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    b.body(Full::new(Bytes::from(body.to_string()))).unwrap()
}

/// POSTs `body` with the kit's token to the front door at `addr` and returns the status, headers and parsed body.
pub async fn post(
    addr: std::net::SocketAddr,
    path: &str,
    body: &str,
) -> (u16, http::HeaderMap, serde_json::Value) {
    let (status, headers, text) =
        send(addr, false, request("POST", path, Some(crate::TOKEN), body)).await;
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status.as_u16(), headers, json)
}
