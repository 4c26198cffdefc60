//! The gRPC conventions both services follow, in one place:
//! - compression: every server accepts gzip- and zstd-compressed requests and compresses its responses with the
//!   first of those the caller lists in `grpc-accept-encoding` ([`compressed!`](crate::compressed));
//! - reflection, `grpc.reflection.v1` and `v1alpha` (older clients, Python's `grpcio-reflection` among them, speak
//!   only `v1alpha`), each listing exactly the services the server serves ([`reflection_v1`],
//!   [`reflection_v1alpha`]);
//! - health (`grpc.health.v1`) with `Watch` per the health protocol: a service the server does not know gets
//!   `SERVICE_UNKNOWN` and the call stays open, instead of an error ([`Health`]);
//! - HTTP/2 keepalive: the server pings an idle connection every interval and closes it when a ping goes
//!   unanswered for the timeout ([`Keepalive`]).

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::{HealthReporter, HealthService};

/// The encodings every server accepts and sends, in order of preference when the caller accepts several.
pub const ENCODINGS: [CompressionEncoding; 2] =
    [CompressionEncoding::Gzip, CompressionEncoding::Zstd];

/// A generated tonic server (or `tonic::server::Grpc`) that accepts and sends every encoding of [`ENCODINGS`].
#[macro_export]
macro_rules! compressed {
    ($server:expr) => {{
        let mut server = $server;
        for encoding in $crate::grpc::ENCODINGS {
            server = server.accept_compressed(encoding).send_compressed(encoding);
        }
        server
    }};
}

/// Health's full service name.
pub const HEALTH: &str = "grpc.health.v1.Health";
/// Reflection's full service names.
pub const REFLECTION: [&str; 2] = [
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// The reflection builder both versions start from: `file_sets` (encoded descriptor sets) plus health's and both
/// reflection versions' descriptors, listing `served` (the server's own services) and health and reflection.
fn reflection_builder<'a>(
    file_sets: &[&'a [u8]],
    served: &[&str],
) -> tonic_reflection::server::Builder<'a> {
    let mut builder = tonic_reflection::server::Builder::configure()
        .include_reflection_service(false)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET);
    builder = builder.register_file_descriptor_set(served_files(file_sets, served));
    for name in served.iter().copied().chain([HEALTH]).chain(REFLECTION) {
        builder = builder.with_service_name(name);
    }
    builder
}

/// The files of `file_sets` a client of `served` needs: those declaring a served service, and what they import.
/// Another service's file is left out, and a kept file keeps only its served services, so reflection resolves no
/// service the server does not serve. A set that does not decode contributes nothing.
pub fn served_files(file_sets: &[&[u8]], served: &[&str]) -> prost_types::FileDescriptorSet {
    use prost::Message;
    let files: Vec<prost_types::FileDescriptorProto> = file_sets
        .iter()
        .filter_map(|set| prost_types::FileDescriptorSet::decode(*set).ok())
        .flat_map(|set| set.file)
        .collect();
    let declares_served = |f: &prost_types::FileDescriptorProto| {
        f.service.iter().any(|svc| {
            let full = format!("{}.{}", f.package(), svc.name());
            served.contains(&full.as_str())
        })
    };
    let mut wanted: Vec<&str> = files
        .iter()
        .filter(|f| declares_served(f))
        .map(|f| f.name())
        .collect();
    let mut i = 0;
    while i < wanted.len() {
        if let Some(file) = files.iter().find(|f| f.name() == wanted[i]) {
            for dep in &file.dependency {
                if !wanted.contains(&dep.as_str()) {
                    wanted.push(dep);
                }
            }
        }
        i += 1;
    }
    let keep = files
        .iter()
        .filter(|f| wanted.contains(&f.name()))
        .map(|f| {
            let mut f = f.clone();
            let package = f.package().to_string();
            f.service
                .retain(|svc| served.contains(&format!("{package}.{}", svc.name()).as_str()));
            f
        })
        .collect();
    prost_types::FileDescriptorSet { file: keep }
}

/// `grpc.reflection.v1.ServerReflection` over `file_sets`, listing `served` plus health and reflection.
pub fn reflection_v1(
    file_sets: &[&[u8]],
    served: &[&str],
) -> Result<
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
    tonic_reflection::server::Error,
> {
    Ok(compressed!(
        reflection_builder(file_sets, served).build_v1()?
    ))
}

/// `grpc.reflection.v1alpha.ServerReflection`, the same as [`reflection_v1`] in the older version.
pub fn reflection_v1alpha(
    file_sets: &[&[u8]],
    served: &[&str],
) -> Result<
    tonic_reflection::server::v1alpha::ServerReflectionServer<
        impl tonic_reflection::server::v1alpha::ServerReflection,
    >,
    tonic_reflection::server::Error,
> {
    Ok(compressed!(
        reflection_builder(file_sets, served).build_v1alpha()?
    ))
}

/// `grpc.health.v1.Health` over tonic-health's service, except for `Watch` of a service it does not know: the
/// protocol says the server sends `SERVICE_UNKNOWN` and keeps the call open (the service may appear later), where
/// tonic-health ends the call with `NOT_FOUND`. The services a server serves are all known from its start, so the
/// open call only ever carries that one message; it ends when the server stops, like every other `Watch`.
pub struct Health {
    inner: HealthService,
}

impl Health {
    /// The health service and the reporter that sets its statuses (`""`, the server as a whole, starts
    /// `SERVING`).
    pub fn new() -> (HealthReporter, HealthServer<Health>) {
        let reporter = HealthReporter::new();
        let inner = HealthService::from_health_reporter(reporter.clone());
        (reporter, compressed!(HealthServer::new(Health { inner })))
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

fn unknown() -> HealthCheckResponse {
    HealthCheckResponse {
        status: ServingStatus::ServiceUnknown as i32,
    }
}

#[tonic::async_trait]
impl tonic_health::pb::health_server::Health for Health {
    type WatchStream = WatchStream;

    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.inner.check(request).await
    }

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        match self.inner.watch(request).await {
            Ok(known) => Ok(Response::new(Box::pin(known.into_inner()))),
            Err(e) if e.code() == tonic::Code::NotFound => {
                // The server's own status stream (`""`, always known) keeps the call open exactly as long as every
                // other `Watch`; its messages are not this service's, so only `SERVICE_UNKNOWN` is sent.
                let whole = self
                    .inner
                    .watch(Request::new(HealthCheckRequest {
                        service: String::new(),
                    }))
                    .await?
                    .into_inner();
                let silent = whole.filter_map(|_| std::future::ready(None));
                Ok(Response::new(Box::pin(
                    futures::stream::once(std::future::ready(Ok(unknown()))).chain(silent),
                )))
            }
            Err(e) => Err(e),
        }
    }
}

/// HTTP/2 keepalive of a server's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// How long a connection may be idle before the server pings it.
    pub interval: Duration,
    /// How long the server waits for the ping's answer before it closes the connection.
    pub timeout: Duration,
}

impl Keepalive {
    /// The defaults: a ping after 30 s idle, answered within 20 s.
    pub const DEFAULT: Keepalive = Keepalive {
        interval: Duration::from_secs(30),
        timeout: Duration::from_secs(20),
    };

    /// From the `keepalive_interval_ms` and `keepalive_timeout_ms` keys; the error names the key. An interval under
    /// one second would ping busy clients' connections for nothing; a timeout must leave the answer time to come.
    pub fn from_millis(
        interval_ms: u64,
        timeout_ms: u64,
    ) -> Result<Keepalive, (&'static str, String)> {
        if interval_ms < 1000 {
            return Err((
                "keepalive_interval_ms",
                format!("{interval_ms}: must be at least 1000"),
            ));
        }
        if timeout_ms < 100 {
            return Err((
                "keepalive_timeout_ms",
                format!("{timeout_ms}: must be at least 100"),
            ));
        }
        Ok(Keepalive {
            interval: Duration::from_millis(interval_ms),
            timeout: Duration::from_millis(timeout_ms),
        })
    }

    /// `builder` with this keepalive.
    pub fn apply<L>(&self, builder: tonic::transport::Server<L>) -> tonic::transport::Server<L> {
        builder
            .http2_keepalive_interval(Some(self.interval))
            .http2_keepalive_timeout(Some(self.timeout))
    }
}

/// How much of its request one call may send before the server reads it: the HTTP/2 stream receive window. Small
/// by default (HTTP/2's own initial window, also gRPC's), so a request of megabytes arrives in steps read as they
/// come instead of one burst the connection's reader, and every other call on the connection, wait behind. The
/// connection's window is at least [`ReceiveWindow::MIN_CONNECTION_BYTES`], so many calls upload at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveWindow {
    stream: u32,
}

impl ReceiveWindow {
    /// A call's window by default: 65 535 bytes.
    pub const DEFAULT: ReceiveWindow = ReceiveWindow { stream: 65_535 };
    /// The smallest a call's window may be: one frame of HTTP/2's smallest maximum size.
    pub const MIN_BYTES: u32 = 16 * 1024;
    /// The largest a call's window may be.
    pub const MAX_BYTES: u32 = 16 * 1024 * 1024;
    /// The connection's window, at least.
    pub const MIN_CONNECTION_BYTES: u32 = 1024 * 1024;

    /// A call's window of `bytes`, or why it is out of range.
    pub fn from_bytes(bytes: u32) -> Result<ReceiveWindow, String> {
        if (Self::MIN_BYTES..=Self::MAX_BYTES).contains(&bytes) {
            Ok(ReceiveWindow { stream: bytes })
        } else {
            Err(format!(
                "{bytes}: must be between {} and {}",
                Self::MIN_BYTES,
                Self::MAX_BYTES
            ))
        }
    }

    /// A call's window, in bytes.
    pub fn stream_bytes(&self) -> u32 {
        self.stream
    }

    /// The connection's window, in bytes: the call's, or [`Self::MIN_CONNECTION_BYTES`] when that is larger.
    pub fn connection_bytes(&self) -> u32 {
        self.stream.max(Self::MIN_CONNECTION_BYTES)
    }

    /// `builder` with these windows.
    pub fn apply<L>(&self, builder: tonic::transport::Server<L>) -> tonic::transport::Server<L> {
        builder
            .initial_stream_window_size(Some(self.stream_bytes()))
            .initial_connection_window_size(Some(self.connection_bytes()))
    }
}

#[cfg(test)]
#[path = "grpc_tests.rs"]
mod tests;
