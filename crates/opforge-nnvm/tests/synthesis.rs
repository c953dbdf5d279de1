//! The OpDef synthesis rule, the adapters, resources, parameters and the
//! registration errors, each on a sandbox registry.

use opforge_core::attrs::AttrMap;
use opforge_core::autodiff::{Gradient, GradientContext, GradientFn, GradientTape, OpsExt, Sym};
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::kernel::OutputRequest;
use opforge_core::param::Parameter;
use opforge_core::registry::Registry;
use opforge_core::shape_inference::{InferenceContext, ShapeFn};
use opforge_core::{Code, DataType, Result, Tensor};
use opforge_nnvm::{
    FCompute, FGradient, FInferShape, FInferType, FListInputNames, FListOutputNames, FMutateInputs,
    FNumVisibleOutputs, FResourceRequest, NnvmOp, NodeAttrs, Op, OpContext, ResourceRequest,
    TIsBackward, TShape,
};
use std::sync::Arc;

extern crate opforge_ops as _;

fn eager(r: &Arc<Registry>) -> EagerContext {
    EagerContext::with_registry(Arc::new(CpuDevice::new(1).unwrap()), r.clone())
}

fn f32s(dims: &[i64], v: &[f32]) -> Tensor {
    Tensor::from_slice(dims, v).unwrap()
}

/// Every output (hidden ones too) shaped like input 0; input 1, if any,
/// merged with input 0 (so either fills the other).
/// (name, type attr) of each argument.
fn named_types(args: &[opforge_core::proto::op_def::ArgDef]) -> Vec<(&str, &str)> {
    args.iter()
        .map(|a| (a.name.as_str(), a.type_attr.as_str()))
        .collect()
}

fn like_first(a: &NodeAttrs<'_>, ins: &mut [TShape], outs: &mut [TShape]) -> Result<bool> {
    if ins.len() > 1 {
        let (first, rest) = ins.split_at_mut(1);
        first[0].assign(&rest[0], &format!("{}: input 0", a.op()))?;
        rest[0].assign(&first[0], &format!("{}: input 1", a.op()))?;
    }
    for (j, o) in outs.iter_mut().enumerate() {
        o.assign(&ins[0], &format!("{}: output {j}", a.op()))?;
    }
    Ok(outs.iter().all(TShape::is_known))
}

/// Every input and output takes the first known dtype (MXNet's ElemwiseType).
fn tie_types(
    _: &NodeAttrs<'_>,
    ins: &mut [Option<DataType>],
    outs: &mut [Option<DataType>],
) -> Result<bool> {
    let Some(t) = ins.iter().chain(outs.iter()).flatten().copied().next() else {
        return Ok(false);
    };
    for slot in ins.iter_mut().chain(outs.iter_mut()) {
        *slot = Some(t);
    }
    Ok(true)
}

/// Output k = sum of the float inputs + k (every output written).
fn sum_plus_index(
    _: &NodeAttrs<'_>,
    _: &OpContext<'_, '_>,
    ins: &[Tensor],
    req: &[OutputRequest],
    outs: &mut [Tensor],
) -> Result<()> {
    for (k, out) in outs.iter_mut().enumerate() {
        assert_eq!(req[k], OutputRequest::Write, "eager calls ask Write");
        let o = out.flat_mut::<f32>()?;
        o.fill(k as f32);
        for t in ins {
            for (a, b) in o.iter_mut().zip(t.flat::<f32>()?) {
                *a += b;
            }
        }
    }
    Ok(())
}

#[test]
fn default_names_and_one_type_attr_per_input() {
    let r = Arc::new(Registry::new());
    NnvmOp::new("NnvmPair")
        .set_num_inputs(2)
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FCompute>(Arc::new(sum_plus_index))
        .finish(&r)
        .unwrap();
    let def = r.op_def("NnvmPair").unwrap();
    let ins = named_types(&def.input_arg);
    assert_eq!(ins, [("arg0", "T0"), ("arg1", "T1")]);
    assert_eq!(def.output_arg[0].name, "output");
    assert_eq!(def.output_arg[0].type_attr, "T0");
    let attrs: Vec<&str> = def.attr.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(attrs, ["T0", "T1"]);
    let y = eager(&r)
        .op("NnvmPair")
        .input(f32s(&[2], &[1.0, 2.0]))
        .input(f32s(&[2], &[10.0, 20.0]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[11.0, 22.0]);
    let one = Arc::new(Registry::new());
    NnvmOp::new("NnvmOne")
        .set_attr::<FInferShape>(Arc::new(like_first))
        .finish(&one)
        .unwrap();
    let def = one.op_def("NnvmOne").unwrap();
    assert_eq!(def.input_arg[0].name, "data");
    assert_eq!(def.input_arg[0].type_attr, "T");
    // No FCompute: an op without a kernel.
    assert!(one.kernels_for("NnvmOne").is_empty());
}

#[test]
fn listed_names_tied_types_and_hidden_outputs() {
    let r = Arc::new(Registry::new());
    NnvmOp::new("NnvmHidden")
        .set_num_inputs(2)
        .set_num_outputs(3)
        .set_attr::<FListInputNames>(Arc::new(|_: &NodeAttrs<'_>| {
            vec!["lhs".into(), "rhs".into()]
        }))
        .set_attr::<FListOutputNames>(Arc::new(|_: &NodeAttrs<'_>| {
            vec!["out".into(), "second".into(), "workspace".into()]
        }))
        .set_attr::<FNumVisibleOutputs>(Arc::new(|_: &NodeAttrs<'_>| 2))
        .set_attr::<FInferType>(Arc::new(tie_types))
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FCompute>(Arc::new(sum_plus_index))
        .finish(&r)
        .unwrap();
    let def = r.op_def("NnvmHidden").unwrap();
    let ins = named_types(&def.input_arg);
    assert_eq!(ins, [("lhs", "T"), ("rhs", "T")]);
    let outs = named_types(&def.output_arg);
    assert_eq!(outs, [("out", "T"), ("second", "T")]);
    assert_eq!(def.attr.len(), 1);
    let ys = eager(&r)
        .op("NnvmHidden")
        .input(f32s(&[2], &[1.0, 2.0]))
        .input(f32s(&[2], &[3.0, 4.0]))
        .run()
        .unwrap();
    assert_eq!(ys.len(), 2, "the hidden output is dropped");
    assert_eq!(ys[0].flat::<f32>().unwrap(), &[4.0, 6.0]);
    assert_eq!(ys[1].flat::<f32>().unwrap(), &[5.0, 7.0]);
    // Tied types: mixing dtypes is refused when the call is resolved.
    let e = eager(&r)
        .op("NnvmHidden")
        .input(f32s(&[1], &[1.0]))
        .input(Tensor::from_vec(&[1], vec![1.0f64]).unwrap())
        .run()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

/// Output 0 like input 1's dtype; output 1 always int32.
fn second_and_int(
    _: &NodeAttrs<'_>,
    ins: &mut [Option<DataType>],
    outs: &mut [Option<DataType>],
) -> Result<bool> {
    outs[0] = ins[1];
    outs[1] = Some(DataType::Int32);
    Ok(outs.iter().all(Option::is_some))
}

#[test]
fn untied_types_follow_the_input_or_are_fixed() {
    let r = Registry::new();
    NnvmOp::new("NnvmMixed")
        .set_num_inputs(2)
        .set_num_outputs(2)
        .set_attr::<FInferType>(Arc::new(second_and_int))
        .set_attr::<FInferShape>(Arc::new(like_first))
        .finish(&r)
        .unwrap();
    let def = r.op_def("NnvmMixed").unwrap();
    assert_eq!(def.input_arg[0].type_attr, "T0");
    assert_eq!(def.input_arg[1].type_attr, "T1");
    assert_eq!(def.output_arg[0].name, "output");
    assert_eq!(def.output_arg[0].type_attr, "T1");
    assert_eq!(def.output_arg[1].name, "output1");
    assert_eq!(def.output_arg[1].r#type, DataType::Int32 as i32);
    assert!(def.output_arg[1].type_attr.is_empty());
}

#[derive(Parameter, Clone, Debug)]
struct ScaleParam {
    /// The factor.
    #[param(default = 2.0, lower_bound = 0.0)]
    scale: f32,
}

fn scale_compute(
    attrs: &NodeAttrs<'_>,
    _: &OpContext<'_, '_>,
    ins: &[Tensor],
    _: &[OutputRequest],
    outs: &mut [Tensor],
) -> Result<()> {
    let p: ScaleParam = attrs.params()?;
    for (o, &x) in outs[0]
        .flat_mut::<f32>()?
        .iter_mut()
        .zip(ins[0].flat::<f32>()?)
    {
        *o = p.scale * x;
    }
    Ok(())
}

#[test]
fn the_parameter_struct_gives_the_attrs_and_checks_them() {
    let r = Arc::new(Registry::new());
    NnvmOp::new("NnvmScale")
        .describe("Scales its input.")
        .set_attr_parser::<ScaleParam>()
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FCompute>(Arc::new(scale_compute))
        .finish(&r)
        .unwrap();
    let def = r.op_def("NnvmScale").unwrap();
    let scale = def.attr.iter().find(|a| a.name == "scale").unwrap();
    assert_eq!(scale.r#type, "float");
    assert_eq!(scale.description, "The factor.");
    let ctx = eager(&r);
    let y = ctx
        .op("NnvmScale")
        .input(f32s(&[2], &[1.0, -2.0]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[2.0, -4.0]);
    let y = ctx
        .op("NnvmScale")
        .input(f32s(&[2], &[1.0, -2.0]))
        .attr("scale", 0.5f32)
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[0.5, -1.0]);
    let e = ctx
        .op("NnvmScale")
        .input(f32s(&[1], &[1.0]))
        .attr("scale", -1.0f32)
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("NnvmScale: invalid value -1 for parameter 'scale': must be >= 0"),
        "{e}"
    );
}

fn temp_compute(
    _: &NodeAttrs<'_>,
    ctx: &OpContext<'_, '_>,
    ins: &[Tensor],
    _: &[OutputRequest],
    outs: &mut [Tensor],
) -> Result<()> {
    // A workspace as large as the input: squares, then copied out.
    let mut tmp = ctx.requested_temp(DataType::Float, ins[0].dims())?;
    for (t, &x) in tmp.flat_mut::<f32>()?.iter_mut().zip(ins[0].flat::<f32>()?) {
        *t = x * x;
    }
    outs[0]
        .flat_mut::<f32>()?
        .copy_from_slice(tmp.flat::<f32>()?);
    Ok(())
}

#[test]
fn temporary_workspace_only_when_requested() {
    let r = Arc::new(Registry::new());
    NnvmOp::new("NnvmTemp")
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FResourceRequest>(Arc::new(|_: &NodeAttrs<'_>| {
            vec![ResourceRequest::TempSpace]
        }))
        .set_attr::<FCompute>(Arc::new(temp_compute))
        .finish(&r)
        .unwrap();
    NnvmOp::new("NnvmNoTemp")
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FCompute>(Arc::new(temp_compute))
        .finish(&r)
        .unwrap();
    let ctx = eager(&r);
    let y = ctx
        .op("NnvmTemp")
        .input(f32s(&[3], &[1.0, -2.0, 3.0]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[1.0, 4.0, 9.0]);
    let e = ctx
        .op("NnvmNoTemp")
        .input(f32s(&[1], &[1.0]))
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().contains(
            "NnvmNoTemp: the compute function asked for temporary workspace, but the op's \
             FResourceRequest does not request TempSpace"
        ),
        "{e}"
    );
}

fn copy_compute(
    _: &NodeAttrs<'_>,
    _: &OpContext<'_, '_>,
    ins: &[Tensor],
    _: &[OutputRequest],
    outs: &mut [Tensor],
) -> Result<()> {
    outs[0]
        .flat_mut::<f32>()?
        .copy_from_slice(ins[0].flat::<f32>()?);
    Ok(())
}

#[test]
fn a_shape_fn_gives_an_finfer_shape_and_sizes_the_kernel() {
    let r = Arc::new(Registry::new());
    let shape_fn: Arc<opforge_core::shape_inference::ShapeFunction> =
        Arc::new(|c: &mut InferenceContext| {
            let s = c.input(0);
            c.set_output(0, s);
            Ok(())
        });
    NnvmOp::new("NnvmTfShape")
        .set_attr::<ShapeFn>(shape_fn)
        .set_attr::<FCompute>(Arc::new(copy_compute))
        .finish(&r)
        .unwrap();
    let f = Op::get(&r, "NnvmTfShape")
        .unwrap()
        .get_attr::<FInferShape>()
        .unwrap();
    let attrs = AttrMap::new();
    let node = NodeAttrs::new("NnvmTfShape", "n", &attrs, None);
    let mut ins = [TShape::new(&[2, -1])];
    let mut outs = [TShape::unknown()];
    assert!(!f(&node, &mut ins, &mut outs).unwrap());
    assert_eq!(outs[0], TShape::new(&[2, -1]));
    let y = eager(&r)
        .op("NnvmTfShape")
        .input(f32s(&[2], &[5.0, 6.0]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[5.0, 6.0]);
}

#[test]
fn the_shape_fn_from_finfer_shape_refines_unknown_inputs() {
    let r = Registry::new();
    NnvmOp::new("NnvmMerge")
        .set_num_inputs(2)
        .set_attr::<FInferShape>(Arc::new(like_first))
        .finish(&r)
        .unwrap();
    let def = r.op_def("NnvmMerge").unwrap();
    let f = r.attr::<ShapeFn>("NnvmMerge").unwrap();
    let mut ic = InferenceContext::new(&def, "m", &AttrMap::new(), &[Some(vec![2, 3]), None], 1);
    f(&mut ic).unwrap();
    let in1 = ic.input(1);
    assert_eq!(ic.shape_values(in1), Some(vec![2, 3]));
    let out = ic.output(0).unwrap();
    assert_eq!(ic.shape_values(out), Some(vec![2, 3]));
    let mut ic = InferenceContext::new(
        &def,
        "m",
        &AttrMap::new(),
        &[Some(vec![2]), Some(vec![3])],
        1,
    );
    let e = f(&mut ic).unwrap_err();
    assert_eq!(
        e.message(),
        "NnvmMerge: input 0: shape [2] is incompatible with shape [3]"
    );
}

fn double_compute(
    _: &NodeAttrs<'_>,
    _: &OpContext<'_, '_>,
    ins: &[Tensor],
    _: &[OutputRequest],
    outs: &mut [Tensor],
) -> Result<()> {
    for (o, &x) in outs[0]
        .flat_mut::<f64>()?
        .iter_mut()
        .zip(ins[0].flat::<f64>()?)
    {
        *o = 2.0 * x;
    }
    Ok(())
}

fn double_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let two = ctx.scalar(DataType::Double, 2.0)?;
    let dx = ctx.mul(g, two)?;
    ctx.set_input_grad(0, dx)
}

#[test]
fn gradients_adapt_both_ways() {
    let r = Arc::new(Registry::with_builtins());
    // Core's Gradient given: the op gets an FGradient from it.
    NnvmOp::new("NnvmDouble")
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FCompute>(Arc::new(double_compute))
        .set_attr::<Gradient>(Arc::new(GradientFn::from_fn(double_grad)))
        .finish(&r)
        .unwrap();
    let fgrad = r
        .attr::<FGradient>("NnvmDouble")
        .expect("an FGradient adapted from Gradient");
    // That FGradient given to another op: core's Gradient comes from it.
    NnvmOp::new("NnvmDoubleToo")
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FCompute>(Arc::new(double_compute))
        .set_attr::<FGradient>(fgrad)
        .finish(&r)
        .unwrap();
    let ctx = eager(&r);
    for op in ["NnvmDouble", "NnvmDoubleToo"] {
        let mut tape = GradientTape::new(&ctx, false);
        let x = tape.watch(Tensor::from_vec(&[2], vec![1.0f64, -4.0]).unwrap());
        let y = tape.op1(op, &[x], &[]).unwrap();
        let z = tape.op1(op, &[y], &[]).unwrap();
        let g = tape.gradient(z, &[x]).unwrap();
        assert_eq!(
            tape.value(g[0].unwrap()).unwrap().flat::<f64>().unwrap(),
            &[4.0, 4.0],
            "{op}"
        );
    }
    // A not-differentiable op has no FGradient.
    NnvmOp::new("NnvmFlat")
        .set_attr::<Gradient>(Arc::new(GradientFn::NotDifferentiable))
        .finish(&r)
        .unwrap();
    assert!(r.attr::<FGradient>("NnvmFlat").is_none());
}

fn wrong_count(_: &mut GradientContext<'_>, _: &[Sym]) -> Result<Vec<Option<Sym>>> {
    Ok(vec![None, None])
}

#[test]
fn an_fgradient_with_the_wrong_number_of_entries_is_an_error() {
    let r = Arc::new(Registry::with_builtins());
    NnvmOp::new("NnvmBadGrad")
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FCompute>(Arc::new(double_compute))
        .set_attr::<FGradient>(Arc::new(wrong_count))
        .finish(&r)
        .unwrap();
    let ctx = eager(&r);
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[1], vec![1.0f64]).unwrap());
    let y = tape.op1("NnvmBadGrad", &[x], &[]).unwrap();
    let e = tape.gradient(y, &[x]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains(
            "the FGradient of op 'NnvmBadGrad' returned 2 gradient entries; the op has 1 inputs"
        ),
        "{e}"
    );
}

fn other_shape(_: &NodeAttrs<'_>, _: &mut [TShape], outs: &mut [TShape]) -> Result<bool> {
    outs[0] = TShape::new(&[1]);
    Ok(true)
}

#[test]
fn registration_errors_name_the_op() {
    let r = Registry::new();
    let e = NnvmOp::new("NnvmTwice")
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FInferShape>(Arc::new(other_shape))
        .finish(&r)
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.message(), "op 'NnvmTwice': FInferShape is set twice");
    assert!(r.lookup("NnvmTwice").is_err(), "nothing registered");

    let e = NnvmOp::new("NnvmNoShape")
        .set_attr::<FCompute>(Arc::new(copy_compute))
        .finish(&r)
        .unwrap_err();
    assert_eq!(
        e.message(),
        "NNVM op 'NnvmNoShape': an op with an FCompute needs an FInferShape (or a ShapeFn) to \
         size its outputs"
    );
    let e = NnvmOp::new("NnvmNames")
        .set_num_inputs(2)
        .set_attr::<FListInputNames>(Arc::new(|_: &NodeAttrs<'_>| vec!["only".into()]))
        .finish(&r)
        .unwrap_err();
    assert_eq!(
        e.message(),
        "NNVM op 'NnvmNames': FListInputNames gives 1 names for 2 Inputs"
    );
    let e = NnvmOp::new("nnvm_lower").finish(&r).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    // A different op under a taken name.
    NnvmOp::new("NnvmTaken").finish(&r).unwrap();
    let e = NnvmOp::new("NnvmTaken")
        .set_num_inputs(2)
        .finish(&r)
        .unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists);
}

#[test]
fn mutate_inputs_and_is_backward_are_kept() {
    let r = Registry::new();
    NnvmOp::new("NnvmUpdate")
        .set_attr::<FMutateInputs>(Arc::new(|_: &NodeAttrs<'_>| vec![0]))
        .set_attr::<TIsBackward>(Arc::new(true))
        .finish(&r)
        .unwrap();
    assert!(r.op_def("NnvmUpdate").unwrap().is_stateful);
    let op = Op::get(&r, "NnvmUpdate").unwrap();
    assert!(*op.get_attr::<TIsBackward>().unwrap());
    let attrs = AttrMap::new();
    let f = op.get_attr::<FMutateInputs>().unwrap();
    assert_eq!(f(&NodeAttrs::new("NnvmUpdate", "u", &attrs, None)), [0]);
    assert_eq!(r.ops_with_attr::<TIsBackward>(), ["NnvmUpdate"]);
}

#[test]
fn the_python_wrapper_is_generated_from_the_synthesised_opdef() {
    let r = Registry::new();
    NnvmOp::new("NnvmScaled")
        .describe("Scales its input.\n\nEvery element is multiplied by `scale`.")
        .add_argument("data", "NDArray-or-Symbol", "The input array.")
        .set_attr_parser::<ScaleParam>()
        .set_attr::<FInferShape>(Arc::new(like_first))
        .finish(&r)
        .unwrap();
    let def = r.op_def("NnvmScaled").unwrap();
    assert_eq!(
        opforge_core::signature::snake_case(&def.name),
        "nnvm_scaled"
    );
    assert_eq!(
        opforge_core::signature::python_signature(&def),
        "nnvm_scaled(data, scale=2.0, name=None)"
    );
    let doc = opforge_core::signature::python_docstring(&def);
    assert!(
        doc.starts_with("Scales its input.\n\nEvery element is multiplied by `scale`."),
        "{doc}"
    );
    assert!(
        doc.contains("  data: A `Tensor`.\n    The input array."),
        "{doc}"
    );
    assert!(
        doc.contains("  scale: An optional `float`. Defaults to `2.0`.\n    The factor."),
        "{doc}"
    );
}

/// A device of the test's own, as another crate would add one.
struct OtherDevice;
impl opforge_nnvm::DeviceKind for OtherDevice {
    const DEVICE_TYPE: &'static str = "OTHER";
    const FCOMPUTE_NAME: &'static str = "FCompute<other>";
}

#[test]
fn one_kernel_per_fcompute_device() {
    let r = Registry::new();
    NnvmOp::new("NnvmTwoDevices")
        .set_attr::<FInferShape>(Arc::new(like_first))
        .set_attr::<FCompute>(Arc::new(copy_compute))
        .set_attr::<FCompute<OtherDevice>>(Arc::new(copy_compute))
        .finish(&r)
        .unwrap();
    let mut devices: Vec<String> = r
        .kernels_for("NnvmTwoDevices")
        .iter()
        .map(|k| k.def.device_type.clone())
        .collect();
    devices.sort();
    assert_eq!(devices, ["CPU", "OTHER"]);
    assert_eq!(
        r.ops_with_attr::<FCompute<OtherDevice>>(),
        ["NnvmTwoDevices"]
    );
    let names = Op::get(&r, "NnvmTwoDevices").unwrap().attr_names();
    assert!(
        names.contains(&"FCompute<cpu>") && names.contains(&"FCompute<other>"),
        "{names:?}"
    );
}
