//! The Rust SDK's example plugin (`examples/zero_out`, package `zero_out`,
//! a cdylib built here with a nested `cargo build`) through the real host
//! loader: inspected without being loaded, loaded into a sandbox registry
//! (so each test sees only what it loaded), run eagerly and in a session,
//! differentiated,
//! called from 16 threads, loaded and unloaded 1000 times with flat memory,
//! and unloaded under a live session.
//!
//! The tests of this binary take one lock each: the RSS figures of the
//! cycle test are process-wide, and the SDK keeps its host table in a
//! global of the library, so every test also loads its own copy of the file
//! (its own mapping).

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{
    compute_gradient, compute_gradient_error, gradients, Gradient, GradientTape, Ops, Sym, SymArg,
};
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::kernel::{KernelDefBuilder, KernelRegistration};
use opforge_core::registry::Registry;
use opforge_core::shape_inference::{DimOrConst, ShapeFn};
use opforge_core::Code;
use opforge_core::{DataType, OpDefBuilder, Tensor};
use opforge_loader::{inspect, LibraryHandle, Loader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// The ops the plugin registers: the guide's ZeroOut variants, then its
/// declaration-only examples of attrs, defaults and lists.
const PLUGIN_OPS: [&str; 8] = [
    "ZeroOut",
    "ZeroOutInt32",
    "ZeroOutList",
    "AttrDefaultExampleForAllTypes",
    "PolymorphicListExample",
    "SameListInputExample",
    "MinLengthIntListExample",
    "MultipleInsAndOuts",
];

/// [`PLUGIN_OPS`] sorted by name, as the registry lists an owner's ops.
fn plugin_ops_sorted() -> Vec<&'static str> {
    let mut v = PLUGIN_OPS.to_vec();
    v.sort_unstable();
    v
}

/// The plugin's ops with kernels and gradients.
const ZERO_OUT_OPS: [&str; 3] = ["ZeroOut", "ZeroOutInt32", "ZeroOutList"];

/// Builds `examples/zero_out` once per test binary; the path of the cdylib.
fn built_plugin() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        opforge_testing::examples::build_example(
            "zero_out",
            false,
            Path::new(env!("CARGO_TARGET_TMPDIR")),
        )
    })
}

/// A copy of the built plugin for one test (its own file, so its own
/// mapping).
fn plugin(name: &str) -> PathBuf {
    let out = plugin_path(name);
    std::fs::copy(built_plugin(), &out).unwrap();
    out
}

/// Where [`plugin`] puts the copy named `name`.
fn plugin_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

/// One test at a time (see the module docs).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A sandbox registry without the standard library's built-in `ZeroOut`,
/// with a feed op: `TFeed(dtype, shape)` (its value is always fed, so it
/// needs no kernel; its shape function gives `shape`, -1 for an unknown
/// dim).
fn registry() -> Arc<Registry> {
    let r = Registry::new();
    r.register_op(
        OpDefBuilder::new("TFeed")
            .attr("dtype: type")
            .attr("shape: list(int) = []")
            .output("y: dtype")
            .set_shape_fn(|c| {
                let dims: Vec<i64> = c.get_attr("shape")?;
                let dims: Vec<DimOrConst> = dims.into_iter().map(DimOrConst::Const).collect();
                let s = c.make_shape(&dims);
                c.set_output(0, s);
                Ok(())
            }),
    )
    .unwrap();
    Arc::new(r)
}

/// A sandbox with the standard op library (what autodiff calls: AddN,
/// OnesLike, ...): every op of the global registry, copied with its kernels,
/// shape function and gradient.
fn std_registry() -> Arc<Registry> {
    opforge_ops::link();
    let g = Registry::global();
    let r = Registry::new();
    for name in g.names() {
        r.register_op_def(g.op_def(&name).unwrap()).unwrap();
        if let Some(f) = g.attr::<ShapeFn>(&name) {
            r.set_attr::<ShapeFn>(&name, f).unwrap();
        }
        if let Some(f) = g.attr::<Gradient>(&name) {
            r.set_attr::<Gradient>(&name, f).unwrap();
        }
        for k in g.kernels_for(&name) {
            let d = &k.def;
            let mut b = KernelDefBuilder::new(&d.op)
                .device(&d.device_type)
                .label(&d.label)
                .priority(d.priority);
            for (attr, types) in &d.constraints {
                b = b.type_constraint_list(attr, types);
            }
            for arg in &d.host_memory_args {
                b = b.host_memory(arg);
            }
            let f = k.factory.clone();
            r.register_kernel(KernelRegistration::with_factory(b, move |c| f(c)))
                .unwrap();
        }
    }
    assert!(r.op_def("ZeroOut").is_err());
    Arc::new(r)
}

fn eager(r: &Arc<Registry>) -> EagerContext {
    EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone())
}

/// Loads a fresh copy of the plugin into a fresh sandbox.
fn setup(name: &str) -> (Arc<Registry>, Loader, LibraryHandle) {
    let r = registry();
    let loader = Loader::new(r.clone());
    let h = loader.load(plugin(name)).unwrap();
    (r, loader, h)
}

fn zero_out(ctx: &EagerContext, x: Tensor, preserve_index: i64) -> opforge_core::Result<Tensor> {
    ctx.op("ZeroOut")
        .input(x)
        .attr("preserve_index", preserve_index)
        .run1()
}

fn feed(g: &mut Graph, name: &str, dtype: DataType, shape: &[i64]) -> Output {
    Output::new(
        g.add(
            NodeSpec::new("TFeed", name)
                .attr("dtype", dtype)
                .attr("shape", shape.to_vec()),
        )
        .unwrap(),
        0,
    )
}

#[test]
fn inspect_reads_name_version_abi_ops_and_kernels_without_loading() {
    let _s = serial();
    let lib = plugin("zo_rs_inspect");
    let j = inspect(&lib).unwrap().to_json().unwrap();
    assert_eq!(j["name"], "zero_out");
    assert_eq!(j["version"], "0.1.0");
    // Built with the 1.1 SDK, and running on 1.0 hosts too (the SDK
    // registers both compute entries).
    assert_eq!(
        j["abi"],
        serde_json::json!({"major": 1, "minor": 1, "min_host_minor": 0})
    );
    let ops: Vec<&str> = j["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(ops, PLUGIN_OPS);
    let zo = &j["ops"][0];
    assert_eq!(zo["input_arg"][0]["name"], "to_zero");
    assert_eq!(zo["input_arg"][0]["type_attr"], "T");
    assert_eq!(zo["output_arg"][0]["name"], "zeroed");
    assert_eq!(zo["attr"][0]["name"], "T");
    assert_eq!(zo["attr"][0]["default_value"]["type"], "DT_INT32");
    assert_eq!(zo["attr"][1]["name"], "preserve_index");
    assert_eq!(zo["attr"][1]["type"], "int");
    assert_eq!(
        zo["summary"],
        "Zeros out every element of the input except one."
    );
    assert_eq!(j["ops"][1]["input_arg"][0]["type"], "DT_INT32");
    assert_eq!(j["ops"][2]["input_arg"][0]["number_attr"], "N");
    let real = serde_json::json!([
        "DT_FLOAT",
        "DT_DOUBLE",
        "DT_INT32",
        "DT_UINT8",
        "DT_INT16",
        "DT_INT8",
        "DT_INT64",
        "DT_BFLOAT16",
        "DT_UINT16",
        "DT_HALF",
        "DT_UINT32",
        "DT_UINT64"
    ]);
    let kernels: Vec<serde_json::Value> = j["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            serde_json::json!({"op": k["op"], "device": k["device"], "constraints": k["constraints"]})
        })
        .collect();
    assert_eq!(
        kernels,
        [
            serde_json::json!({"op": "ZeroOut", "device": "CPU", "constraints": {"T": real}}),
            serde_json::json!({"op": "ZeroOutInt32", "device": "CPU", "constraints": {}}),
            serde_json::json!({"op": "ZeroOutList", "device": "CPU", "constraints": {"T": real}}),
        ]
    );
    assert_eq!(j["shape_fns"], serde_json::json!(PLUGIN_OPS));
    let grads: Vec<&str> = j["gradients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["op"].as_str().unwrap())
        .collect();
    assert_eq!(grads, ZERO_OUT_OPS);
    // Nothing was loaded: the file is not mapped, and a loader maps it fresh.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(
        !maps.contains("zo_rs_inspect"),
        "inspect mapped the library"
    );
    let r = registry();
    let h = Loader::new(r.clone()).load(&lib).unwrap();
    assert_eq!((h.name(), h.version()), ("zero_out", "0.1.0"));
    assert_eq!(r.ops_of(h.owner()), plugin_ops_sorted());
}

#[test]
fn zero_out_runs_eagerly_for_int32_float_and_double() {
    let _s = serial();
    let (r, _loader, _h) = setup("zo_rs_eager");
    let ctx = eager(&r);
    let y = zero_out(
        &ctx,
        Tensor::from_vec(&[2, 3], vec![5i32, 4, 3, 2, 1, 9]).unwrap(),
        0,
    )
    .unwrap();
    assert_eq!(y.dtype(), DataType::Int32);
    assert_eq!(y.dims(), &[2, 3]);
    assert_eq!(y.flat::<i32>().unwrap(), &[5, 0, 0, 0, 0, 0]);
    let y = zero_out(
        &ctx,
        Tensor::from_vec(&[2, 2], vec![1.5f32, -2.5, 3.5, 4.5]).unwrap(),
        2,
    )
    .unwrap();
    assert_eq!(y.dtype(), DataType::Float);
    assert_eq!(y.flat::<f32>().unwrap(), &[0., 0., 3.5, 0.]);
    let y = zero_out(
        &ctx,
        Tensor::from_vec(&[3], vec![1f64, 2., -3.]).unwrap(),
        2,
    )
    .unwrap();
    assert_eq!(y.dtype(), DataType::Double);
    assert_eq!(y.flat::<f64>().unwrap(), &[0., 0., -3.]);
    // The default preserve_index is 0.
    let y = ctx
        .op("ZeroOut")
        .input(Tensor::from_vec(&[2], vec![7i32, 8]).unwrap())
        .run1()
        .unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[7, 0]);
    // A shared input is not computed in place: the caller's tensor is unchanged.
    let x = Tensor::from_vec(&[3], vec![1i32, 2, 3]).unwrap();
    let y = zero_out(&ctx, x.clone(), 1).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 2, 0]);
    assert_eq!(x.flat::<i32>().unwrap(), &[1, 2, 3]);
    // An input nothing else holds becomes the output (the kernel declares
    // `output_like_forwarding(0, 0)`) and is zeroed in place.
    let x = Tensor::from_vec(&[4], vec![6i32, 7, 8, 9]).unwrap();
    let at = x.bytes().unwrap().as_ptr();
    let y = zero_out(&ctx, x, 2).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 0, 8, 0]);
    assert_eq!(
        y.bytes().unwrap().as_ptr(),
        at,
        "the input was not forwarded"
    );
    // Large enough for the host to hand it around in several blocks.
    let big: Vec<f32> = (0..100_000).map(|i| i as f32).collect();
    let y = zero_out(&ctx, Tensor::from_vec(&[100_000], big).unwrap(), 99_999).unwrap();
    let y = y.flat::<f32>().unwrap();
    assert_eq!(y[99_999], 99_999.);
    assert!(y[..99_999].iter().all(|&v| v == 0.));
    // A dtype outside realnumbertype is the usual attr error.
    let e = zero_out(&ctx, Tensor::scalar(true), 0).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
}

#[test]
fn zero_out_errors_carry_the_plugins_codes_and_messages() {
    let _s = serial();
    let (r, _loader, _h) = setup("zo_rs_errors");
    let ctx = eager(&r);
    // Checked at kernel creation.
    let lib = std::fs::canonicalize(plugin_path("zo_rs_errors")).unwrap();
    let lib = format!("[library zero_out 0.1.0 ({})] [Op:ZeroOut]", lib.display());
    let e = zero_out(&ctx, Tensor::from_vec(&[2], vec![1i32, 2]).unwrap(), -1).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        format!(
            "the kernel creation of op 'ZeroOut' (node 'ZeroOut') failed: \
             Need preserve_index >= 0, got -1 {lib}"
        )
    );
    // Checked against the input at compute.
    let e = zero_out(
        &ctx,
        Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 4]).unwrap(),
        4,
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        format!(
            "the kernel of op 'ZeroOut' (node 'ZeroOut') failed: preserve_index out of range: \
             4 is not in [0, 4) for an input of shape [2,2] {lib}"
        )
    );
    let e = zero_out(&ctx, Tensor::from_vec(&[0], Vec::<f32>::new()).unwrap(), 0).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("is not in [0, 0)"), "{e}");
    // The same kernel still works afterwards.
    let y = zero_out(
        &ctx,
        Tensor::from_vec(&[5], vec![1i32, 2, 3, 4, 5]).unwrap(),
        4,
    )
    .unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 0, 0, 0, 5]);
}

#[test]
fn zero_out_list_and_zero_out_int32_run_eagerly() {
    let _s = serial();
    let (r, _loader, _h) = setup("zo_rs_variants");
    let ctx = eager(&r);
    let ys = ctx
        .op("ZeroOutList")
        .input_list(vec![
            Tensor::from_vec(&[3], vec![1f32, 2., 3.]).unwrap(),
            Tensor::from_vec(&[2, 1], vec![4f32, 5.]).unwrap(),
            Tensor::from_vec(&[0], Vec::<f32>::new()).unwrap(),
        ])
        .run()
        .unwrap();
    assert_eq!(ys.len(), 3);
    assert_eq!(ys[0].flat::<f32>().unwrap(), &[1., 0., 0.]);
    assert_eq!(ys[1].dims(), &[2, 1]);
    assert_eq!(ys[1].flat::<f32>().unwrap(), &[4., 0.]);
    assert_eq!(ys[2].dims(), &[0]);
    let ys = ctx
        .op("ZeroOutList")
        .input_list(vec![Tensor::from_vec(&[2], vec![9i64, 9]).unwrap()])
        .run()
        .unwrap();
    assert_eq!(ys[0].flat::<i64>().unwrap(), &[9, 0]);
    // Mixed dtypes in one list are refused (N * T).
    let e = ctx
        .op("ZeroOutList")
        .input_list(vec![Tensor::scalar(1f32), Tensor::scalar(1i32)])
        .run()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");

    let y = ctx
        .op("ZeroOutInt32")
        .input(Tensor::from_vec(&[2, 2], vec![3i32, 4, 5, 6]).unwrap())
        .run1()
        .unwrap();
    assert_eq!(y.dims(), &[2, 2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[3, 0, 0, 0]);
    let y = ctx
        .op("ZeroOutInt32")
        .input(Tensor::from_vec(&[0], Vec::<i32>::new()).unwrap())
        .run1()
        .unwrap();
    assert_eq!(y.num_elements(), 0);
    // int32 only.
    let e = ctx
        .op("ZeroOutInt32")
        .input(Tensor::scalar(1f32))
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
}

#[test]
fn graph_shapes_come_from_the_plugins_shape_functions_and_a_session_runs_it() {
    let _s = serial();
    let (r, _loader, _h) = setup("zo_rs_graph");
    let mut g = Graph::with_registry(r.clone());
    let x = feed(&mut g, "x", DataType::Float, &[2, -1, 3]);
    let z = Output::new(
        g.add(
            NodeSpec::new("ZeroOut", "z")
                .input(x)
                .attr("preserve_index", 1i64),
        )
        .unwrap(),
        0,
    );
    assert_eq!(g.output_shape(z).unwrap(), Some(&[2, -1, 3][..]));
    let a = feed(&mut g, "a", DataType::Int32, &[4]);
    let i = Output::new(
        g.add(NodeSpec::new("ZeroOutInt32", "i").input(a)).unwrap(),
        0,
    );
    assert_eq!(g.output_shape(i).unwrap(), Some(&[4][..]));
    let b = feed(&mut g, "b", DataType::Int32, &[1, 2]);
    let l = g
        .add(NodeSpec::new("ZeroOutList", "l").input_list(vec![a, b]))
        .unwrap();
    assert_eq!(g.output_shape(Output::new(l, 0)).unwrap(), Some(&[4][..]));
    assert_eq!(
        g.output_shape(Output::new(l, 1)).unwrap(),
        Some(&[1, 2][..])
    );
    // Chained: the plugin's output feeds the plugin again.
    let z2 = Output::new(
        g.add(
            NodeSpec::new("ZeroOut", "z2")
                .input(z)
                .attr("preserve_index", 1i64),
        )
        .unwrap(),
        0,
    );
    assert_eq!(g.output_shape(z2).unwrap(), Some(&[2, -1, 3][..]));

    let s = Session::new(g).unwrap();
    let xs: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    let out = s
        .run(
            vec![
                (x, Tensor::from_vec(&[2, 2, 3], xs).unwrap()),
                (a, Tensor::from_vec(&[4], vec![7i32, 8, 9, 10]).unwrap()),
                (b, Tensor::from_vec(&[1, 2], vec![11i32, 12]).unwrap()),
            ],
            &[z, z2, i, Output::new(l, 0), Output::new(l, 1)],
            &[],
        )
        .unwrap();
    let mut want = [0f32; 12];
    want[1] = 2.;
    assert_eq!(out[0].dims(), &[2, 2, 3]);
    assert_eq!(out[0].flat::<f32>().unwrap(), &want[..]);
    // z2 keeps element 1 of z too: the same values.
    assert_eq!(out[1].dims(), &[2, 2, 3]);
    assert_eq!(out[1].flat::<f32>().unwrap(), &want[..]);
    assert_eq!(out[2].flat::<i32>().unwrap(), &[7, 0, 0, 0]);
    assert_eq!(out[3].flat::<i32>().unwrap(), &[7, 0, 0, 0]);
    assert_eq!(out[4].flat::<i32>().unwrap(), &[11, 0]);
    // A run-time error of the plugin surfaces from the session.
    let e = s
        .run(
            vec![
                (x, Tensor::from_vec(&[1, 1, 1], vec![1f32]).unwrap()),
                (a, Tensor::from_vec(&[4], vec![0i32; 4]).unwrap()),
                (b, Tensor::from_vec(&[1, 2], vec![0i32; 2]).unwrap()),
            ],
            &[z],
            &[],
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("preserve_index out of range"), "{e}");
}

#[test]
fn zero_out_gradient_through_autodiff() {
    let _s = serial();
    let r = std_registry();
    let loader = Loader::new(r.clone());
    loader.load(plugin("zo_rs_grad")).unwrap();
    let ctx = eager(&r);
    let mut attrs = AttrMap::new();
    attrs.insert("preserve_index".into(), 1i64.into_attr_value());
    // Eagerly, on a tape: the guide's sparse gradient, 1 at the kept index.
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[3], vec![1f32, 2., 3.]).unwrap());
    let y = tape.call("ZeroOut", &[SymArg::One(x)], &attrs).unwrap()[0];
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    assert_eq!(g[0].as_ref().unwrap().flat::<f32>().unwrap(), &[0., 1., 0.]);
    // The numeric gradient checker agrees, for ZeroOut and ZeroOutList.
    let a = attrs.clone();
    let jac =
        compute_gradient(
            &ctx,
            &move |ops: &mut dyn Ops, xs: &[Sym]| {
                Ok(ops.call("ZeroOut", &[SymArg::One(xs[0])], &a)?[0])
            },
            &[Tensor::from_vec(&[2, 2], vec![0.5f64, -1., 2., 4.]).unwrap()],
        )
        .unwrap();
    assert!(
        compute_gradient_error(&jac) < 1e-6,
        "{}",
        compute_gradient_error(&jac)
    );
    let mut list_attrs = AttrMap::new();
    list_attrs.insert("N".into(), 2i64.into_attr_value());
    let jac = compute_gradient(
        &ctx,
        &move |ops: &mut dyn Ops, xs: &[Sym]| {
            Ok(ops.call("ZeroOutList", &[SymArg::List(xs.to_vec())], &list_attrs)?[1])
        },
        &[
            Tensor::from_vec(&[2], vec![0.5f64, -1.]).unwrap(),
            Tensor::from_vec(&[3], vec![2f64, 3., 4.]).unwrap(),
        ],
    )
    .unwrap();
    assert!(
        compute_gradient_error(&jac) < 1e-6,
        "{}",
        compute_gradient_error(&jac)
    );
    // In a graph: gradients() adds the plugin gradient's ZeroOut.
    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
            .unwrap(),
        0,
    );
    let y = Output::new(
        g.add(
            NodeSpec::new("ZeroOut", "y")
                .input(x)
                .attr("preserve_index", 2i64),
        )
        .unwrap(),
        0,
    );
    let dx = gradients(&mut g, &[y], &[x], None).unwrap()[0].unwrap();
    // Second order: the gradient is ZeroOut again, itself differentiable.
    let ddx = gradients(&mut g, &[dx], &[x], None).unwrap()[0];
    let s = Session::new(g).unwrap();
    let out = s
        .run(
            vec![(x, Tensor::from_vec(&[4], vec![4f32, 5., 6., 7.]).unwrap())],
            &[dx],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[0., 0., 1., 0.]);
    // dx does not depend on x: no second-order gradient (None) or zeros.
    if let Some(ddx) = ddx {
        let out = s
            .run(
                vec![(x, Tensor::from_vec(&[4], vec![4f32, 5., 6., 7.]).unwrap())],
                &[ddx],
                &[],
            )
            .unwrap();
        assert!(out[0].flat::<f32>().unwrap().iter().all(|&v| v == 0.));
    }
    // ZeroOutInt32 is registered not differentiable.
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[2], vec![1i32, 2]).unwrap());
    let y = tape
        .call("ZeroOutInt32", &[SymArg::One(x)], &AttrMap::new())
        .unwrap()[0];
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    assert!(g[0].is_none());
}

#[test]
fn sixteen_threads_call_the_plugin_kernel_concurrently() {
    let _s = serial();
    let (r, _loader, _h) = setup("zo_rs_threads");
    let ctx = eager(&r);
    std::thread::scope(|t| {
        for th in 0..16i32 {
            let ctx = &ctx;
            t.spawn(move || {
                for i in 0..500i32 {
                    let n = 1 + (i % 7) as usize;
                    let v: Vec<i32> = (0..n as i32).map(|k| th * 100_000 + i * 10 + k).collect();
                    let keep = (th as usize) % n;
                    let y = zero_out(
                        ctx,
                        Tensor::from_vec(&[n as i64], v.clone()).unwrap(),
                        keep as i64,
                    )
                    .unwrap();
                    let y = y.flat::<i32>().unwrap();
                    for (k, &got) in y.iter().enumerate() {
                        assert_eq!(
                            got,
                            if k == keep { v[k] } else { 0 },
                            "thread {th} call {i}"
                        );
                    }
                    let f = zero_out(
                        ctx,
                        Tensor::from_vec(&[2], vec![th as f32, i as f32]).unwrap(),
                        1,
                    )
                    .unwrap();
                    assert_eq!(f.flat::<f32>().unwrap(), &[0., i as f32]);
                }
            });
        }
    });
}

#[test]
fn sixteen_threads_run_one_session_on_the_plugin_op() {
    let _s = serial();
    let (r, _loader, _h) = setup("zo_rs_threads_session");
    let mut g = Graph::with_registry(r.clone());
    let x = feed(&mut g, "x", DataType::Double, &[-1]);
    let z = Output::new(
        g.add(
            NodeSpec::new("ZeroOut", "z")
                .input(x)
                .attr("preserve_index", 3i64),
        )
        .unwrap(),
        0,
    );
    let s = Session::new(g).unwrap();
    std::thread::scope(|t| {
        for th in 0..16 {
            let s = &s;
            t.spawn(move || {
                for i in 0..200 {
                    let v: Vec<f64> = (0..4 + i % 5)
                        .map(|k| (th * 1000 + i * 10 + k) as f64)
                        .collect();
                    let n = v.len() as i64;
                    let out = s
                        .run(
                            vec![(x, Tensor::from_vec(&[n], v.clone()).unwrap())],
                            &[z],
                            &[],
                        )
                        .unwrap();
                    let y = out[0].flat::<f64>().unwrap();
                    for (k, &got) in y.iter().enumerate() {
                        assert_eq!(got, if k == 3 { v[3] } else { 0. }, "thread {th} run {i}");
                    }
                }
            });
        }
    });
}

/// The resident set size, from /proc/self/statm (pages of 4 KiB).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn load_run_unload_1000_cycles_with_flat_rss() {
    let _s = serial();
    let lib = plugin("zo_rs_cycles");
    let r = registry();
    let loader = Loader::new(r.clone());
    let mut at_100 = 0;
    for i in 1..=1000i32 {
        let h = loader.load(&lib).unwrap();
        {
            // Dropping the context on this thread drops its kernels.
            let ctx = eager(&r);
            let y = zero_out(&ctx, Tensor::from_vec(&[2], vec![i, i]).unwrap(), 1).unwrap();
            assert_eq!(y.flat::<i32>().unwrap(), &[0, i]);
        }
        let report = loader.unload(&h).unwrap();
        assert!(report.unmapped, "cycle {i}: {report:?}");
        assert_eq!(report.ops, plugin_ops_sorted(), "cycle {i}");
        assert!(r.op_def("ZeroOut").is_err());
        if i == 100 {
            at_100 = rss_bytes();
        }
    }
    let at_1000 = rss_bytes();
    let growth = at_1000 as i64 - at_100 as i64;
    println!(
        "RSS after cycle 100: {} KiB, after cycle 1000: {} KiB, growth over 900 cycles: {} KiB \
         ({} bytes per cycle)",
        at_100 / 1024,
        at_1000 / 1024,
        growth / 1024,
        growth / 900
    );
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(
        !maps.contains("zo_rs_cycles"),
        "still mapped after the last unload"
    );
    assert!(
        growth < 2 << 20,
        "RSS grew by {growth} bytes over 900 load/run/unload cycles"
    );
}

#[test]
fn unload_under_a_live_session_fails_it_cleanly_and_eager_calls_are_not_found() {
    let _s = serial();
    let lib = plugin("zo_rs_unload");
    let r = registry();
    let loader = Loader::new(r.clone());
    let h = loader.load(&lib).unwrap();
    let mut g = Graph::with_registry(r.clone());
    let x = feed(&mut g, "x", DataType::Int32, &[2]);
    let z = Output::new(g.add(NodeSpec::new("ZeroOut", "z").input(x)).unwrap(), 0);
    let s = Session::new(g).unwrap();
    let feeds = || vec![(x, Tensor::from_vec(&[2], vec![1i32, 2]).unwrap())];
    assert_eq!(
        s.run(feeds(), &[z], &[]).unwrap()[0].flat::<i32>().unwrap(),
        &[1, 0]
    );
    let ctx = eager(&r);
    zero_out(&ctx, Tensor::scalar(1i32), 0).unwrap();

    let report = loader.unload(&h).unwrap();
    assert_eq!(report.ops, plugin_ops_sorted());
    assert_eq!(report.kernels, 3);
    // The session (and the eager cache) still hold kernel instances.
    assert!(!report.unmapped, "{report:?}");
    assert!(
        report.note.as_deref().unwrap().contains("still held"),
        "{report:?}"
    );

    let e = s.run(feeds(), &[z], &[]).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert_eq!(
        e.message(),
        format!(
            "Node 'z' uses op 'ZeroOut', which was unloaded from the registry (it was registered \
             by library 'zero_out' ({})) after the node was created; load the library again and \
             rebuild the graph or session",
            std::fs::canonicalize(&lib).unwrap().display()
        )
    );
    let e = zero_out(&ctx, Tensor::scalar(1i32), 0).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message()
            .starts_with("Op type not registered 'ZeroOut' in binary running on this host."),
        "{e}"
    );
    let e = eager(&r)
        .op("ZeroOutInt32")
        .input(Tensor::scalar(1i32))
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Once the holders are gone the library is finalised and unmapped, and
    // it loads again.
    drop(s);
    drop(ctx);
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(
        !maps.contains("zo_rs_unload"),
        "still mapped with no holder"
    );
    let h2 = loader.load(&lib).unwrap();
    assert_ne!(h2.owner(), h.owner());
    assert_eq!(
        zero_out(
            &eager(&r),
            Tensor::from_vec(&[2], vec![3i32, 4]).unwrap(),
            1
        )
        .unwrap()
        .flat::<i32>()
        .unwrap(),
        &[0, 4]
    );
}

#[test]
fn unload_while_threads_call_the_kernel() {
    let _s = serial();
    let lib = plugin("zo_rs_unload_busy");
    let r = registry();
    let loader = Loader::new(r.clone());
    let h = loader.load(&lib).unwrap();
    let ctx = eager(&r);
    let started = std::sync::Barrier::new(9);
    let report = std::thread::scope(|t| {
        for th in 0..8i32 {
            let (ctx, started) = (&ctx, &started);
            t.spawn(move || {
                started.wait();
                let mut ok = 0;
                loop {
                    let v = vec![th, th + 1, th + 2];
                    match zero_out(ctx, Tensor::from_vec(&[3], v).unwrap(), 2) {
                        Ok(y) => {
                            assert_eq!(y.flat::<i32>().unwrap(), &[0, 0, th + 2]);
                            ok += 1;
                        }
                        Err(e) => {
                            assert_eq!(e.code(), Code::NotFound, "thread {th} after {ok}: {e}");
                            break;
                        }
                    }
                }
            });
        }
        started.wait();
        std::thread::sleep(std::time::Duration::from_millis(50));
        loader.unload(&h).unwrap()
    });
    assert_eq!(report.ops, plugin_ops_sorted());
    // Once the context is dropped and the threads are gone (their
    // recent-kernel caches are thread-locals, dropped when each thread
    // exits, which a scope's join does not wait for), nothing holds the
    // library: it is finalised and unmapped.
    drop(ctx);
    let start = std::time::Instant::now();
    while std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .contains("zo_rs_unload_busy")
    {
        assert!(
            start.elapsed().as_secs() < 10,
            "still mapped 10 s after the last holder was gone"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    println!(
        "unmapped {:?} after the context was dropped",
        start.elapsed()
    );
    loader.load(&lib).unwrap();
}

/// Two loaders (two sandbox registries) loading the same file: `dlopen`
/// gives both the one mapping, but each runs the library's init on it, and
/// unloading in one runs its fini under the other.
#[test]
fn a_second_loader_of_the_same_file_is_refused_and_a_copy_works() {
    let _s = serial();
    let lib = plugin("zo_rs_two_loaders");
    let (ra, rb) = (registry(), registry());
    let (la, lb) = (Loader::new(ra.clone()), Loader::new(rb.clone()));
    let ha = la.load(&lib).unwrap();
    // The dynamic linker would hand the second Loader the same mapping, and
    // its init would run over the first one's globals: refused, clearly.
    let e = lb.load(&lib).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
    assert!(
        e.message().contains("is already loaded by another Loader")
            && e.message().contains("load a copy of the file"),
        "{e}"
    );
    // A copy is another mapping: both registries then work independently.
    let copy = lib.with_file_name("zo_rs_two_loaders_copy.so");
    std::fs::copy(&lib, &copy).unwrap();
    lb.load(&copy).unwrap();
    let x = || Tensor::from_vec(&[2], vec![1i32, 2]).unwrap();
    assert_eq!(
        zero_out(&eager(&ra), x(), 1)
            .unwrap()
            .flat::<i32>()
            .unwrap(),
        &[0, 2]
    );
    assert_eq!(
        zero_out(&eager(&rb), x(), 1)
            .unwrap()
            .flat::<i32>()
            .unwrap(),
        &[0, 2]
    );
    la.unload(&ha).unwrap();
    // The other registry's copy is untouched: new kernels still work.
    let y = zero_out(&eager(&rb), x(), 0).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[1, 0]);
}

#[test]
fn the_guides_declaration_examples_load_as_the_guide_writes_them() {
    let _s = serial();
    let lib = plugin("zo_rs_guide_decls");
    let r = registry();
    let _h = Loader::new(r.clone()).load(&lib).unwrap();
    let sig = opforge_core::signature::python_signature;

    let op = r.op_def("AttrDefaultExampleForAllTypes").unwrap();
    assert!(op.input_arg.is_empty() && op.output_arg.is_empty());
    let names: Vec<&str> = op.attr.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["s", "i", "f", "b", "ty", "sh", "te", "l_empty", "l_int"]
    );
    assert!(op.attr.iter().all(|a| a.default_value.is_some()));
    assert_eq!(
        sig(&op),
        "attr_default_example_for_all_types(s='foo', i=0, f=1.0, b=True, ty=tf.int32, \
         sh=[1, 2], te=\"\"\"dtype: DT_INT32 int_val: 5\"\"\", l_empty=[], \
         l_int=[2, 3, 5, 7], name=None)"
    );

    let op = r.op_def("PolymorphicListExample").unwrap();
    assert_eq!(op.input_arg[0].type_list_attr, "T");
    assert_eq!(op.output_arg[0].type_list_attr, "T");

    let op = r.op_def("SameListInputExample").unwrap();
    assert_eq!(op.input_arg[0].number_attr, "N");
    assert_eq!(op.input_arg[0].type_attr, "T");
    assert_eq!(sig(&op), "same_list_input_example(in_, name=None)");

    let op = r.op_def("MinLengthIntListExample").unwrap();
    assert_eq!(op.input_arg[0].number_attr, "N");
    assert_eq!(op.input_arg[0].r#type, DataType::Int32 as i32);
    assert!(op.attr[0].has_minimum);
    assert_eq!(op.attr[0].minimum, 2);

    let op = r.op_def("MultipleInsAndOuts").unwrap();
    let types = |args: &[opforge_core::proto::op_def::ArgDef]| -> Vec<(String, i32)> {
        args.iter().map(|a| (a.name.clone(), a.r#type)).collect()
    };
    assert_eq!(
        types(&op.input_arg),
        [
            ("y".to_string(), DataType::Int32 as i32),
            ("z".to_string(), DataType::Float as i32)
        ]
    );
    assert_eq!(
        types(&op.output_arg),
        [
            ("a".to_string(), DataType::String as i32),
            ("b".to_string(), DataType::Int32 as i32)
        ]
    );
    let op = r.op_def("ZeroOut").unwrap();
    assert_eq!(sig(&op), "zero_out(to_zero, preserve_index=0, name=None)");
}
