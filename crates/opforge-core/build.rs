//! Compiles opforge's `.proto` files with protox (a pure-Rust protobuf
//! compiler, so no `protoc` is needed) and generates prost types from them.
//! The encoded descriptor set is also written to `OUT_DIR` so the text format
//! and JSON mapping can be driven by prost-reflect at run time.

use prost::Message;
use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "tensorflow/types.proto",
    "tensorflow/tensor_shape.proto",
    "tensorflow/resource_handle.proto",
    "tensorflow/tensor.proto",
    "tensorflow/full_type.proto",
    "tensorflow/attr_value.proto",
    "tensorflow/op_def.proto",
    "tensorflow/node_def.proto",
    "tensorflow/versions.proto",
    "tensorflow/function.proto",
    "tensorflow/graph_debug_info.proto",
    "tensorflow/graph.proto",
];

fn main() {
    println!("cargo:rerun-if-changed=proto");
    println!("cargo:rerun-if-env-changed=OPFORGE_OPS_TO_REGISTER");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));

    let fds = protox::compile(PROTOS, ["proto"]).unwrap_or_else(|e| panic!("protox: {e}"));
    std::fs::write(out.join("tensorflow_descriptor.bin"), fds.encode_to_vec())
        .expect("write descriptor set");
    let mut config = prost_build::Config::new();
    config.enable_type_names();
    config.btree_map(["."]);
    // An AttrValue is stored per attr of every node (three maps per node in
    // a graph import and run): inline, its `tensor` (a whole TensorProto)
    // and `list` variants made every value ~400 bytes and every map leaf
    // ~4.7 KB. Boxed, the value is the size of its small variants.
    config.boxed(".tensorflow.AttrValue.value.tensor");
    config.boxed(".tensorflow.AttrValue.value.list");
    config
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("prost-build: {e}"));

    // Selective registration (TensorFlow's SHOULD_REGISTER_OP): when
    // OPFORGE_OPS_TO_REGISTER names a file with one op name per line, only
    // those ops are registered by this build.
    let selected = match std::env::var("OPFORGE_OPS_TO_REGISTER") {
        Ok(given) if !given.is_empty() => {
            // Build scripts run in the package's directory; resolve a
            // relative path against the directory cargo was started in.
            let mut path = PathBuf::from(&given);
            if path.is_relative() {
                if let Some(pwd) = std::env::var_os("PWD") {
                    path = PathBuf::from(pwd).join(path);
                }
            }
            let path = path.display().to_string();
            println!("cargo:rerun-if-changed={path}");
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!("OPFORGE_OPS_TO_REGISTER={given} (read as {path}): {e}")
            });
            let names: Vec<String> = text
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            format!("Some(&{names:?})")
        }
        _ => "None".to_string(),
    };
    std::fs::write(
        out.join("selective_registration.rs"),
        format!("/// Ops this build registers, or `None` for all.\npub const OPS_TO_REGISTER: Option<&[&str]> = {selected};\n"),
    )
    .expect("write selective_registration.rs");
}
