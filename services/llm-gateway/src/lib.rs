//! llm-gateway: a stateless gRPC service that runs one model generation per call against any configured provider
//! and streams it back as unified events.
//!
//! Module map:
//! - [`config`]: the typed, validated configuration (file + environment).
//! - [`catalog`]: models, limits, capabilities and prices; exact integer nano-USD cost.
//! - [`model_names`]: aliases and bare names, resolved to catalog models.
//! - [`event`] / [`error`]: the unified events and the typed provider error.
//! - [`adapter`]: one pure translation per wire protocol, over the shared SSE parser and HTTP transport.
//! - [`calls`]: the calls that are not generations, embeddings and token counts: one answer each, over the same
//!   resolution, credentials, retries, spans and metrics.
//! - [`generate`]: one generation end to end: resolve, hooks, build, send, retry and fall back before the first
//!   event, decode, cost; and the reloadable state ([`generate::Gateway::reload`]).
//! - [`limits`]: the `[limits]` table (request and provider-stream sizes) and the helpers that enforce them;
//!   [`census`] counts what they bound in a request still encoded.
//! - [`hooks`]: declarative hooks and external `HooksService` calls that transform a request before it is built.
//! - [`offload`]: large requests prepared on the blocking pool, off the async workers.
//! - [`metrics`]: Prometheus metrics and the `/metrics` listener.
//! - [`grpc`]: proto ↔ domain conversions and error statuses.
//! - [`http`]: the HTTP front door: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages over the same
//!   core, embeddings and token counts over [`calls`].
//! - [`validate`]: request validation (shape, limits, and the rules that depend on the resolved model).
//! - [`server`]: the tonic service, auth, health, reflection and graceful shutdown; `server::run` is the one entry
//!   that both `main` and the tests call.

pub mod adapter;
pub mod calls;
pub mod catalog;
pub mod census;
pub mod config;
pub mod convert;
pub mod error;
pub mod event;
pub mod generate;
pub mod headers;
pub mod hooks;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod model_names;
pub mod offload;
pub mod prep_pool;
pub mod protocol;
mod routes;
pub mod rpc;
pub mod server;
pub mod settings;
pub mod start_error;
pub mod status;
pub mod tracing_spans;
pub mod validate;
