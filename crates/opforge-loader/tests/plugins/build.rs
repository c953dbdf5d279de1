//! Builds a test plugin (`tests/plugins/NAME.rs`, a cdylib on the Rust
//! SDK) as a crate of its own under `CARGO_TARGET_TMPDIR`, and gives the
//! library's path. Included by the tests that load one
//! (`#[path = "plugins/build.rs"] mod plugin_build;`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The built library of `tests/plugins/{name}.rs`.
pub fn build_plugin(name: &str) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
crate-type = ["cdylib"]
path = "{src}"

[dependencies]
opforge-plugin = {{ path = "{sdk}" }}

# A crate of its own, not a member of the opforge workspace around it.
[workspace]
"#,
        src = here.join(format!("tests/plugins/{name}.rs")).display(),
        sdk = here.join("../opforge-plugin").display(),
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&dir)
        .args(["build", "--quiet", "--offline", "--target-dir"])
        .arg(dir.join("target"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building tests/plugins/{name}.rs failed");
    let lib = dir.join("target/debug").join(format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(lib.is_file());
    lib
}
