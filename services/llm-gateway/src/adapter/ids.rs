//! Tool-call id rewriting (stub, being written).
