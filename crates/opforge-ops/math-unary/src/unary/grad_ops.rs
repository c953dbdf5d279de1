//! The gradient helper ops of the unary ops (`TanhGrad`, ...): `z = f(y, dy)`.

use super::*;

// Gradient helpers: z = f(y, dy), no broadcasting
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GradOp {
    Tanh,
    Sigmoid,
    Sqrt,
    Rsqrt,
    Reciprocal,
}

/// The kernel of the `*Grad` helpers: `z = f(y, dy)` elementwise over two
/// inputs with the same number of elements (no broadcasting); `z` has `y`'s shape.
pub(super) struct GradKernel(GradOp);

/// `out = f(in0, in1)` for inputs with the same number of elements, in
/// place in an input's buffer when it may be reused (TensorFlow's `SimpleBinaryOp`).
pub(super) fn simple_binary<T: Element>(
    ctx: &mut OpKernelContext<'_>,
    cost: usize,
    f: impl Fn(T, T) -> T + Sync,
) -> Result<()> {
    let (n0, n1) = (ctx.input(0).num_elements(), ctx.input(1).num_elements());
    ensure!(
        n0 == n1,
        InvalidArgument,
        "The two arguments to a cwise op must have same number of elements, got {n0} and {n1}"
    );
    if ctx.input(0).shape() == ctx.input(1).shape() {
        return binary_same::<T>(ctx, cost, f);
    }
    let shape = ctx.input(0).shape().clone();
    ctx.allocate_output(0, shape)?;
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    par_zip(
        pool,
        ins[0].flat::<T>()?,
        ins[1].flat::<T>()?,
        out.flat_mut::<T>()?,
        cost,
        f,
    );
    Ok(())
}

#[inline(always)]
pub(super) fn tanh_grad<T: Float>(y: T, dy: T) -> T {
    dy.mul(T::ONE.sub(y.mul(y)))
}

#[inline(always)]
pub(super) fn sigmoid_grad<T: Float>(y: T, dy: T) -> T {
    dy.mul(y).mul(T::ONE.sub(y))
}

#[inline(always)]
pub(super) fn sqrt_grad<T: Float>(y: T, dy: T) -> T {
    // TensorFlow: 0 where dy == 0 (so y == 0 does not make NaN), else 0.5 * dy / conj(y).
    if dy == T::ZERO {
        T::ZERO
    } else {
        T::from_f64(0.5).mul(dy).div(y.conj())
    }
}

#[inline(always)]
pub(super) fn rsqrt_grad<T: Float>(y: T, dy: T) -> T {
    if dy == T::ZERO {
        T::ZERO
    } else {
        let c = y.conj();
        T::from_f64(-0.5).mul(dy.mul(c)).mul(c.mul(c))
    }
}

#[inline(always)]
pub(super) fn reciprocal_grad<T: Float + Signed>(y: T, dy: T) -> T {
    if dy == T::ZERO {
        T::ZERO
    } else {
        let c = y.conj();
        c.neg().mul(c).mul(dy)
    }
}

impl OpKernel for GradKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input_dtype(0);
        let bad = |ctx: &OpKernelContext<'_>| Err(unsupported(ctx, dt));
        match self.0 {
            GradOp::Tanh => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, 3, tanh_grad::<T>), bad(ctx))
            }
            GradOp::Sigmoid => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, 3, sigmoid_grad::<T>), bad(ctx))
            }
            GradOp::Sqrt => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, COST_DIV, sqrt_grad::<T>), bad(ctx))
            }
            GradOp::Rsqrt => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, 4, rsqrt_grad::<T>), bad(ctx))
            }
            GradOp::Reciprocal => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, 3, reciprocal_grad::<T>), bad(ctx))
            }
        }
    }
}

// The gradient helper ops' one dtype table: spec list and kernel list.
opforge_ops_base::dtype_table! {
    /// The types of the unary gradient helper ops (TensorFlow's
    /// `UNARY_GRADIENT_COMPLEX`).
    FLOAT_COMPLEX, FLOAT_COMPLEX_SPEC, float_complex_grad_types => [BFloat16, Half, Float, Double, Complex64, Complex128]
}

macro_rules! grad_op {
    ($name:literal, $op:ident, $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("y: T")
            .input("dy: T")
            .output("z: T")
            .attr(format!("T: {{{FLOAT_COMPLEX_SPEC}}}"))
            // TensorFlow's UNARY_GRADIENT_COMPLEX: UnchangedShape (input 0's
            // handle; `dy` is not merged in).
            .set_shape_fn(unchanged_shape)
            .doc($doc));
        register_kernel!(
            KernelDefBuilder::new($name).type_constraint_list("T", FLOAT_COMPLEX),
            fn = |_| Ok(Box::new(GradKernel(GradOp::$op)) as Box<dyn OpKernel>)
        );
    };
}

grad_op!(
    "TanhGrad",
    Tanh,
    "Computes the gradient for the tanh of `x` wrt its input.\n\nSpecifically, `grad = dy * (1 - y*y)`, where `y = tanh(x)`, and `dy`\nis the corresponding input gradient."
);
grad_op!(
    "SigmoidGrad",
    Sigmoid,
    "Computes the gradient of the sigmoid of `x` wrt its input.\n\nSpecifically, `grad = dy * y * (1 - y)`, where `y = sigmoid(x)`, and\n`dy` is the corresponding input gradient."
);
grad_op!(
    "SqrtGrad",
    Sqrt,
    "Computes the gradient for the sqrt of `x` wrt its input.\n\nSpecifically, `grad = dy * 0.5 / y`, where `y = sqrt(x)`, and `dy`\nis the corresponding input gradient."
);
grad_op!(
    "RsqrtGrad",
    Rsqrt,
    "Computes the gradient for the rsqrt of `x` wrt its input.\n\nSpecifically, `grad = dy * -0.5 * y^3`, where `y = rsqrt(x)`, and `dy`\nis the corresponding input gradient."
);
grad_op!(
    "ReciprocalGrad",
    Reciprocal,
    "Computes the gradient for the inverse of `x` wrt its input.\n\nSpecifically, `grad = -dy * y*y`, where `y = 1/x`, and `dy`\nis the corresponding input gradient."
);

// ---------------------------------------------------------------------------
