//! Compiles `baton/v1/*.proto` with protox (pure Rust, so building needs no `protoc`) and
//! writes the descriptor set that server reflection serves.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "baton/v1/model.proto",
        "baton/v1/session.proto",
        "baton/v1/checkpoint.proto",
        "baton/v1/memory.proto",
        "baton/v1/brief.proto",
        "baton/v1/event.proto",
        "baton/v1/admin.proto",
        "baton/v1/search.proto",
        "baton/v1/thread.proto",
        "baton/v1/items.proto",
        "baton/v1/reservation.proto",
        "baton/v1/commit.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let fds = protox::compile(files, ["."])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("baton_descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Malformed requests are INVALID_ARGUMENT (see src/codec.rs).
        .codec_path("crate::codec::BatonCodec")
        .compile_fds(fds)?;
    Ok(())
}
