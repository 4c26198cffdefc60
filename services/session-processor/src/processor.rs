//! Processor (being written).
