//! Benchmarks for llm-gateway and session-processor (docs/benchmarks.md).
//!
//! - [`fixtures`]: the recorded provider streams of `shared/fake-provider/fixtures/`, scaled up to many text deltas
//!   for the criterion micro-benchmarks (`benches/`).
//! - [`floor`]: the floor, a trivial relay (SSE frames in, one gRPC message out per frame, no decoding) that the load
//!   generator measures in the same run as the gateway, so every figure has its floor beside it.
//! - [`stats`]: percentiles of latency samples.
//! - [`procfs`]: RSS and CPU time of a process, read from `/proc`.
//! - [`procs`]: starting the benchmarked processes on loopback; the machine's description.
//! - [`redisinfo`]: Redis command counts (`INFO commandstats`).
//! - [`promtext`]: a `/metrics` scrape and a histogram's sums and counts from it.
//! - [`redis_kit`]: private `redis-server`s, a Redis Cluster and a Sentinel-managed primary on loopback, for
//!   `procbench` and the end-to-end tests.
//!
//! Binaries: `loadgen` (the load generator), `floor-relay` (the floor as its own process) and `procbench` (the
//! processor benchmark: sessions through session-processor + llm-gateway + Redis).

pub mod fixtures;
pub mod floor;
pub mod procfs;
pub mod procs;
pub mod promtext;
pub mod redis_kit;
pub mod redisinfo;
pub mod stats;
