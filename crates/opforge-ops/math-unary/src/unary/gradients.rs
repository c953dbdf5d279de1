//! Gradients of the unary math ops and `Cast`.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym};
use opforge_core::{register_gradient, DataType, Result};

type Grads = Result<Vec<Option<Sym>>>;

/// `grad * f(x)` for the ops whose derivative is a function of `x`.
fn times(o: &mut dyn Ops, g: Sym, factor: Sym) -> Grads {
    Ok(vec![Some(o.mul(g, factor)?)])
}

fn neg_grad(o: &mut dyn Ops, _: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    Ok(vec![Some(o.neg(g)?)])
}

fn abs_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let sign = o.op1("Sign", &[op.inputs[0]], &[])?;
    times(o, g, sign)
}

fn sign_grad(o: &mut dyn Ops, op: &GradOp<'_>, _: &[Option<Sym>]) -> Grads {
    Ok(vec![Some(o.zeros_like(op.inputs[0])?)])
}

/// The ops whose gradient is a helper op `Helper(y, grad)` of the output.
fn helper_of_output(
    o: &mut dyn Ops,
    op: &GradOp<'_>,
    grads: &[Option<Sym>],
    helper: &str,
) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    Ok(vec![Some(o.op1(helper, &[op.outputs[0], g], &[])?)])
}

fn reciprocal_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    helper_of_output(o, op, grads, "ReciprocalGrad")
}

fn sqrt_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    helper_of_output(o, op, grads, "SqrtGrad")
}

fn rsqrt_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    helper_of_output(o, op, grads, "RsqrtGrad")
}

fn tanh_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    helper_of_output(o, op, grads, "TanhGrad")
}

fn sigmoid_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    helper_of_output(o, op, grads, "SigmoidGrad")
}

fn square_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let x = op.inputs[0];
    let two = o.scalar(o.dtype(x), 2.0)?;
    let two_x = o.mul(x, two)?;
    times(o, g, two_x)
}

fn exp_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    times(o, g, op.outputs[0])
}

fn log_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let inv = o.op1("Reciprocal", &[op.inputs[0]], &[])?;
    times(o, g, inv)
}

fn log1p_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let x = op.inputs[0];
    let one = o.scalar(o.dtype(x), 1.0)?;
    let one_plus_x = o.add(one, x)?;
    let inv = o.op1("Reciprocal", &[one_plus_x], &[])?;
    times(o, g, inv)
}

fn sin_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let cos = o.op1("Cos", &[op.inputs[0]], &[])?;
    times(o, g, cos)
}

fn cos_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let minus_g = o.neg(g)?;
    let sin = o.op1("Sin", &[op.inputs[0]], &[])?;
    times(o, minus_g, sin)
}

/// `Floor`, `Ceil`, `Round`: piecewise constant; TensorFlow returns None.
fn no_grad(_: &mut dyn Ops, _: &GradOp<'_>, _: &[Option<Sym>]) -> Grads {
    Ok(vec![None])
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
fn cast_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let (src, dst) = (o.dtype(op.inputs[0]).base(), o.dtype(g).base());
    if !(is_float_or_complex(src) && is_float_or_complex(dst)) {
        return Ok(vec![None]);
    }
    Ok(vec![Some(o.op1(
        "Cast",
        &[g],
        &[("DstT", src.into_attr_value())],
    )?)])
}

/// `z = TanhGrad(a, b) = b * (1 - a^2)`: `(grad * -2 * b * a, TanhGrad(a, grad))`.
fn tanh_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (a, b) = (op.inputs[0], op.inputs[1]);
    let minus_two = o.scalar(o.dtype(g), -2.0)?;
    let t = o.mul(g, minus_two)?;
    let t = o.mul(t, b)?;
    let ga = o.mul(t, a)?;
    let gb = o.op1("TanhGrad", &[a, g], &[])?;
    Ok(vec![Some(ga), Some(gb)])
}

/// `z = SigmoidGrad(a, b) = b * a * (1 - a)`:
/// `(grad * b - 2 * grad * b * a, SigmoidGrad(a, grad))`.
fn sigmoid_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (a, b) = (op.inputs[0], op.inputs[1]);
    let gb = o.mul(g, b)?;
    let two = o.scalar(o.dtype(g), 2.0)?;
    let t = o.mul(two, gb)?;
    let t = o.mul(t, a)?;
    let ga = o.sub(gb, t)?;
    let gb = o.op1("SigmoidGrad", &[a, g], &[])?;
    Ok(vec![Some(ga), Some(gb)])
}

/// `z = SqrtGrad(a, b) = 0.5 * b / a`: with `ga = grad / a`, `(-ga * z, 0.5 * ga)`.
fn sqrt_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (a, z) = (op.inputs[0], op.outputs[0]);
    let ga = o.div(g, a)?;
    let minus_ga = o.neg(ga)?;
    let grad_a = o.mul(minus_ga, z)?;
    let half = o.scalar(o.dtype(g), 0.5)?;
    let grad_b = o.mul(half, ga)?;
    Ok(vec![Some(grad_a), Some(grad_b)])
}

/// `z = RsqrtGrad(a, b) = -0.5 * b * a^3`:
/// `(-1.5 * grad * b * a^2, RsqrtGrad(a, grad))`.
fn rsqrt_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (a, b) = (op.inputs[0], op.inputs[1]);
    let c = o.scalar(o.dtype(g), -1.5)?;
    let t = o.mul(c, g)?;
    let t = o.mul(t, b)?;
    let a2 = o.op1("Square", &[a], &[])?;
    let grad_a = o.mul(t, a2)?;
    let grad_b = o.op1("RsqrtGrad", &[a, g], &[])?;
    Ok(vec![Some(grad_a), Some(grad_b)])
}

/// `z = ReciprocalGrad(a, b) = -b * a^2`:
/// `(grad * -2 * b * a, ReciprocalGrad(a, grad))`.
fn reciprocal_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (a, b) = (op.inputs[0], op.inputs[1]);
    let minus_two = o.scalar(o.dtype(g), -2.0)?;
    let t = o.mul(g, minus_two)?;
    let t = o.mul(t, b)?;
    let grad_a = o.mul(t, a)?;
    let grad_b = o.op1("ReciprocalGrad", &[a, g], &[])?;
    Ok(vec![Some(grad_a), Some(grad_b)])
}

register_gradient!("Neg", neg_grad);
register_gradient!("Abs", abs_grad);
register_gradient!("Sign", sign_grad);
register_gradient!("Reciprocal", reciprocal_grad);
register_gradient!("Square", square_grad);
register_gradient!("Sqrt", sqrt_grad);
register_gradient!("Rsqrt", rsqrt_grad);
register_gradient!("Exp", exp_grad);
register_gradient!("Log", log_grad);
register_gradient!("Log1p", log1p_grad);
register_gradient!("Tanh", tanh_grad);
register_gradient!("Sigmoid", sigmoid_grad);
register_gradient!("Sin", sin_grad);
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
