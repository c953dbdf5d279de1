//! The `Relu` family kernels.

use super::*;

// Relu family
// ---------------------------------------------------------------------------

/// A real element type of the Relu family.
pub(super) trait ReluElem: Element + PartialOrd {
    const ZERO: Self;
    const SIX: Self;
    fn times(self, o: Self) -> Self;
}

macro_rules! relu_float {
    ($($t:ty),*) => {$(
        impl ReluElem for $t {
            const ZERO: $t = 0.0;
            const SIX: $t = 6.0;
            #[inline(always)] fn times(self, o: $t) -> $t { self * o }
        }
    )*};
}
relu_float!(f32, f64);

macro_rules! relu_half {
    ($($t:ty),*) => {$(
        impl ReluElem for $t {
            const ZERO: $t = <$t>::ZERO;
            const SIX: $t = <$t>::from_f32_const(6.0);
            #[inline(always)] fn times(self, o: $t) -> $t { <$t>::from_f32(self.to_f32() * o.to_f32()) }
        }
    )*};
}
relu_half!(f16, bf16);

macro_rules! relu_int {
    ($($t:ty),*) => {$(
        impl ReluElem for $t {
            const ZERO: $t = 0;
            const SIX: $t = 6;
            #[inline(always)] fn times(self, o: $t) -> $t { self.wrapping_mul(o) }
        }
    )*};
}
relu_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// `max(x, 0)` with NaN propagated (Eigen's `std::max(x, 0)`).
#[inline(always)]
pub(super) fn relu_of<T: ReluElem>(x: T) -> T {
    if x < T::ZERO {
        T::ZERO
    } else {
        x
    }
}

#[inline(always)]
pub(super) fn relu6_of<T: ReluElem>(x: T) -> T {
    let y = relu_of(x);
    if T::SIX < y {
        T::SIX
    } else {
        y
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum ReluOp {
    Relu,
    Relu6,
    Grad,
}

pub(super) struct ReluKernel(ReluOp);

pub(super) fn relu_kernel(op: ReluOp) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ReluKernel(op)))
}

pub(super) fn relu_compute<T: ReluElem>(op: ReluOp, ctx: &mut OpKernelContext<'_>) -> Result<()> {
    match op {
        ReluOp::Relu => unary_same::<T>(ctx, CHEAP_COST, relu_of),
        ReluOp::Relu6 => unary_same::<T>(ctx, CHEAP_COST, relu6_of),
        ReluOp::Grad => {
            ensure!(
                ctx.input(0).shape() == ctx.input(1).shape(),
                InvalidArgument,
                "g and a must be the same size: gradients {} vs. features {}",
                ctx.input(0).shape(),
                ctx.input(1).shape()
            );
            binary_same::<T>(ctx, CHEAP_COST, |g, f| {
                if f > T::ZERO {
                    g
                } else {
                    g.times(T::ZERO)
                }
            })
        }
    }
}

impl OpKernel for ReluKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input(0).dtype();
        let op = self.0;
        dispatch!(dt, T => relu_compute::<T>(op, ctx),
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
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

// ---------------------------------------------------------------------------
