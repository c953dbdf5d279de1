//! The manifest rules, on libraries built from `tests/c/manifests.c` (and
//! files patched after the build, as a damaged or hand-edited file would
//! be): an op, kernel or gradient declared twice is refused at inspection
//! and at load, naming both records; a damaged record is not mistaken for
//! a missing library record; a wrong layout hash is refused by inspection's
//! verdict as by loading; a manifest that differs from what init registers
//! names the difference.

use opforge_core::registry::Registry;
use opforge_core::Code;
use opforge_loader::{inspect, Loader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `tests/c/manifests.c` built as `lib<name>.so` with `-D` flags.
fn build(name: &str, defines: &[&str]) -> PathBuf {
    opforge_testing::examples::build_c_library(
        "crates/opforge-loader/tests/c/manifests.c",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        name,
        defines,
    )
}

/// A copy of `lib` named `lib<name>.so` with the first `from` replaced by
/// `to` (of the same length): a record C wrote carries no CRC, so the
/// change is only seen in the record's content.
fn patched(lib: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    assert_eq!(from.len(), to.len());
    let mut bytes = std::fs::read(lib).unwrap();
    let at = bytes
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap_or_else(|| panic!("{from} is not in {}", lib.display()));
    bytes[at..at + to.len()].copy_from_slice(to.as_bytes());
    let out = lib.with_file_name(format!("lib{name}.so"));
    std::fs::write(&out, bytes).unwrap();
    out
}

/// Loads `lib` into a fresh registry: the error, and whether the library's
/// op got registered.
fn load_error(lib: &Path) -> (opforge_core::Status, bool) {
    let r = Arc::new(Registry::new());
    let e = Loader::new(r.clone()).load(lib).unwrap_err();
    (e, r.op_def("ManifestOp").is_ok())
}

#[test]
fn the_consistent_library_loads() {
    let lib = build("manifests_ok", &[]);
    let m = inspect(&lib).unwrap();
    m.check_host().unwrap();
    assert_eq!(m.ops.as_ref().unwrap().len(), 1);
    let r = Arc::new(Registry::new());
    Loader::new(r.clone()).load(&lib).unwrap();
    assert!(r.op_def("ManifestOp").is_ok());
}

#[test]
fn an_op_or_gradient_declared_twice_is_refused_naming_both_records() {
    for (name, define, what) in [
        ("manifests_twice", "-DMANIFEST_TWICE", "op 'ManifestOp'"),
        (
            "manifests_grad_twice",
            "-DMANIFEST_GRAD_TWICE",
            "a gradient of op 'ManifestOp'",
        ),
    ] {
        let lib = build(name, &[define]);
        let e = inspect(&lib).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
        let msg = e.message();
        assert!(
            msg.contains(&format!(
                "declares {what} twice, in the records at offsets "
            )),
            "{msg}"
        );
        // Both offsets: two numbers, the second after the first.
        let tail = msg.split("at offsets ").nth(1).unwrap();
        let offsets: Vec<usize> = tail
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .take(2)
            .map(|s| s.parse().unwrap())
            .collect();
        assert!(offsets.len() == 2 && offsets[0] < offsets[1], "{msg}");
        let (e, registered) = load_error(&lib);
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains(&format!("{what} twice")), "{e}");
        assert!(!registered, "a refused library registered its op");
    }
}

#[test]
fn a_damaged_library_record_is_not_reported_as_a_missing_one() {
    let lib = build("manifests_damage", &[]);
    // (name, from, to, what the error says besides "damaged" and "no CRC")
    let damages: [(&str, &str, &str, &[&str]); 3] = [
        // The kind's value: a kind no opforge defines, with the library
        // record's keys.
        (
            "manifests_damaged_kind",
            r#""kind":"library""#,
            r#""kind":"librarx""#,
            &[r#"under the kind "librarx""#],
        ),
        // The kind's key.
        (
            "manifests_damaged_key",
            r#""kind":"library""#,
            r#""kinx":"library""#,
            &[r#"no "kind" string (its keys: "#, "kinx"],
        ),
        // Another key of the library record.
        (
            "manifests_damaged_name",
            r#""name":"manifests""#,
            r#""nxme":"manifests""#,
            &["'name' (a string) is missing", "nxme"],
        ),
    ];
    for (name, from, to, says) in damages {
        let bad = patched(&lib, name, from, to);
        for e in [inspect(&bad).unwrap_err(), load_error(&bad).0] {
            assert_eq!(e.code(), Code::DataLoss, "{e}");
            let msg = e.message();
            for s in says.iter().chain(&["damaged", "no CRC"]) {
                assert!(msg.contains(s), "{s:?} not in {msg}");
            }
            assert!(!msg.contains("add OPFORGE_LIBRARY"), "{msg}");
        }
    }
    // Without a library record at all, the advice is to add one.
    let none = build("manifests_no_library", &["-DNO_LIBRARY_RECORD"]);
    let e = inspect(&none).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    assert!(e.message().contains("add OPFORGE_LIBRARY"), "{e}");
}

#[test]
fn a_wrong_layout_hash_is_refused_by_inspection_as_by_loading() {
    let lib = build("manifests_hash", &[]);
    let hash = opforge_abi::OPFORGE_LAYOUT_HASH_STR;
    let bad = patched(&lib, "manifests_bad_hash", hash, "0123456789abcdef");
    // The manifest reads; its verdict is loading's refusal.
    let m = inspect(&bad).unwrap();
    let verdict = m.check_host().unwrap_err();
    let (e, registered) = load_error(&bad);
    assert!(!registered);
    assert_eq!(verdict.code(), Code::FailedPrecondition);
    assert_eq!(verdict.to_string(), e.to_string());
    assert!(
        e.message().contains(&format!(
            "its layout hash 0123456789abcdef is not the one of opforge C ABI 1.1 ({hash})"
        )),
        "{e}"
    );
}

#[test]
fn a_manifest_that_differs_from_init_names_the_difference() {
    let cases: [(&str, &[&str], &str); 3] = [
        (
            "manifests_init_float",
            &["-DINIT_T=\"float\""],
            r#"op 'ManifestOp': input_arg[0].type is "DT_INT32" in the manifest, "DT_FLOAT" in what init registers"#,
        ),
        (
            "manifests_no_kernel",
            &["-DINIT_NO_KERNEL"],
            "the manifest declares the kernel ManifestOp on CPU, init does not register it",
        ),
        (
            "manifests_grad_nodes",
            &["-DMANIFEST_GRAD_FORM=\"nodes\""],
            r#"the gradient of op 'ManifestOp' has the form "nodes" in the manifest, "fn" in what init registers"#,
        ),
    ];
    for (name, defines, want) in cases {
        let lib = build(name, defines);
        let (e, registered) = load_error(&lib);
        assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
        assert!(e.message().contains(want), "{name}: {e}");
        assert!(
            e.message()
                .contains("differs from what its manifest declares"),
            "{e}"
        );
        assert!(!registered);
    }
}
