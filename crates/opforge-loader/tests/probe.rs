//! The host's kernel and shape APIs, driven by a C test library
//! (tests/c/probe.c): forwarding, pass-through, foreign outputs, attrs read
//! at creation, temporaries, parallel_for, error codes, and calls the host
//! must refuse without crashing.

use opforge_core::attrs::AttrMap;
use opforge_core::autodiff::Gradient;
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::registry::Registry;
use opforge_core::shape_inference::{InferenceContext, ShapeFn};
use opforge_core::Code;
use opforge_core::{DataType, OpDefBuilder, Tensor};
use opforge_loader::{LibraryHandle, Loader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn build(name: &str) -> PathBuf {
    opforge_testing::examples::build_c_library(
        "crates/opforge-loader/tests/c/probe.c",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        name,
        &[],
    )
}

fn setup(name: &str) -> (PathBuf, Arc<Registry>, Loader, LibraryHandle, EagerContext) {
    let lib = build(name);
    // The standard ops: ProbeSquare's declarative gradient calls AddV2 and Mul.
    opforge_ops::link();
    let r = Registry::with_builtins();
    r.register_op(
        OpDefBuilder::new("TFeed")
            .attr("dtype: type")
            .output("y: dtype"),
    )
    .unwrap();
    let r = Arc::new(r);
    let loader = Loader::new(r.clone());
    let h = loader.load(&lib).unwrap();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(4).unwrap()), r.clone());
    (lib, r, loader, h, ctx)
}

/// A counter the library exports, read through its own symbol.
fn counter(lib: &Path, name: &str) -> i32 {
    // SAFETY: the library is already loaded (this only adds a reference),
    // and the symbol is `int name(void)` in tests/c/probe.c.
    unsafe {
        let l = libloading::Library::new(lib).unwrap();
        let f: libloading::Symbol<'_, unsafe extern "C" fn() -> i32> =
            l.get(name.as_bytes()).unwrap();
        f()
    }
}

#[test]
fn outputs_forward_pass_through_and_wrap_plugin_memory() {
    let (lib, _r, _loader, h, ctx) = setup("probe_outputs");
    assert_eq!(h.name(), "probe");
    // A uniquely owned input is forwarded (computed in place)...
    let y = ctx
        .op("ProbeForward")
        .input(Tensor::from_vec(&[3], vec![1f32, 2., 3.]).unwrap())
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[2., 4., 6.]);
    // ... a shared one is not (the caller's tensor is unchanged).
    let x = Tensor::from_vec(&[2], vec![5f32, 6.]).unwrap();
    let y = ctx.op("ProbeForward").input(x.clone()).run1().unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[10., 12.]);
    assert_eq!(x.flat::<f32>().unwrap(), &[5., 6.]);
    // set_output_from_input shares the input's storage.
    let x = Tensor::from_vec(&[2], vec![7i64, 8]).unwrap();
    let y = ctx.op("ProbePass").input(x.clone()).run1().unwrap();
    assert!(y.shares_storage_with(&x));
    let s = Tensor::from_strings(&[1], vec![b"hi".to_vec()]).unwrap();
    assert_eq!(
        ctx.op("ProbePass")
            .input(s)
            .run1()
            .unwrap()
            .strings()
            .unwrap()[0],
        b"hi"
    );
    // Foreign outputs: released exactly once, when the last tensor goes.
    let before = counter(&lib, "probe_released");
    let y = ctx
        .op("ProbeForeign")
        .input(Tensor::scalar(4i32))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[0., 1., 2., 3.]);
    let y2 = y.clone();
    drop(y);
    assert_eq!(counter(&lib, "probe_released"), before);
    drop(y2);
    assert_eq!(counter(&lib, "probe_released"), before + 1);
    let y = ctx
        .op("ProbeForeign")
        .input(Tensor::scalar(0i32))
        .run1()
        .unwrap();
    assert_eq!(y.num_elements(), 0);
}

#[test]
fn attrs_are_read_at_creation_and_state_is_destroyed() {
    let (lib, _r, _loader, _h, ctx) = setup("probe_attrs");
    let x = || Tensor::from_vec(&[2], vec![1f32, 2.]).unwrap();
    // Defaults: scale 2, offsets [1, 2], mode "abc": y = 2x + 3 + 3.
    let y = ctx.op("ProbeAttrs").input(x()).run1().unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[8., 10.]);
    let y = ctx
        .op("ProbeAttrs")
        .input(x())
        .attr("scale", 0.5f32)
        .attr("offsets", vec![10i64])
        .attr("mode", "")
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[10.5, 11.]);
    // An empty list reads as an empty INT list.
    let y = ctx
        .op("ProbeAttrs")
        .input(x())
        .attr("offsets", Vec::<i64>::new())
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[5., 7.]);
    // A failing create is the node's construction error, with the library named.
    let e = ctx
        .op("ProbeAttrs")
        .input(x())
        .attr("scale", -1f32)
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("scale must be >= 0"), "{e}");
    assert!(
        e.message().contains("kernel creation of op 'ProbeAttrs'"),
        "{e}"
    );
    assert!(e.message().contains("[library probe 0.0.1"), "{e}");
    // Kernel instances are destroyed when the context drops them.
    let before = counter(&lib, "probe_destroyed");
    drop(ctx);
    assert_eq!(counter(&lib, "probe_destroyed"), before + 3);
}

#[test]
fn callback_codes_become_statuses_naming_library_and_op() {
    let (_lib, _r, _loader, _h, ctx) = setup("probe_errors");
    let run = |code: i64| {
        ctx.op("ProbeError")
            .input(Tensor::scalar(1f32))
            .attr("code", code)
            .run1()
            .unwrap_err()
    };
    let e = run(3);
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("the kernel of op 'ProbeError'"), "{e}");
    assert!(e.message().contains("probe failed on purpose"), "{e}");
    assert!(e.message().contains("[library probe 0.0.1"), "{e}");
    assert_eq!(run(8).code(), Code::ResourceExhausted);
    let e = run(13);
    assert_eq!(e.code(), Code::Internal);
    assert!(e.message().contains("failed with no message"), "{e}");
    let e = run(99);
    assert_eq!(e.code(), Code::Unknown);
    assert!(e.message().contains("unknown code 99"), "{e}");
    // parallel_for: a failing shard's code and message win.
    let e = ctx
        .op("ProbeTemp")
        .input(Tensor::from_vec(&[3], vec![-1f32, 2., 3.]).unwrap())
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange);
    assert!(e.message().contains("negative first element"), "{e}");
    let n = 100_000;
    let v: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let want: f32 = v.iter().sum();
    let y = ctx
        .op("ProbeTemp")
        .input(Tensor::from_vec(&[n as i64], v).unwrap())
        .run1()
        .unwrap();
    assert_eq!(y.scalar_value::<f32>().unwrap(), want);
}

#[test]
fn shape_functions_refuse_forged_handles_and_report_errors() {
    let (_lib, r, _loader, _h, ctx) = setup("probe_shapes");
    let f = r.attr::<ShapeFn>("ProbeShape").unwrap();
    let def = r.op_def("ProbeShape").unwrap();
    let mut ic = InferenceContext::new(&def, "p", &AttrMap::new(), &[Some(vec![4])], 1);
    f(&mut ic).unwrap();
    assert_eq!(ic.debug_string(ic.output(0).unwrap()), "[4,7]");
    // The host's own message for a failed with_rank, with op and library.
    let mut ic = InferenceContext::new(&def, "p", &AttrMap::new(), &[Some(vec![4, 2])], 1);
    let e = f(&mut ic).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("Shape must be rank 1 but is rank 2"),
        "{e}"
    );
    assert!(
        e.message().contains("shape function of op 'ProbeShape'"),
        "{e}"
    );
    // In a graph and a session.
    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("TFeed", "x").attr("dtype", DataType::Float))
            .unwrap(),
        0,
    );
    let y = g.add(NodeSpec::new("ProbeShape", "y").input(x)).unwrap();
    let s = Session::new(g).unwrap();
    let out = s
        .run(
            vec![(x, Tensor::from_vec(&[3], vec![1f32, 2., 3.]).unwrap())],
            &[Output::new(y, 0)],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].dims(), &[3, 7]);
    assert_eq!(
        ctx.op("ProbeShape")
            .input(Tensor::from_vec(&[1], vec![1f32]).unwrap())
            .run1()
            .unwrap()
            .dims(),
        &[1, 7]
    );
    // not_differentiable was registered; the refused registrations were not.
    assert!(r
        .attr::<Gradient>("ProbeShape")
        .unwrap()
        .is_not_differentiable());
    assert!(r.op_def("NoSuchOp").is_err());
    // A struct from a newer header registered; a too short one did not.
    assert_eq!(r.op_def("ProbeNewer").unwrap().output_arg[0].name, "y");
    assert!(r.op_def("ProbeTooShort").is_err());
}

#[test]
fn sixteen_threads_call_one_plugin_kernel() {
    let (_lib, _r, _loader, _h, ctx) = setup("probe_threads");
    std::thread::scope(|t| {
        for i in 0..16 {
            let ctx = &ctx;
            t.spawn(move || {
                for j in 0..200 {
                    let v = (i * 1000 + j) as f32;
                    let y = ctx
                        .op("ProbeForward")
                        .input(Tensor::from_vec(&[2], vec![v, 1.]).unwrap())
                        .run1()
                        .unwrap();
                    assert_eq!(y.flat::<f32>().unwrap(), &[2. * v, 2.]);
                    // NOT_THREAD_SAFE kernels are serialised.
                    let x = Tensor::scalar(v);
                    let y = ctx.op("ProbePass").input(x).run1().unwrap();
                    assert_eq!(y.scalar_value::<f32>().unwrap(), v);
                }
            });
        }
    });
}

#[test]
fn panics_on_many_threads_replace_states_safely_and_destroy_each_once() {
    let (lib, _r, _loader, _h, ctx) = setup("probe_panic_threads");
    let created = counter(&lib, "probe_panic_states");
    let destroyed = counter(&lib, "probe_destroyed");
    // Joined threads (not scoped ones): join returns after a thread's
    // thread-locals, the eager kernels it cached among them, are dropped.
    let ctx = Arc::new(ctx);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let ctx = ctx.clone();
            std::thread::spawn(move || {
                for j in 0..300 {
                    // Every 7th call of each thread panics.
                    let v = if (i + j) % 7 == 0 { -1f32 } else { 1f32 };
                    let r = ctx
                        .op("ProbePanic")
                        .input(Tensor::from_vec(&[1], vec![v]).unwrap())
                        .run1();
                    match r {
                        Ok(y) => assert!(y.scalar_value::<f32>().unwrap() >= 1.),
                        Err(e) => {
                            assert_eq!(e.code(), Code::Internal, "{e}");
                            assert!(e.message().contains("state poisoned"), "{e}");
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let ctx = Arc::into_inner(ctx).unwrap();
    let made = counter(&lib, "probe_panic_states") - created;
    assert!(made >= 2, "no state was replaced ({made} made)");
    drop(ctx);
    assert_eq!(
        counter(&lib, "probe_destroyed") - destroyed,
        made,
        "every state made is destroyed exactly once"
    );
}

#[test]
fn unload_runs_fini_once_nothing_holds_the_library() {
    let (lib, r, loader, h, ctx) = setup("probe_fini");
    ctx.op("ProbeForward")
        .input(Tensor::scalar(1f32))
        .run1()
        .unwrap();
    let foreign = ctx
        .op("ProbeForeign")
        .input(Tensor::scalar(2i32))
        .run1()
        .unwrap();
    drop(ctx);
    // Keep our own reference to the mapping to read the counters after.
    // SAFETY: the library is loaded already; this adds a reference.
    let pin = unsafe { libloading::Library::new(&lib).unwrap() };
    // Unloading only if unused is refused while the foreign output lives.
    let e = loader.unload_if_unused(&h).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message()
            .contains("0 kernel instances and 1 outputs backed by its memory"),
        "{e}"
    );
    assert!(r.op_def("ProbeForward").is_ok());
    let report = loader.unload(&h).unwrap();
    assert_eq!(report.ops.len(), 11);
    // The foreign output still holds the library.
    assert!(!report.unmapped, "{report:?}");
    assert_eq!(counter(&lib, "probe_fini_calls"), 0);
    assert!(r.op_def("ProbeForward").is_err());
    assert_eq!(foreign.flat::<f32>().unwrap(), &[0., 1.]);
    drop(foreign);
    assert_eq!(counter(&lib, "probe_fini_calls"), 1);
    drop(pin);
}

#[test]
fn gradient_callbacks_build_gradients_from_registered_ops() {
    use opforge_core::autodiff::{
        compute_gradient, compute_gradient_error, gradients, GradientTape, Ops, SymArg,
    };
    opforge_ops::link();
    let lib = build("probe_grad");
    let r = Arc::new(Registry::with_builtins());
    let loader = Loader::new(r.clone());
    loader.load(&lib).unwrap();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone());
    // Eagerly, on a tape: d(sum(3x))/dx = 3.
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[2], vec![1f32, 2.]).unwrap());
    let y = tape
        .call("ProbeScale", &[SymArg::One(x)], &AttrMap::new())
        .unwrap()[0];
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    assert_eq!(g[0].as_ref().unwrap().flat::<f32>().unwrap(), &[3., 3.]);
    // The numeric gradient checker agrees.
    let jac = compute_gradient(
        &ctx,
        &|ops: &mut dyn opforge_core::autodiff::Ops, xs: &[opforge_core::autodiff::Sym]| {
            Ok(ops.call("ProbeScale", &[SymArg::One(xs[0])], &AttrMap::new())?[0])
        },
        &[Tensor::from_vec(&[3], vec![0.5f32, -1., 2.]).unwrap()],
    )
    .unwrap();
    assert!(
        compute_gradient_error(&jac) < 1e-2,
        "{}",
        compute_gradient_error(&jac)
    );
    // In a graph: gradients() adds the plugin gradient's Mul.
    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
            .unwrap(),
        0,
    );
    let y = Output::new(g.add(NodeSpec::new("ProbeScale", "y").input(x)).unwrap(), 0);
    let dx = gradients(&mut g, &[y], &[x], None).unwrap()[0].unwrap();
    let s = Session::new(g).unwrap();
    let out = s
        .run(
            vec![(x, Tensor::from_vec(&[2], vec![4f32, 5.]).unwrap())],
            &[dx],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[3., 3.]);
}

#[test]
fn declarative_gradients_run_without_plugin_code() {
    use opforge_core::autodiff::{
        compute_gradient, compute_gradient_error, gradients, GradientTape, Ops, SymArg,
    };
    opforge_ops::link();
    let lib = build("probe_decl");
    let r = Arc::new(Registry::with_builtins());
    let loader = Loader::new(r.clone());
    loader.load(&lib).unwrap();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone());
    // d(x^2)/dx = 2x, built from AddV2 and Mul.
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[3], vec![1f32, -2., 0.5]).unwrap());
    let y = tape
        .call("ProbeSquare", &[SymArg::One(x)], &AttrMap::new())
        .unwrap()[0];
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    assert_eq!(
        g[0].as_ref().unwrap().flat::<f32>().unwrap(),
        &[2., -4., 1.]
    );
    let jac = compute_gradient(
        &ctx,
        &|ops: &mut dyn Ops, xs: &[opforge_core::autodiff::Sym]| {
            Ok(ops.call("ProbeSquare", &[SymArg::One(xs[0])], &AttrMap::new())?[0])
        },
        &[Tensor::from_vec(&[2], vec![0.5f32, 3.]).unwrap()],
    )
    .unwrap();
    assert!(
        compute_gradient_error(&jac) < 1e-2,
        "{}",
        compute_gradient_error(&jac)
    );
    // Higher order: the gradient of the gradient is 2 (AddV2 and Mul are differentiable).
    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
            .unwrap(),
        0,
    );
    let y = Output::new(
        g.add(NodeSpec::new("ProbeSquare", "y").input(x)).unwrap(),
        0,
    );
    let dx = gradients(&mut g, &[y], &[x], None).unwrap()[0].unwrap();
    let ddx = gradients(&mut g, &[dx], &[x], None).unwrap()[0].unwrap();
    let s = Session::new(g).unwrap();
    let out = s
        .run(
            vec![(x, Tensor::from_vec(&[2], vec![4f32, 5.]).unwrap())],
            &[dx, ddx],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[8., 10.]);
    assert_eq!(out[1].flat::<f32>().unwrap(), &[2., 2.]);
    // Unloading removes the op and its gradient.
    drop(s);
    drop(ctx);
    loader.unload(&loader.libraries()[0]).unwrap();
    assert!(r.attr::<Gradient>("ProbeSquare").is_none());
}

#[test]
fn a_panicked_kernel_state_is_replaced_and_destroyed() {
    let (lib, _r, _loader, _h, ctx) = setup("probe_panic");
    let run = |v: f32| {
        ctx.op("ProbePanic")
            .input(Tensor::from_vec(&[1], vec![v]).unwrap())
            .run1()
    };
    let first = run(1.).unwrap().scalar_value::<f32>().unwrap();
    assert_eq!(run(2.).unwrap().scalar_value::<f32>().unwrap(), first);
    let destroyed = counter(&lib, "probe_destroyed");
    let e = run(-1.).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(e.message().contains("panicked: state poisoned"), "{e}");
    assert!(
        e.message().contains("the kernel instance was rebuilt"),
        "{e}"
    );
    // A new state serves the next calls. The instance's first state (used
    // without a lock, so a compute on another thread may still be running
    // on it) is destroyed with the instance, not now.
    assert_eq!(run(3.).unwrap().scalar_value::<f32>().unwrap(), first + 1.);
    assert_eq!(counter(&lib, "probe_destroyed"), destroyed);
    // Later states are read-locked by each compute: the next panic
    // destroys the state it poisoned at once.
    let e = run(-2.).unwrap_err();
    assert!(
        e.message().contains("the kernel instance was rebuilt"),
        "{e}"
    );
    assert_eq!(counter(&lib, "probe_destroyed"), destroyed + 1);
    assert_eq!(run(4.).unwrap().scalar_value::<f32>().unwrap(), first + 2.);
    // Dropping the instance destroys the first state and the current one:
    // each of the three states made was destroyed once.
    drop(ctx);
    assert_eq!(counter(&lib, "probe_destroyed"), destroyed + 3);
}
