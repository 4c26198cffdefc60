//! Compiles `proto/` with protox (pure Rust, no `protoc`) and generates the tonic clients and servers.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not baked in when it is compiled: a build script compiled for one checkout is
    // reused by another that shares the target folder (same sources, same hash), and must read that one's files.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let files = [
        "llm/gateway/v1/gateway.proto",
        "llm/gateway/v1/hooks.proto",
        "llm/gateway/v1/keys.proto",
        "llm/sessions/v1/sessions.proto",
    ];
    let paths: Vec<PathBuf> = files.iter().map(|f| root.join(f)).collect();
    for p in &paths {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let fds = protox::compile(&paths, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        // Small encode buffers for every stream (src/codec.rs).
        .codec_path("crate::codec::ProstCodec")
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
