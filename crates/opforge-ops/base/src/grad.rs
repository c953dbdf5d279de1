//! Gradient helpers shared by the op families' gradient functions.

use opforge_core::attrs::AttrMap;
use opforge_core::attrs::{FromAttrValue, IntoAttrValue};
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym, SymArg};
use opforge_core::{DataType, Result, Status, Tensor};

/// Attr `name` of the forward op, or `default` when the call did not
/// set it (eager calls record only the attrs they were given).
pub fn attr_or<T: FromAttrValue>(ctx: &GradientContext<'_>, name: &str, default: T) -> Result<T> {
    if ctx.attrs().contains_key(name) {
        ctx.get_attr(name)
    } else {
        Ok(default)
    }
}

/// Sets the gradient of flat input `i` to the `i`-th of `grads` (`Sym`s,
/// or `Option<Sym>`s where `None` leaves an input without one): for
/// helpers that compute a gradient per input.
pub fn set_input_grads<G: Into<Option<Sym>>>(
    ctx: &mut GradientContext<'_>,
    grads: impl IntoIterator<Item = G>,
) -> Result<()> {
    for (i, g) in grads.into_iter().enumerate() {
        if let Some(g) = g.into() {
            ctx.set_input_grad(i, g)?;
        }
    }
    Ok(())
}

/// The gradient of each output passed to the input of the same index
/// (`Identity`, `IdentityN`, `PlaceholderWithDefault`: TensorFlow's `_IdGrad`).
pub fn identity_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    for i in 0..ctx.num_outputs().min(ctx.num_inputs()) {
        if let Some(g) = ctx.output_grad(i) {
            ctx.set_input_grad(i, g)?;
        }
    }
    Ok(())
}

/// Sets input 0's gradient to `op(grad)`, for the ops whose gradient is
/// one op applied to the incoming gradient (`Diag` and `DiagPart`, ...).
pub fn one_op_grad(ctx: &mut GradientContext<'_>, op: &str) -> Result<()> {
    let dx = ctx.op1(op, &[ctx.grad()?], &[])?;
    ctx.set_input_grad(0, dx)
}

/// An int32 scalar constant.
pub fn int_scalar(o: &mut dyn Ops, v: i32) -> Result<Sym> {
    o.constant(Tensor::scalar(v))
}

/// `ConcatV2(xs, axis)` (one value: itself).
pub fn concat(o: &mut dyn Ops, xs: &[Sym], axis: Sym) -> Result<Sym> {
    if let [one] = xs {
        return Ok(*one);
    }
    let args = [SymArg::List(xs.to_vec()), SymArg::One(axis)];
    o.call("ConcatV2", &args, &AttrMap::new())?
        .pop()
        .ok_or_else(|| Status::internal("ConcatV2 has no output"))
}

/// The vectors `xs` joined end to end (`ConcatV2` on axis 0), as shapes are.
pub fn concat_vectors(o: &mut dyn Ops, xs: &[Sym]) -> Result<Sym> {
    let axis = int_scalar(o, 0)?;
    concat(o, xs, axis)
}

/// `Sum(x, axes)` (optionally keeping the reduced dims).
pub fn reduce_sum(o: &mut dyn Ops, x: Sym, axes: Sym, keep_dims: bool) -> Result<Sym> {
    o.op1(
        "Sum",
        &[x, axes],
        &[("keep_dims", keep_dims.into_attr_value())],
    )
}

/// `Cast(x, dtype)`.
pub fn cast(o: &mut dyn Ops, x: Sym, dtype: DataType) -> Result<Sym> {
    o.op1("Cast", &[x], &[("DstT", dtype.into_attr_value())])
}

/// `x[begin:end]` of a vector (`end = None`: to the end; negative
/// indices count from the end), with `StridedSlice`.
pub fn slice_vector(o: &mut dyn Ops, x: Sym, begin: i32, end: Option<i32>) -> Result<Sym> {
    let b = o.int_vector(&[begin])?;
    let e = o.int_vector(&[end.unwrap_or(0)])?;
    let st = o.int_vector(&[1])?;
    let end_mask: i64 = if end.is_none() { 1 } else { 0 };
    o.op1(
        "StridedSlice",
        &[x, b, e, st],
        &[
            ("begin_mask", 0i64.into_attr_value()),
            ("end_mask", end_mask.into_attr_value()),
            ("ellipsis_mask", 0i64.into_attr_value()),
            ("new_axis_mask", 0i64.into_attr_value()),
            ("shrink_axis_mask", 0i64.into_attr_value()),
        ],
    )
}

/// TensorFlow's `math_ops.reduced_shape`: `input_shape` (int32) with the
/// dims in `axes` (a scalar or vector, int32 or int64, possibly
/// negative) set to 1, computed at run time (without `DynamicStitch`:
/// a one-hot mask of the reduced axes selects between 1 and the dim).
pub fn reduced_shape(o: &mut dyn Ops, x: Sym, input_shape: Sym, axes: Sym) -> Result<Sym> {
    if o.shape(x).is_some_and(|s| s.is_empty()) {
        // A scalar: nothing to reduce (and no rank to take axes modulo).
        return Ok(input_shape);
    }
    let axes = if o.dtype(axes) == DataType::Int32 {
        axes
    } else {
        cast(o, axes, DataType::Int32)?
    };
    let minus_one = o.int_vector(&[-1])?;
    let axes = o.reshape(axes, minus_one)?;
    let rank = o.op1(
        "Size",
        &[input_shape],
        &[("out_type", DataType::Int32.into_attr_value())],
    )?;
    let axes = o.op1("FloorMod", &[axes, rank], &[])?;
    let (on, off) = (int_scalar(o, 1)?, int_scalar(o, 0)?);
    let onehot = o.op1("OneHot", &[axes, rank, on, off], &[])?;
    let zero_axis = int_scalar(o, 0)?;
    let counts = reduce_sum(o, onehot, zero_axis, false)?;
    let is_reduced = o.op1("Greater", &[counts, off], &[])?;
    o.op1("SelectV2", &[is_reduced, on, input_shape], &[])
}

/// The gradient `grad` of a reduction of `x` over `axes`, reshaped to
/// the kept-dims shape (unless `keep_dims`) and broadcast to `x`'s shape.
/// Also returns `x`'s shape and the kept-dims shape.
pub fn broadcast_reduced(ctx: &mut GradientContext<'_>, grad: Sym) -> Result<(Sym, Sym, Sym)> {
    let (x, axes) = (ctx.input(0), ctx.input(1));
    let input_shape = ctx.shape_of(x)?;
    let kept = if attr_or(ctx, "keep_dims", false)? {
        ctx.shape_of(ctx.output(0))?
    } else {
        reduced_shape(ctx, x, input_shape, axes)?
    };
    let g = ctx.reshape(grad, kept)?;
    let g = ctx.op1("BroadcastTo", &[g, input_shape], &[])?;
    Ok((g, input_shape, kept))
}

/// Gradient helper for broadcasting binary ops: given the gradients `gx`,
/// `gy` of the broadcast output, sums each over the axes its input was
/// broadcast along and reshapes it to that input's shape (TensorFlow's
/// `BroadcastGradientArgs` + `Sum` + `Reshape` pattern). When both inputs'
/// shapes are fully known and equal, the gradients are returned as they are.
pub fn unbroadcast_grads(
    o: &mut dyn opforge_core::autodiff::Ops,
    x: opforge_core::autodiff::Sym,
    y: opforge_core::autodiff::Sym,
    gx: Option<opforge_core::autodiff::Sym>,
    gy: Option<opforge_core::autodiff::Sym>,
) -> Result<(
    Option<opforge_core::autodiff::Sym>,
    Option<opforge_core::autodiff::Sym>,
)> {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{OpsExt, SymArg};
    let (sx, sy) = (o.shape(x), o.shape(y));
    if let (Some(a), Some(b)) = (&sx, &sy) {
        if a == b && a.iter().all(|&d| d >= 0) {
            return Ok((gx, gy));
        }
    }
    let shape_x = o.shape_of(x)?;
    let shape_y = o.shape_of(y)?;
    let r = o.call(
        "BroadcastGradientArgs",
        &[SymArg::One(shape_x), SymArg::One(shape_y)],
        &opforge_core::attrs::AttrMap::new(),
    )?;
    let reduce =
        |o: &mut dyn opforge_core::autodiff::Ops, g: Option<_>, axes, shape| -> Result<Option<_>> {
            let Some(g) = g else { return Ok(None) };
            let summed = o.op1(
                "Sum",
                &[g, axes],
                &[("keep_dims", IntoAttrValue::into_attr_value(false))],
            )?;
            Ok(Some(o.reshape(summed, shape)?))
        };
    let gx = reduce(o, gx, r[0], shape_x)?;
    let gy = reduce(o, gy, r[1], shape_y)?;
    Ok((gx, gy))
}
