//! The demo ops: `ZeroOut` from TensorFlow's "Create an op" guide, and the
//! guide's examples of attrs, defaults and polymorphic inputs.

use opforge_core::dtype::REAL_NUMBER_TYPES;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::common::{no_outputs, unchanged_shape, unknown_shape};
use opforge_core::{
    dispatch, ensure, register_kernel, register_op, Element, OpDefBuilder, Result, Status,
};
use opforge_ops_base::args::fmt_shape;

/// The ops this file registers (its tests check them).
#[cfg(test)]
const OPS: &[&str] = &[
    "ZeroOut",
    "AttrDefaultExampleForAllTypes",
    "PolymorphicListExample",
    "SameListInputExample",
    "MinLengthIntListExample",
    "MultipleInsAndOuts",
];

/// `ZeroOut`: the op of TensorFlow's "Create an op" guide.
pub fn zero_out() -> OpDefBuilder {
    OpDefBuilder::new("ZeroOut")
        .attr("T: realnumbertype = DT_INT32")
        .attr("preserve_index: int = 0")
        .input("to_zero: T")
        .output("zeroed: T")
        .set_shape_fn(unchanged_shape)
        .doc(
            "Zeros out every element of the input except one.\n\
             \n\
             The output has the shape and type of the input. The element at flat\n\
             (row-major) index `preserve_index`, 0 by default, keeps its value;\n\
             every other element is set to zero.",
        )
}

/// `AttrDefaultExampleForAllTypes`: a default value for every attr type.
pub fn attr_default_example_for_all_types() -> OpDefBuilder {
    OpDefBuilder::new("AttrDefaultExampleForAllTypes")
        .attr("s: string = 'foo'")
        .attr("i: int = 0")
        .attr("f: float = 1.0")
        .attr("b: bool = true")
        .attr("ty: type = DT_INT32")
        .attr("sh: shape = { dim { size: 1 } dim { size: 2 } }")
        .attr("te: tensor = { dtype: DT_INT32 int_val: 5 }")
        .attr("l_empty: list(int) = []")
        .attr("l_int: list(int) = [2, 3, 5, 7]")
        .set_shape_fn(no_outputs)
        .doc("Shows a default value for an attr of every type.")
}

/// `PolymorphicListExample`: a list input whose element types may differ.
pub fn polymorphic_list_example() -> OpDefBuilder {
    OpDefBuilder::new("PolymorphicListExample")
        .attr("T: list(type)")
        .input("in: T")
        .output("out: T")
        .set_shape_fn(unknown_shape)
        .doc("Takes a list of tensors of any types and returns a list of the same types.")
}

/// `SameListInputExample`: a list input whose tensors all have one type.
pub fn same_list_input_example() -> OpDefBuilder {
    OpDefBuilder::new("SameListInputExample")
        .attr("N: int")
        .attr("T: type")
        .input("in: N * T")
        .output("out: T")
        .set_shape_fn(unknown_shape)
        .doc("Takes N tensors of one type T and returns one tensor of type T.")
}

/// `MinLengthIntListExample`: a list input of at least two `int32` tensors.
pub fn min_length_int_list_example() -> OpDefBuilder {
    OpDefBuilder::new("MinLengthIntListExample")
        .attr("N: int >= 2")
        .input("in: N * int32")
        .output("out: int32")
        .set_shape_fn(unknown_shape)
        .doc("Takes at least two int32 tensors and returns one int32 tensor.")
}

/// `MultipleInsAndOuts`: several inputs and outputs of fixed types.
pub fn multiple_ins_and_outs() -> OpDefBuilder {
    OpDefBuilder::new("MultipleInsAndOuts")
        .input("y: int32")
        .input("z: float")
        .output("a: string")
        .output("b: int32")
        .set_shape_fn(unknown_shape)
        .doc("Takes an int32 and a float tensor and returns a string and an int32 tensor.")
}

register_op!(zero_out());

/// `ZeroOut`'s kernel: `preserve_index` is checked at construction
/// (`>= 0`) and against each input's size.
struct ZeroOutKernel {
    preserve_index: usize,
}

impl CreateKernel for ZeroOutKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let preserve_index: i64 = ctx.get_attr("preserve_index")?;
        ensure!(
            preserve_index >= 0,
            InvalidArgument,
            "Need preserve_index >= 0, got {}",
            preserve_index
        );
        let preserve_index = usize::try_from(preserve_index).map_err(|_| {
            Status::invalid_argument(format!(
                "preserve_index {preserve_index} does not fit in memory indices"
            ))
        })?;
        Ok(ZeroOutKernel { preserve_index })
    }
}

/// Zeros `out` except element `keep`, which gets `x[keep]`.
fn zero_out_into<T: Element>(x: &[T], out: &mut [T], keep: usize) {
    let kept = x[keep];
    out.fill(T::default());
    out[keep] = kept;
}

/// Zeros `x` in place except element `keep`.
fn zero_out_in_place<T: Element>(x: &mut [T], keep: usize) {
    x[..keep].fill(T::default());
    x[keep + 1..].fill(T::default());
}

impl OpKernel for ZeroOutKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.input(0).num_elements();
        let keep = self.preserve_index;
        ensure!(
            keep < n,
            InvalidArgument,
            "preserve_index out of range: {} is not in [0, {}) for an input of shape {}",
            keep,
            n,
            fmt_shape(ctx.input(0).dims())
        );
        let dtype = ctx.input(0).dtype();
        let shape = ctx.input(0).shape().clone();
        let forwarded = ctx
            .forward_input_or_allocate_output(&[0], 0, &shape)?
            .is_some();
        dispatch!(
            dtype,
            T => if forwarded {
                zero_out_in_place(ctx.output_mut(0)?.flat_mut::<T>()?, keep);
                Ok(())
            } else {
                let (ins, out) = ctx.inputs_and_output(0)?;
                zero_out_into(ins[0].flat::<T>()?, out.flat_mut::<T>()?, keep);
                Ok(())
            },
            [Float, Double, Int32, UInt8, Int16, Int8, Int64, BFloat16, UInt16, Half, UInt32, UInt64],
            Err(Status::unimplemented(format!("ZeroOut does not support {dtype}")))
        )
    }
}

register_kernel!(
    KernelDefBuilder::new("ZeroOut").type_constraint_list("T", REAL_NUMBER_TYPES),
    ZeroOutKernel
);
register_op!(attr_default_example_for_all_types());
register_op!(polymorphic_list_example());
register_op!(same_list_input_example());
register_op!(min_length_int_list_example());
register_op!(multiple_ins_and_outs());

// ---- Gradients ----

/// `ZeroOut`'s gradient, from TensorFlow's "Create an op" guide: only the
/// kept element of the input gets a gradient (the guide's
/// `sparse_to_dense([index], shape, grad[index], 0)`). `ZeroOut` is linear,
/// so its gradient is `ZeroOut` of the incoming gradient with the same
/// `preserve_index` (the guide's op keeps element 0, the default): exactly
/// zeros elsewhere, and itself differentiable to any order.
mod gradients {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym};
    use opforge_core::{register_gradient, Result};

    fn zero_out_grad(
        o: &mut dyn Ops,
        op: &GradOp<'_>,
        grads: &[Option<Sym>],
    ) -> Result<Vec<Option<Sym>>> {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        let preserve_index: i64 = op.attr("preserve_index")?;
        Ok(vec![Some(o.op1(
            "ZeroOut",
            &[g],
            &[("preserve_index", preserve_index.into_attr_value())],
        )?)])
    }

    register_gradient!("ZeroOut", zero_out_grad);
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::proto::{self, attr_value::Value};
    use opforge_core::{registry, DataType, Registry};

    fn all() -> Vec<OpDefBuilder> {
        vec![
            zero_out(),
            attr_default_example_for_all_types(),
            polymorphic_list_example(),
            same_list_input_example(),
            min_length_int_list_example(),
            multiple_ins_and_outs(),
        ]
    }

    #[test]
    fn every_example_finalizes() {
        let builders = all();
        assert_eq!(
            builders.iter().map(|b| b.name()).collect::<Vec<_>>(),
            OPS,
            "OPS lists every example"
        );
        for b in builders {
            let op = b.finalize().unwrap_or_else(|e| panic!("{}: {e}", b.name()));
            assert_eq!(op.name, b.name());
            assert!(!op.summary.is_empty(), "{} has a summary", op.name);
        }
    }

    #[test]
    fn every_example_is_registered() {
        let global = Registry::global();
        global.verify().unwrap();
        for name in OPS {
            if registry::should_register_op(name, registry::OPS_TO_REGISTER) {
                let registered = global.op_def(name).unwrap();
                let built = all()
                    .into_iter()
                    .find(|b| b.name() == *name)
                    .unwrap()
                    .finalize()
                    .unwrap();
                assert_eq!(registered, built);
            }
        }
    }

    #[test]
    fn zero_out_op_def() {
        let op = zero_out().finalize().unwrap();
        assert_eq!(op.input_arg.len(), 1);
        assert_eq!(op.input_arg[0].name, "to_zero");
        assert_eq!(op.input_arg[0].type_attr, "T");
        assert_eq!(op.output_arg.len(), 1);
        assert_eq!(op.output_arg[0].name, "zeroed");
        assert_eq!(op.output_arg[0].type_attr, "T");
        assert_eq!(op.attr.len(), 2);
        let t = &op.attr[0];
        assert_eq!((t.name.as_str(), t.r#type.as_str()), ("T", "type"));
        assert_eq!(
            t.default_value.as_ref().and_then(|v| v.value.clone()),
            Some(Value::Type(DataType::Int32 as i32))
        );
        let Some(Value::List(allowed)) = t.allowed_values.as_ref().and_then(|v| v.value.clone())
        else {
            panic!("T has allowed values: {t:?}");
        };
        let expected: Vec<i32> = opforge_core::dtype::REAL_NUMBER_TYPES
            .iter()
            .map(|&d| d as i32)
            .collect();
        assert_eq!(allowed.r#type, expected);
        let p = &op.attr[1];
        assert_eq!(
            (p.name.as_str(), p.r#type.as_str()),
            ("preserve_index", "int")
        );
        assert_eq!(
            p.default_value.as_ref().and_then(|v| v.value.clone()),
            Some(Value::I(0))
        );
        assert_eq!(
            op.summary,
            "Zeros out every element of the input except one."
        );
        assert!(
            op.description.contains("preserve_index"),
            "{}",
            op.description
        );
        assert!(!op.is_stateful);
        assert_eq!(
            opforge_core::signature::python_signature(&op),
            "zero_out(to_zero, preserve_index=0, name=None)"
        );
    }

    #[test]
    fn guide_examples() {
        let op = attr_default_example_for_all_types().finalize().unwrap();
        assert!(op.input_arg.is_empty() && op.output_arg.is_empty());
        let names: Vec<&str> = op.attr.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            ["s", "i", "f", "b", "ty", "sh", "te", "l_empty", "l_int"]
        );
        assert!(op.attr.iter().all(|a| a.default_value.is_some()));
        assert_eq!(
            opforge_core::signature::python_signature(&op),
            "attr_default_example_for_all_types(s='foo', i=0, f=1.0, b=True, ty=tf.int32, \
             sh=[1, 2], te=\"\"\"dtype: DT_INT32 int_val: 5\"\"\", l_empty=[], \
             l_int=[2, 3, 5, 7], name=None)"
        );

        let op = polymorphic_list_example().finalize().unwrap();
        assert_eq!(op.input_arg[0].type_list_attr, "T");
        assert_eq!(op.output_arg[0].type_list_attr, "T");

        let op = same_list_input_example().finalize().unwrap();
        assert_eq!(op.input_arg[0].number_attr, "N");
        assert_eq!(op.input_arg[0].type_attr, "T");
        assert_eq!(
            opforge_core::signature::python_signature(&op),
            "same_list_input_example(in_, name=None)"
        );

        let op = min_length_int_list_example().finalize().unwrap();
        assert_eq!(op.input_arg[0].number_attr, "N");
        assert_eq!(op.input_arg[0].r#type, DataType::Int32 as i32);
        assert!(op.attr[0].has_minimum);
        assert_eq!(op.attr[0].minimum, 2);

        let op = multiple_ins_and_outs().finalize().unwrap();
        let types = |args: &[proto::op_def::ArgDef]| -> Vec<(String, i32)> {
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
    }

    use opforge_core::{Code, Tensor};
    use opforge_testing::util::{ctx, t};

    fn zero_out_run(x: Tensor, preserve_index: i64) -> opforge_core::Result<Tensor> {
        ctx()
            .op("ZeroOut")
            .input(x)
            .attr("preserve_index", preserve_index)
            .run1()
    }

    #[test]
    fn zero_out_keeps_one_element() {
        let y = zero_out_run(t(&[2, 2], vec![5i32, 6, 7, 8]), 0).unwrap();
        assert_eq!(y.dims(), &[2, 2]);
        assert_eq!(y.flat::<i32>().unwrap(), &[5, 0, 0, 0]);
        let y = zero_out_run(t(&[2, 3], vec![1.5f32, 2.0, 3.0, 4.0, -5.0, 6.0]), 4).unwrap();
        assert_eq!(y.flat::<f32>().unwrap(), &[0.0, 0.0, 0.0, 0.0, -5.0, 0.0]);
        // Default attr: index 0.
        let y = ctx()
            .op("ZeroOut")
            .input(t(&[3], vec![9i64, 8, 7]))
            .run1()
            .unwrap();
        assert_eq!(y.flat::<i64>().unwrap(), &[9, 0, 0]);
        // A scalar has one element.
        let y = zero_out_run(Tensor::scalar(3.0f64), 0).unwrap();
        assert_eq!(y.scalar_value::<f64>().unwrap(), 3.0);
        // The last element; an input the caller keeps is not modified.
        let x = t(&[4], vec![1u8, 2, 3, 4]);
        let y = zero_out_run(x.clone(), 3).unwrap();
        assert_eq!(y.flat::<u8>().unwrap(), &[0, 0, 0, 4]);
        assert_eq!(x.flat::<u8>().unwrap(), &[1, 2, 3, 4]);
        assert!(!y.shares_storage_with(&x));
        // A uniquely owned input is zeroed in place.
        let x = t(&[3], vec![4i16, 5, 6]);
        let addr = x.bytes().unwrap().as_ptr();
        let y = zero_out_run(x, 1).unwrap();
        assert_eq!(y.bytes().unwrap().as_ptr(), addr);
        assert_eq!(y.flat::<i16>().unwrap(), &[0, 5, 0]);
    }

    #[test]
    fn zero_out_every_real_number_type() {
        use half::{bf16, f16};
        let h = |v: f32| f16::from_f32(v);
        let b = |v: f32| bf16::from_f32(v);
        macro_rules! check {
            ($t:ty, $vals:expr) => {{
                let vals: Vec<$t> = $vals;
                let y = zero_out_run(t(&[3], vals.clone()), 1).unwrap();
                assert_eq!(y.dtype(), <$t as Element>::DTYPE);
                let want = vec![<$t>::default(), vals[1], <$t>::default()];
                assert_eq!(y.flat::<$t>().unwrap(), want.as_slice());
            }};
        }
        check!(f32, vec![1.0, 2.0, 3.0]);
        check!(f64, vec![1.0, -2.0, 3.0]);
        check!(i32, vec![1, -2, 3]);
        check!(u8, vec![1, 2, 3]);
        check!(i16, vec![1, -2, 3]);
        check!(i8, vec![1, -2, 3]);
        check!(i64, vec![1, i64::MIN, 3]);
        check!(bf16, vec![b(1.0), b(2.5), b(3.0)]);
        check!(u16, vec![1, 2, 3]);
        check!(f16, vec![h(1.0), h(-2.5), h(3.0)]);
        check!(u32, vec![1, u32::MAX, 3]);
        check!(u64, vec![1, u64::MAX, 3]);
        // Not a real number type: rejected by the OpDef.
        let e = zero_out_run(t(&[1], vec![true]), 0).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn zero_out_errors() {
        let e = zero_out_run(t(&[2], vec![1i32, 2]), -1).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message().contains("Need preserve_index >= 0, got -1"),
            "{e}"
        );
        let e = zero_out_run(t(&[2], vec![1i32, 2]), 2).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("preserve_index out of range"), "{e}");
        assert!(e.message().contains("2 is not in [0, 2)"), "{e}");
        // An empty input has no element to keep (as in TensorFlow's guide).
        let e = zero_out_run(Tensor::zeros(DataType::Float, &[0, 4]).unwrap(), 0).unwrap_err();
        assert!(e.message().contains("preserve_index out of range"), "{e}");
        let e = zero_out_run(t(&[1], vec![1.0f32]), i64::MAX).unwrap_err();
        assert!(e.message().contains("preserve_index out of range"), "{e}");
    }

    /// Shape functions and gradients.
    mod shape_and_gradient_tests {
        use opforge_core::attrs::IntoAttrValue;
        use opforge_core::autodiff::{GradientTape, Ops, OpsExt, Sym};
        use opforge_core::DataType;
        use opforge_testing::infer_ok;
        use opforge_testing::shape::ShapeTestOp;
        use opforge_testing::util::{assert_close, ctx, t};

        #[test]
        fn example_shape_functions() {
            for op in ["ZeroOut", "StringToNumber"] {
                let o = ShapeTestOp::new(op);
                infer_ok!(o, "?", "in0");
                infer_ok!(o, "[]", "in0");
                infer_ok!(o, "[2,?,3]", "in0");
            }
            infer_ok!(ShapeTestOp::new("AttrDefaultExampleForAllTypes"), "", "");
            let poly = ShapeTestOp::new("PolymorphicListExample")
                .attr("T", vec![DataType::Float, DataType::Int32]);
            infer_ok!(poly, "[2];[3]", "?;?");
            let same = ShapeTestOp::new("SameListInputExample")
                .attr("N", 2i64)
                .attr("T", DataType::Float);
            infer_ok!(same, "[2];[2]", "?");
            let min_len = ShapeTestOp::new("MinLengthIntListExample").attr("N", 2i64);
            infer_ok!(min_len, "[2];[2]", "?");
            infer_ok!(ShapeTestOp::new("MultipleInsAndOuts"), "[];[]", "?;?");
        }

        fn zero_out(
            preserve_index: i64,
        ) -> impl Fn(&mut dyn Ops, &[Sym]) -> opforge_core::Result<Sym> {
            move |o: &mut dyn Ops, xs: &[Sym]| {
                let z = o.op1(
                    "ZeroOut",
                    &[xs[0]],
                    &[("preserve_index", preserve_index.into_attr_value())],
                )?;
                // Something nonlinear after it, so the incoming gradient varies.
                o.mul(z, xs[0])
            }
        }

        #[test]
        fn zero_out_gradient_matches_numerical_one() {
            let v = vec![0.5, -1.5, 2.0, 3.5, -0.25, 1.0];
            for p in [0, 4] {
                let f = zero_out(p);
                opforge_testing::util::check_gradients(&f, &[t(&[2, 3], v.clone())]);
            }
        }

        #[test]
        fn zero_out_gradient_against_hand_values() {
            // The TensorFlow guide's gradient: only the kept element gets the
            // incoming gradient; every other element gets exactly 0, even
            // where the incoming gradient is not finite.
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]));
            let z = tape.op1("ZeroOut", &[x], &[]).unwrap();
            let seed = tape
                .constant(t(&[2, 2], vec![7.0f64, f64::INFINITY, f64::NAN, -1.0]))
                .unwrap();
            // backprop with a seed (the tape's gradient() seeds ones).
            let records = tape.records_snapshot();
            let g =
                opforge_core::autodiff::backprop(&mut tape, &records, &[z], &[Some(seed)], &[x])
                    .unwrap()[0]
                    .unwrap();
            assert_close(tape.value(g).unwrap(), &[2, 2], &[7.0, 0.0, 0.0, 0.0], 0.0);
            // With preserve_index = 3, float32.
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[4], vec![1.0f32, 2.0, 3.0, 4.0]));
            let z = tape
                .op1(
                    "ZeroOut",
                    &[x],
                    &[("preserve_index", 3i64.into_attr_value())],
                )
                .unwrap();
            let g = tape
                .gradient_tensors(z, &[x])
                .unwrap()
                .pop()
                .unwrap()
                .unwrap();
            assert_close(&g, &[4], &[0.0, 0.0, 0.0, 1.0], 0.0);
            assert_eq!(g.dtype(), DataType::Float);
        }

        /// Gradient functions see every attr of the op (given, inferred and
        /// defaulted), eagerly as in graphs: the tape records the resolved
        /// attrs. Before the fix in `tape.rs` it recorded only the given
        /// ones, and `ZeroOut`'s gradient failed on its defaulted
        /// `preserve_index` (as would any gradient reading `T`).
        #[test]
        fn the_tape_records_defaulted_and_inferred_attrs() {
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[3], vec![1.0f64, 2.0, 3.0]));
            let z = tape.op1("ZeroOut", &[x], &[]).unwrap();
            let r = tape.records_snapshot().pop().unwrap();
            assert_eq!(r.attrs["preserve_index"], 0i64.into_attr_value());
            assert_eq!(r.attrs["T"], DataType::Double.into_attr_value());
            let g = tape
                .gradient_tensors(z, &[x])
                .unwrap()
                .pop()
                .unwrap()
                .unwrap();
            assert_close(&g, &[3], &[1.0, 0.0, 0.0], 0.0);
        }
    }
}
