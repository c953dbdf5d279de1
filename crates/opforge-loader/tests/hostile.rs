//! The ABI's own rules kept against a hostile library (tests/c/hostile.c):
//! unknown callback codes carry their number (R3), handles of an earlier
//! call are refused (R7), forged and foreign context pointers are refused
//! before any dereference (R9), and no shape above TensorFlow's 254
//! dimensions is made from what a plugin passes. Each test builds its own
//! copy of the library (the library keeps per-test state in globals).

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{gradients, GradientTape, Ops, SymArg};
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::registry::Registry;
use opforge_core::shape_inference::{InferenceContext, ShapeFn};
use opforge_core::{Code, DataType, Status, Tensor};
use opforge_loader::Loader;
use std::path::Path;
use std::sync::Arc;

/// The hostile library built as `name`, loaded into a registry with the
/// standard ops (Placeholder for graphs), and an eager context on it.
fn setup(name: &str) -> (Arc<Registry>, Loader, EagerContext) {
    let lib = opforge_testing::examples::build_c_library(
        "crates/opforge-loader/tests/c/hostile.c",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        name,
        &[],
    );
    opforge_ops::link();
    let r = Arc::new(Registry::with_builtins());
    let loader = Loader::new(r.clone());
    loader.load(&lib).unwrap();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(4).unwrap()), r.clone());
    (r, loader, ctx)
}

fn x() -> Tensor {
    Tensor::from_vec(&[2], vec![1f32, 2.]).unwrap()
}

/// Runs `op` eagerly on [`x`] with one int attr.
fn run(ctx: &EagerContext, op: &str, attr: &str, v: i64) -> Result<Tensor, Status> {
    ctx.op(op).input(x()).attr(attr, v).run1()
}

/// The gradient of `op` at [`x`], eagerly on a tape.
fn eager_gradient(ctx: &EagerContext, op: &str) -> Result<Tensor, Status> {
    let mut tape = GradientTape::new(ctx, false);
    let x = tape.watch(x());
    let y = tape.call(op, &[SymArg::One(x)], &AttrMap::new())?[0];
    let g = tape.gradient_tensors(y, &[x])?;
    Ok(g[0].clone().expect("a gradient flows"))
}

/// A graph `y = op(x)` for a float placeholder `x`.
fn graph_of(
    r: &Arc<Registry>,
    op: &str,
    attr: Option<(&str, i64)>,
) -> Result<(Graph, Output, Output), Status> {
    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))?,
        0,
    );
    let mut spec = NodeSpec::new(op, "y").input(x);
    if let Some((name, v)) = attr {
        spec = spec.attr(name, v);
    }
    let y = Output::new(g.add(spec)?, 0);
    Ok((g, x, y))
}

fn assert_error(e: &Status, code: Code, parts: &[&str]) {
    assert_eq!(e.code(), code, "{e}");
    for p in parts {
        assert!(e.message().contains(p), "'{p}' is not in: {e}");
    }
}

#[test]
fn unknown_callback_codes_are_unknown_with_their_number() {
    let (r, _loader, ctx) = setup("hostile_codes");
    for code in [12345i64, -1] {
        let e = run(&ctx, "HostileComputeCode", "code", code).unwrap_err();
        assert_error(
            &e,
            Code::Unknown,
            &[
                "the kernel of op 'HostileComputeCode'",
                "failed with no message",
                &format!("(it returned the unknown code {code})"),
                "[library hostile 0.0.1",
            ],
        );
        assert!(!e.message().contains("unknown code 0"), "{e}");
        let e = run(&ctx, "HostileCreateCode", "code", code).unwrap_err();
        assert_error(
            &e,
            Code::Unknown,
            &[
                "the kernel creation of op 'HostileCreateCode'",
                &format!("(it returned the unknown code {code})"),
            ],
        );
    }
    // A shape function that set a message under its unknown code.
    let e = graph_of(&r, "HostileShapeCode", None).err().unwrap();
    assert_error(
        &e,
        Code::Unknown,
        &[
            "the shape function of op 'HostileShapeCode'",
            "the shape function says no",
            "(it returned the unknown code 12345)",
        ],
    );
    // A gradient callback returning -1.
    let e = eager_gradient(&ctx, "HostileGradCode").unwrap_err();
    assert_error(
        &e,
        Code::Unknown,
        &[
            "the gradient function of op 'HostileGradCode'",
            "(it returned the unknown code -1)",
        ],
    );
}

#[test]
fn shape_handles_of_an_earlier_call_are_refused() {
    let (r, _loader, _ctx) = setup("hostile_stale_shape");
    let f = r.attr::<ShapeFn>("HostileStaleShape").unwrap();
    let def = r.op_def("HostileStaleShape").unwrap();
    let call = |which: i64| {
        let mut attrs = AttrMap::new();
        attrs.insert("which".into(), which.into_attr_value());
        let mut ic = InferenceContext::new(&def, "n", &attrs, &[Some(vec![4, 2])], 1);
        f(&mut ic).map(|()| ic.debug_string(ic.output(0).unwrap()))
    };
    // The first call keeps its handles (and works).
    assert_eq!(call(0).unwrap(), "[4,2]");
    // Later calls have the same inputs, so the kept handles' indices are
    // valid in them: refused all the same, for being of another call.
    for (which, what) in [(0, "shape"), (1, "dimension")] {
        let e = call(which).unwrap_err();
        assert_error(
            &e,
            Code::InvalidArgument,
            &[
                "the shape function of op 'HostileStaleShape'",
                &format!("{what} handle 0x"),
                "is not a handle of this call",
                "rule R7",
            ],
        );
    }
}

#[test]
fn value_handles_of_an_earlier_gradient_call_are_refused() {
    let (_r, _loader, ctx) = setup("hostile_stale_grad");
    assert_eq!(
        eager_gradient(&ctx, "HostileStaleGrad")
            .unwrap()
            .flat::<f32>()
            .unwrap(),
        &[1., 1.]
    );
    let e = eager_gradient(&ctx, "HostileStaleGrad").unwrap_err();
    assert_error(
        &e,
        Code::InvalidArgument,
        &[
            "the gradient function of op 'HostileStaleGrad'",
            "value handle 0x",
            "is not a handle of this call",
        ],
    );
}

#[test]
fn forged_and_foreign_contexts_are_refused_before_any_dereference() {
    let (r, _loader, ctx) = setup("hostile_forge");
    // Mode 0 checks, from create, compute and its parallel_for work
    // functions, that every forged pointer, every context of another kind
    // and create's finished init is refused (the op fails naming any the
    // host let through), then copies its input.
    let y = run(&ctx, "HostileForge", "mode", 0).unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[1., 2.]);
    // The host's answer to an unmapped context pointer.
    let e = run(&ctx, "HostileForge", "mode", 1).unwrap_err();
    assert_error(
        &e,
        Code::InvalidArgument,
        &[
            "an OpforgeKernelCtx (0x1000) that is not the context of the callback running on \
             this thread",
            "rules R7 and R9",
        ],
    );
    // ... and to a work function of parallel_for that uses the context.
    let e = run(&ctx, "HostileForge", "mode", 2).unwrap_err();
    assert_error(
        &e,
        Code::InvalidArgument,
        &[
            "a parallel_for shard of op 'HostileForge'",
            "that is not the context of the callback running on this thread",
            "not in parallel_for work functions",
        ],
    );
    // The shape function's checks (in a graph), and the gradient
    // callback's, whose `call` runs HostileNested: its kernel (eagerly) and
    // its shape function (in a graph) run on this thread while the call
    // holds the gradient context, and must find it refused.
    let dx = eager_gradient(&ctx, "HostileForge").unwrap();
    assert_eq!(dx.flat::<f32>().unwrap(), &[1., 1.]);
    let (mut g, x, y) = graph_of(&r, "HostileForge", None).unwrap();
    let dx = gradients(&mut g, &[y], &[x], None).unwrap()[0].unwrap();
    assert_eq!(g.node(dx.node).unwrap().op, "HostileNested");
    let out = Session::new(g)
        .unwrap()
        .run(
            vec![(x, Tensor::from_vec(&[2], vec![3f32, 4.]).unwrap())],
            &[y, dx],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[3., 4.]);
    assert_eq!(out[1].flat::<f32>().unwrap(), &[1., 1.]);
}

#[test]
fn no_shape_above_254_dimensions_is_made_from_a_plugin() {
    let (r, _loader, ctx) = setup("hostile_rank");
    // Kernels: allocate_output, allocate_temp, forward_input_or_allocate_output
    // and set_output_foreign refuse before reading the dims.
    for (how, call, rank) in [
        (0, "allocate_output of op 'HostileRank' (output 0)", 100_000),
        (1, "allocate_temp of op 'HostileRank'", 255),
        (
            2,
            "forward_input_or_allocate_output of op 'HostileRank' (output 0)",
            255,
        ),
        (3, "set_output_foreign of op 'HostileRank' (output 0)", 255),
    ] {
        let e = run(&ctx, "HostileRank", "how", how).unwrap_err();
        assert_error(
            &e,
            Code::InvalidArgument,
            &[
                &format!("{call}: Too many dimensions in tensor"),
                &format!("a shape of rank {rank} was asked for"),
                "at most 254 dimensions",
            ],
        );
    }
    // Rank 254 is TensorFlow's maximum, and allowed.
    let y = run(&ctx, "HostileRank", "how", 4).unwrap();
    assert_eq!((y.rank(), y.flat::<f32>().unwrap()), (254, &[7f32][..]));
    // Shape functions: every way of making a shape refuses rank 255 and
    // up (checked by the library; the graph builds only if all refused).
    graph_of(&r, "HostileRank", Some(("how", 4))).unwrap();
    let e = graph_of(&r, "HostileRank", Some(("how", 10)))
        .err()
        .unwrap();
    assert_error(
        &e,
        Code::InvalidArgument,
        &[
            "the shape function of op 'HostileRank'",
            "make_shape_from_values: Too many dimensions in tensor",
            "a shape of rank 100000 was asked for",
        ],
    );
    // Gradients: a constant of rank 255.
    let e = eager_gradient(&ctx, "HostileRank").unwrap_err();
    assert_error(
        &e,
        Code::InvalidArgument,
        &[
            "the gradient function of op 'HostileRank'",
            "a tensor value: Too many dimensions in tensor",
        ],
    );
}
