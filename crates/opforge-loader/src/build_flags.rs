//! The compiler flags of a C or C++ op library built against this
//! opforge's headers (`opforge lib cflags` in the CLI,
//! `opforge.sysconfig.get_compile_flags()` in Python, which both give the
//! include directory of the headers they ship): TensorFlow's C++ layer
//! needs Eigen 3.4 (the system's: Debian's `libeigen3-dev`) and its
//! alignment, and a C++ library needs two flags to stay unloadable.

use std::path::{Path, PathBuf};

/// The Eigen include directory (the one holding
/// `unsupported/Eigen/CXX11/Tensor`), if this machine has one:
/// `EIGEN3_INCLUDE_DIR`, then `pkg-config --cflags eigen3`, then
/// `/usr/include/eigen3` and `/usr/local/include/eigen3`.
pub fn eigen_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("unsupported/Eigen/CXX11/Tensor").is_file();
    if let Some(d) = std::env::var_os("EIGEN3_INCLUDE_DIR").map(PathBuf::from) {
        if has(&d) {
            return Some(d);
        }
    }
    if let Ok(o) = std::process::Command::new("pkg-config")
        .args(["--cflags-only-I", "eigen3"])
        .output()
    {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        for flag in text.split_whitespace() {
            if let Some(d) = flag.strip_prefix("-I").map(PathBuf::from) {
                if has(&d) {
                    return Some(d);
                }
            }
        }
    }
    ["/usr/include/eigen3", "/usr/local/include/eigen3"]
        .iter()
        .map(PathBuf::from)
        .find(|d| has(d))
}

/// Whether the C++ compiler of the build line (`$CXX`, else `c++`) is GCC,
/// which marks some statics of inline functions STB_GNU_UNIQUE (a library
/// holding one can never be unloaded) unless told `-fno-gnu-unique`.
fn cxx_is_gcc() -> bool {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    std::process::Command::new(cxx)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("Free Software Foundation"))
        .unwrap_or(false)
}

/// The flags for a library built against the headers in `include`: `-I`
/// it; for C++ (`lang_c` false) also Eigen's directory, Eigen's alignment
/// as TensorFlow builds it (`EIGEN_MAX_ALIGN_BYTES=64`: the layer maps
/// tensors as aligned), `-fvisibility-inlines-hidden` (a library that
/// exports its copies of the standard library's inline functions has
/// libstdc++ bind to them, which pins it for the life of the process) and,
/// with GCC, `-fno-gnu-unique`. The second value says how to install Eigen
/// when C++ flags were asked for and it is missing.
pub fn compile_flags(include: &Path, lang_c: bool) -> (Vec<String>, Option<String>) {
    let mut flags = vec![format!("-I{}", include.display())];
    if lang_c {
        return (flags, None);
    }
    let mut missing = None;
    match eigen_dir() {
        Some(d) => flags.push(format!("-I{}", d.display())),
        None => {
            missing = Some(
                "Eigen 3.4 was not found (the TensorFlow C++ layer needs \
                 unsupported/Eigen/CXX11/Tensor): install it (Debian/Ubuntu: apt-get install \
                 libeigen3-dev) or set EIGEN3_INCLUDE_DIR to the directory holding it"
                    .to_string(),
            )
        }
    }
    flags.push("-DEIGEN_MAX_ALIGN_BYTES=64".into());
    flags.push("-fvisibility-inlines-hidden".into());
    if cxx_is_gcc() {
        flags.push("-fno-gnu-unique".into());
    }
    (flags, missing)
}
