//! `opforge new NAME`: a ready-to-build op-library crate.

use crate::CliError;
use opforge::Status;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The SDK crate of the source tree this binary was built from.
const SOURCE_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../opforge-plugin");

const CARGO_TOML: &str = include_str!("templates/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("templates/lib.rs.tmpl");
const README: &str = include_str!("templates/README.md.tmpl");

/// `my_ops` / `my-ops` -> `MyOps`.
fn camel(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The files of a new op-library crate named `name` whose SDK dependency
/// line is `sdk_dependency`.
pub fn crate_files(name: &str, sdk_dependency: &str) -> Vec<(&'static str, String)> {
    let op_camel = format!("{}Square", camel(name));
    let snake = format!("{}_square", name.replace('-', "_").to_ascii_lowercase());
    let fill = |t: &str| {
        t.replace("{{name}}", name)
            .replace("{{sdk_dependency}}", sdk_dependency)
            .replace("{{OP_CONST}}", &snake.to_ascii_uppercase())
            .replace("{{op_snake}}", &snake)
            .replace("{{Op}}", &op_camel)
            .replace("{{op}}", &op_camel)
    };
    vec![
        ("Cargo.toml", fill(CARGO_TOML)),
        ("src/lib.rs", fill(LIB_RS)),
        ("README.md", fill(README)),
        (".gitignore", "/target\n".to_string()),
    ]
}

/// `opforge new NAME`: creates `./NAME`, an op-library crate whose `cargo
/// build --release` makes the library and whose `cargo test` passes. The
/// SDK dependency is `sdk_path` if given, else the source tree this binary
/// was built from (when it is still there), else the SDK's version.
pub fn new_crate(name: &str, sdk_path: Option<&Path>, out: &mut dyn Write) -> Result<(), CliError> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return Err(Status::invalid_argument(format!(
            "'{name}' is not a crate name: use letters, digits, '_' and '-', starting with a letter"
        ))
        .into());
    }
    let dir = PathBuf::from(name);
    if dir.exists() {
        return Err(Status::already_exists(format!(
            "{} exists already; choose another name or remove it",
            dir.display()
        ))
        .into());
    }
    let source_sdk = Path::new(SOURCE_SDK);
    let sdk = match sdk_path {
        Some(p) => Some(
            p.canonicalize()
                .map_err(|e| Status::not_found(format!("--sdk-path {}: {e}", p.display())))?,
        ),
        None => source_sdk.join("Cargo.toml").exists().then(|| {
            source_sdk
                .canonicalize()
                .unwrap_or_else(|_| source_sdk.into())
        }),
    };
    let dependency = match sdk {
        Some(p) => format!(
            "opforge-plugin = {{ path = {:?} }}",
            p.display().to_string()
        ),
        None => format!("opforge-plugin = \"{}\"", env!("CARGO_PKG_VERSION")),
    };
    for (file, text) in crate_files(name, &dependency) {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text)?;
    }
    writeln!(
        out,
        "Created the op library crate {name}/ (op {}Square). Next: cd {name} && cargo build --release && cargo test",
        camel(name)
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(camel("my_ops"), "MyOps");
        assert_eq!(camel("demo-lib"), "DemoLib");
        let files = crate_files("my_ops", "opforge-plugin = \"0.1.0\"");
        let lib = &files[1].1;
        assert!(lib.contains("OpDefBuilder::new(\"MyOpsSquare\")"), "{lib}");
        assert!(lib.contains("pub const MY_OPS_SQUARE_KERNEL"), "{lib}");
        assert!(lib.contains("fn my_ops_square_grad"), "{lib}");
        assert!(!files.iter().any(|(_, t)| t.contains("{{")));
    }
}
