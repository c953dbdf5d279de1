//! `opforge new NAME` makes a crate whose `cargo build` gives an op library
//! that opforge loads and runs in every dtype its op declares, and whose
//! own `cargo test` passes;
//! `opforge lib cflags` points at the header.

use std::path::PathBuf;
use std::process::Command;

fn opforge(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_opforge"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run opforge")
}

/// Cargo in the new crate's directory, building into the crate's own
/// `target/` (where the test looks for the library) even when the caller
/// set CARGO_TARGET_DIR.
fn cargo(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .env_remove("CARGO_TARGET_DIR")
        .current_dir(dir)
        .output()
        .expect("run cargo")
}

#[test]
fn a_new_crate_builds_tests_and_loads() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_new");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let o = opforge(&root, &["new", "demo_ops"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let krate = root.join("demo_ops");
    for f in ["Cargo.toml", "src/lib.rs", "README.md"] {
        assert!(krate.join(f).exists(), "{f}");
    }
    // Again: the directory exists.
    let o = opforge(&root, &["new", "demo_ops"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists already"));
    let o = opforge(&root, &["new", "9lives"]);
    assert!(!o.status.success());

    let o = cargo(&krate, &["build", "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = cargo(&krate, &["test", "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let lib = krate.join(format!(
        "target/debug/{}demo_ops{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let lib = lib.to_str().unwrap();
    let o = opforge(&root, &["lib", "inspect", lib]);
    let manifest: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(manifest["name"], "demo_ops");
    assert_eq!(manifest["ops"][0]["name"], "DemoOpsSquare");
    // The op, as the host registered it, allows exactly the dtypes its
    // kernel declares (the manifest, read without running the library),
    // and runs in each of them: no "No OpKernel", no missing code.
    let kernel_types: Vec<String> = manifest["kernels"][0]["constraints"]["T"]
        .as_array()
        .expect("the kernel's T constraint")
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kernel_types,
        ["DT_HALF", "DT_BFLOAT16", "DT_FLOAT", "DT_DOUBLE"]
    );
    let o = opforge(
        &root,
        &[
            "--library",
            lib,
            "ops",
            "show",
            "DemoOpsSquare",
            "--format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let op: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(op["attr"][0]["name"], "T");
    assert_eq!(
        op["attr"][0]["allowed_values"]["list"]["type"],
        serde_json::json!(kernel_types)
    );
    let calls: String = kernel_types
        .iter()
        .map(|d| {
            format!(
                r#"{{"op":"DemoOpsSquare","inputs":[{{"dtype":"{d}","shape":[4],"values":[1.5,-2,0,3]}}]}}"#
            ) + "\n"
        })
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_opforge"))
        .args(["--library", lib, "exec", "--jsonl", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(calls.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), kernel_types.len());
    for (dtype, line) in kernel_types.iter().zip(&lines) {
        assert_eq!(line["outputs"][0]["dtype"], dtype.as_str(), "{line}");
        assert_eq!(
            line["outputs"][0]["values"],
            serde_json::json!([2.25, 4.0, 0.0, 9.0]),
            "{dtype}: {line}"
        );
    }
}

#[test]
fn cflags_name_the_directory_of_the_header() {
    let o = opforge(std::path::Path::new("."), &["lib", "cflags"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    let first = text.split_whitespace().next().expect("a flag");
    let dir = first.strip_prefix("-I").expect("-I<dir> first");
    let header = std::fs::read_to_string(PathBuf::from(dir).join("opforge/opforge.h")).unwrap();
    assert!(header.contains("OPFORGE_ABI_MAJOR"));
    let op_kernel = PathBuf::from(dir).join("tensorflow/core/framework/op_kernel.h");
    assert!(op_kernel.is_file(), "{}", op_kernel.display());
}
