//! TensorFlow's "Create an op" guide as an opforge op library: `ZeroOut`
//! in its final form (polymorphic `T: realnumbertype`, the
//! `preserve_index: int = 0` attr checked at construction and against the
//! input), and the guide's earlier variants under their own names:
//! `ZeroOutInt32` (int32 only, keeps the first element) and `ZeroOutList`
//! (a list input, each tensor zeroed but its first element). Each has a
//! shape function (outputs have the inputs' shapes) and a gradient. The
//! guide's examples of attrs, defaults and polymorphic inputs
//! (`AttrDefaultExampleForAllTypes`, `PolymorphicListExample`,
//! `SameListInputExample`, `MinLengthIntListExample`, `MultipleInsAndOuts`)
//! are declared too, without kernels, as in the guide.
//!
//! Build it with `cargo build -p zero_out`: the result
//! (`target/debug/libzero_out.so`) is a library opforge loads at run time.
//! It depends on nothing of opforge but the SDK, and imports no opforge
//! symbol.

use opforge_plugin::prelude::*;

/// `ZeroOut`: the guide's final form.
pub const ZERO_OUT: OpDefBuilder = OpDefBuilder::new("ZeroOut")
    .attr("T: realnumbertype = DT_INT32")
    .attr("preserve_index: int = 0")
    .input("to_zero: T")
    .output("zeroed: T")
    .set_shape_fn(shape::unchanged_shape)
    .doc(
        "Zeros out every element of the input except one.\n\
         \n\
         The output has the shape and type of the input. The element at flat\n\
         (row-major) index `preserve_index`, 0 by default, keeps its value;\n\
         every other element is set to zero.",
    );

/// `ZeroOutInt32`: the guide's first version, int32 only.
pub const ZERO_OUT_INT32: OpDefBuilder = OpDefBuilder::new("ZeroOutInt32")
    .input("to_zero: int32")
    .output("zeroed: int32")
    .set_shape_fn(shape::unchanged_shape)
    .doc(
        "Zeros out every element of an int32 tensor except the first.\n\
         \n\
         to_zero: the tensor to zero out.\n\
         zeroed: the tensor with its first element kept and the others zero.",
    );

/// `ZeroOutList`: the guide's list input, `N` tensors of one type.
pub const ZERO_OUT_LIST: OpDefBuilder = OpDefBuilder::new("ZeroOutList")
    .attr("N: int >= 1")
    .attr("T: realnumbertype = DT_INT32")
    .input("to_zero: N * T")
    .output("zeroed: N * T")
    .set_shape_fn(list_shapes)
    .doc(
        "Zeros out every element of each of N tensors except its first.\n\
         \n\
         Output i has the shape and type of input i.",
    );

/// Output `i` has input `i`'s shape, for every `i`.
fn list_shapes(c: &mut InferenceContext<'_>) -> Result<()> {
    for i in 0..c.num_inputs() {
        let s = c.input(i);
        c.set_output(i, s)?;
    }
    Ok(())
}

/// Formats dims as TensorFlow prints a shape: `[2,3]`.
fn fmt_shape(dims: &[i64]) -> String {
    let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
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

/// Writes output `out` as input `input` zeroed except element `keep`,
/// computing in place when the host can forward the input.
fn zero_out_arg(
    ctx: &mut OpKernelContext<'_>,
    input: usize,
    out: usize,
    keep: usize,
) -> Result<()> {
    let (dtype, dims) = {
        let x = ctx.input(input)?;
        (x.dtype(), x.dims().to_vec())
    };
    let forwarded = ctx
        .forward_input_or_allocate_output(&[input], out, &dims)?
        .is_some();
    dispatch!(
        dtype,
        T => if forwarded {
            zero_out_in_place(ctx.output_mut(out)?.flat_mut::<T>()?, keep);
            Ok(())
        } else {
            let (ins, mut o) = ctx.inputs_and_output(out)?;
            zero_out_into(ins[input].flat::<T>()?, o.flat_mut::<T>()?, keep);
            Ok(())
        },
        [f32, f64, i32, u8, i16, i8, i64, BFloat16, u16, Half, u32, u64],
        Err(Status::unimplemented(format!("ZeroOut does not support {dtype}")))
    )
}

use opforge_plugin::{BFloat16, Half};

/// `ZeroOut`'s kernel: `preserve_index` is checked at construction
/// (`>= 0`) and against each input's size.
pub struct ZeroOutKernel {
    preserve_index: usize,
}

impl CreateKernel for ZeroOutKernel {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        let preserve_index: i64 = init.get_attr("preserve_index")?;
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

impl OpKernel for ZeroOutKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (dtype, n) = {
            let x = ctx.input(0)?;
            (x.dtype(), x.num_elements())
        };
        let keep = self.preserve_index;
        ensure!(
            keep < n,
            InvalidArgument,
            "preserve_index out of range: {} is not in [0, {}) for an input of shape {}",
            keep,
            n,
            fmt_shape(ctx.input(0)?.dims())
        );
        // Output 0 is set before compute runs (`output_like_forwarding(0,
        // 0)` in ZERO_OUT_KERNEL): input 0's own buffer when nothing else
        // holds it, else a new tensor of its dims. Input 0 stays readable
        // until the output is used.
        let forwarded = ctx.forwarded_from(0) == Some(0);
        dispatch!(
            dtype,
            T => if forwarded {
                zero_out_in_place(ctx.output_mut(0)?.flat_mut::<T>()?, keep);
                Ok(())
            } else {
                let (ins, mut o) = ctx.inputs_and_output(0)?;
                zero_out_into(ins[0].flat::<T>()?, o.flat_mut::<T>()?, keep);
                Ok(())
            },
            [f32, f64, i32, u8, i16, i8, i64, BFloat16, u16, Half, u32, u64],
            Err(Status::unimplemented(format!("ZeroOut does not support {dtype}")))
        )
    }
}

/// `ZeroOutInt32`'s kernel: keeps element 0.
pub struct ZeroOutInt32Kernel;

impl CreateKernel for ZeroOutInt32Kernel {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(ZeroOutInt32Kernel)
    }
}

impl OpKernel for ZeroOutInt32Kernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0)?;
        let dims = x.dims().to_vec();
        let input = x.flat::<i32>()?.to_vec();
        let mut out = ctx.allocate_output(0, &dims)?;
        let out = out.flat_mut::<i32>()?;
        out.fill(0);
        if let (Some(o), Some(&first)) = (out.first_mut(), input.first()) {
            *o = first;
        }
        Ok(())
    }
}

/// `ZeroOutList`'s kernel: each tensor keeps its element 0 (empty tensors
/// stay empty).
pub struct ZeroOutListKernel;

impl CreateKernel for ZeroOutListKernel {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        let n: i64 = init.get_attr("N")?;
        ensure!(n >= 1, InvalidArgument, "Need N >= 1, got {}", n);
        Ok(ZeroOutListKernel)
    }
}

impl OpKernel for ZeroOutListKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let inputs = ctx.input_range("to_zero")?;
        let outputs = ctx.output_range("zeroed")?;
        ensure!(
            inputs.len() == outputs.len(),
            Internal,
            "{} inputs but {} outputs",
            inputs.len(),
            outputs.len()
        );
        for (i, o) in inputs.zip(outputs) {
            if ctx.input(i)?.num_elements() == 0 {
                let dims = ctx.input(i)?.dims().to_vec();
                ctx.allocate_output(o, &dims)?;
                continue;
            }
            zero_out_arg(ctx, i, o, 0)?;
        }
        Ok(())
    }
}

/// `ZeroOut`'s kernel definition: the output has the input's dims, and may
/// take over its buffer (the host sets it before compute, so the kernel
/// computes with no call back into the host).
pub const ZERO_OUT_KERNEL: KernelDef = KernelDefBuilder::new("ZeroOut")
    .type_constraint_list("T", DataType::REAL_NUMBER_TYPES)
    .output_like_forwarding(0, 0)
    .build::<ZeroOutKernel>();
/// `ZeroOutInt32`'s kernel definition.
pub const ZERO_OUT_INT32_KERNEL: KernelDef =
    KernelDefBuilder::new("ZeroOutInt32").build::<ZeroOutInt32Kernel>();
/// `ZeroOutList`'s kernel definition.
pub const ZERO_OUT_LIST_KERNEL: KernelDef = KernelDefBuilder::new("ZeroOutList")
    .type_constraint_list("T", DataType::REAL_NUMBER_TYPES)
    .build::<ZeroOutListKernel>();

use opforge_plugin::KernelDef;

/// `ZeroOut`'s gradient, the guide's sparse gradient: only the kept
/// element of the input gets a gradient (the guide's
/// `sparse_to_dense([index], shape, grad[index], 0)`). `ZeroOut` is linear,
/// so that gradient is `ZeroOut` of the incoming gradient with the same
/// `preserve_index`: exactly zeros elsewhere, and itself differentiable to
/// any order.
pub fn zero_out_grad(g: &mut GradientContext<'_>) -> Result<()> {
    let dy = g.grad()?;
    let preserve_index: i64 = g.get_attr("preserve_index")?;
    let dx = g.op1(
        "ZeroOut",
        &[dy],
        &[("preserve_index", AttrValue::Int(preserve_index))],
    )?;
    g.set_input_grad(0, dx)
}

/// `ZeroOutList`'s gradient: input `i` gets `ZeroOut` (keeping element 0)
/// of output `i`'s gradient.
pub fn zero_out_list_grad(g: &mut GradientContext<'_>) -> Result<()> {
    let inputs = g.input_range("to_zero")?;
    let outputs = g.output_range("zeroed")?;
    for (i, o) in inputs.zip(outputs) {
        if let Some(dy) = g.output_grad(o) {
            let dx = g.op1("ZeroOut", &[dy], &[("preserve_index", AttrValue::Int(0))])?;
            g.set_input_grad(i, dx)?;
        }
    }
    Ok(())
}

// The guide's examples of attrs, defaults and polymorphic inputs: op
// declarations only (the guide gives them no kernel), so graphs can be built
// and shapes inferred with them.

/// `AttrDefaultExampleForAllTypes`: a default value for every attr type.
pub const ATTR_DEFAULT_EXAMPLE_FOR_ALL_TYPES: OpDefBuilder =
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
        .set_shape_fn(shape::no_outputs)
        .doc("Shows a default value for an attr of every type.");

/// `PolymorphicListExample`: a list input whose element types may differ.
pub const POLYMORPHIC_LIST_EXAMPLE: OpDefBuilder = OpDefBuilder::new("PolymorphicListExample")
    .attr("T: list(type)")
    .input("in: T")
    .output("out: T")
    .set_shape_fn(shape::unknown_shape)
    .doc("Takes a list of tensors of any types and returns a list of the same types.");

/// `SameListInputExample`: a list input whose tensors all have one type.
pub const SAME_LIST_INPUT_EXAMPLE: OpDefBuilder = OpDefBuilder::new("SameListInputExample")
    .attr("N: int")
    .attr("T: type")
    .input("in: N * T")
    .output("out: T")
    .set_shape_fn(shape::unknown_shape)
    .doc("Takes N tensors of one type T and returns one tensor of type T.");

/// `MinLengthIntListExample`: a list input of at least two `int32` tensors.
pub const MIN_LENGTH_INT_LIST_EXAMPLE: OpDefBuilder = OpDefBuilder::new("MinLengthIntListExample")
    .attr("N: int >= 2")
    .input("in: N * int32")
    .output("out: int32")
    .set_shape_fn(shape::unknown_shape)
    .doc("Takes at least two int32 tensors and returns one int32 tensor.");

/// `MultipleInsAndOuts`: several inputs and outputs of fixed types.
pub const MULTIPLE_INS_AND_OUTS: OpDefBuilder = OpDefBuilder::new("MultipleInsAndOuts")
    .input("y: int32")
    .input("z: float")
    .output("a: string")
    .output("b: int32")
    .set_shape_fn(shape::unknown_shape)
    .doc("Takes an int32 and a float tensor and returns a string and an int32 tensor.");

opforge_plugin::export! {
    name: "zero_out",
    version: env!("CARGO_PKG_VERSION"),
    ops: [
        ZERO_OUT,
        ZERO_OUT_INT32,
        ZERO_OUT_LIST,
        ATTR_DEFAULT_EXAMPLE_FOR_ALL_TYPES,
        POLYMORPHIC_LIST_EXAMPLE,
        SAME_LIST_INPUT_EXAMPLE,
        MIN_LENGTH_INT_LIST_EXAMPLE,
        MULTIPLE_INS_AND_OUTS,
    ],
    kernels: [ZERO_OUT_KERNEL, ZERO_OUT_INT32_KERNEL, ZERO_OUT_LIST_KERNEL],
    gradients: [
        GradientDef::new("ZeroOut", zero_out_grad),
        GradientDef::not_differentiable("ZeroOutInt32"),
        GradientDef::new("ZeroOutList", zero_out_list_grad),
    ],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroing_keeps_one_element() {
        let x = [1, 2, 3, 4];
        let mut out = [9; 4];
        zero_out_into(&x, &mut out, 2);
        assert_eq!(out, [0, 0, 3, 0]);
        let mut y = [1.5f32, 2.5, 3.5];
        zero_out_in_place(&mut y, 0);
        assert_eq!(y, [1.5, 0.0, 0.0]);
        let mut z = [Half(0x3c00), Half(0x4000)];
        zero_out_in_place(&mut z, 1);
        assert_eq!(z, [Half(0), Half(0x4000)]);
    }

    #[test]
    fn shapes_print_as_tensorflow_does() {
        assert_eq!(fmt_shape(&[2, 3]), "[2,3]");
        assert_eq!(fmt_shape(&[]), "[]");
    }

    #[test]
    fn declarations() {
        assert_eq!(
            ZERO_OUT.attrs(),
            ["T: realnumbertype = DT_INT32", "preserve_index: int = 0"]
        );
        assert!(ZERO_OUT.shape_fn().is_some());
        assert_eq!(ZERO_OUT_INT32.inputs(), ["to_zero: int32"]);
        assert_eq!(ZERO_OUT_LIST.inputs(), ["to_zero: N * T"]);
        let c = ZERO_OUT_KERNEL.def.constraints();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].attr(), "T");
        assert_eq!(c[0].types(), DataType::REAL_NUMBER_TYPES);
        assert!(ZERO_OUT_INT32_KERNEL.def.constraints().is_empty());
    }
}
