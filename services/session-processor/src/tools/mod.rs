//! Built-in tools (being written).
