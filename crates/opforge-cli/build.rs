//! Embeds every header of the repository's `include/` directory (the C ABI's
//! `opforge/opforge.h` and the TensorFlow C++ layer) in the CLI, so that
//! `opforge lib cflags` can write them out when the source tree is gone:
//! `$OUT_DIR/headers.rs` holds `HEADERS: &[(relative path, contents)]`,
//! listed from the directory (no hand-kept list).

use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let root = root
        .canonicalize()
        .expect("the repository's include/ directory");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    let mut src =
        String::from("/// Every header under include/: (path relative to it, contents).\n");
    src.push_str("pub const HEADERS: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f.strip_prefix(&root).expect("under include/");
        src.push_str(&format!(
            "    ({:?}, include_str!({:?})),\n",
            rel.to_string_lossy(),
            f.display().to_string()
        ));
    }
    src.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("headers.rs");
    std::fs::write(out, src).expect("writing headers.rs");
}
