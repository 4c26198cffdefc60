//! The `/metrics` endpoint both services serve on their own listener, and [`scrape`], the client the tests and
//! benchmarks read it with.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Something that renders the OpenMetrics text exposition on every scrape.
pub trait Exposition: Send + Sync + 'static {
    /// The current exposition text.
    fn encode(&self) -> String;
}

/// A bare registry is exposed as is.
impl Exposition for prometheus_client::registry::Registry {
    fn encode(&self) -> String {
        encode_registry(self)
    }
}

/// Encodes `registry` as OpenMetrics text.
pub fn encode_registry(registry: &prometheus_client::registry::Registry) -> String {
    let mut out = String::with_capacity(8 * 1024);
    // Writing into a String cannot fail; an error here would be a bug in an encoder, and an empty scrape is the
    // least harmful answer to it.
    if prometheus_client::encoding::text::encode(&mut out, registry).is_err() {
        out.clear();
    }
    out
}

/// How long a scraper may take to send its request headers before the connection is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `GET /metrics` on `listener` until `shutdown` resolves. Any other path is 404, any other method 405.
///
/// A plain HTTP/1.1 responder on hyper: scrapes are rare and tiny, so there is no router, no TLS and no auth (bind
/// it to an address only the scraper reaches).
pub async fn serve<E: Exposition>(
    registry: Arc<E>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Accept errors are transient (EMFILE, aborted handshakes); pausing keeps one from spinning a core.
                tracing::warn!(message = "metrics listener accept failed", error = %e);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let registry = Arc::clone(&registry);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let registry = Arc::clone(&registry);
                async move { Ok::<_, Infallible>(respond(&*registry, &req)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(message = "metrics connection ended with an error", error = %e);
            }
        });
    }
}

/// The content type of a scrape's answer.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn respond<E: Exposition, B>(registry: &E, req: &Request<B>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, OPENMETRICS, Bytes::from(registry.encode())),
        (_, "/metrics") => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"only GET\n"),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"metrics are at /metrics\n"),
        ),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}

/// Reads the `/metrics` listener at `addr` as a scraper does (one `GET /metrics` over HTTP/1.1, the connection
/// closed after it): the body of a 200 in OpenMetrics text. Anything else is an error naming what came back.
pub async fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let mut sock = tokio::net::TcpStream::connect(addr).await?;
    sock.write_all(b"GET /metrics HTTP/1.1\r\nhost: metrics\r\nconnection: close\r\n\r\n")
        .await?;
    let mut reply = String::new();
    sock.read_to_string(&mut reply).await?;
    let not_metrics = || {
        std::io::Error::other(format!(
            "not an OpenMetrics 200 from {addr}: {}",
            reply.lines().next().unwrap_or("")
        ))
    };
    let (head, body) = reply.split_once("\r\n\r\n").ok_or_else(not_metrics)?;
    let openmetrics = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case(&format!("content-type: {OPENMETRICS}")));
    if !head.starts_with("HTTP/1.1 200") || !openmetrics {
        return Err(not_metrics());
    }
    // The listener answers with a whole body and its content-length, so the body is the text as is.
    Ok(body.to_string())
}

#[cfg(test)]
#[path = "metrics_http_tests.rs"]
mod tests;
