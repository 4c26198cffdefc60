//! session-processor: runs multi-step LLM conversations with tools through llm-gateway and persists every message
//! and part in Redis.
//!
//! Module map:
//! - [`ids`]: ascending, sortable ids for sessions, messages and parts.
//! - [`processor`]: the Processor, a state machine with no I/O: gateway events in, part changes out.
//! - [`store`]: the one place that talks to Redis: sessions, messages, parts, the event log, leases.
//! - [`tools`]: built-in workspace tools confined to the session's workspace, permission rules, doom-loop detection.

pub mod ids;
pub mod processor;
pub mod store;
pub mod tools;
