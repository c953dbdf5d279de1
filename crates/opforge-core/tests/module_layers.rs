//! The modules of opforge-core form layers: each module uses only modules
//! of layers below its own (ARCHITECTURE.md's module table). This test
//! reads the sources and fails on any `crate::` path (or `$crate::` in a
//! macro, or a root re-export such as `crate::Registry`) that reaches up or
//! sideways, so a cycle such as the old {attrs, kernel, op_def, registry}
//! one cannot come back. Test code (`tests.rs`, `*_tests.rs`, a trailing
//! `#[cfg(test)] mod tests`) may use any module.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, bottom first; modules of one layer do not use each other.
const LAYERS: &[&[&str]] = &[
    &["error", "strings", "op_attr", "origin"],
    &["dtype"],
    &["proto"],
    &["op_def", "resource_handle"],
    &["signature", "tensor"],
    &["attrs", "resource"],
    &["compat", "device", "param"],
    &["kernel"],
    &["registry"],
    // shape_inference's harness (the INFER_OK driver) looks ops up.
    &["eager", "shape_inference"],
    &["graph"],
    &["autodiff"],
];

/// The modules the crate root re-exports items of, by item.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("DataType", "dtype"),
    ("Code", "error"),
    ("Result", "error"),
    ("Status", "error"),
    ("status", "error"),
    ("ensure", "error"),
    ("OpDefBuilder", "op_def"),
    ("Element", "tensor"),
    ("Tensor", "tensor"),
    ("TensorShape", "tensor"),
    ("dispatch", "tensor"),
    ("Registry", "registry"),
    ("OpRegistrationData", "registry"),
    ("register_op", "registry"),
    ("register_op_attr", "registry"),
    ("register_kernel", "registry"),
    ("register_kernel_for_types", "registry"),
    ("register_gradient", "autodiff"),
    ("register_not_differentiable", "autodiff"),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.is_file() && path.extension().is_some_and(|x| x == "rs") {
        out.push(path.to_path_buf());
    }
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    name == "tests" || name.ends_with("_tests")
}

/// The names following `crate::` (or `$crate::`) on a line, and those of a
/// `use crate::{a, b::c}` group.
fn crate_paths(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = &rest[..at];
        let word_start = before
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        rest = &rest[at + "crate::".len()..];
        if !word_start {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let head = item.trim().split("::").next().unwrap_or("").trim();
                if !head.is_empty() {
                    names.push(head.to_string());
                }
            }
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        names.push(name);
    }
    names
}

#[test]
fn every_module_uses_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if name != "lib" {
            modules.insert(name, ());
        }
    }
    let unlisted: Vec<&String> = modules.keys().filter(|m| layer_of(m).is_none()).collect();
    assert!(
        unlisted.is_empty(),
        "modules in no layer (add them to LAYERS and to ARCHITECTURE.md's module table): {unlisted:?}"
    );
    let mut violations = Vec::new();
    for module in modules.keys() {
        let own = layer_of(module).unwrap();
        let mut files = Vec::new();
        rust_files(&src.join(module), &mut files);
        rust_files(&src.join(format!("{module}.rs")), &mut files);
        for file in files.iter().filter(|f| !is_test_file(f)) {
            let text = std::fs::read_to_string(file).unwrap();
            let mut lines = text.lines().enumerate().peekable();
            while let Some((i, line)) = lines.next() {
                let line = line.trim();
                if line == "#[cfg(test)]"
                    && lines
                        .peek()
                        .is_some_and(|(_, next)| next.trim_start().starts_with("mod tests"))
                {
                    break;
                }
                if line.starts_with("//") {
                    continue;
                }
                for name in crate_paths(line) {
                    let used = ROOT_ITEMS
                        .iter()
                        .find(|(item, _)| *item == name)
                        .map_or(name.as_str(), |(_, m)| m);
                    if used == module {
                        continue;
                    }
                    if let Some(layer) = layer_of(used) {
                        if layer >= own {
                            violations.push(format!(
                                "{}:{}: {module} (layer {own}) uses {used} (layer {layer})",
                                file.strip_prefix(&src).unwrap().display(),
                                i + 1
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "module layering broken:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scanner_sees_paths_groups_and_macros() {
    assert_eq!(crate_paths("use crate::attrs::AttrMap;"), ["attrs"]);
    assert_eq!(
        crate_paths("use crate::{kernel::X, Status, registry};"),
        ["kernel", "Status", "registry"]
    );
    assert_eq!(
        crate_paths("$crate::registry::StaticRegistration::op(|| x)"),
        ["registry"]
    );
    assert!(crate_paths("let x = mycrate::foo;").is_empty());
}
