//! HTTP transport (stub, being written).
