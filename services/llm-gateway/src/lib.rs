//! llm-gateway: a stateless gRPC service that runs one model generation per call against any configured provider
//! and streams it back as unified events.
//!
//! Module map, bottom up: a module uses only the modules before it (docs/architecture.md has the whole map;
//! `scripts/shape.py` checks the order). Linked modules are public: what the binary, the end-to-end tests and the
//! benchmarks use; the others are the crate's own.
//! - `error` / [`event`]: the typed provider error (and bounded text); the unified events.
//! - `protocol`: the wire protocols, shared by the catalog, the configuration and the adapters.
//! - `settings`: the configuration error that names its key, and secrets that never print.
//! - `headers`: the headers only the gateway may set (callers and hooks cannot).
//! - [`catalog`]: models, limits, capabilities and prices; exact integer nano-USD cost.
//! - `model_names`: aliases and bare names, resolved to catalog models.
//! - `limits`: the `[limits]` table (request and provider-stream sizes) and the helpers that enforce them;
//!   `census` counts what they bound in a request still encoded.
//! - [`metrics`]: Prometheus metrics and the `/metrics` listener.
//! - `prep_pool`: the threads that prepare huge requests, under `SCHED_IDLE`.
//! - [`adapter`]: one pure translation per wire protocol, over the response framings and the HTTP transport, with
//!   each cloud's addressing, configuration and credentials in `adapter::cloud`.
//! - `hooks`: declarative hooks and external `HooksService` calls that transform a request before it is built.
//! - `start_error` / `status`: why a generation could not start; errors as gRPC statuses with rich details.
//! - [`convert`]: unified events → the wire, proto errors → domain.
//! - `validate`: request validation (shape, limits, and the rules that depend on the resolved model).
//! - `tracing_spans`: the `gen_ai` spans of a generation and its attempts.
//! - `offload`: large requests prepared on the blocking pool, off the async workers.
//! - [`config`]: the typed, validated configuration (file + environment).
//! - [`keys`]: caller identity: named keys of tenants (configured, or created at run time in Redis and cached on
//!   every replica), who a call is from; [`access`]: a caller admitted to a call, limited to its key's models;
//!   [`admin`]: `KeysService`, the admin API over the keys.
//! - [`generate`]: one generation end to end: resolve, hooks, build, send, retry and fall back before the first
//!   event, decode, cost; and the reloadable state ([`generate::Gateway::reload`]).
//! - `calls`: the calls that are not generations, embeddings and token counts: one answer each, over the same
//!   resolution, credentials, retries, spans and metrics.
//! - `rpc` / `routes`: `GatewayService`'s handlers, and those handlers over llm-proto's codec.
//! - [`server`]: the tonic service, auth, health, reflection and graceful shutdown; `server::run` is the one entry
//!   that both `main` and the tests call.
//! - [`http`]: the HTTP front door: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages over the same
//!   core, embeddings and token counts over `calls`.

pub mod access;
pub mod adapter;
pub mod admin;
mod calls;
pub mod catalog;
mod census;
pub mod config;
pub mod convert;
mod error;
pub mod event;
pub mod generate;
mod headers;
mod hooks;
pub mod http;
pub mod keys;
mod limits;
pub mod metrics;
mod model_names;
mod offload;
mod prep_pool;
mod protocol;
mod routes;
mod rpc;
pub mod server;
mod settings;
mod start_error;
mod status;
mod tracing_spans;
mod validate;
