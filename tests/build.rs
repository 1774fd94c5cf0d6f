//! Compiles the vendored etcd v3 API protos (tests/proto/etcd/, see their headers) with
//! protox, pure Rust as baton-proto's build is, into gRPC clients for baton-bench's etcd
//! rows (src/bin/baton-bench/etcd.rs). Clients only: nothing here serves etcd's API.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["etcd/etcdserverpb/rpc.proto", "etcd/mvccpb/kv.proto", "etcd/authpb/auth.proto"];
    println!("cargo:rerun-if-changed=build.rs");
    for file in files {
        println!("cargo:rerun-if-changed=proto/{file}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure().build_server(false).build_client(true).compile_fds(fds)?;
    Ok(())
}
