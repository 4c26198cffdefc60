//! session-processor: runs multi-step LLM conversations with tools through llm-gateway and persists every message
//! and part in Redis.
//!
//! Module map:
//! - [`ids`]: ascending, sortable ids for sessions, messages and parts.
//! - [`maps`]: the maps and sets keyed by ids on a prompt's path, with a fast seeded hasher.
//! - [`names`]: the names callers and operators choose (tenants): the one rule, shared by config, the API and the
//!   workspace layout.
//! - [`processor`]: the Processor, a state machine with no I/O: gateway events in, part changes out.
//! - [`step_event`]: a gateway stream's event as the loop reads it, a delta decoded without an allocation.
//! - [`store`]: the one place that talks to Redis: sessions, messages, parts, the event log, leases.
//! - [`event_wire`]: event ids and the batch encoding of the event log, shared by the store and the hub.
//! - [`events`]: the per-replica event hub: live delivery to local streams, coalesced writes to the event log.
//! - [`history`]: stored messages → the gateway conversation; the loop's exit rule and model priority.
//! - [`engine`]: the runLoop (a pure policy and the driver that performs it) and the engine that owns storage, the
//!   gateway client and the running loops.
//! - [`server`]: the `SessionService` gRPC server; its `routes` serve the calls that stream a session's events with a
//!   codec that writes each event straight from what this replica keeps.
//! - [`api`]: the API's edge: request validation and limits, tenant checks, error details, paging by bytes.
//! - [`config`]: typed, validated configuration and agents.
//! - [`tools`]: built-in workspace tools confined to the session's workspace, permission rules, doom-loop detection.
//! - [`context`]: token estimates and usable context for compaction; the summary step's prompts.
//! - [`retry`]: whether and when a failed step runs again.
//! - [`structured`]: structured output through a dedicated, schema-validated tool.
//! - [`title`]: the session title request and its clean-up.
//! - [`snapshot`]: git-tree snapshots of session workspaces, kept outside them, and the diffs between them.
//! - [`diff_api`]: the `GetDiff` RPC over those snapshots.
//! - [`diagnostics`]: the `Diagnose` RPC: a session's stored data checked against the invariants.
//! - [`gateway_pool`]: the channels to llm-gateway replicas and how a step picks one.
//! - [`metrics`]: the processor's Prometheus metrics.
//! - [`app`]: start-up shared by `main` and the tests: config, Redis, gateway client, sweeper, server.

pub mod api;
pub mod app;
pub mod config;
pub mod context;
pub mod diagnostics;
pub mod diff_api;
pub mod engine;
pub mod event_wire;
pub mod events;
pub mod gateway_pool;
pub mod history;
pub mod ids;
pub mod maps;
pub mod metrics;
pub mod names;
pub mod processor;
pub mod retry;
pub mod runtimes;
pub mod server;
pub mod snapshot;
pub mod step_event;
pub mod store;
pub mod structured;
pub mod title;
pub mod tools;
