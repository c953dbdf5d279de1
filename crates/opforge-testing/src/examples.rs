//! The repository's op-library examples (`examples/zero_out`,
//! `examples/median_pool`, ...) built for tests and benchmarks: a nested
//! `cargo build -p NAME --lib` into a target directory of the caller's, so
//! the outer cargo's lock is not needed. Test binaries that share the
//! directory share the build (cargo's own lock serialises them, and the
//! second finds it done).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

/// The repository root (the workspace this crate belongs to).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The file name of a cdylib named `name` on this platform
/// (`libzero_out.so` on Linux).
pub fn cdylib_file_name(name: &str) -> String {
    format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

/// Builds the workspace package `package` (an op-library example) as a
/// cdylib into `target_dir/examples` (`target_dir` is a test's
/// `env!("CARGO_TARGET_TMPDIR")` or a bench's) and returns the library's
/// path. Each `(package, release)` is built once per process.
///
/// # Panics
/// If cargo cannot run or the build fails: this is test machinery, and the
/// message says which build failed (cargo's own output is on stderr).
pub fn build_example(package: &str, release: bool, target_dir: &Path) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<(String, bool), PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(p) = built.get(&(package.to_string(), release)) {
        return p.clone();
    }
    let target = target_dir.join("examples");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(repo_root())
        .args(["build", "--quiet", "-p", package, "--lib", "--target-dir"])
        .arg(&target);
    if release {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {package}: {e}"));
    assert!(
        status.success(),
        "cargo build -p {package} --lib failed ({status})"
    );
    let lib = target
        .join(if release { "release" } else { "debug" })
        .join(cdylib_file_name(package));
    assert!(lib.is_file(), "{} was not built", lib.display());
    built.insert((package.to_string(), release), lib.clone());
    lib
}

/// Compiles the C op library `src` (a path relative to the repository
/// root, e.g. `examples/c_zero_out/zero_out.c`) with the system C compiler
/// (`$CC`, else `cc`) as C99 with `-Wall -Wextra -Werror`, the extra `args`
/// (`-DNAME=...`) and the header's include directory, into
/// `dir/lib<name>.so`; its path. The `args` come first, so an `-I` among
/// them wins over the repository's header (a frozen header of an older
/// minor: [`frozen_include_dir`]).
///
/// # Panics
/// If there is no C compiler or the compile fails (test machinery).
pub fn build_c_library(src: &str, dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let out = dir.join(format!("lib{name}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"])
        .args(args)
        .arg("-I")
        .arg(repo_root().join("include"))
        .arg("-o")
        .arg(&out)
        .arg(repo_root().join(src))
        .status()
        .unwrap_or_else(|e| {
            panic!("the tests need a C compiler ({cc}: {e}): install one (apt-get install gcc) or set CC")
        });
    assert!(status.success(), "{cc} failed to build {src} as {name}");
    out
}

/// The include directory of the frozen header of ABI `major.minor`
/// (`crates/opforge-abi/tests/frozen/MAJOR.MINOR`): `-I` it in
/// [`build_c_library`]'s `args` to build a library exactly as one built
/// against that release of the header.
pub fn frozen_include_dir(major: u32, minor: u32) -> PathBuf {
    repo_root().join(format!("crates/opforge-abi/tests/frozen/{major}.{minor}"))
}
