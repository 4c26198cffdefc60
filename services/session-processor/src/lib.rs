//! session-processor: runs multi-step LLM conversations with tools through llm-gateway and persists every message
//! and part in Redis.
//!
//! Module map (docs/architecture.md has the whole one). Linked modules are public: what the binary, the end-to-end
//! tests and the benchmarks use; the others are the crate's own.
//! - [`ids`]: ascending, sortable ids for sessions, messages and parts.
//! - `maps`: the maps and sets keyed by ids on a prompt's path, with a fast seeded hasher.
//! - `names`: the names callers and operators choose (tenants): the one rule, shared by config, the API and the
//!   workspace layout.
//! - `event_wire`: event ids and the batch encoding of the event log, shared by the store and the hub.
//! - [`store`]: the one place that talks to Redis: [`store::Store`] hands out a handle per concern over one
//!   connection (sessions, the index, messages and parts, the event log, leases, the active set, a prompt's first
//!   write, the prompt queue, mailboxes, spend, statuses).
//! - [`processor`]: the Processor, a state machine with no I/O: gateway events in, part changes out; the step's
//!   parts, open blocks and tool calls in [`processor::StepParts`].
//! - `step_event`: a gateway stream's event as the loop reads it, a delta decoded without an allocation.
//! - `history`: stored messages → the gateway conversation; the loop's exit rule and model priority.
//! - `context`: token estimates and usable context for compaction; the summary step's prompts.
//! - `retry`: whether and when a failed step runs again, and the backoff.
//! - `structured`: structured output through a dedicated, schema-validated tool.
//! - `title`: the session title request and its clean-up.
//! - [`events`]: the per-replica event hub: live delivery to local streams, coalesced writes to the event log; what
//!   a loop publishes through it ([`events::Publisher`]) and its lease as the channel renews it
//!   ([`events::LoopLease`]).
//! - [`tools`]: built-in workspace tools confined to the session's workspace, permission rules, doom-loop detection.
//! - [`snapshot`]: git-tree snapshots of session workspaces, kept outside them, and the diffs between them.
//! - [`gateway_pool`]: the channels to llm-gateway replicas and how a step picks one.
//! - [`engine`]: the runLoop (a pure policy, and the driver and services that perform it, each holding only the
//!   store handles it uses) and [`engine::Engine`], which builds them and is what the API calls.
//! - `api`: the API's edge: request validation and limits, tenant checks, error details, paging by bytes.
//! - [`server`]: the `SessionService` gRPC server: the listener and a router to one handler file per RPC; its
//!   `routes` serve the calls that stream a session's events with a codec that writes each event straight from what
//!   this replica keeps.
//! - `diff_api`: the `GetDiff` RPC over the snapshots.
//! - [`diagnostics`]: the `Diagnose` RPC: a session's stored data checked against the invariants.
//! - [`config`]: typed, validated configuration and agents.
//! - [`metrics`]: the processor's Prometheus metrics.
//! - [`runtimes`]: a single-threaded runtime per core (or the shared one), each with its own gateway client and
//!   Redis connection.
//! - [`app`]: start-up shared by `main` and the tests: config, Redis, gateway client, sweeper, server.

mod api;
pub mod app;
pub mod config;
mod context;
pub mod diagnostics;
mod diff_api;
pub mod engine;
mod event_wire;
pub mod events;
pub mod gateway_pool;
mod history;
pub mod ids;
mod maps;
pub mod metrics;
mod names;
pub mod processor;
mod retry;
pub mod runtimes;
pub mod server;
pub mod snapshot;
mod step_event;
pub mod store;
mod structured;
mod title;
pub mod tools;
