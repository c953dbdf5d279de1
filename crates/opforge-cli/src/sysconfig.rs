//! `opforge lib cflags` and `opforge lib ldflags`: what a C or C++ compiler
//! needs to build an op library, as TensorFlow's
//! `tf.sysconfig.get_compile_flags()` / `get_link_flags()`, so that
//! TensorFlow's documented build line works unchanged:
//!
//! ```text
//! c++ -std=c++17 -shared -fPIC -O2 zero_out.cc -o zero_out.so \
//!     $(opforge lib cflags) $(opforge lib ldflags)
//! ```
//!
//! The include directory holds the C ABI's `opforge/opforge.h` and the
//! TensorFlow C++ layer (`tensorflow/core/framework/op_kernel.h`, ...):
//! the source tree's `include/` when it still holds exactly the headers
//! this binary was built with, else a copy written under the user's cache
//! directory. The layer's Eigen is the system's (Eigen 3.4: Debian's
//! `libeigen3-dev`), found by `opforge_loader::build_flags` (which the
//! Python package's `opforge.sysconfig` uses too).

use crate::CliError;
use opforge_loader::build_flags::compile_flags;
use std::io::Write;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/headers.rs"));

/// The include directory of the source tree this binary was built from.
const SOURCE_INCLUDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");

/// Whether `dir` holds every header this binary embeds, unchanged.
fn holds_headers(dir: &Path) -> bool {
    HEADERS
        .iter()
        .all(|(rel, text)| std::fs::read_to_string(dir.join(rel)).ok().as_deref() == Some(*text))
}

/// The directory holding `opforge/opforge.h` and the TensorFlow layer's
/// headers of this opforge (see the module documentation).
pub fn include_dir() -> Result<PathBuf, CliError> {
    let source = Path::new(SOURCE_INCLUDE);
    if holds_headers(source) {
        return Ok(source
            .canonicalize()
            .unwrap_or_else(|_| source.to_path_buf()));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let dir = cache
        .join("opforge")
        .join(env!("CARGO_PKG_VERSION"))
        .join("include");
    if !holds_headers(&dir) {
        for (rel, text) in HEADERS {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, text)?;
        }
    }
    Ok(dir)
}

/// `opforge lib cflags`: the include directory of this opforge's headers,
/// then the flags of [`opforge_loader::build_flags::compile_flags`] (Eigen,
/// its alignment, and for C++ what lets the library unload); `warn` gets
/// how to install Eigen when it is missing.
pub fn cflags(out: &mut dyn Write, warn: &mut dyn Write, lang_c: bool) -> Result<(), CliError> {
    let (flags, missing) = compile_flags(&include_dir()?, lang_c);
    if let Some(m) = missing {
        writeln!(warn, "opforge lib cflags: {m}")?;
    }
    writeln!(out, "{}", flags.join(" "))?;
    Ok(())
}

/// `opforge lib ldflags`: an op library links no opforge library (every
/// call crosses the C ABI through the table the host passes to init), so
/// there is nothing to link: an empty line, for the build line's
/// `$(opforge lib ldflags)`.
pub fn ldflags(out: &mut dyn Write) -> Result<(), CliError> {
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_loader::build_flags::eigen_dir;

    #[test]
    fn the_embedded_headers_are_the_include_directory() {
        let rels: Vec<&str> = HEADERS.iter().map(|(r, _)| *r).collect();
        assert!(rels.contains(&"opforge/opforge.h"), "{rels:?}");
        assert!(
            rels.contains(&"tensorflow/core/framework/op_kernel.h"),
            "{rels:?}"
        );
        assert!(holds_headers(Path::new(SOURCE_INCLUDE)));
    }

    #[test]
    fn cflags_name_the_include_directory_and_the_alignment() {
        let (mut out, mut warn) = (Vec::new(), Vec::new());
        cflags(&mut out, &mut warn, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        let dir = include_dir().unwrap();
        assert!(text.starts_with(&format!("-I{} ", dir.display())), "{text}");
        assert!(
            text.contains(" -DEIGEN_MAX_ALIGN_BYTES=64 -fvisibility-inlines-hidden"),
            "{text}"
        );
        assert_eq!(warn.is_empty(), eigen_dir().is_some());
        // C: the include directory only.
        let mut c = Vec::new();
        cflags(&mut c, &mut warn, true).unwrap();
        assert_eq!(
            String::from_utf8(c).unwrap(),
            format!("-I{}\n", dir.display())
        );
    }
}
