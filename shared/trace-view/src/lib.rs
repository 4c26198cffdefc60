//! `trace-view`: a local OTLP/gRPC trace receiver that keeps the most recent traces in memory and prints each as a
//! tree over plain HTTP, so a newcomer sees a prompt's trace (caller → processor → gateway → provider) on one
//! machine without Jaeger. `make up` starts it and points both services at it; production exports to a real
//! collector instead (docs/operations.md, "Logs and traces").
//!
//! Modules: [`store`] (the bounded store of recent traces, pure), [`render`] (trees and lists as text, pure),
//! [`serve`] (the OTLP receiver and the HTTP listener, the I/O edge).

pub mod render;
pub mod serve;
pub mod store;
