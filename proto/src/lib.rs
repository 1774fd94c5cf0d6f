//! Baton's gRPC API (`baton.v1`): messages and tonic stubs generated from `proto/baton/v1`.
//!
//! Other languages generate their own stubs from the same `.proto` files.
//!
//! Besides the generated code this crate holds the few pure rules that the server and the
//! client must apply identically (secret redaction, safe agent session ids), so that neither
//! depends on the other.

pub mod agent;
pub mod codec;
pub mod details;
pub mod redact;

/// `baton.v1`: every message and service.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1 {
    tonic::include_proto!("baton.v1");
}

/// The encoded `FileDescriptorSet` of `baton.v1`, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/baton_descriptor.bin"));
