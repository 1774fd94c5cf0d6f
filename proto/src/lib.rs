//! Baton's gRPC API (`baton.v1`): messages and tonic stubs generated from `proto/baton/v1`.
//!
//! Other languages generate their own stubs from the same `.proto` files.

#![allow(clippy::all, clippy::pedantic, missing_docs)]

/// `baton.v1`: every message and service.
pub mod v1 {
    tonic::include_proto!("baton.v1");
}

/// The encoded `FileDescriptorSet` of `baton.v1`, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/baton_descriptor.bin"));
