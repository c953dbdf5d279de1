//! Gradients of the basic array ops.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym, SymArg};
use opforge_core::{register_gradient, register_not_differentiable, Result};
use opforge_ops_base::grad::identity_grad;

/// `Reshape`, `ExpandDims`, `Squeeze`: the gradient reshaped to the input's shape.
fn reshape_to_input(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let s = ctx.shape_of(ctx.input(0))?;
    let dx = ctx.reshape(g, s)?;
    ctx.set_input_grad(0, dx)
}

/// The sum of `g` over all its axes.
pub(crate) fn sum_all(o: &mut dyn Ops, g: Sym) -> Result<Sym> {
    let rank = o.op1("Rank", &[g], &[])?;
    let zero = o.constant(opforge_core::Tensor::scalar(0i32))?;
    let one = o.constant(opforge_core::Tensor::scalar(1i32))?;
    let axes = o.op1("Range", &[zero, rank, one], &[])?;
    o.op1("Sum", &[g, axes], &[("keep_dims", false.into_attr_value())])
}

/// `Fill(dims, value)`: no gradient for `dims`, the sum of the gradient for `value`.
fn fill_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let dvalue = sum_all(ctx, g)?;
    ctx.set_input_grad(1, dvalue)
}

/// `BroadcastTo(input, shape)`: the gradient summed over the broadcast axes.
fn broadcast_to_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, shape) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let shape_dtype = ctx.dtype(shape);
    let x_shape = ctx.op1(
        "Shape",
        &[x],
        &[("out_type", shape_dtype.into_attr_value())],
    )?;
    let r = ctx.call(
        "BroadcastGradientArgs",
        &[SymArg::One(shape), SymArg::One(x_shape)],
        &opforge_core::attrs::AttrMap::new(),
    )?;
    let summed = ctx.op1("Sum", &[g, r[1]], &[("keep_dims", true.into_attr_value())])?;
    let dx = ctx.reshape(summed, x_shape)?;
    ctx.set_input_grad(0, dx)
}

/// `CheckNumerics`: the gradient, checked by `CheckNumerics` with the
/// message of TensorFlow's `_CheckNumericsGrad`.
fn check_numerics_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let message: String = ctx.get_attr("message")?;
    let message =
        format!("Not a number (NaN) or infinity (Inf) values detected in gradient. {message}");
    let dx = ctx.op1(
        "CheckNumerics",
        &[g],
        &[("message", message.into_attr_value())],
    )?;
    ctx.set_input_grad(0, dx)
}

register_gradient!("Identity", identity_grad);
register_gradient!("CheckNumerics", check_numerics_grad);
register_gradient!("IdentityN", identity_grad);
register_gradient!("Reshape", reshape_to_input);
register_gradient!("ExpandDims", reshape_to_input);
register_gradient!("Squeeze", reshape_to_input);
register_gradient!("Fill", fill_grad);
register_gradient!("BroadcastTo", broadcast_to_grad);
register_not_differentiable!(
    "Const",
    "StopGradient",
    "Shape",
    "ShapeN",
    "Size",
    "Rank",
    "ZerosLike",
    "OnesLike",
    "Range",
    "BroadcastArgs",
    "BroadcastGradientArgs",
    "InvertPermutation",
);
