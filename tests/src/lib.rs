//! e2e harness
