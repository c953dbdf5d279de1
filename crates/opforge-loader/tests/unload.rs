//! What an unload needs to know first, on the C probe library
//! (tests/c/probe.c): which loaded library a file is (`Loader::find`), what
//! still holds it (`Loader::holders`: kernel instances, outputs in its
//! memory), how an eager context lets go of its kernels
//! (`EagerContext::release_kernels`), and which library an unloaded op came
//! from (`Loader::unloaded_library_of`).

use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::registry::Registry;
use opforge_core::{Code, Tensor};
use opforge_loader::{Holders, Loader};
use std::path::Path;
use std::sync::Arc;

#[test]
fn holders_find_and_the_ops_of_unloaded_libraries() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let lib = opforge_testing::examples::build_c_library(
        "crates/opforge-loader/tests/c/probe.c",
        dir,
        "probe_unload",
        &[],
    );
    // The standard ops: the probe's declarative gradient calls AddV2 and Mul.
    opforge_ops::link();
    let r = Arc::new(Registry::with_builtins());
    let loader = Loader::new(r.clone());
    let h = loader.load(&lib).unwrap();
    assert_eq!(
        h.to_string(),
        format!(
            "probe 0.0.1 ({})",
            std::fs::canonicalize(&lib).unwrap().display()
        )
    );

    // The file, a copy of it, and no other file, are the library.
    assert_eq!(loader.find(&lib).unwrap(), h);
    let copy = dir.join("libprobe_unload_copy.so");
    std::fs::copy(&lib, &copy).unwrap();
    assert_eq!(loader.find(&copy).unwrap(), h);
    let e = loader.find(dir.join("libnot_loaded.so")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("(loaded: probe 0.0.1)"), "{e}");

    // An eager context's kernel holds it until the context lets it go.
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone());
    ctx.op("ProbeForward")
        .input(Tensor::scalar(1f32))
        .run1()
        .unwrap();
    let ops = r.ops_of(h.owner());
    assert_eq!(
        loader.holders(&h).unwrap(),
        Holders {
            kernel_instances: 1,
            foreign_outputs: 0
        }
    );
    assert_eq!(ctx.release_kernels(&ops), 1);
    assert!(loader.holders(&h).unwrap().is_empty());
    // An output in the library's memory holds it while the tensor lives.
    let foreign = ctx
        .op("ProbeForeign")
        .input(Tensor::scalar(2i32))
        .run1()
        .unwrap();
    ctx.release_kernels(&ops);
    let holders = loader.holders(&h).unwrap();
    assert_eq!(
        holders,
        Holders {
            kernel_instances: 0,
            foreign_outputs: 1
        }
    );
    assert_eq!(
        holders.to_string(),
        "0 kernel instances and 1 outputs backed by its memory"
    );
    drop(foreign);
    assert!(loader.holders(&h).unwrap().is_empty());

    // Unloaded: its ops are named as the library's, until it is loaded again.
    assert_eq!(loader.unloaded_library_of("ProbeForward"), None);
    let report = loader.unload(&h).unwrap();
    assert!(report.unmapped, "{report:?}");
    assert_eq!(
        loader.unloaded_library_of("ProbeForward"),
        Some(h.to_string())
    );
    assert_eq!(loader.unloaded_library_of("AddV2"), None);
    assert_eq!(loader.holders(&h).unwrap_err().code(), Code::NotFound);
    assert_eq!(loader.find(&lib).unwrap_err().code(), Code::NotFound);
    let again = loader.load(&lib).unwrap();
    assert_eq!(loader.unloaded_library_of("ProbeForward"), None);
    assert_eq!(loader.find(&lib).unwrap(), again);
}
