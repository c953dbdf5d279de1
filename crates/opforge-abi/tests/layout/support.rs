//! Paths of the header and the frozen copies, and the system compilers.

use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------
// Paths and compilers
// ---------------------------------------------------------------------------

pub(crate) fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

pub(crate) fn header_path() -> PathBuf {
    include_dir().join("opforge/opforge.h")
}

pub(crate) fn frozen_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/frozen")
}

/// A fresh directory for one test's files.
pub(crate) fn work_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("opforge-abi-layout")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The compiler named by `var` (or `default`), checked to run.
pub(crate) fn compiler(var: &str, default: &str) -> String {
    let cc = std::env::var(var).ok().filter(|s| !s.trim().is_empty());
    let cc = cc.unwrap_or_else(|| default.to_string());
    match Command::new(&cc).arg("--version").output() {
        Ok(out) if out.status.success() => cc,
        Ok(out) => panic!(
            "the C ABI test needs a working compiler, but `{cc} --version` failed ({}): {}\n\
             Install gcc or clang, or set ${var} to one.",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "the C ABI test needs a C/C++ compiler, and `{cc}` cannot be run ({e}).\n\
             Install gcc or clang (e.g. `apt-get install gcc g++`), or set ${var} to one."
        ),
    }
}

pub(crate) fn cc() -> String {
    compiler("CC", "cc")
}

pub(crate) fn cxx() -> String {
    compiler("CXX", "c++")
}

/// Runs `cmd`, panicking with its output on failure; returns stdout.
pub(crate) fn run(mut cmd: Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {cmd:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
