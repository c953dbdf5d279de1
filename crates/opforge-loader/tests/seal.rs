//! Sealed declarations through the loader's API: what init registers
//! (`Loader::declaration`), written by `opforge_loader::seal`, read by
//! `inspect`, and checked against init by `Loader::load`.

use opforge_core::registry::Registry;
use opforge_core::Code;
use opforge_loader::{inspect, seal, Loader, SealOutcome};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// tests/c/probe.c (registers by code, declares nothing) as `lib{name}.so`.
fn build(name: &str) -> PathBuf {
    opforge_testing::examples::build_c_library(
        "crates/opforge-loader/tests/c/probe.c",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        name,
        &[],
    )
}

fn loader() -> Loader {
    // ProbeSquare's declarative gradient calls the standard AddV2 and Mul.
    opforge_ops::link();
    Loader::new(Arc::new(Registry::with_builtins()))
}

/// What init of `lib` registers, loading a copy (a file is mapped once per
/// process; the copies keep the tests' loads apart).
fn declaration(lib: &Path) -> Vec<Value> {
    let copy = lib.with_extension("probe.so");
    std::fs::copy(lib, &copy).unwrap();
    let l = loader();
    let h = l.load_ignoring_seal(&copy).unwrap();
    l.declaration(&h).unwrap()
}

#[test]
fn init_is_checked_against_the_sealed_declaration() {
    let lib = build("seal_api");
    assert!(!inspect(&lib).unwrap().is_declared());
    let records = declaration(&lib);
    let kinds = |k: &str| records.iter().filter(|r| r["kind"] == k).count();
    assert_eq!(
        (kinds("op"), kinds("kernel"), kinds("gradient")),
        (11, 10, 3)
    );
    let fwd = records
        .iter()
        .find(|r| r["name"] == "ProbeForward")
        .unwrap();
    assert_eq!(fwd["inputs"], json!(["x: float"]));
    assert_eq!(fwd["shape_fn"], false);

    // Seal a copy with exactly what init registers: it loads.
    let good = lib.with_file_name("libseal_api_good.so");
    std::fs::copy(&lib, &good).unwrap();
    assert_eq!(
        seal(&good, &records).unwrap(),
        SealOutcome::Sealed {
            ops: 11,
            kernels: 10,
            gradients: 3,
            replaced: false
        }
    );
    let m = inspect(&good).unwrap();
    assert!(m.sealed && m.is_declared());
    assert_eq!(m.ops.as_ref().unwrap().len(), 11);
    let l = loader();
    let h = l.load(&good).unwrap();
    assert!(l.registry().lookup("ProbeForward").is_ok());
    l.unload(&h).unwrap();

    // A declaration missing an op, or with one init does not register:
    // the load fails and registers nothing.
    let cases: [(&str, Vec<Value>, &str); 2] = [
        (
            "missing",
            records
                .iter()
                .filter(|r| r["name"] != "ProbeNewer")
                .cloned()
                .collect(),
            "init registers op 'ProbeNewer', the manifest does not declare it",
        ),
        (
            "extra",
            records
                .iter()
                .cloned()
                .chain([json!({"kind": "op", "name": "ProbeExtra", "outputs": ["y: float"]})])
                .collect(),
            "the manifest declares op 'ProbeExtra', init does not register it",
        ),
    ];
    for (name, recs, want) in cases {
        let f = lib.with_file_name(format!("libseal_api_{name}.so"));
        std::fs::copy(&lib, &f).unwrap();
        seal(&f, &recs).unwrap();
        let l = loader();
        let e = l.load(&f).unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{name}: {e}");
        assert!(e.message().contains(want), "{name}: {e}");
        assert!(l.registry().lookup("ProbeForward").is_err(), "{name}");
        // Ignoring the sealed declaration, it loads.
        let h = l.load_ignoring_seal(&f).unwrap();
        l.unload(&h).unwrap();
    }
}

#[test]
fn seal_refuses_bad_records_and_leaves_the_file_alone() {
    let lib = build("seal_api_bad");
    let before = std::fs::read(&lib).unwrap();
    let e = seal(&lib, &[json!({"kind": "library", "name": "x"})]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // An op record that is not a valid op: refused before anything is written.
    let e = seal(&lib, &[json!({"kind": "op", "name": "bad name!"})]).unwrap_err();
    assert!(e.message().contains("nothing was written"), "{e}");
    assert_eq!(std::fs::read(&lib).unwrap(), before);
    assert!(!inspect(&lib).unwrap().is_declared());
}
