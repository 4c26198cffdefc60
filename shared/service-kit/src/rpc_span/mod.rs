//! OpenTelemetry spans of gRPC calls, after the RPC semantic conventions for gRPC: a `SERVER` span for every call a
//! server receives ([`ServerSpanLayer`]) and a `CLIENT` span for every call a client makes ([`ClientSpanLayer`]).
//!
//! Each span is named `{package.Service}/{Method}` and carries `rpc.system = "grpc"`, `rpc.service`, `rpc.method`,
//! `rpc.grpc.status_code` (an integer), `server.address` and `server.port`, and on the server `network.peer.address`
//! and `network.peer.port`. A call's status arrives at its very end, in the trailers after the last message (or in
//! the headers of a trailers-only answer), so the layers wrap the response body: the span ends when the body ends,
//! with the final status. A call that ends without a status (the caller cancelled it, or its connection went) is
//! recorded as `CANCELLED`. Which codes make the span's status an error follows the conventions: on a client every
//! code but `OK`; on a server only `UNKNOWN`, `DEADLINE_EXCEEDED`, `UNIMPLEMENTED`, `INTERNAL`, `UNAVAILABLE` and
//! `DATA_LOSS` (the others are the caller's doing). An error also sets `error.type` to the code's name.
//!
//! The spans have the `tracing` target [`llm_telemetry::RPC_SPAN_TARGET`]: they are exported as traces but kept out
//! of logs, so without an OTLP exporter they are not created at all. The cost is per call (the span, its
//! attributes, one extraction or injection of the W3C context); a message of a stream only passes through the body
//! wrapper, which looks at a frame only to find the trailers.

mod call;
mod client;
mod server;
mod service;

use call::CallSpan;
pub use call::{CallFuture, SpanBody};
pub use client::ClientSpanLayer;
pub use server::ServerSpanLayer;
pub use service::SpanService;

use tonic::codegen::http::HeaderMap;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `CANCELLED`: what a call that ended without a status is recorded as.
pub const CANCELLED: i32 = 1;
/// `UNKNOWN`: a body that ended without `grpc-status`.
pub const UNKNOWN: i32 = 2;

/// Which end of a call a span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The caller (span kind `CLIENT`).
    Client,
    /// The callee (span kind `SERVER`).
    Server,
}

impl Side {
    /// The span kind, as `otel.kind` takes it.
    pub fn kind(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// `/package.Service/Method` as (`package.Service`, `Method`); `None` for a path that is not a gRPC method's.
pub fn split_path(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}

/// The `grpc-status` value of `headers` (response headers or trailers), when there is a well-formed one.
pub fn status_in(headers: &HeaderMap) -> Option<i32> {
    let value = headers.get("grpc-status")?.as_bytes();
    if value.is_empty() || value.len() > 3 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0, |n, d| n * 10 + i32::from(d - b'0')))
}

/// The status a client infers from an HTTP response without `grpc-status` (the gRPC HTTP-to-status mapping):
/// what a proxy in between answered.
pub fn status_of_http(status: u16) -> i32 {
    match status {
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502 | 503 | 504 => 14,
        _ => UNKNOWN,
    }
}

/// Whether `code` makes a span's status an error, on `side` (see the module documentation).
pub fn is_error(side: Side, code: i32) -> bool {
    match side {
        Side::Client => code != 0,
        Side::Server => matches!(code, 2 | 4 | 12 | 13 | 14 | 15),
    }
}

/// The name of a gRPC status code, as `error.type` takes it (`_OTHER` for a code outside the protocol's).
pub fn code_name(code: i32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("_OTHER")
}

/// A new call span on `side` for `service`/`method` (`name` is the path without its leading `/`). A server span
/// is a root until the caller's context is set as its parent; a client span is a child of the current span.
fn new_span(side: Side, name: &str, service: &str, method: &str) -> tracing::Span {
    let parent = match side {
        Side::Client => tracing::Span::current().id(),
        Side::Server => None,
    };
    tracing::info_span!(
        target: llm_telemetry::RPC_SPAN_TARGET,
        parent: parent,
        "grpc",
        "otel.name" = name,
        "otel.kind" = side.kind(),
        "otel.status_code" = tracing::field::Empty,
        "rpc.system" = "grpc",
        "rpc.service" = service,
        "rpc.method" = method,
        "rpc.grpc.status_code" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        "server.address" = tracing::field::Empty,
        "server.port" = tracing::field::Empty,
        "network.peer.address" = tracing::field::Empty,
        "network.peer.port" = tracing::field::Empty,
    )
}

#[cfg(test)]
mod tests;
