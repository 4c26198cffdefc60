//! Redis persistence (being written).
