//! The C example (examples/c_zero_out/zero_out.c), built with the system C
//! compiler, loaded, run eagerly and in a session, inspected without being
//! loaded, refused before any of its code runs, and unloaded. Built against
//! this repository's header it is a 1.1 library (the views entry only);
//! built against the frozen 1.0 header, a 1.0 library (the 1.0 compute,
//! a 1.0-sized kernel registration), which this host still loads and runs.
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

/// The C example built against the frozen 1.0 header: a 1.0 library.
fn build_1_0(name: &str, defines: &[&str]) -> PathBuf {
    let inc = format!(
        "-I{}",
        opforge_testing::examples::frozen_include_dir(1, 0).display()
    );
    let mut args = vec![inc.as_str()];
    args.extend_from_slice(defines);
    build(name, &args)
}

/// How often the library's entry `name` ran (`zero_out_c_compute_calls`,
/// `zero_out_c_compute_views_calls`).
fn calls(lib: &Path, name: &str) -> u64 {
    // SAFETY: the library is loaded (this only adds a reference), and the
    // symbol is a `uint64_t` the example exports; the tests that read it
    // run no compute of it meanwhile.
    unsafe {
        let l = libloading::Library::new(lib).unwrap();
        let p: libloading::Symbol<'_, *const u64> = l.get(name.as_bytes()).unwrap();
        std::ptr::read_volatile(*p)
    }
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

/// Runs the example eagerly (five calls that reach the kernel) and in a
/// session (one).
fn runs_eagerly_and_in_a_session(r: &Arc<Registry>) {
    let ctx = eager(r);
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
    // An input the caller still holds is not written.
    let x = Tensor::from_vec(&[3], vec![7i32, 8, 9]).unwrap();
    let y = zero_out(&ctx, x.clone()).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[7, 0, 0]);
    assert_eq!(x.flat::<i32>().unwrap(), &[7, 8, 9]);
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
fn loads_and_runs_through_the_views_entry() {
    let lib = build("zo_views", &[]);
    let r = registry();
    let loader = Loader::new(r.clone());
    let h = loader.load(&lib).unwrap();
    assert_eq!(r.ops_of(h.owner()), ["ZeroOut"]);
    runs_eagerly_and_in_a_session(&r);
    // Only the views entry exists in this build, and it ran.
    assert_eq!(calls(&lib, "zero_out_c_compute_views_calls"), 6);
    assert_eq!(calls(&lib, "zero_out_c_compute_calls"), 0);
    // An input nothing else holds is forwarded: the output is its buffer.
    let ctx = eager(&r);
    let x = Tensor::from_vec(&[4], vec![3i32, 1, 4, 1]).unwrap();
    let at = x.bytes().unwrap().as_ptr();
    let y = zero_out(&ctx, x).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[3, 0, 0, 0]);
    assert_eq!(
        y.bytes().unwrap().as_ptr(),
        at,
        "the input was not forwarded"
    );
}

#[test]
fn a_library_built_against_the_1_0_header_loads_and_runs() {
    let lib = build_1_0("zo_abi10", &[]);
    let m = inspect(&lib).unwrap();
    let abi = m.library.abi;
    assert_eq!(
        (abi.major, abi.minor, abi.min_host_minor),
        (1, 0, 0),
        "not a 1.0 build"
    );
    assert_eq!(
        abi.layout_hash,
        opforge_abi::known_layout_hash(1, 0).unwrap()
    );
    let r = registry();
    let loader = Loader::new(r.clone());
    let h = loader.load(&lib).unwrap();
    assert_eq!(r.ops_of(h.owner()), ["ZeroOut"]);
    // Its kernel registration is 1.0-sized (the 1.1 fields are past its
    // struct_size): the host runs its 1.0 compute, never anything else.
    runs_eagerly_and_in_a_session(&r);
    assert_eq!(calls(&lib, "zero_out_c_compute_calls"), 6);
    assert_eq!(calls(&lib, "zero_out_c_compute_views_calls"), 0);
    loader.unload(&h).unwrap();
}

#[test]
fn with_both_entries_the_host_calls_the_views_entry() {
    // Both entries, so it may say it runs on 1.0 hosts.
    let lib = build(
        "zo_both",
        &["-DZERO_OUT_BOTH_ENTRIES", "-DOPFORGE_MIN_HOST_MINOR=0"],
    );
    let abi = inspect(&lib).unwrap().library.abi;
    assert_eq!((abi.minor, abi.min_host_minor), (1, 0));
    let r = registry();
    let loader = Loader::new(r.clone());
    loader.load(&lib).unwrap();
    runs_eagerly_and_in_a_session(&r);
    assert_eq!(calls(&lib, "zero_out_c_compute_views_calls"), 6);
    assert_eq!(calls(&lib, "zero_out_c_compute_calls"), 0);
}

#[test]
fn a_views_only_kernel_of_a_library_that_says_it_runs_on_1_0_is_refused() {
    let lib = build("zo_views_min0", &["-DOPFORGE_MIN_HOST_MINOR=0"]);
    let r = registry();
    let loader = Loader::new(r.clone());
    let e = loader.load(&lib).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().contains(
            "kernel of op 'ZeroOut' has only the 1.1 compute_views entry, but library \
             zero_out_c 0.1.0"
        ) && e.message().contains("declares min_host_minor 0"),
        "{e}"
    );
    assert!(r.op_def("ZeroOut").is_err(), "a refused load registered");
    assert!(loader.libraries().is_empty());
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
    runs_eagerly_and_in_a_session(&r);
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
        serde_json::json!({"major": 1, "minor": 1, "min_host_minor": 1})
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

    let (m, def) = marker("zo_minor2");
    let lib = build(
        "zo_minor2",
        &[&def, "-DZERO_OUT_ABI_MINOR=2", "-DOPFORGE_MIN_HOST_MINOR=2"],
    );
    let e = loader.load(&lib).unwrap_err();
    let path = std::fs::canonicalize(&lib).unwrap();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert_eq!(
        e.message(),
        format!(
            "op library '{}' (zero_out_c 0.1.0) cannot be loaded: needs opforge C ABI 1.2+ \
             (built with 1.2); this host provides 1.1; upgrade opforge, or rebuild the library \
             with a lower OPFORGE_MIN_HOST_MINOR (checking newer slots with OPFORGE_HAS_SLOT)",
            path.display()
        )
    );
    assert!(!m.exists(), "the refused library's code ran");

    // A library built against a newer minor that runs on 1.1 loads.
    let lib = build(
        "zo_minor2_min1",
        &["-DZERO_OUT_ABI_MINOR=2", "-DOPFORGE_MIN_HOST_MINOR=1"],
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
