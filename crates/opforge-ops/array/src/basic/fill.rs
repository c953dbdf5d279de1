//! `Fill`, `ZerosLike` and `OnesLike`.

use super::*;
use opforge_ops_base::cpu::elem::{Scalar, Wide};

// Fill, ZerosLike, OnesLike
// ---------------------------------------------------------------------------

/// `Fill`.
pub fn fill() -> OpDefBuilder {
    OpDefBuilder::new("Fill")
        .input("dims: index_type")
        .input("value: T")
        .output("output: T")
        .attr("T: type")
        .attr("index_type: {int32, int64} = DT_INT32")
        .doc(
            "Creates a tensor filled with a scalar value.\n\n\
             This operation creates a tensor of shape `dims` and fills it with `value`.",
        )
}

/// `ZerosLike`.
pub fn zeros_like() -> OpDefBuilder {
    OpDefBuilder::new("ZerosLike")
        .input("x: T")
        .output("y: T")
        .attr("T: type")
        .doc("Returns a tensor of zeros with the same shape and type as x.")
}

opforge_ops_base::dtype_table! {
    /// `OnesLike`'s `T`, in TensorFlow's order (its kernel's types).
    ONES_LIKE_SPEC = POD_TYPES in [
        BFloat16, Half, Float, Double, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64,
        Complex64, Complex128, Bool
    ]
}

/// `OnesLike`.
pub fn ones_like() -> OpDefBuilder {
    OpDefBuilder::new("OnesLike")
        .input("x: T")
        .output("y: T")
        .attr(format!("T: {{{ONES_LIKE_SPEC}}}"))
        .doc("Returns a tensor of ones with the same shape and type as x.")
}

pub(super) struct FillOp;

impl OpKernel for FillOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dims_t = ctx.input(0);
        ensure!(
            dims_t.rank() <= 1,
            InvalidArgument,
            "dims must represent a vector, got shape {}",
            fmt_shape(dims_t.dims())
        );
        let value = ctx.input(1);
        ensure!(
            is_legacy_scalar(value),
            InvalidArgument,
            "value must represent a scalar, got shape {}",
            fmt_shape(value.dims())
        );
        let shape = make_shape(&index_values(dims_t, "dims")?)?;
        let out = move_elements(ctx.device(), value.dtype(), &[value], shape, &FillValue)?;
        ctx.set_output(0, out)
    }
}

pub(super) struct ZerosLikeOp;

impl OpKernel for ZerosLikeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0);
        let out = Tensor::zeros_with_shape(x.dtype(), x.shape().clone())?;
        ctx.set_output(0, out)
    }
}

pub(super) struct OnesLikeOp;

pub(super) fn ones_into<T: Element>(ctx: &mut OpKernelContext<'_>, one: T) -> Result<()> {
    let shape = ctx.input(0).shape().clone();
    ctx.forward_input_or_allocate_output(&[0], 0, &shape)?;
    let pool = ctx.thread_pool();
    par_map_inplace(pool, ctx.output_mut(0)?.flat_mut::<T>()?, 1, |_| one);
    Ok(())
}

impl OpKernel for OnesLikeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dtype = ctx.input(0).dtype();
        dispatch!(
            dtype,
            T => ones_into(ctx, T::narrow(Wide::Bool(true))),
            [Bool, Float, Double, Int32, UInt8, Int16, Int8, Int64, UInt16, UInt32, UInt64, Half,
             BFloat16, Complex64, Complex128],
            Err(Status::unimplemented(format!("OnesLike of {dtype}")))
        )
    }
}

/// `Fill`: the shape held by `dims` (whose values must be >= 0).
pub(super) fn fill_shape(c: &mut InferenceContext) -> Result<()> {
    let index_type = match c.get_attr::<DataType>("index_type") {
        Ok(t) => t,
        Err(e) if e.code() == Code::NotFound => DataType::Int32,
        Err(e) => return Err(e),
    };
    let (dims, value) = (c.input(0), c.input(1));
    c.with_rank(dims, 1)?;
    c.with_rank(value, 0)?;
    if let Some(t) = c.input_tensor(0) {
        if matches!(index_type, DataType::Int32 | DataType::Int64) {
            for v in index_values(t, "dims")? {
                ensure!(v >= 0, InvalidArgument, "Fill dimensions must be >= 0");
            }
        }
    }
    let out = c.make_shape_from_shape_tensor(0)?;
    c.set_output(0, out);
    if let Some(data) = c.input_handle_shapes_and_types(1).map(<[_]>::to_vec) {
        c.set_output_handle_shapes_and_types(0, data);
    }
    Ok(())
}

register_op!(fill().set_shape_fn(fill_shape));
register_op!(zeros_like().set_shape_fn(common::unchanged_shape));
register_op!(ones_like().set_shape_fn(common::unchanged_shape));
register_kernel!(
    KernelDefBuilder::new("Fill")
        .type_constraint_list("T", &types(&[&all_types(), QUANTIZED]))
        .type_constraint_list("index_type", INDEX_TYPES)
        .host_memory("dims"),
    fn = |_| Ok(Box::new(FillOp))
);
register_kernel!(
    KernelDefBuilder::new("ZerosLike").type_constraint_list("T", POD_STRING_TYPES),
    fn = |_| Ok(Box::new(ZerosLikeOp))
);
register_kernel!(
    KernelDefBuilder::new("OnesLike").type_constraint_list("T", POD_TYPES),
    fn = |_| Ok(Box::new(OnesLikeOp))
);

// ---------------------------------------------------------------------------
