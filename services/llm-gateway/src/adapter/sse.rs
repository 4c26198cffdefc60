//! Incremental SSE parser (stub, being written).
