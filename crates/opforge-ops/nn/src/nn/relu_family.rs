//! The `Relu` family kernels.

use super::*;
use opforge_ops_base::real_types;

// Relu family
// ---------------------------------------------------------------------------

/// `max(x, 0)` with NaN propagated (Eigen's `std::max(x, 0)`).
#[inline(always)]
pub(super) fn relu_of<T: Num + Ordered>(x: T) -> T {
    if x < T::ZERO {
        T::ZERO
    } else {
        x
    }
}

/// `min(max(x, 0), six)` with NaN propagated.
#[inline(always)]
pub(super) fn relu6_of<T: Num + Ordered>(x: T, six: T) -> T {
    let y = relu_of(x);
    if six < y {
        six
    } else {
        y
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum ReluOp {
    Relu,
    Relu6,
    Grad,
    /// `Relu6Grad`: the gradient where `0 < features < 6`, else 0.
    Relu6Grad,
}

pub(super) struct ReluKernel(ReluOp);

pub(super) fn relu_kernel(op: ReluOp) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ReluKernel(op)))
}

pub(super) fn relu_compute<T: Num + Ordered>(
    op: ReluOp,
    ctx: &mut OpKernelContext<'_>,
) -> Result<()> {
    match op {
        ReluOp::Relu => unary_same::<T>(ctx, CHEAP_COST, relu_of),
        ReluOp::Relu6 => {
            let six = T::narrow(Wide::Int(6));
            unary_same::<T>(ctx, CHEAP_COST, move |x| relu6_of(x, six))
        }
        ReluOp::Grad => {
            same_size(ctx, "features")?;
            binary_same::<T>(ctx, CHEAP_COST, |g, f| {
                if f > T::ZERO {
                    g
                } else {
                    g.mul(T::ZERO)
                }
            })
        }
        ReluOp::Relu6Grad => {
            same_size(ctx, "features")?;
            let six = T::narrow(Wide::Int(6));
            // TensorFlow: `gradients * ((features > 0) * (features < 6))`, so a
            // NaN gradient stays NaN where it is blocked.
            binary_same::<T>(ctx, CHEAP_COST, move |g, f| {
                if f > T::ZERO && f < six {
                    g
                } else {
                    g.mul(T::ZERO)
                }
            })
        }
    }
}

/// TensorFlow's `ReluHelpers::ValidateSameSize` for the `*Grad` ops, naming
/// the second input (`features` or `outputs`).
pub(super) fn same_size(ctx: &OpKernelContext<'_>, second: &str) -> Result<()> {
    ensure!(
        ctx.input(0).shape() == ctx.input(1).shape(),
        InvalidArgument,
        "g and a must be the same size: gradients {} vs. {second} {}",
        ctx.input(0).shape(),
        ctx.input(1).shape()
    );
    Ok(())
}

impl OpKernel for ReluKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input(0).dtype();
        let op = self.0;
        real_types!(dt, T => relu_compute::<T>(op, ctx),
            Err(Status::unimplemented(format!("{} has no CPU kernel for {dt}", ctx.op_def().name))))
    }
}

register_kernel!(
    KernelDefBuilder::new("Relu").type_constraint_list("T", REAL_KERNEL_TYPES),
    fn = |_| relu_kernel(ReluOp::Relu)
);
register_kernel!(
    KernelDefBuilder::new("Relu6").type_constraint_list("T", REAL_KERNEL_TYPES),
    fn = |_| relu_kernel(ReluOp::Relu6)
);
register_kernel!(
    KernelDefBuilder::new("ReluGrad").type_constraint_list("T", REAL_KERNEL_TYPES),
    fn = |_| relu_kernel(ReluOp::Grad)
);
register_kernel!(
    KernelDefBuilder::new("Relu6Grad").type_constraint_list("T", REAL_KERNEL_TYPES),
    fn = |_| relu_kernel(ReluOp::Relu6Grad)
);

// ---------------------------------------------------------------------------
