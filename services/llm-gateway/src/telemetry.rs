//! Logging and tracing set-up, shared with the session-processor (see the `llm-telemetry` crate).

pub use llm_telemetry::{Telemetry, init};
