//! The I/O edge: the OTLP/gRPC `TraceService` that fills the store, and a plain HTTP listener that prints it:
//! `GET /traces` (the recent traces, newest first), `GET /traces/<trace id>` (one tree) and
//! `GET /traces?session=<session id>` (the trees of one session's traces, oldest first). Text, for curl.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tokio::net::TcpListener;

use crate::render;
use crate::store::{Traces, records_of};

/// Traces listed by `GET /traces`.
const LISTED: usize = 50;

/// The store both listeners share.
pub type Shared = Arc<Mutex<Traces>>;

/// Receives OTLP/gRPC exports into the store.
#[derive(Clone)]
struct Receiver(Shared);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans = records_of(request.into_inner());
        self.0.lock().unwrap_or_else(|p| p.into_inner()).add(spans);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// Serves OTLP/gRPC on `otlp` until the process ends.
pub async fn serve_otlp(otlp: TcpListener, traces: Shared) -> Result<(), tonic::transport::Error> {
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(otlp);
    tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(Receiver(traces)))
        .serve_with_incoming(incoming)
        .await
}

/// Serves the HTTP listener until the process ends.
pub async fn serve_http(http: TcpListener, traces: Shared) -> std::io::Result<()> {
    loop {
        let (stream, _) = http.accept().await?;
        let traces = traces.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let traces = traces.clone();
                async move { Ok::<_, Infallible>(answer(&req, &traces)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

/// The answer to one HTTP request.
fn answer(req: &Request<Incoming>, traces: &Shared) -> Response<Full<Bytes>> {
    let traces = traces.lock().unwrap_or_else(|p| p.into_inner());
    let path = req.uri().path();
    let session = req
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("session=")));
    match (path, session) {
        ("/traces", Some(id)) => {
            let found = traces.with_attribute("gen_ai.conversation.id", id);
            if found.is_empty() {
                return text(
                    StatusCode::NOT_FOUND,
                    format!("no trace of session {id} yet\n"),
                );
            }
            text(
                StatusCode::OK,
                found
                    .iter()
                    .map(|t| render::tree(t))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        }
        ("/" | "/traces", None) => text(StatusCode::OK, render::list(&traces.recent(LISTED))),
        _ => match path
            .strip_prefix("/traces/")
            .and_then(|id| traces.trace(id))
        {
            Some(spans) => text(StatusCode::OK, render::tree(spans)),
            None => text(
                StatusCode::NOT_FOUND,
                "no such trace (GET /traces lists them)\n".into(),
            ),
        },
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
