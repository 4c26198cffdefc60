//! HTTP error classification (stub, being written).
