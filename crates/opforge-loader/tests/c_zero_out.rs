//! The C example (examples/c_zero_out/zero_out.c), built with the system C
//! compiler, loaded, run eagerly and in a session, inspected without being
//! loaded, refused before any of its code runs, and unloaded.
//!
//! Every test builds its own copy of the library (its own file name): the
//! C library keeps the host table in a global, so two loaders must not
//! share one mapping of it.

use opforge_core::attrs::AttrMap;
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::registry::Registry;
use opforge_core::shape_inference::{InferenceContext, ShapeFn};
use opforge_core::Code;
use opforge_core::{DataType, OpDefBuilder, Tensor};
use opforge_loader::{inspect, Loader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Builds the C example as `lib<name>.so` in the target dir with extra `-D`
/// flags.
fn build(name: &str, defines: &[&str]) -> PathBuf {
    opforge_testing::examples::build_c_library(
        "examples/c_zero_out/zero_out.c",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        name,
        defines,
    )
}

fn marker(name: &str) -> (PathBuf, String) {
    let m = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.loaded"));
    let _ = std::fs::remove_file(&m);
    let def = format!("-DZERO_OUT_MARKER=\"{}\"", m.display());
    (m, def)
}

/// A registry with a feed op (its value is always fed, so it needs no kernel).
fn registry() -> Arc<Registry> {
    let r = Registry::new();
    r.register_op(
        OpDefBuilder::new("TFeed")
            .attr("dtype: type")
            .output("y: dtype"),
    )
    .unwrap();
    Arc::new(r)
}

fn eager(r: &Arc<Registry>) -> EagerContext {
    EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone())
}

fn zero_out(ctx: &EagerContext, v: Tensor) -> opforge_core::Result<Tensor> {
    ctx.op("ZeroOut").input(v).run1()
}

#[test]
fn loads_and_runs_eagerly_and_in_a_session() {
    let lib = build("zo_run", &[]);
    let r = registry();
    let loader = Loader::new(r.clone());
    let h = loader.load(&lib).unwrap();
    assert_eq!(h.name(), "zero_out_c");
    assert_eq!(h.version(), "0.1.0");
    assert_eq!(r.ops_of(h.owner()), ["ZeroOut"]);
    let def = r.op_def("ZeroOut").unwrap();
    assert_eq!(def.summary, "Zeroes all but the first element.");

    let ctx = eager(&r);
    let y = zero_out(
        &ctx,
        Tensor::from_vec(&[2, 3], vec![5i32, 4, 3, 2, 1, 9]).unwrap(),
    )
    .unwrap();
    assert_eq!(y.dims(), &[2, 3]);
    assert_eq!(y.flat::<i32>().unwrap(), &[5, 0, 0, 0, 0, 0]);
    // Large enough for parallel_for to shard on the pool.
    let big: Vec<i32> = (1..=100_000).collect();
    let y = zero_out(&ctx, Tensor::from_vec(&[100_000], big).unwrap()).unwrap();
    assert_eq!(y.flat::<i32>().unwrap()[0], 1);
    assert!(y.flat::<i32>().unwrap()[1..].iter().all(|&v| v == 0));
    // Empty and scalar inputs.
    let y = zero_out(&ctx, Tensor::from_vec(&[0], Vec::<i32>::new()).unwrap()).unwrap();
    assert_eq!(y.num_elements(), 0);
    let y = zero_out(&ctx, Tensor::scalar(7i32)).unwrap();
    assert_eq!(y.scalar_value::<i32>().unwrap(), 7);
    // A wrong dtype is the usual attr-inference error, not a crash.
    assert_eq!(
        zero_out(&ctx, Tensor::scalar(1f32)).unwrap_err().code(),
        Code::InvalidArgument
    );

    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("TFeed", "x").attr("dtype", DataType::Int32))
            .unwrap(),
        0,
    );
    let z = g.add(NodeSpec::new("ZeroOut", "z").input(x)).unwrap();
    let s = Session::new(g).unwrap();
    let out = s
        .run(
            vec![(x, Tensor::from_vec(&[3], vec![8i32, 8, 8]).unwrap())],
            &[Output::new(z, 0)],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].flat::<i32>().unwrap(), &[8, 0, 0]);
}

#[test]
fn shape_inference_runs_the_plugin_shape_function() {
    let lib = build("zo_shape", &[]);
    let r = registry();
    let loader = Loader::new(r.clone());
    loader.load(&lib).unwrap();
    let f = r.attr::<ShapeFn>("ZeroOut").expect("a shape function");
    let def = r.op_def("ZeroOut").unwrap();
    let mut ic = InferenceContext::new(&def, "z", &AttrMap::new(), &[Some(vec![2, -1, 5])], 1);
    f(&mut ic).unwrap();
    let out = ic.output(0).unwrap();
    assert_eq!(ic.debug_string(out), "[2,?,5]");
    // Identity is kept: the output is the input's shape itself.
    assert_eq!(out, ic.input(0));
    let mut ic = InferenceContext::new(&def, "z", &AttrMap::new(), &[None], 1);
    f(&mut ic).unwrap();
    assert_eq!(ic.debug_string(ic.output(0).unwrap()), "?");
    // In a graph, shapes are inferred at construction.
    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("TFeed", "x").attr("dtype", DataType::Int32))
            .unwrap(),
        0,
    );
    let z = g.add(NodeSpec::new("ZeroOut", "z").input(x)).unwrap();
    assert_eq!(g.output_shape(Output::new(z, 0)).unwrap(), None);
}

#[test]
fn inspect_reads_the_manifest_without_running_any_code() {
    let (m, def) = marker("zo_inspect");
    let lib = build("zo_inspect", &[&def]);
    let manifest = inspect(&lib).unwrap();
    assert!(!m.exists(), "inspect ran the library's constructor");
    let j = manifest.to_json().unwrap();
    assert_eq!(j["name"], "zero_out_c");
    assert_eq!(j["version"], "0.1.0");
    assert_eq!(
        j["abi"],
        serde_json::json!({"major": 1, "minor": 0, "min_host_minor": 0})
    );
    assert_eq!(j["ops"][0]["name"], "ZeroOut");
    assert_eq!(j["ops"][0]["input_arg"][0]["name"], "to_zero");
    assert_eq!(j["ops"][0]["input_arg"][0]["type"], "DT_INT32");
    assert_eq!(
        j["kernels"],
        serde_json::json!([{"op": "ZeroOut", "device": "CPU", "constraints": {}}])
    );
    assert_eq!(j["shape_fns"], serde_json::json!(["ZeroOut"]));
    assert_eq!(j["gradients"], serde_json::json!([]));
    assert!(!m.exists());
    // The marker works: loading does run the constructor.
    let loader = Loader::new(registry());
    loader.load(&lib).unwrap();
    assert!(m.exists(), "the constructor did not run at load");
    // A library that registers by code only: null lists.
    let lib = build("zo_undeclared", &["-DZERO_OUT_NO_DECLARATION"]);
    let j = inspect(&lib).unwrap().to_json().unwrap();
    assert!(j["ops"].is_null() && j["kernels"].is_null() && j["gradients"].is_null());
    // ... and it loads normally.
    let r = registry();
    Loader::new(r.clone()).load(&lib).unwrap();
    assert!(r.op_def("ZeroOut").is_ok());
}

#[test]
fn newer_major_and_higher_min_host_minor_are_refused_before_any_code_runs() {
    let (m, def) = marker("zo_major2");
    let lib = build("zo_major2", &[&def, "-DZERO_OUT_ABI_MAJOR=2"]);
    let loader = Loader::new(registry());
    let e = loader.load(&lib).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    let path = std::fs::canonicalize(&lib).unwrap();
    assert_eq!(
        e.message(),
        format!(
            "op library '{}' (zero_out_c 0.1.0) cannot be loaded: built for opforge C ABI 2.x; \
             this host provides 1.x; upgrade opforge to a version with that ABI major, or \
             rebuild the library against this opforge's include/opforge/opforge.h",
            path.display()
        )
    );
    assert!(!m.exists(), "the refused library's code ran");

    let (m, def) = marker("zo_minor1");
    let lib = build(
        "zo_minor1",
        &[&def, "-DZERO_OUT_ABI_MINOR=1", "-DOPFORGE_MIN_HOST_MINOR=1"],
    );
    let e = loader.load(&lib).unwrap_err();
    let path = std::fs::canonicalize(&lib).unwrap();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert_eq!(
        e.message(),
        format!(
            "op library '{}' (zero_out_c 0.1.0) cannot be loaded: needs opforge C ABI 1.1+ \
             (built with 1.1); this host provides 1.0; upgrade opforge, or rebuild the library \
             with a lower OPFORGE_MIN_HOST_MINOR (checking newer slots with OPFORGE_HAS_SLOT)",
            path.display()
        )
    );
    assert!(!m.exists(), "the refused library's code ran");

    // A library built against a newer minor that runs on 1.0 loads.
    let lib = build(
        "zo_minor1_min0",
        &["-DZERO_OUT_ABI_MINOR=1", "-DOPFORGE_MIN_HOST_MINOR=0"],
    );
    loader.load(&lib).unwrap();
}

#[test]
fn missing_and_corrupt_manifests_are_clean_errors() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let loader = Loader::new(registry());
    // Not a file.
    let e = loader.load(dir.join("no_such_library.so")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(
        inspect(dir.join("no_such_library.so")).unwrap_err().code(),
        Code::NotFound
    );
    // Not an object file.
    let junk = dir.join("libjunk.so");
    std::fs::write(&junk, b"this is not a shared library").unwrap();
    let e = loader.load(&junk).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("is not a shared library"), "{e}");
    // A shared library without a manifest.
    let src = dir.join("plain.c");
    std::fs::write(&src, "int plain(void) { return 1; }\n").unwrap();
    let plain = dir.join("libplain.so");
    assert!(std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&plain)
        .arg(&src)
        .status()
        .unwrap()
        .success());
    let e = loader.load(&plain).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("has no opforge manifest"), "{e}");
    // A corrupt manifest: flip the magic of the library record.
    let lib = build("zo_corrupt", &[]);
    let mut bytes = std::fs::read(&lib).unwrap();
    let at = bytes.windows(4).position(|w| w == b"OPFM").unwrap();
    bytes[at + 1] = b'X';
    let bad = dir.join("libzo_corrupt_magic.so");
    std::fs::write(&bad, &bytes).unwrap();
    let e = loader.load(&bad).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss);
    assert!(e.message().contains("corrupt at offset 0"), "{e}");
    // A corrupt length.
    let mut bytes = std::fs::read(&lib).unwrap();
    bytes[at + 8..at + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&bad, &bytes).unwrap();
    let e = inspect(&bad).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss);
    assert!(e.message().contains("bytes of JSON"), "{e}");
    // Broken JSON.
    let mut bytes = std::fs::read(&lib).unwrap();
    bytes[at + 16] = b'[';
    std::fs::write(&bad, &bytes).unwrap();
    let e = inspect(&bad).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss);
    assert!(e.message().contains("does not parse"), "{e}");
    // Nothing was registered by any of these.
    assert!(loader.libraries().is_empty());
}

#[test]
fn loading_twice_gives_the_same_handle() {
    let lib = build("zo_twice", &[]);
    let r = registry();
    let loader = Loader::new(r.clone());
    let a = loader.load(&lib).unwrap();
    let b = loader.load(&lib).unwrap();
    assert_eq!(a, b);
    let link = lib.with_file_name("libzo_twice_link.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&lib, &link).unwrap();
    assert_eq!(loader.load(&link).unwrap(), a);
    let copy = lib.with_file_name("libzo_twice_copy.so");
    std::fs::copy(&lib, &copy).unwrap();
    assert_eq!(loader.load(&copy).unwrap(), a);
    assert_eq!(loader.libraries().len(), 1);
}

#[test]
fn a_failing_init_leaves_nothing_registered_and_conflicts_name_both_libraries() {
    let r = registry();
    let loader = Loader::new(r.clone());
    let failing = build("zo_fail", &["-DZERO_OUT_FAIL_INIT"]);
    let e = loader.load(&failing).unwrap_err();
    assert_eq!(e.code(), Code::Aborted);
    assert!(e.message().contains("init failed on purpose"), "{e}");
    assert!(e.message().contains("nothing was registered"), "{e}");
    assert!(e.message().contains("zero_out_c 0.1.0"), "{e}");
    assert!(r.op_def("ZeroOut").is_err());
    assert!(loader.libraries().is_empty());

    let first = build("zo_first", &[]);
    loader.load(&first).unwrap();
    let other = build(
        "zo_other",
        &[
            "-DZERO_OUT_LIB_NAME=\"other_zero_out\"",
            "-DZERO_OUT_T=\"int64\"",
        ],
    );
    let e = loader.load(&other).unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists);
    let msg = e.message();
    assert!(
        msg.contains("zero_out_c") && msg.contains("libzo_first.so"),
        "{msg}"
    );
    assert!(
        msg.contains("other_zero_out") && msg.contains("libzo_other.so"),
        "{msg}"
    );
    // ... and the difference.
    assert!(
        msg.contains("DT_INT32") && msg.contains("DT_INT64"),
        "{msg}"
    );
    // The first library's op is untouched.
    assert_eq!(
        r.op_def("ZeroOut").unwrap().input_arg[0].r#type,
        DataType::Int32 as i32
    );
}

#[test]
fn unload_removes_the_op_and_sessions_fail_cleanly() {
    let lib = build("zo_unload", &[]);
    let r = registry();
    let loader = Loader::new(r.clone());
    let h = loader.load(&lib).unwrap();
    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("TFeed", "x").attr("dtype", DataType::Int32))
            .unwrap(),
        0,
    );
    let z = g.add(NodeSpec::new("ZeroOut", "z").input(x)).unwrap();
    let s = Session::new(g).unwrap();
    let feed = || vec![(x, Tensor::from_vec(&[2], vec![1i32, 2]).unwrap())];
    assert_eq!(
        s.run(feed(), &[Output::new(z, 0)], &[]).unwrap()[0]
            .flat::<i32>()
            .unwrap(),
        &[1, 0]
    );
    let ctx = eager(&r);
    zero_out(&ctx, Tensor::scalar(1i32)).unwrap();

    // The caller may choose to fail while the library is in use.
    let e = loader.unload_if_unused(&h).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("2 kernel instances"), "{e}");
    assert!(r.op_def("ZeroOut").is_ok());
    let report = loader.unload(&h).unwrap();
    assert_eq!(report.ops, ["ZeroOut"]);
    assert_eq!(report.kernels, 1);
    assert!(report.attrs >= 1);
    // The session and the eager cache still hold kernel instances.
    assert!(!report.unmapped);
    assert!(
        report.note.as_deref().unwrap().contains("still held"),
        "{report:?}"
    );
    assert!(r.op_def("ZeroOut").is_err());
    let e = s.run(feed(), &[Output::new(z, 0)], &[]).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("'ZeroOut'"), "{e}");
    let e = zero_out(&ctx, Tensor::scalar(1i32)).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Loading again while the old instance is held is refused, clearly.
    let e = loader.load(&lib).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("still held"), "{e}");
    // Once the holders are gone, the library is closed and loads again.
    drop(s);
    drop(ctx);
    let h2 = loader.load(&lib).unwrap();
    assert_ne!(h2.owner(), h.owner());
    assert_eq!(
        zero_out(&eager(&r), Tensor::scalar(3i32))
            .unwrap()
            .scalar_value::<i32>()
            .unwrap(),
        3
    );
    assert_eq!(loader.unload(&h).unwrap_err().code(), Code::NotFound);
}

#[test]
fn load_run_unload_cycles() {
    let lib = build("zo_cycles", &[]);
    let r = registry();
    let loader = Loader::new(r.clone());
    for i in 0..50 {
        let h = loader.load(&lib).unwrap();
        {
            // Dropping the context on this thread drops its kernels.
            let ctx = eager(&r);
            let y = zero_out(&ctx, Tensor::from_vec(&[2], vec![i, i]).unwrap()).unwrap();
            assert_eq!(y.flat::<i32>().unwrap(), &[i, 0]);
        }
        let report = if i % 2 == 0 {
            loader.unload(&h).unwrap()
        } else {
            loader.unload_if_unused(&h).unwrap()
        };
        assert!(report.unmapped, "cycle {i}: {report:?}");
        assert!(r.op_def("ZeroOut").is_err());
    }
}
