//! Generated types for the product's public gRPC API.
//!
//! - [`gateway`]: `llm.gateway.v1`, the llm-gateway's generation and catalog API, and the `HooksService` that
//!   operators implement to transform generations (the gateway is its client).
//! - [`sessions`]: `llm.sessions.v1`, the session-processor's API.
//! - [`FILE_DESCRIPTOR_SET`]: the compiled descriptors, for gRPC server reflection.
//! - [`codec`]: the protobuf codec the generated code and the gateway's hand-wired routes use (small encode
//!   buffers, decode errors as the user chooses).

pub mod codec;

/// `llm.gateway.v1`: one model generation per call, streamed as unified events; and the hooks API.
pub mod gateway {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("llm.gateway.v1");
}

/// `llm.sessions.v1`: sessions, prompts and their persisted messages and parts.
pub mod sessions {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("llm.sessions.v1");
}

/// Encoded `FileDescriptorSet` of every `.proto` file, for `tonic-reflection`.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));
