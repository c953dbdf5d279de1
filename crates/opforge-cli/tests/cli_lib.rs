//! `opforge lib inspect` and `--library FILE` on `ops list` / `ops show`,
//! with the C example and the loader's C probe library built by the system
//! C compiler.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Output;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cc(src: &Path, name: &str, defines: &[&str]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_lib");
    let src = src.strip_prefix(repo()).unwrap_or(src);
    opforge_testing::examples::build_c_library(src.to_str().unwrap(), &dir, name, defines)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn lib_inspect_prints_the_manifest_without_running_the_library() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_lib");
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("zero_out_inspect.loaded");
    let _ = std::fs::remove_file(&marker);
    let def = format!("-DZERO_OUT_MARKER=\"{}\"", marker.display());
    let lib = cc(
        &repo().join("examples/c_zero_out/zero_out.c"),
        "zo_cli",
        &[&def],
    );
    let o = opforge(&["lib", "inspect", lib.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["name"], "zero_out_c");
    assert_eq!(j["version"], "0.1.0");
    assert_eq!(
        j["abi"],
        serde_json::json!({"major": 1, "minor": 1, "min_host_minor": 1})
    );
    assert_eq!(j["ops"][0]["name"], "ZeroOut");
    assert_eq!(j["ops"][0]["output_arg"][0]["type"], "DT_INT32");
    assert_eq!(j["kernels"][0]["op"], "ZeroOut");
    assert_eq!(j["kernels"][0]["device"], "CPU");
    assert!(!marker.exists(), "lib inspect ran the library's code");

    let o = opforge(&["lib", "inspect", lib.to_str().unwrap(), "--format", "text"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // The summary only: no JSON before it.
    assert!(
        out.starts_with("zero_out_c 0.1.0 (opforge C ABI 1.1, runs on hosts 1.1+)\n"),
        "{out}"
    );
    assert!(!out.contains('{') && !out.contains("\"name\""), "{out}");
    assert!(
        out.contains("  this host (opforge C ABI 1.1): loads it\n"),
        "{out}"
    );
    assert!(
        out.contains("op ZeroOut(to_zero: int32) -> (zeroed: int32), shape function"),
        "{out}"
    );
    assert!(out.contains("  kernel ZeroOut on CPU\n"), "{out}");
    assert!(!marker.exists());
}

#[test]
fn lib_inspect_text_lists_attrs_kernels_and_gradients() {
    let lib = zero_out_lib();
    let o = opforge(&["lib", "inspect", &lib]);
    assert!(o.status.success(), "{}", text(&o).1);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = opforge(&["lib", "inspect", &lib, "--format", "text"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let gradients = j["gradients"].as_array().unwrap();
    assert!(!gradients.is_empty(), "{j}");
    for g in gradients {
        let line = format!(
            "  gradient of {}: {}\n",
            g["op"].as_str().unwrap(),
            g["form"].as_str().unwrap()
        );
        assert!(out.contains(&line), "{line:?} not in\n{out}");
    }
    assert_eq!(
        out.matches("\n  kernel ").count(),
        j["kernels"].as_array().unwrap().len(),
        "{out}"
    );
    assert!(
        out.contains(
            "  op ZeroOut(to_zero: T) -> (zeroed: T), shape function\n    attrs: T: \
             realnumbertype = DT_INT32; preserve_index: int = 0\n"
        ),
        "{out}"
    );
}

/// `crates/opforge-loader/tests/c/manifests.c` built with `defines`.
fn manifests_lib(name: &str, defines: &[&str]) -> PathBuf {
    cc(
        &repo().join("crates/opforge-loader/tests/c/manifests.c"),
        name,
        defines,
    )
}

#[test]
fn lib_inspect_fails_on_an_op_declared_twice() {
    let lib = manifests_lib("manifests_cli_twice", &["-DMANIFEST_TWICE"]);
    for format in ["json", "text"] {
        let o = opforge(&["lib", "inspect", lib.to_str().unwrap(), "--format", format]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(err.starts_with("error: INVALID_ARGUMENT: "), "{err}");
        assert!(err.contains("declares op 'ManifestOp' twice"), "{err}");
        assert!(out.is_empty(), "{out}");
    }
}

#[test]
fn lib_inspect_fails_with_loadings_reason_on_a_wrong_layout_hash() {
    let lib = manifests_lib("manifests_cli_hash", &[]);
    let mut bytes = std::fs::read(&lib).unwrap();
    let hash = b"d369ae65736de423";
    let at = bytes.windows(16).position(|w| w == hash).unwrap();
    bytes[at..at + 16].copy_from_slice(b"0123456789abcdef");
    let bad = lib.with_file_name("libmanifests_cli_bad_hash.so");
    std::fs::write(&bad, bytes).unwrap();
    let o = opforge(&["lib", "inspect", bad.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    // What the manifest says, then why this host refuses it.
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["name"], "manifests");
    assert!(
        err.starts_with("error: FAILED_PRECONDITION: op library '"),
        "{err}"
    );
    assert!(
        err.contains("its layout hash 0123456789abcdef is not the one of opforge C ABI 1.1"),
        "{err}"
    );
    let o = opforge(&["lib", "inspect", bad.to_str().unwrap(), "--format", "text"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("refuses it (the error below says why)"),
        "{out}"
    );
    assert!(err.contains("layout hash 0123456789abcdef"), "{err}");
    // Loading it (--library) gives the same reason.
    let o = opforge(&["ops", "list", "--library", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("layout hash 0123456789abcdef"),
        "{}",
        text(&o).1
    );
}

#[test]
fn lib_cycle_loads_and_unloads_with_flat_memory() {
    let lib = cc(
        &repo().join("examples/c_zero_out/zero_out.c"),
        "zo_cli_cycle",
        &[],
    );
    let o = opforge(&[
        "lib",
        "cycle",
        lib.to_str().unwrap(),
        "--times",
        "300",
        "--max-growth-kib",
        "2048",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("zero_out_c 0.1.0 ("), "{out}");
    assert!(
        out.contains(": 300 cycles of load, init, unload\n"),
        "{out}"
    );
    assert!(out.contains("unmapped after every unload: yes\n"), "{out}");
    assert!(
        out.contains("KiB over the 299 cycles after the first)"),
        "{out}"
    );
    let o = opforge(&["lib", "cycle", lib.to_str().unwrap(), "--times", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.starts_with("error: INVALID_ARGUMENT: "),
        "{}",
        text(&o).1
    );
    // A library that fails to load fails the command, naming the cycle.
    let twice = manifests_lib("manifests_cli_cycle_twice", &["-DMANIFEST_TWICE"]);
    let o = opforge(&["lib", "cycle", twice.to_str().unwrap(), "--times", "3"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.starts_with("error: INVALID_ARGUMENT: cycle 1 of 3: "),
        "{err}"
    );
}

#[test]
fn lib_inspect_fails_cleanly_on_files_without_a_manifest() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_lib");
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.so");
    std::fs::write(&junk, b"junk").unwrap();
    let o = opforge(&["lib", "inspect", junk.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.starts_with("error: INVALID_ARGUMENT: "), "{err}");
    let o = opforge(&["lib", "inspect", dir.join("missing.so").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.starts_with("error: NOT_FOUND: "),
        "{}",
        text(&o).1
    );
    // The opforge binary itself is a shared object without a manifest.
    let o = opforge(&["lib", "inspect", env!("CARGO_BIN_EXE_opforge")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("has no opforge manifest"),
        "{}",
        text(&o).1
    );
}

#[test]
fn ops_list_and_show_load_libraries() {
    let probe = cc(
        &repo().join("crates/opforge-loader/tests/c/probe.c"),
        "probe_cli",
        &[],
    );
    let p = probe.to_str().unwrap();
    let o = opforge(&["ops", "list", "--library", p]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let names: Vec<&str> = out.lines().collect();
    for n in ["ProbeAttrs", "ProbeForward", "MatMul"] {
        assert!(names.contains(&n), "{n} not in the list");
    }
    let o = opforge(&[
        "ops",
        "show",
        "ProbeAttrs",
        "--library",
        p,
        "--format",
        "json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["name"], "ProbeAttrs");
    assert_eq!(j["attr"][0]["name"], "scale");
    let o = opforge(&["ops", "show", "ProbeAttrs", "--library", p]);
    assert!(
        text(&o)
            .0
            .contains("probe_attrs(x, scale=2.0, offsets=[1, 2], mode='abc', name=None)"),
        "{}",
        text(&o).0
    );
    // The C ZeroOut (int32 only) conflicts with the Rust example's
    // (polymorphic): the second library is refused, naming both.
    let zo = cc(
        &repo().join("examples/c_zero_out/zero_out.c"),
        "zo_cli_conflict",
        &[],
    );
    let rust_zo = zero_out_lib();
    let o = opforge(&[
        "ops",
        "list",
        "--library",
        &rust_zo,
        "--library",
        zo.to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.starts_with("error: ALREADY_EXISTS: "), "{err}");
    assert!(err.contains("zero_out_c"), "{err}");
    assert!(err.contains("libzero_out"), "{err}");
}

#[test]
fn exec_and_shape_infer_take_libraries_too() {
    let probe = cc(
        &repo().join("crates/opforge-loader/tests/c/probe.c"),
        "probe_cli_exec",
        &[],
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_lib");
    let calls = dir.join("calls.jsonl");
    std::fs::write(
        &calls,
        r#"{"op": "ProbeForward", "inputs": [{"dtype": "DT_FLOAT", "shape": [2], "values": [1, 2]}]}"#,
    )
    .unwrap();
    let o = opforge(&[
        "exec",
        "--jsonl",
        calls.to_str().unwrap(),
        "--library",
        probe.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["outputs"][0]["values"],
        serde_json::json!([2.0, 4.0]),
        "{v}"
    );
    let cases = dir.join("shapes.jsonl");
    std::fs::write(&cases, r#"{"op": "ProbeShape", "ins": "[5]"}"#).unwrap();
    let o = opforge(&[
        "--library",
        probe.to_str().unwrap(),
        "shape",
        "infer",
        "--jsonl",
        cases.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("[d0_0,7]"), "{out}");
    // `lib` commands take the library as their argument, not --library.
    let o = opforge(&[
        "lib",
        "inspect",
        probe.to_str().unwrap(),
        "--library",
        probe.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("--library is not used"),
        "{}",
        text(&o).1
    );
}
