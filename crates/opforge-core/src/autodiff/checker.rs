//! The gradient checker: theoretical Jacobians (from the registered
//! gradients) against numerical ones (central differences), like
//! TensorFlow's `tf.test.compute_gradient`.

use super::{backprop, GradientTape, Ops, Sym};
use crate::eager::EagerContext;
use crate::{DataType, Result, Status, Tensor};

/// The Jacobians of y with respect to one x: `rows = x.num_elements()`,
/// `cols = y.num_elements()`, row-major (`[r * cols + c]` = dy_c / dx_r).
#[derive(Clone, Debug, PartialEq)]
pub struct Jacobians {
    /// From the registered gradient functions.
    pub theoretical: Vec<f64>,
    /// From central differences.
    pub numerical: Vec<f64>,
    /// x's number of elements.
    pub rows: usize,
    /// y's number of elements.
    pub cols: usize,
}

fn to_f64(t: &Tensor) -> Result<Vec<f64>> {
    Ok(match t.dtype() {
        DataType::Float => t.flat::<f32>()?.iter().map(|&v| v as f64).collect(),
        DataType::Double => t.flat::<f64>()?.to_vec(),
        DataType::Half => t.flat::<half::f16>()?.iter().map(|v| v.to_f64()).collect(),
        DataType::BFloat16 => t.flat::<half::bf16>()?.iter().map(|v| v.to_f64()).collect(),
        other => {
            return Err(Status::unimplemented(format!(
                "the gradient checker does not support {other}"
            )))
        }
    })
}

fn from_f64(dtype: DataType, dims: &[i64], v: &[f64]) -> Result<Tensor> {
    match dtype {
        DataType::Float => Tensor::from_vec(dims, v.iter().map(|&x| x as f32).collect()),
        DataType::Double => Tensor::from_slice(dims, v),
        DataType::Half => {
            Tensor::from_vec(dims, v.iter().map(|&x| half::f16::from_f64(x)).collect())
        }
        DataType::BFloat16 => {
            Tensor::from_vec(dims, v.iter().map(|&x| half::bf16::from_f64(x)).collect())
        }
        other => Err(Status::unimplemented(format!(
            "the gradient checker does not support {other}"
        ))),
    }
}

type Builder<'f> = &'f dyn Fn(&mut dyn Ops, &[Sym]) -> Result<Sym>;

/// `t`'s values as f64, copied to the host first if they are on `ctx`'s device.
fn values(ctx: &EagerContext, t: &Tensor) -> Result<Vec<f64>> {
    to_f64(&ctx.device().copy_to_host(t)?)
}

/// Runs `f` on `xs` and returns y's values as f64 and its shape.
fn evaluate(ctx: &EagerContext, f: Builder<'_>, xs: &[Tensor]) -> Result<(Vec<f64>, Vec<i64>)> {
    let mut tape = GradientTape::new(ctx, false);
    let syms: Vec<Sym> = xs.iter().map(|x| tape.watch(x.clone())).collect();
    let y = f(&mut tape, &syms)?;
    let t = tape.value(y)?.clone();
    Ok((values(ctx, &t)?, t.dims().to_vec()))
}

/// The theoretical and numerical Jacobians of `f`'s output with respect to
/// each input, at `xs`. `f` builds its output from its inputs through
/// [`Ops`], so the same code runs in the inputs' dtype (for the theoretical
/// Jacobian) and in float64 (for the numerical one, when every op in `f`
/// has a float64 kernel; otherwise in the inputs' dtype with a larger step).
pub fn compute_gradient(
    ctx: &EagerContext,
    f: Builder<'_>,
    xs: &[Tensor],
) -> Result<Vec<Jacobians>> {
    // Theoretical: one backprop per element of y, over one recorded run.
    let mut tape = GradientTape::new(ctx, true);
    let syms: Vec<Sym> = xs.iter().map(|x| tape.watch(x.clone())).collect();
    let y = f(&mut tape, &syms)?;
    let y_t = tape.value(y)?.clone();
    let (y_dtype, y_dims, cols) = (y_t.dtype(), y_t.dims().to_vec(), y_t.num_elements());
    let records = tape.records_snapshot();
    let mut jac: Vec<Jacobians> = xs
        .iter()
        .map(|x| Jacobians {
            theoretical: vec![0.0; x.num_elements() * cols],
            numerical: vec![0.0; x.num_elements() * cols],
            rows: x.num_elements(),
            cols,
        })
        .collect();
    for c in 0..cols {
        let mut onehot = vec![0.0; cols];
        onehot[c] = 1.0;
        let seed = tape.constant(from_f64(y_dtype, &y_dims, &onehot)?)?;
        let grads = backprop(&mut tape, &records, &[y], &[Some(seed)], &syms)?;
        for (i, g) in grads.into_iter().enumerate() {
            if let Some(g) = g {
                let vals = values(ctx, tape.value(g)?)?;
                if vals.len() != jac[i].rows {
                    return Err(Status::internal(format!(
                        "the gradient for input {i} has {} elements, the input {}",
                        vals.len(),
                        jac[i].rows
                    )));
                }
                for (r, v) in vals.into_iter().enumerate() {
                    jac[i].theoretical[r * cols + c] = v;
                }
            }
        }
    }
    // Numerical: central differences, in float64 when f supports it.
    let as_f64: Vec<Tensor> = xs
        .iter()
        .map(|x| from_f64(DataType::Double, x.dims(), &values(ctx, x)?))
        .collect::<Result<_>>()?;
    let (base, delta) = match evaluate(ctx, f, &as_f64) {
        Ok(_) => (as_f64, 1e-6),
        Err(_) => (
            xs.to_vec(),
            if xs.iter().all(|x| x.dtype() == DataType::Double) {
                1e-6
            } else {
                1e-3
            },
        ),
    };
    for i in 0..xs.len() {
        let orig = values(ctx, &base[i])?;
        for r in 0..orig.len() {
            let probe = |sign: f64| -> Result<Vec<f64>> {
                let mut v = orig.clone();
                v[r] += sign * delta;
                let mut inputs = base.clone();
                inputs[i] = from_f64(base[i].dtype(), base[i].dims(), &v)?;
                Ok(evaluate(ctx, f, &inputs)?.0)
            };
            let (plus, minus) = (probe(1.0)?, probe(-1.0)?);
            for c in 0..cols {
                jac[i].numerical[r * cols + c] = (plus[c] - minus[c]) / (2.0 * delta);
            }
        }
    }
    Ok(jac)
}

/// The largest absolute difference between theoretical and numerical
/// Jacobian entries (TensorFlow's `compute_gradient_error`).
pub fn compute_gradient_error(jacobians: &[Jacobians]) -> f64 {
    jacobians
        .iter()
        .flat_map(|j| {
            j.theoretical
                .iter()
                .zip(&j.numerical)
                .map(|(a, b)| (a - b).abs())
        })
        .fold(0.0, f64::max)
}
