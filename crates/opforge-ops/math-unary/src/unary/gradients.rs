//! Gradients of the unary math ops and `Cast`.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym};
use opforge_core::{register_gradient, DataType, Result};

/// Sets the input's gradient to `grad * factor`, for the ops whose
/// derivative is a function `factor` of `x` or `y`.
fn times(ctx: &mut GradientContext<'_>, g: Sym, factor: Sym) -> Result<()> {
    let dx = ctx.mul(g, factor)?;
    ctx.set_input_grad(0, dx)
}

/// Sets the input's gradient to `grad * unary(x)`.
fn times_unary_of_x(ctx: &mut GradientContext<'_>, unary: &str) -> Result<()> {
    let g = ctx.grad()?;
    let factor = ctx.op1(unary, &[ctx.input(0)], &[])?;
    times(ctx, g, factor)
}

fn neg_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let dx = ctx.neg(ctx.grad()?)?;
    ctx.set_input_grad(0, dx)
}

fn sign_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let dx = ctx.zeros_like(ctx.input(0))?;
    ctx.set_input_grad(0, dx)
}

/// The ops whose gradient is a helper op `Helper(y, grad)` of the output.
fn helper_of_output(ctx: &mut GradientContext<'_>, helper: &str) -> Result<()> {
    let (g, y) = (ctx.grad()?, ctx.output(0));
    let dx = ctx.op1(helper, &[y, g], &[])?;
    ctx.set_input_grad(0, dx)
}

fn square_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x) = (ctx.grad()?, ctx.input(0));
    let two = ctx.scalar(ctx.dtype(x), 2.0)?;
    let two_x = ctx.mul(x, two)?;
    times(ctx, g, two_x)
}

fn exp_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, y) = (ctx.grad()?, ctx.output(0));
    times(ctx, g, y)
}

fn log1p_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x) = (ctx.grad()?, ctx.input(0));
    let one = ctx.scalar(ctx.dtype(x), 1.0)?;
    let one_plus_x = ctx.add(one, x)?;
    let inv = ctx.op1("Reciprocal", &[one_plus_x], &[])?;
    times(ctx, g, inv)
}

fn cos_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let minus_g = ctx.neg(ctx.grad()?)?;
    let sin = ctx.op1("Sin", &[ctx.input(0)], &[])?;
    times(ctx, minus_g, sin)
}

/// `Floor`, `Ceil`, `Round`: piecewise constant; TensorFlow returns None.
fn no_grad(_: &mut GradientContext<'_>) -> Result<()> {
    Ok(())
}

fn is_float_or_complex(dt: DataType) -> bool {
    matches!(
        dt,
        DataType::Half
            | DataType::Float
            | DataType::Double
            | DataType::BFloat16
            | DataType::Complex64
            | DataType::Complex128
    )
}

/// `Cast`: the gradient cast back to the source type when both types
/// are floating or complex; None otherwise.
fn cast_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let (src, dst) = (ctx.dtype(ctx.input(0)).base(), ctx.dtype(g).base());
    if !(is_float_or_complex(src) && is_float_or_complex(dst)) {
        return Ok(());
    }
    let dx = ctx.op1("Cast", &[g], &[("DstT", src.into_attr_value())])?;
    ctx.set_input_grad(0, dx)
}

/// The gradients of `z = Helper(a, b)` for the helpers whose `b`
/// gradient is `Helper(a, grad)`: `grad_a` from `a`, `b`, `grad`.
fn helper_grad_grad(
    ctx: &mut GradientContext<'_>,
    helper: &str,
    grad_a: impl FnOnce(&mut GradientContext<'_>, Sym, Sym, Sym) -> Result<Sym>,
) -> Result<()> {
    let (g, a, b) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let ga = grad_a(ctx, a, b, g)?;
    let gb = ctx.op1(helper, &[a, g], &[])?;
    ctx.set_input_grad(0, ga)?;
    ctx.set_input_grad(1, gb)
}

/// `grad * -2 * b * a`: the `a` gradient of `TanhGrad` and `ReciprocalGrad`.
fn minus_two_g_b_a(ctx: &mut GradientContext<'_>, a: Sym, b: Sym, g: Sym) -> Result<Sym> {
    let minus_two = ctx.scalar(ctx.dtype(g), -2.0)?;
    let t = ctx.mul(g, minus_two)?;
    let t = ctx.mul(t, b)?;
    ctx.mul(t, a)
}

/// `z = TanhGrad(a, b) = b * (1 - a^2)`: `(grad * -2 * b * a, TanhGrad(a, grad))`.
fn tanh_grad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    helper_grad_grad(ctx, "TanhGrad", minus_two_g_b_a)
}

/// `z = SigmoidGrad(a, b) = b * a * (1 - a)`:
/// `(grad * b - 2 * grad * b * a, SigmoidGrad(a, grad))`.
fn sigmoid_grad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    helper_grad_grad(ctx, "SigmoidGrad", |ctx, a, b, g| {
        let gb = ctx.mul(g, b)?;
        let two = ctx.scalar(ctx.dtype(g), 2.0)?;
        let t = ctx.mul(two, gb)?;
        let t = ctx.mul(t, a)?;
        ctx.sub(gb, t)
    })
}

/// `z = SqrtGrad(a, b) = 0.5 * b / a`: with `ga = grad / a`, `(-ga * z, 0.5 * ga)`.
fn sqrt_grad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, a, z) = (ctx.grad()?, ctx.input(0), ctx.output(0));
    let ga = ctx.div(g, a)?;
    let minus_ga = ctx.neg(ga)?;
    let grad_a = ctx.mul(minus_ga, z)?;
    let half = ctx.scalar(ctx.dtype(g), 0.5)?;
    let grad_b = ctx.mul(half, ga)?;
    ctx.set_input_grad(0, grad_a)?;
    ctx.set_input_grad(1, grad_b)
}

/// `z = RsqrtGrad(a, b) = -0.5 * b * a^3`:
/// `(-1.5 * grad * b * a^2, RsqrtGrad(a, grad))`.
fn rsqrt_grad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    helper_grad_grad(ctx, "RsqrtGrad", |ctx, a, b, g| {
        let c = ctx.scalar(ctx.dtype(g), -1.5)?;
        let t = ctx.mul(c, g)?;
        let t = ctx.mul(t, b)?;
        let a2 = ctx.op1("Square", &[a], &[])?;
        ctx.mul(t, a2)
    })
}

/// `z = ReciprocalGrad(a, b) = -b * a^2`:
/// `(grad * -2 * b * a, ReciprocalGrad(a, grad))`.
fn reciprocal_grad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    helper_grad_grad(ctx, "ReciprocalGrad", minus_two_g_b_a)
}

register_gradient!("Neg", neg_grad);
register_gradient!("Abs", |ctx| times_unary_of_x(ctx, "Sign"));
register_gradient!("Sign", sign_grad);
register_gradient!("Reciprocal", |ctx| helper_of_output(ctx, "ReciprocalGrad"));
register_gradient!("Square", square_grad);
register_gradient!("Sqrt", |ctx| helper_of_output(ctx, "SqrtGrad"));
register_gradient!("Rsqrt", |ctx| helper_of_output(ctx, "RsqrtGrad"));
register_gradient!("Exp", exp_grad);
register_gradient!("Log", |ctx| times_unary_of_x(ctx, "Reciprocal"));
register_gradient!("Log1p", log1p_grad);
register_gradient!("Tanh", |ctx| helper_of_output(ctx, "TanhGrad"));
register_gradient!("Sigmoid", |ctx| helper_of_output(ctx, "SigmoidGrad"));
register_gradient!("Sin", |ctx| times_unary_of_x(ctx, "Cos"));
register_gradient!("Cos", cos_grad);
register_gradient!("Floor", no_grad);
register_gradient!("Ceil", no_grad);
register_gradient!("Round", no_grad);
register_gradient!("Cast", cast_grad);
register_gradient!("TanhGrad", tanh_grad_grad);
register_gradient!("SigmoidGrad", sigmoid_grad_grad);
register_gradient!("SqrtGrad", sqrt_grad_grad);
register_gradient!("RsqrtGrad", rsqrt_grad_grad);
register_gradient!("ReciprocalGrad", reciprocal_grad_grad);
opforge_core::register_not_differentiable!("LogicalNot");
