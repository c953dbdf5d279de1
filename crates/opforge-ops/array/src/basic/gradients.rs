//! Gradients of the basic array ops.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym, SymArg};
use opforge_core::{register_gradient, register_not_differentiable, Result};

type Grads = Result<Vec<Option<Sym>>>;

fn identity_grad(_: &mut dyn Ops, _: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    Ok(vec![grads[0]])
}

fn identity_n_grad(_: &mut dyn Ops, _: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    Ok(grads.to_vec())
}

/// `Reshape`, `ExpandDims`, `Squeeze`: the gradient reshaped to the input's shape.
fn reshape_to_input(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let mut out = vec![None; op.inputs.len()];
    if let Some(g) = grads[0] {
        let s = o.shape_of(op.inputs[0])?;
        out[0] = Some(o.reshape(g, s)?);
    }
    Ok(out)
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
fn fill_grad(o: &mut dyn Ops, _: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    Ok(vec![None, Some(sum_all(o, g)?)])
}

/// `BroadcastTo(input, shape)`: the gradient summed over the broadcast axes.
fn broadcast_to_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (x, shape) = (op.inputs[0], op.inputs[1]);
    let shape_dtype = o.dtype(shape);
    let x_shape = o.op1(
        "Shape",
        &[x],
        &[("out_type", shape_dtype.into_attr_value())],
    )?;
    let r = o.call(
        "BroadcastGradientArgs",
        &[SymArg::One(shape), SymArg::One(x_shape)],
        &opforge_core::attrs::AttrMap::new(),
    )?;
    let summed = o.op1("Sum", &[g, r[1]], &[("keep_dims", true.into_attr_value())])?;
    Ok(vec![Some(o.reshape(summed, x_shape)?), None])
}

/// `CheckNumerics`: the gradient, checked by `CheckNumerics` with the
/// message of TensorFlow's `_CheckNumericsGrad`.
fn check_numerics_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let message: String = op.attr("message")?;
    let message =
        format!("Not a number (NaN) or infinity (Inf) values detected in gradient. {message}");
    Ok(vec![Some(o.op1(
        "CheckNumerics",
        &[g],
        &[("message", message.into_attr_value())],
    )?)])
}

register_gradient!("Identity", identity_grad);
register_gradient!("CheckNumerics", check_numerics_grad);
register_gradient!("IdentityN", identity_n_grad);
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
