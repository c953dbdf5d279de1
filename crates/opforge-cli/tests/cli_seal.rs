//! `opforge lib seal FILE`: the loader's C probe library (which registers
//! its ops by code and declares none) is sealed, inspected, loaded and run;
//! re-sealing, declared libraries, bad files, crashing and hanging inits
//! and tampered files are checked too.

mod common;
use common::*;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_seal");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cc(src: &Path, name: &str, defines: &[&str]) -> PathBuf {
    let src = src.strip_prefix(repo()).unwrap_or(src);
    opforge_testing::examples::build_c_library(src.to_str().unwrap(), &dir(), name, defines)
}

fn probe(name: &str) -> PathBuf {
    cc(
        &repo().join("crates/opforge-loader/tests/c/probe.c"),
        name,
        &[],
    )
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn inspect(lib: &Path) -> Value {
    let o = opforge(&["lib", "inspect", lib.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    serde_json::from_str(&out).unwrap()
}

/// Exit 1 with one `error: CODE: ...` line and no panic; returns stderr.
fn fails(args: &[&str], code: &str) -> String {
    let o = opforge(args);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(
        err.starts_with(&format!("error: {code}: ")),
        "{args:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn seal_records_what_init_registers_and_the_library_still_runs() {
    let lib = probe("probe_seal");
    let p = lib.to_str().unwrap();
    let before = inspect(&lib);
    assert_eq!(before["ops"], Value::Null);
    assert_eq!(before["kernels"], Value::Null);
    assert_eq!(before["sealed"], false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o750)).unwrap();
    }

    let o = opforge(&["lib", "seal", p]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("probe 0.0.1, 11 ops, 10 kernels, 3 gradients"),
        "{out}"
    );
    assert!(!out.contains("replacing"), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&lib).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o750, "the file keeps its permissions");
    }

    let j = inspect(&lib);
    assert_eq!(j["sealed"], true);
    assert_eq!(j["name"], "probe");
    let ops: Vec<&str> = j["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    for n in ["ProbeForward", "ProbeAttrs", "ProbeShape", "ProbeSquare"] {
        assert!(ops.contains(&n), "{n} not in {ops:?}");
    }
    // The OpDef is the one registration builds (attr defaults included).
    let attrs = j["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "ProbeAttrs")
        .unwrap();
    assert_eq!(attrs["attr"][0]["name"], "scale");
    assert_eq!(attrs["attr"][0]["default_value"]["f"], 2.0);
    assert_eq!(j["shape_fns"], json!(["ProbeShape"]));
    let square = j["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["op"] == "ProbeSquare")
        .unwrap();
    assert_eq!(square["device"], "CPU");
    assert_eq!(square["constraints"], json!({"T": ["DT_FLOAT"]}));
    assert_eq!(square["label"], "");
    assert_eq!(square["priority"], 0);
    let mut grads: Vec<(String, String)> = j["gradients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["op"].as_str().unwrap().to_string(),
                g["form"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    grads.sort();
    assert_eq!(
        grads,
        [
            ("ProbeScale".to_string(), "fn".to_string()),
            ("ProbeShape".to_string(), "not_differentiable".to_string()),
            ("ProbeSquare".to_string(), "nodes".to_string()),
        ]
    );
    let o = opforge(&["lib", "inspect", p, "--format", "text"]);
    assert!(
        text(&o)
            .0
            .contains("op ProbeShape(x: float) -> (y: float), shape function"),
        "{}",
        text(&o).0
    );

    // Sealing again replaces the declaration: the same bytes.
    let sealed = std::fs::read(&lib).unwrap();
    let o = opforge(&["lib", "seal", p]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("replacing its earlier sealed declaration"),
        "{out}"
    );
    assert_eq!(
        std::fs::read(&lib).unwrap(),
        sealed,
        "re-sealing is idempotent"
    );

    // It still loads (init is checked against the sealed declaration) and runs.
    let calls = dir().join("seal_calls.jsonl");
    std::fs::write(
        &calls,
        r#"{"op": "ProbeForward", "inputs": [{"dtype": "DT_FLOAT", "shape": [2], "values": [1, 2]}]}"#,
    )
    .unwrap();
    let o = opforge(&["exec", "--jsonl", calls.to_str().unwrap(), "--library", p]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["outputs"][0]["values"], json!([2.0, 4.0]), "{out}");
}

#[test]
fn a_declared_library_is_left_as_it_is() {
    let lib = cc(
        &repo().join("examples/c_zero_out/zero_out.c"),
        "zo_declared_seal",
        &[],
    );
    let bytes = std::fs::read(&lib).unwrap();
    let o = opforge(&["lib", "seal", lib.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("zero_out_c 0.1.0 declares its ops"), "{out}");
    assert!(out.contains("nothing to seal"), "{out}");
    assert_eq!(std::fs::read(&lib).unwrap(), bytes);
    assert_eq!(inspect(&lib)["sealed"], false);
}

#[test]
fn bad_files_are_clean_errors() {
    let d = dir();
    fails(
        &["lib", "seal", d.join("missing.so").to_str().unwrap()],
        "NOT_FOUND",
    );
    let junk = d.join("junk_seal.so");
    std::fs::write(&junk, b"this is not an ELF file").unwrap();
    fails(&["lib", "seal", junk.to_str().unwrap()], "INVALID_ARGUMENT");
    // An ELF file cut short (its section headers are gone).
    let lib = probe("probe_seal_cut");
    let bytes = std::fs::read(&lib).unwrap();
    let cut = d.join("cut_seal.so");
    for len in [8, 64, 4096, bytes.len() - 100] {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let o = opforge(&["lib", "seal", cut.to_str().unwrap()]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "len {len}: {err}");
        assert!(err.starts_with("error: "), "len {len}: {err}");
        assert!(!err.contains("panicked"), "len {len}: {err}");
        assert_eq!(
            std::fs::read(&cut).unwrap(),
            &bytes[..len],
            "a failed seal changes nothing"
        );
    }
    // An ELF file without a manifest: the opforge binary itself.
    let err = fails(
        &["lib", "seal", env!("CARGO_BIN_EXE_opforge")],
        "FAILED_PRECONDITION",
    );
    assert!(err.contains("has no opforge manifest"), "{err}");
}

#[test]
fn an_init_that_crashes_or_hangs_in_the_child_is_reported() {
    let zo = repo().join("examples/c_zero_out/zero_out.c");
    let lib = cc(
        &zo,
        "zo_abort_seal",
        &["-DZERO_OUT_NO_DECLARATION", "-DZERO_OUT_ABORT_INIT"],
    );
    let bytes = std::fs::read(&lib).unwrap();
    let err = fails(
        &["lib", "seal", lib.to_str().unwrap()],
        "FAILED_PRECONDITION",
    );
    assert!(err.contains("child process"), "{err}");
    assert!(err.contains("signal 6 (SIGABRT)"), "{err}");
    assert_eq!(std::fs::read(&lib).unwrap(), bytes, "nothing was written");

    let lib = cc(
        &zo,
        "zo_hang_seal",
        &["-DZERO_OUT_NO_DECLARATION", "-DZERO_OUT_HANG_INIT"],
    );
    let start = std::time::Instant::now();
    let err = fails(
        &["lib", "seal", lib.to_str().unwrap(), "--timeout", "1"],
        "DEADLINE_EXCEEDED",
    );
    assert!(err.contains("within 1 s"), "{err}");
    assert!(start.elapsed() < std::time::Duration::from_secs(30));

    // An init that fails with a status: the child's code comes back.
    let lib = cc(
        &zo,
        "zo_fail_seal",
        &["-DZERO_OUT_NO_DECLARATION", "-DZERO_OUT_FAIL_INIT"],
    );
    let bytes = std::fs::read(&lib).unwrap();
    let err = fails(&["lib", "seal", lib.to_str().unwrap()], "ABORTED");
    assert!(err.contains("in the child process failed"), "{err}");
    assert!(err.contains("init failed on purpose"), "{err}");
    assert_eq!(std::fs::read(&lib).unwrap(), bytes, "nothing was written");
}

#[test]
fn a_hand_written_c_library_is_sealed_and_then_inspected_and_run() {
    // The C example without its static declaration registers by code only:
    // inspect knows nothing of its ops until it is sealed.
    let zo = repo().join("examples/c_zero_out/zero_out.c");
    let lib = cc(&zo, "zo_c_seal", &["-DZERO_OUT_NO_DECLARATION"]);
    let p = lib.to_str().unwrap();
    let o = opforge(&["lib", "inspect", p]);
    assert!(o.status.success(), "{}", text(&o).1);
    let j: serde_json::Value = serde_json::from_str(&text(&o).0).unwrap();
    assert_eq!(j["ops"], serde_json::Value::Null);
    let o = opforge(&["lib", "seal", p]);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = opforge(&["lib", "inspect", p]);
    let j: serde_json::Value = serde_json::from_str(&text(&o).0).unwrap();
    assert_eq!(j["sealed"], true);
    assert_eq!(j["ops"][0]["name"], "ZeroOut");
    assert_eq!(j["ops"][0]["input_arg"][0]["type"], "DT_INT32");
    assert_eq!(j["kernels"][0]["op"], "ZeroOut");
    assert_eq!(j["shape_fns"], serde_json::json!(["ZeroOut"]));
    // Still a library that loads and runs.
    let calls = dir().join("zo_c_seal.jsonl");
    std::fs::write(
        &calls,
        r#"{"op": "ZeroOut", "inputs": [{"dtype": "DT_INT32", "shape": [3], "values": [7, 8, 9]}]}"#,
    )
    .unwrap();
    let o = opforge(&["exec", "--jsonl", calls.to_str().unwrap(), "--library", p]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(text(&o).0.contains(r#""values":[7,0,0]"#), "{}", text(&o).0);
}

#[test]
fn a_tampered_or_stale_sealed_declaration_is_refused() {
    let lib = probe("probe_seal_tamper");
    let p = lib.to_str().unwrap();
    let o = opforge(&["lib", "seal", p]);
    assert!(o.status.success(), "{}", text(&o).1);
    let sealed = std::fs::read(&lib).unwrap();
    // The sealed section starts with the seal record.
    let at = sealed
        .windows(13)
        .rposition(|w| w == br#""kind":"seal""#)
        .expect("the seal record");
    let newer = sealed
        .windows(10)
        .skip(at)
        .position(|w| w == b"ProbeNewer")
        .unwrap()
        + at;
    let mut bad = sealed.clone();
    bad[newer] ^= 0x01;
    std::fs::write(&lib, &bad).unwrap();
    let err = fails(&["lib", "inspect", p], "DATA_LOSS");
    assert!(err.contains("CRC mismatch"), "{err}");
    assert!(err.contains("opforge_manifest_sealed"), "{err}");
    // Loading reads the same declaration.
    fails(&["ops", "list", "--library", p], "DATA_LOSS");
    // Sealing again repairs it.
    let o = opforge(&["lib", "seal", p]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(std::fs::read(&lib).unwrap(), sealed);

    // The library record changed after sealing (same length): stale.
    let lib_rec = sealed
        .windows(17)
        .position(|w| w == br#""version":"0.0.1""#)
        .unwrap();
    let mut stale = sealed.clone();
    stale[lib_rec + 15] = b'9'; // "0.0.1" -> "0.0.9"
    std::fs::write(&lib, &stale).unwrap();
    let err = fails(&["lib", "inspect", p], "FAILED_PRECONDITION");
    assert!(err.contains("was made for probe 0.0.1"), "{err}");
    assert!(err.contains("changed after it was sealed"), "{err}");
}
