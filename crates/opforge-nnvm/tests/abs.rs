//! The seed's `abs` example written NNVM style: `NNVM_REGISTER_OP`-like
//! static pieces (this file and `abs_parts/gradient.rs`), `FInferShape`,
//! `FInferType`, an `FCompute` honouring `Write`/`Add`/`Null` requests, and
//! an `FGradient` built from other ops. Registered into this test binary's
//! global registry only (the standard library's op list is not touched).

mod abs_parts {
    pub mod gradient;
}

use opforge_core::attrs::AttrMap;
use opforge_core::autodiff::{gradients, GradientTape, Ops, OpsExt};
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::kernel::{FInplaceOption, OutputBinding, OutputRequest};
use opforge_core::registry::Registry;
use opforge_core::{Code, DataType, Result, Status, Tensor};
use opforge_nnvm::{
    nnvm_register_op, register_static, Cpu, FCompute, FGradient, FInferShape, FInferType,
    NodeAttrs, Op, OpContext, OpMap, TShape,
};
use opforge_testing::util::{call_with_requests, check, const_node};
use std::cell::RefCell;
use std::sync::{Arc, Once};

extern crate opforge_ops as _;

fn abs_shape(attrs: &NodeAttrs<'_>, ins: &mut [TShape], outs: &mut [TShape]) -> Result<bool> {
    // Either side fills the other (MXNet's ElemwiseShape): unknown inputs too.
    let op = attrs.op();
    outs[0].assign(&ins[0], &format!("{op}: output 'output'"))?;
    ins[0].assign(&outs[0], &format!("{op}: input 'data'"))?;
    Ok(ins[0].is_known())
}

fn abs_type(
    attrs: &NodeAttrs<'_>,
    ins: &mut [Option<DataType>],
    outs: &mut [Option<DataType>],
) -> Result<bool> {
    match (ins[0], outs[0]) {
        (Some(a), Some(b)) if a != b => Err(Status::invalid_argument(format!(
            "{}: input 'data' is {a} but output 'output' is {b}",
            attrs.op()
        ))),
        (Some(t), _) | (None, Some(t)) => {
            ins[0] = Some(t);
            outs[0] = Some(t);
            Ok(true)
        }
        (None, None) => Ok(false),
    }
}

thread_local! {
    /// The requests the compute function saw on this thread.
    static SEEN: RefCell<Vec<OutputRequest>> = const { RefCell::new(Vec::new()) };
}

fn abs_elements<
    T: Copy + PartialOrd + std::ops::Neg<Output = T> + std::ops::AddAssign + Default,
>(
    x: &[T],
    out: &mut [T],
    req: OutputRequest,
) {
    for (o, &v) in out.iter_mut().zip(x) {
        let a = if v < T::default() { -v } else { v };
        match req {
            OutputRequest::Add => *o += a,
            _ => *o = a,
        }
    }
}

fn abs_compute(
    attrs: &NodeAttrs<'_>,
    _: &OpContext<'_, '_>,
    inputs: &[Tensor],
    req: &[OutputRequest],
    outputs: &mut [Tensor],
) -> Result<()> {
    SEEN.with(|s| s.borrow_mut().push(req[0]));
    if req[0] == OutputRequest::Null {
        return Ok(());
    }
    let x = &inputs[0];
    match x.dtype() {
        DataType::Float => abs_elements(x.flat::<f32>()?, outputs[0].flat_mut::<f32>()?, req[0]),
        DataType::Double => abs_elements(x.flat::<f64>()?, outputs[0].flat_mut::<f64>()?, req[0]),
        other => {
            return Err(Status::invalid_argument(format!(
                "{}: input 'data' must be float or double, got {other}",
                attrs.op()
            )))
        }
    }
    Ok(())
}

nnvm_register_op!("NnvmAbs", |op| op
    .describe("Returns the absolute value of the input, elementwise.")
    .set_num_inputs(1)
    .set_num_outputs(1)
    .add_argument("data", "NDArray-or-Symbol", "The input array.")
    .set_attr::<FInferShape>(Arc::new(abs_shape))
    .set_attr::<FInferType>(Arc::new(abs_type))
    .set_attr::<FInplaceOption>(Arc::new(|_: &AttrMap| vec![(0, 0)]))
    .set_attr::<FCompute<Cpu>>(Arc::new(abs_compute)));

fn registered() -> &'static Registry {
    static ONCE: Once = Once::new();
    let r = Registry::global();
    ONCE.call_once(|| {
        let ops = register_static(r).unwrap();
        assert!(ops.contains(&"NnvmAbs".to_string()), "{ops:?}");
    });
    r
}

fn t64(dims: &[i64], v: &[f64]) -> Tensor {
    Tensor::from_slice(dims, v).unwrap()
}

#[test]
fn abs_is_an_op_of_the_registry_with_the_synthesised_opdef() {
    let r = registered();
    let def = r.op_def("NnvmAbs").unwrap();
    assert_eq!(def.input_arg.len(), 1);
    assert_eq!(def.input_arg[0].name, "data");
    assert_eq!(def.input_arg[0].type_attr, "T");
    assert_eq!(def.input_arg[0].description, "The input array.");
    assert_eq!(def.output_arg.len(), 1);
    assert_eq!(def.output_arg[0].name, "output");
    assert_eq!(def.output_arg[0].type_attr, "T");
    let attrs: Vec<&str> = def.attr.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(attrs, ["T"]);
    assert_eq!(
        def.summary,
        "Returns the absolute value of the input, elementwise."
    );
    // The query API: the op is listed under each attribute it has.
    let op = Op::get(r, "NnvmAbs").unwrap();
    assert!(op.has_attr::<FInferShape>());
    assert!(op.has_attr::<FGradient>());
    assert!(op.has_attr::<opforge_core::shape_inference::ShapeFn>());
    assert!(op.has_attr::<opforge_core::autodiff::Gradient>());
    assert!(!op.has_attr::<opforge_nnvm::FResourceRequest>());
    assert!(r
        .ops_with_attr::<FCompute>()
        .contains(&"NnvmAbs".to_string()));
    let map = OpMap::<FInferType>::of(r);
    assert!(map.contains("NnvmAbs"));
    assert!(!map.contains("Abs"), "the standard Abs has no FInferType");
    assert!(op.attr_names().contains(&"FCompute<cpu>"));
    // Finishing the static pieces again changes nothing.
    register_static(r).unwrap();
    assert!(Op::get(r, "NoSuchNnvmOp").is_err());
}

#[test]
fn abs_runs_eagerly() {
    registered();
    let ctx = opforge_testing::gradcheck::cpu();
    let y = ctx
        .op("NnvmAbs")
        .input(t64(&[2, 2], &[-1.5, 2.0, 0.0, -3.25]))
        .run1()
        .unwrap();
    assert_eq!(y.dims(), &[2, 2]);
    assert_eq!(y.flat::<f64>().unwrap(), &[1.5, 2.0, 0.0, 3.25]);
    let y = ctx
        .op("NnvmAbs")
        .input(Tensor::from_vec(&[3], vec![-1.0f32, 4.0, -0.5]).unwrap())
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[1.0, 4.0, 0.5]);
    let e = ctx
        .op("NnvmAbs")
        .input(Tensor::from_vec(&[1], vec![-1i32]).unwrap())
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("NnvmAbs: input 'data' must be float or double, got int32"),
        "{e}"
    );
}

#[test]
fn abs_runs_in_a_graph_and_infers_shapes() {
    registered();
    let mut g = Graph::new();
    let x = const_node(&mut g, "x", &t64(&[3], &[-2.0, 0.5, -0.25]));
    let id = g.add(NodeSpec::new("NnvmAbs", "abs").input(x)).unwrap();
    let y = Output::new(id, 0);
    assert_eq!(g.output_shape(y).unwrap(), Some(&[3i64][..]));
    let sess = Session::new(g).unwrap();
    let out = sess.run(vec![], &[y], &[]).unwrap();
    assert_eq!(out[0].flat::<f64>().unwrap(), &[2.0, 0.5, 0.25]);
}

#[test]
fn abs_gradient_in_a_graph_and_on_the_tape() {
    registered();
    let xv = [-2.0, 0.5, -0.25];
    // Graph gradients().
    let mut g = Graph::new();
    let x = const_node(&mut g, "x", &t64(&[3], &xv));
    let id = g.add(NodeSpec::new("NnvmAbs", "abs").input(x)).unwrap();
    let dx = gradients(&mut g, &[Output::new(id, 0)], &[x], None).unwrap();
    let dx = dx[0].expect("a gradient for x");
    let out = Session::new(g).unwrap().run(vec![], &[dx], &[]).unwrap();
    assert_eq!(out[0].flat::<f64>().unwrap(), &[-1.0, 1.0, -1.0]);
    // The eager tape, with a weighted upstream gradient.
    let ctx = opforge_testing::gradcheck::cpu();
    let mut tape = GradientTape::new(ctx, false);
    let xs = tape.watch(t64(&[3], &xv));
    let y = tape.op1("NnvmAbs", &[xs], &[]).unwrap();
    let w = tape.constant(t64(&[3], &[3.0, 5.0, 7.0])).unwrap();
    let z = tape.mul(y, w).unwrap();
    let grads = tape.gradient(z, &[xs]).unwrap();
    let gx = tape.value(grads[0].unwrap()).unwrap();
    assert_eq!(gx.flat::<f64>().unwrap(), &[-3.0, 5.0, -7.0]);
}

#[test]
fn abs_gradient_checks_numerically_on_cpu_and_fake_device() {
    registered();
    check(
        "NnvmAbs",
        &|o, xs| o.op1("NnvmAbs", &[xs[0]], &[]),
        &[(vec![2, 3], vec![1.3, -2.7, 0.6, -4.1, 3.2, -0.45])],
    );
}

#[test]
fn abs_kernel_honours_add_and_null_requests() {
    registered();
    SEEN.with(|s| s.borrow_mut().clear());
    let x = t64(&[3], &[-1.0, 2.0, -3.0]);
    let acc = t64(&[3], &[10.0, 20.0, 30.0]);
    let out = call_with_requests(
        "NnvmAbs",
        vec![x.clone()],
        &[],
        &mut [OutputBinding::Add(acc)],
    )
    .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.flat::<f64>().unwrap(), &[11.0, 22.0, 33.0]);
    // The compute function itself was asked to add (the kernel declares Add).
    assert_eq!(SEEN.with(|s| s.borrow().clone()), [OutputRequest::Add]);

    let out =
        call_with_requests("NnvmAbs", vec![x.clone()], &[], &mut [OutputBinding::Null]).unwrap();
    assert!(out.is_empty());
    let out =
        call_with_requests("NnvmAbs", vec![x.clone()], &[], &mut [OutputBinding::Write]).unwrap();
    assert_eq!(out[0].1.flat::<f64>().unwrap(), &[1.0, 2.0, 3.0]);
    assert_eq!(
        SEEN.with(|s| s.borrow().clone()),
        [
            OutputRequest::Add,
            OutputRequest::Null,
            OutputRequest::Write
        ]
    );

    let bad = t64(&[2], &[0.0, 0.0]);
    let e =
        call_with_requests("NnvmAbs", vec![x], &[], &mut [OutputBinding::Add(bad)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("NnvmAbs: output 0 is requested with Add into an accumulator of shape [2], but the output's shape is [3]"),
        "{e}"
    );
}

#[test]
fn abs_infer_shape_fills_an_unknown_input_from_the_output() {
    let r = registered();
    let f = r.attr::<FInferShape>("NnvmAbs").unwrap();
    let attrs = AttrMap::new();
    let node = NodeAttrs::new("NnvmAbs", "n", &attrs, None);
    let mut ins = [TShape::unknown()];
    let mut outs = [TShape::new(&[4, 2])];
    assert!(f(&node, &mut ins, &mut outs).unwrap());
    assert_eq!(ins[0], TShape::new(&[4, 2]));
    let mut ins = [TShape::new(&[4, 3])];
    let e = f(&node, &mut ins, &mut outs).unwrap_err();
    assert_eq!(
        e.message(),
        "NnvmAbs: output 'output': shape [4,2] is incompatible with shape [4,3]"
    );
}

#[test]
fn a_session_sums_abs_outputs_with_add_requests() {
    registered();
    // y = AddN(|a|, |b|, |c|): the executor chains the parts, the later
    // NnvmAbs nodes adding into the first one's buffer.
    let mut g = Graph::new();
    let a = const_node(&mut g, "a", &t64(&[2], &[-1.0, 2.0]));
    let b = const_node(&mut g, "b", &t64(&[2], &[3.0, -4.0]));
    let c = const_node(&mut g, "c", &t64(&[2], &[-0.5, -0.25]));
    let mut parts = Vec::new();
    for (name, x) in [("abs_a", a), ("abs_b", b), ("abs_c", c)] {
        let id = g.add(NodeSpec::new("NnvmAbs", name).input(x)).unwrap();
        parts.push(Output::new(id, 0));
    }
    let sum = g
        .add(NodeSpec::new("AddN", "sum").input_list(parts))
        .unwrap();
    let y = Output::new(sum, 0);
    let sess = Session::new(g).unwrap();
    let planned = sess.planned_requests(&[], &[y], &[]).unwrap();
    let adds: Vec<&str> = planned
        .iter()
        .filter(|(_, r)| r == &[OutputRequest::Add])
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(adds.len(), 2, "{planned:?}");
    assert!(adds.iter().all(|n| n.starts_with("abs_")), "{planned:?}");
    let out = sess.run(vec![], &[y], &[]).unwrap();
    assert_eq!(out[0].flat::<f64>().unwrap(), &[4.5, 6.25]);
}
