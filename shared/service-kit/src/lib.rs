//! Plumbing both services share, one concern per module:
//! - [`tls`]: TLS and mutual TLS from certificate files: the configuration keys, loading and validating the files
//!   at start-up, and tonic's server and client configurations built from them.
//! - [`auth`]: the `authorization: Bearer` value parsed per RFC 9110 (from gRPC metadata too), the constant-time
//!   token comparison and lookup, and the interceptor a command-line client sends its token with.
//! - [`names`]: the tenant-name rule both services check.
//! - [`env`]: where configuration reads environment variables from (the process, or a fixed list in tests).
//! - [`grpc`]: the gRPC conventions every server follows: gzip and zstd, reflection v1 and v1alpha listing only
//!   the served services, health `Watch` per the protocol, HTTP/2 keepalive.
//! - [`listen`]: the `[server]` keys both services read alike: listener addresses (the environment first), caller
//!   tokens the environment adds to, a gRPC listener's HTTP/2 settings.
//! - [`trace_context`]: the caller's W3C trace context from gRPC metadata, checked, to pass on to the calls a
//!   request makes.
//! - [`hand_wired`]: a gRPC service some of whose methods are served by hand, the rest by the generated server.
//! - [`raw`]: a codec that sends bytes as they are (requests no typed client can build, or encoded ahead of time).
//! - [`deadline`]: the caller's `grpc-timeout` honoured over the whole call, streams included, with
//!   `DEADLINE_EXCEEDED`.
//! - [`rpc_span`]: OpenTelemetry spans of gRPC calls per the RPC conventions, a `SERVER` span per call a server
//!   receives and a `CLIENT` span per call a client makes, each ended with the call's final status.
//! - [`coalesce`]: a connection wrapper under the HTTP/2 codec that sends a burst of frames in one system call.
//! - [`serve`]: the start-up error of a server and the SIGTERM/SIGINT shutdown signal.
//! - [`status`]: error statuses with `google.rpc.ErrorInfo` and `BadRequest` details.
//! - `test_certs` (feature `test-certs`): a small certificate authority with server and client certificates, for
//!   tests.
//! - `prerequisite` (feature `test-support`): what a test does when a toolchain or kernel feature it needs is
//!   missing: fail under CI, else skip loudly.

pub mod auth;
pub mod coalesce;
pub mod deadline;
pub mod env;
pub mod grpc;
pub mod hand_wired;
pub mod listen;
pub mod names;
pub mod raw;
pub mod rpc_span;
pub mod serve;
pub mod status;
pub mod tls;
pub mod trace_context;

#[cfg(any(test, feature = "test-certs"))]
pub mod test_certs;

#[cfg(any(test, feature = "test-support"))]
pub mod prerequisite;
