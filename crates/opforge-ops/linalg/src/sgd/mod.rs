//! `_ResourceApplyGradientDescentMatMul`: the SGD update of a variable
//! whose gradient is a matrix product, `var -= alpha * op(a) · op(b)`, as
//! one kernel. The op carries the SGD update fusions as its graph rewrite
//! ([`rewrite`]), which sessions run before a graph: they put it in place
//! of `ResourceApplyGradientDescent(var, alpha, MatMul(a, b))` (or
//! `AssignSubVariableOp(var, Mul(alpha, MatMul(a, b)))`) when nothing else
//! reads the product: a dense layer's weight update as a training step
//! writes it. Like TensorFlow's
//! grappler-made ops (`_FusedMatMul`), its name starts with `_`: graphs get
//! it from the rewrite, not from users.
//!
//! The product is computed in `MatMul`'s blocks, and each block's rows of
//! the variable are updated on the thread that computed the block, right
//! after it, while the block is still in cache: the gradient never makes
//! the round trip through memory that the unfused graph gives it (written
//! by `MatMul`, read back by the update), and the update of the last layer
//! overlaps the product instead of following it. The arithmetic is the
//! unfused graph's exactly: the same blocks and kernel calls for the
//! product, then `v - alpha * p` for each element, so the variable ends up
//! bit-identical (tested).

mod rewrite;

use crate::matmul::{faer_products, matrix_product, product_then, Gemm};
use faer::traits::ComplexField;
use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::resource::ResourceHandle;
use opforge_core::shape_inference::{common, InferenceContext};
use opforge_core::{
    ensure, register_kernel, register_not_differentiable, register_op, DataType, Element,
    OpDefBuilder, Result, Status, Tensor, TensorShape,
};
use opforge_ops_base::args::fmt_shape;
use opforge_ops_base::cpu::elem::Num;
use opforge_ops_base::types::{FLOAT_DOUBLE_SPEC, FLOAT_DOUBLE_TYPES};
use opforge_ops_base::var::{self, Var};

/// The op's name.
pub(crate) const NAME: &str = "_ResourceApplyGradientDescentMatMul";

/// `_ResourceApplyGradientDescentMatMul`.
pub fn resource_apply_gradient_descent_mat_mul() -> OpDefBuilder {
    OpDefBuilder::new(NAME)
        .input("var: resource")
        .input("alpha: T")
        .input("a: T")
        .input("b: T")
        .attr(format!("T: {{{FLOAT_DOUBLE_SPEC}}}"))
        .attr("transpose_a: bool = false")
        .attr("transpose_b: bool = false")
        .attr("use_locking: bool = false")
        .stateful()
        .set_shape_fn(shape)
        .graph_rewrite(rewrite::fuse_sgd_updates)
        .doc(
            "Update '*var' by subtracting 'alpha' * MatMul(a, b) from it.\n\
             \n\
             `ResourceApplyGradientDescent` whose `delta` is `MatMul(a, b, transpose_a,\n\
             transpose_b)`, in one kernel: each block of the product updates its part\n\
             of the variable as soon as it is computed. Bit-identical to the two ops.\n\
             Graph rewrites make it; `alpha` must be a scalar and the product must\n\
             have the variable's shape.",
        )
}

register_op!(resource_apply_gradient_descent_mat_mul());
register_not_differentiable!(NAME);

/// `ApplyGradientDescentShapeFn` with `MatMul`'s shape function for the
/// delta: `alpha` is a scalar, `a` and `b` are matrices whose inner
/// dimensions agree, and their product has the variable's shape (the
/// shape its handle holds, unknown without handle data).
fn shape(c: &mut InferenceContext) -> Result<()> {
    let var = var::handle_shape(c, 0);
    let alpha = c.input(1);
    c.with_rank(alpha, 0)?;
    let delta = common::matrix_product_shape(c, 2, 3)?;
    c.merge(var, delta)?;
    Ok(())
}

struct Kernel {
    transpose_a: bool,
    transpose_b: bool,
}

impl CreateKernel for Kernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Kernel {
            transpose_a: ctx.get_attr("transpose_a")?,
            transpose_b: ctx.get_attr("transpose_b")?,
        })
    }
}

impl OpKernel for Kernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (h, var) = var::to_update(ctx, 2)?;
        let (alpha, a, b) = (ctx.input(1), ctx.input(2), ctx.input(3));
        ensure!(
            alpha.rank() == 0,
            InvalidArgument,
            "alpha is not a scalar: {}",
            fmt_shape(alpha.dims())
        );
        let g = matrix_product(a, b, self.transpose_a, self.transpose_b)?;
        let dims = [g.m as i64, g.n as i64];
        let check = |current: &Tensor| {
            ensure!(
                current.dims() == dims,
                InvalidArgument,
                "var and delta do not have the same shape{} {}",
                fmt_shape(current.dims()),
                fmt_shape(&dims)
            );
            Ok(())
        };
        match a.dtype() {
            DataType::Float => fused::<f32>(ctx, &var, &h, &g, alpha, a, b, check),
            DataType::Double => fused::<f64>(ctx, &var, &h, &g, alpha, a, b, check),
            dt => Err(Status::unimplemented(format!(
                "{NAME} does not support {dt} variables"
            ))),
        }
    }
}

/// The update. When no read shares the variable's buffer, under its write
/// lock: each block of the product updates its part of the variable on
/// the thread that computed it (the blocks shard with `shard_isolated`, as
/// the lock requires). When a read does share it (a node running at the
/// same time still reads the variable, such as the product for the layer
/// below), the product is computed first, without the lock, and applied as
/// `ResourceApplyGradientDescent` applies its delta (in place if the read
/// is gone by then, else into a fresh buffer): no copy of the variable
/// just to update it, and no wait on the lock meanwhile.
#[allow(clippy::too_many_arguments)]
fn fused<T: ComplexField + Num + Element + Copy + Send + Sync>(
    ctx: &OpKernelContext<'_>,
    var: &Var,
    h: &ResourceHandle,
    g: &Gemm,
    alpha: &Tensor,
    a: &Tensor,
    b: &Tensor,
    check: impl Fn(&Tensor) -> Result<()>,
) -> Result<()> {
    let alpha = alpha.flat::<T>()?[0];
    let pool: &ThreadPool = ctx.thread_pool();
    let (a, b) = (a.flat::<T>()?, b.flat::<T>()?);
    let mut product = ctx.allocate_temp(T::DTYPE, TensorShape::new(&[g.m as i64, g.n as i64])?)?;
    let sgd = |v: T, p: T| Num::sub(v, Num::mul(alpha, p));
    {
        let mut slot = var.write();
        let current = slot.as_mut().ok_or_else(|| var::uninitialized(h))?;
        check(current)?;
        if let Ok(v) = current.flat_mut::<T>() {
            let row = |p: &[T], v: &mut [T]| {
                for (v, &p) in v.iter_mut().zip(p) {
                    *v = sgd(*v, p);
                }
            };
            product_then(pool, g, a, b, product.flat_mut()?, v, &row, true);
            return Ok(());
        }
    }
    faer_products(pool, g, a, b, &[(0, 0)], product.flat_mut()?);
    var::update_elementwise::<T>(ctx, var, h, &product, check, sgd)
}

register_kernel!(
    KernelDefBuilder::new(NAME).type_constraint_list("T", FLOAT_DOUBLE_TYPES),
    Kernel
);

#[cfg(test)]
mod tests;
