//! Compiles the delegation protocol, the OpenAPI v2 document model and the
//! Kubernetes schemas with protox (no system protoc).
//!
//! `k8s/*.proto` (written by `k8s/gen.py`) become one encoded
//! `FileDescriptorSet`, `$OUT_DIR/k8s_descriptor_set.bin`, which `src/k8s.rs`
//! loads at run time to decode Kubernetes protobuf request bodies.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=delegation.proto");
    let fds = protox::compile(["delegation.proto"], ["."])?;
    // Bodies and chunks as `bytes::Bytes`: passed through without copies.
    tonic_prost_build::configure().bytes(".").compile_fds(fds)?;

    println!("cargo:rerun-if-changed=openapi");
    let fds = protox::compile(["openapi_v2.proto"], ["openapi"])?;
    tonic_prost_build::configure().compile_fds(fds)?;

    println!("cargo:rerun-if-changed=k8s");
    let mut k8s_protos: Vec<PathBuf> = std::fs::read_dir("k8s")?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    k8s_protos.retain(|path| path.extension().is_some_and(|ext| ext == "proto"));
    k8s_protos.sort();
    let names: Vec<PathBuf> = k8s_protos
        .iter()
        .filter_map(|path| path.file_name().map(PathBuf::from))
        .collect();
    let set = protox::Compiler::new(["k8s"])?
        .include_source_info(false)
        .include_imports(true)
        .open_files(names)?
        .encode_file_descriptor_set();
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("k8s_descriptor_set.bin");
    std::fs::write(out, set)?;
    Ok(())
}
