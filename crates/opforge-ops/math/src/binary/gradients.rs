//! Gradients of the binary math ops.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym, SymArg};
use opforge_core::{register_gradient, register_not_differentiable, Result};
use opforge_ops_base::grad::{set_input_grads, unbroadcast_grads};

/// Sets the gradients `gx`, `gy` of the two inputs, each reduced to its
/// input's shape.
fn reduced(ctx: &mut GradientContext<'_>, gx: Sym, gy: Sym) -> Result<()> {
    let (x, y) = (ctx.input(0), ctx.input(1));
    let (gx, gy) = unbroadcast_grads(ctx, x, y, Some(gx), Some(gy))?;
    set_input_grads(ctx, [gx, gy])
}

fn add_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    reduced(ctx, g, g)
}

fn sub_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let minus_g = ctx.neg(g)?;
    reduced(ctx, g, minus_g)
}

fn mul_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, y) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let gx = ctx.mul(g, y)?;
    let gy = ctx.mul(x, g)?;
    reduced(ctx, gx, gy)
}

/// `Div` and `RealDiv` (on floating types TensorFlow's `divide` is `RealDiv`):
/// `(grad / y, grad * (-x / y / y))`.
fn div_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, y) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let gx = ctx.div(g, y)?;
    let minus_x = ctx.neg(x)?;
    let t = ctx.div(minus_x, y)?;
    let t = ctx.div(t, y)?;
    let gy = ctx.mul(g, t)?;
    reduced(ctx, gx, gy)
}

/// `FloorDiv`: piecewise constant; TensorFlow returns None for both.
fn floor_div_grad(_: &mut GradientContext<'_>) -> Result<()> {
    Ok(())
}

/// `FloorMod`: `(grad, grad * -floor_div(x, y))`.
fn floor_mod_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, y) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let q = ctx.op1("FloorDiv", &[x, y], &[])?;
    let minus_q = ctx.neg(q)?;
    let gy = ctx.mul(g, minus_q)?;
    reduced(ctx, g, gy)
}

/// `Maximum`/`Minimum`: the gradient goes to `x` where `selector(x, y)`
/// (ties included), to `y` elsewhere.
fn max_min_grad(ctx: &mut GradientContext<'_>, selector: &str) -> Result<()> {
    let (g, x, y) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let zeros = ctx.zeros_like(g)?;
    let xmask = ctx.op1(selector, &[x, y], &[])?;
    let gx = ctx.op1("SelectV2", &[xmask, g, zeros], &[])?;
    let gy = ctx.op1("SelectV2", &[xmask, zeros, g], &[])?;
    reduced(ctx, gx, gy)
}

/// `Pow`: `(grad * y * x^(y - 1), grad * z * log(x))`, with `log(x)`
/// taken as 0 where `x <= 0` (no false singularity at 0).
fn pow_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, y, z) = (ctx.grad()?, ctx.input(0), ctx.input(1), ctx.output(0));
    let dt = ctx.dtype(x);
    let one = ctx.scalar(dt, 1.0)?;
    let y_minus_one = ctx.sub(y, one)?;
    let p = ctx.op1("Pow", &[x, y_minus_one], &[])?;
    let t = ctx.mul(g, y)?;
    let gx = ctx.mul(t, p)?;
    let zero = ctx.scalar(dt, 0.0)?;
    let mask = if dt.is_complex() {
        ctx.op1("NotEqual", &[x, zero], &[])?
    } else {
        ctx.op1("Greater", &[x, zero], &[])?
    };
    let ones = ctx.ones_like(x)?;
    let safe_x = ctx.op1("Select", &[mask, x, ones], &[])?;
    let log = ctx.op1("Log", &[safe_x], &[])?;
    let zeros = ctx.zeros_like(x)?;
    let log_x = ctx.op1("Select", &[mask, log, zeros], &[])?;
    let t = ctx.mul(g, z)?;
    let gy = ctx.mul(t, log_x)?;
    reduced(ctx, gx, gy)
}

/// `SquaredDifference`: with `d = 2 * grad * (x - y)`, `(d, -d)`, each
/// reduced to its input's shape (`y`'s negated after the reduction).
fn squared_difference_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, y) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let two = ctx.scalar(ctx.dtype(g), 2.0)?;
    let two_g = ctx.mul(two, g)?;
    let diff = ctx.sub(x, y)?;
    let d = ctx.mul(two_g, diff)?;
    let (gx, gy) = unbroadcast_grads(ctx, x, y, Some(d), Some(d))?;
    let gy = match gy {
        Some(gy) => Some(ctx.neg(gy)?),
        None => None,
    };
    set_input_grads(ctx, [gx, gy])
}

/// `AddN`: the gradient, to every input.
fn add_n_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    for i in 0..ctx.num_inputs() {
        ctx.set_input_grad(i, g)?;
    }
    Ok(())
}

/// `Select`: the gradient where the condition picks `t`, zeros elsewhere
/// (and the reverse for `e`); none for the condition.
fn select_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, c, x) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let zeros = ctx.zeros_like(x)?;
    let gx = ctx.op1("Select", &[c, g, zeros], &[])?;
    let gy = ctx.op1("Select", &[c, zeros, g], &[])?;
    ctx.set_input_grad(1, gx)?;
    ctx.set_input_grad(2, gy)
}

/// `SelectV2`: as `Select`, each summed over the dims its input was
/// broadcast along (kept as size 1) and reshaped to the input's shape.
fn select_v2_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, c) = (ctx.grad()?, ctx.input(0));
    let zero = ctx.scalar(ctx.dtype(g), 0.0)?;
    let out_shape = ctx.shape_of(ctx.output(0))?;
    for (i, picked) in [(1, true), (2, false)] {
        let input = ctx.input(i);
        let masked = if picked {
            ctx.op1("SelectV2", &[c, g, zero], &[])?
        } else {
            ctx.op1("SelectV2", &[c, zero, g], &[])?
        };
        let shape = ctx.shape_of(input)?;
        let r = ctx.call(
            "BroadcastGradientArgs",
            &[SymArg::One(shape), SymArg::One(out_shape)],
            &Default::default(),
        )?;
        let summed = ctx.op1(
            "Sum",
            &[masked, r[0]],
            &[("keep_dims", true.into_attr_value())],
        )?;
        let gi = ctx.reshape(summed, shape)?;
        ctx.set_input_grad(i, gi)?;
    }
    Ok(())
}

register_gradient!("Add", add_grad);
register_gradient!("AddV2", add_grad);
register_gradient!("Sub", sub_grad);
register_gradient!("Mul", mul_grad);
register_gradient!("Div", div_grad);
register_gradient!("RealDiv", div_grad);
register_gradient!("FloorDiv", floor_div_grad);
register_gradient!("FloorMod", floor_mod_grad);
register_gradient!("Maximum", |ctx| max_min_grad(ctx, "GreaterEqual"));
register_gradient!("Minimum", |ctx| max_min_grad(ctx, "LessEqual"));
register_gradient!("Pow", pow_grad);
register_gradient!("SquaredDifference", squared_difference_grad);
register_gradient!("AddN", add_n_grad);
register_gradient!("Select", select_grad);
register_gradient!("SelectV2", select_v2_grad);
register_not_differentiable!(
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "Equal",
    "NotEqual",
    "LogicalAnd",
    "LogicalOr",
);
