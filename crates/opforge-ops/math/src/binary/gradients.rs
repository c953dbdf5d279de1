//! Gradients of the binary math ops.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym, SymArg};
use opforge_core::{register_gradient, register_not_differentiable, Result};
use opforge_ops_base::grad::unbroadcast_grads;

type Grads = Result<Vec<Option<Sym>>>;

fn reduced(o: &mut dyn Ops, op: &GradOp<'_>, gx: Sym, gy: Sym) -> Grads {
    let (gx, gy) = unbroadcast_grads(o, op.inputs[0], op.inputs[1], Some(gx), Some(gy))?;
    Ok(vec![gx, gy])
}

fn add_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    reduced(o, op, g, g)
}

fn sub_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let minus_g = o.neg(g)?;
    reduced(o, op, g, minus_g)
}

fn mul_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (op.inputs[0], op.inputs[1]);
    let gx = o.mul(g, y)?;
    let gy = o.mul(x, g)?;
    reduced(o, op, gx, gy)
}

/// `Div` and `RealDiv` (on floating types TensorFlow's `divide` is `RealDiv`):
/// `(grad / y, grad * (-x / y / y))`.
fn div_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (op.inputs[0], op.inputs[1]);
    let gx = o.div(g, y)?;
    let minus_x = o.neg(x)?;
    let t = o.div(minus_x, y)?;
    let t = o.div(t, y)?;
    let gy = o.mul(g, t)?;
    reduced(o, op, gx, gy)
}

/// `FloorDiv`: piecewise constant; TensorFlow returns None for both.
fn floor_div_grad(_: &mut dyn Ops, _: &GradOp<'_>, _: &[Option<Sym>]) -> Grads {
    Ok(vec![None, None])
}

/// `FloorMod`: `(grad, grad * -floor_div(x, y))`.
fn floor_mod_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (op.inputs[0], op.inputs[1]);
    let q = o.op1("FloorDiv", &[x, y], &[])?;
    let minus_q = o.neg(q)?;
    let gy = o.mul(g, minus_q)?;
    reduced(o, op, g, gy)
}

/// `Maximum`/`Minimum`: the gradient goes to `x` where `selector(x, y)`
/// (ties included), to `y` elsewhere.
fn max_min_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>], selector: &str) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (op.inputs[0], op.inputs[1]);
    let zeros = o.zeros_like(g)?;
    let xmask = o.op1(selector, &[x, y], &[])?;
    let gx = o.op1("SelectV2", &[xmask, g, zeros], &[])?;
    let gy = o.op1("SelectV2", &[xmask, zeros, g], &[])?;
    reduced(o, op, gx, gy)
}

fn maximum_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    max_min_grad(o, op, grads, "GreaterEqual")
}

fn minimum_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    max_min_grad(o, op, grads, "LessEqual")
}

/// `Pow`: `(grad * y * x^(y - 1), grad * z * log(x))`, with `log(x)`
/// taken as 0 where `x <= 0` (no false singularity at 0).
fn pow_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y, z) = (op.inputs[0], op.inputs[1], op.outputs[0]);
    let dt = o.dtype(x);
    let one = o.scalar(dt, 1.0)?;
    let y_minus_one = o.sub(y, one)?;
    let p = o.op1("Pow", &[x, y_minus_one], &[])?;
    let t = o.mul(g, y)?;
    let gx = o.mul(t, p)?;
    let zero = o.scalar(dt, 0.0)?;
    let mask = if dt.is_complex() {
        o.op1("NotEqual", &[x, zero], &[])?
    } else {
        o.op1("Greater", &[x, zero], &[])?
    };
    let ones = o.ones_like(x)?;
    let safe_x = o.op1("Select", &[mask, x, ones], &[])?;
    let log = o.op1("Log", &[safe_x], &[])?;
    let zeros = o.zeros_like(x)?;
    let log_x = o.op1("Select", &[mask, log, zeros], &[])?;
    let t = o.mul(g, z)?;
    let gy = o.mul(t, log_x)?;
    reduced(o, op, gx, gy)
}

/// `SquaredDifference`: with `d = 2 * grad * (x - y)`, `(d, -d)`, each
/// reduced to its input's shape (`y`'s negated after the reduction).
fn squared_difference_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (op.inputs[0], op.inputs[1]);
    let two = o.scalar(o.dtype(g), 2.0)?;
    let two_g = o.mul(two, g)?;
    let diff = o.sub(x, y)?;
    let d = o.mul(two_g, diff)?;
    let (gx, gy) = unbroadcast_grads(o, x, y, Some(d), Some(d))?;
    let gy = match gy {
        Some(gy) => Some(o.neg(gy)?),
        None => None,
    };
    Ok(vec![gx, gy])
}

/// `AddN`: the gradient, to every input.
fn add_n_grad(_: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    Ok(vec![grads[0]; op.inputs.len()])
}

/// `Select`: the gradient where the condition picks `t`, zeros elsewhere
/// (and the reverse for `e`); none for the condition.
fn select_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None, None]);
    };
    let (c, x) = (op.inputs[0], op.inputs[1]);
    let zeros = o.zeros_like(x)?;
    let gx = o.op1("Select", &[c, g, zeros], &[])?;
    let gy = o.op1("Select", &[c, zeros, g], &[])?;
    Ok(vec![None, Some(gx), Some(gy)])
}

/// `SelectV2`: as `Select`, each summed over the dims its input was
/// broadcast along (kept as size 1) and reshaped to the input's shape.
fn select_v2_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None, None]);
    };
    let c = op.inputs[0];
    let zero = o.scalar(o.dtype(g), 0.0)?;
    let out_shape = o.shape_of(op.outputs[0])?;
    let mut result = vec![None];
    for (i, picked) in [(1, true), (2, false)] {
        let input = op.inputs[i];
        let masked = if picked {
            o.op1("SelectV2", &[c, g, zero], &[])?
        } else {
            o.op1("SelectV2", &[c, zero, g], &[])?
        };
        let shape = o.shape_of(input)?;
        let r = o.call(
            "BroadcastGradientArgs",
            &[SymArg::One(shape), SymArg::One(out_shape)],
            &Default::default(),
        )?;
        let summed = o.op1(
            "Sum",
            &[masked, r[0]],
            &[("keep_dims", true.into_attr_value())],
        )?;
        result.push(Some(o.reshape(summed, shape)?));
    }
    Ok(result)
}

register_gradient!("Add", add_grad);
register_gradient!("AddV2", add_grad);
register_gradient!("Sub", sub_grad);
register_gradient!("Mul", mul_grad);
register_gradient!("Div", div_grad);
register_gradient!("RealDiv", div_grad);
register_gradient!("FloorDiv", floor_div_grad);
register_gradient!("FloorMod", floor_mod_grad);
register_gradient!("Maximum", maximum_grad);
register_gradient!("Minimum", minimum_grad);
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
