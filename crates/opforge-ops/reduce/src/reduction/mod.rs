//! Reductions with TensorFlow 2.21's OpDefs and CPU kernel semantics:
//! `Sum`, `Mean`, `Max`, `Min`, `Prod` (numeric), `All`, `Any` (bool) over a
//! set of axes, and `ArgMax`, `ArgMin` along one axis.
//!
//! The kernels collapse the input shape into alternating runs of kept and
//! reduced dimensions (size-1 dimensions join their neighbour), then reduce
//! the innermost reduced run first, so every step is one of three
//! cache-friendly patterns: a full reduction (sharded over the intra-op pool
//! with per-shard partials), a reduction of contiguous rows (softmax-style,
//! last axis), or an accumulation of rows into a vector of columns
//! (`BiasAddGrad`-style, first axis). Floating-point sums use several
//! independent accumulator lanes (which LLVM vectorizes) inside a pairwise
//! (cascade) summation, so `f32` sums stay accurate for large inputs;
//! `half`/`bfloat16` accumulate in `f32`, integer means in 64 bits, as
//! TensorFlow does.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::{common, InferenceContext};
use opforge_core::{
    ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};
use opforge_ops_base::args::{fmt_shape, index_values};
use opforge_ops_base::cpu::elem::{Ordered, Scalar, Wide};
use opforge_ops_base::cpu::par::{par_chunks, par_collect};
use opforge_ops_base::cpu::reduce::engine::run;
use opforge_ops_base::cpu::reduce::plan::*;
use opforge_ops_base::cpu::reduce::reducers::*;
use opforge_ops_base::grad::*;
use opforge_ops_base::types::{NUMERIC_KERNEL_TYPES, REAL_KERNEL_TYPES};

// ---------------------------------------------------------------------------
// OpDefs
// ---------------------------------------------------------------------------

fn reduction_op(name: &str, types: &str, summary: &str) -> OpDefBuilder {
    OpDefBuilder::new(name)
        .input("input: T")
        .input("reduction_indices: Tidx")
        .output("output: T")
        .attr("keep_dims: bool = false")
        .attr(format!("T: {types}"))
        .attr("Tidx: {int32, int64} = DT_INT32")
        .set_shape_fn(common::reduction_shape)
        .doc(format!(
            "{summary}\n\n\
             Reduces `input` along the dimensions given in `reduction_indices`\n\
             (a scalar or a vector; negative indices count from the end). Unless\n\
             `keep_dims` is true, the rank of the tensor is reduced by 1 for each\n\
             entry in `reduction_indices`. If `keep_dims` is true, the reduced\n\
             dimensions are retained with length 1."
        ))
}

fn bool_reduction_op(name: &str, summary: &str) -> OpDefBuilder {
    OpDefBuilder::new(name)
        .input("input: bool")
        .input("reduction_indices: Tidx")
        .output("output: bool")
        .attr("keep_dims: bool = false")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .set_shape_fn(common::reduction_shape)
        .doc(format!(
            "{summary}\n\n\
             Reduces `input` along the dimensions given in `reduction_indices`.\n\
             Unless `keep_dims` is true, the rank of the tensor is reduced by 1 for\n\
             each entry in `reduction_indices`. If `keep_dims` is true, the reduced\n\
             dimensions are retained with length 1."
        ))
}

/// `Sum`.
pub fn sum() -> OpDefBuilder {
    reduction_op(
        "Sum",
        "numbertype",
        "Computes the sum of elements across dimensions of a tensor.",
    )
}

/// `Mean`.
pub fn mean() -> OpDefBuilder {
    reduction_op(
        "Mean",
        "numbertype",
        "Computes the mean of elements across dimensions of a tensor.",
    )
}

/// `Prod`.
pub fn prod() -> OpDefBuilder {
    reduction_op(
        "Prod",
        "numbertype",
        "Computes the product of elements across dimensions of a tensor.",
    )
}

/// `Max`.
pub fn max() -> OpDefBuilder {
    reduction_op(
        "Max",
        "{realnumbertype, quantizedtype}",
        "Computes the maximum of elements across dimensions of a tensor.",
    )
}

/// `Min`.
pub fn min() -> OpDefBuilder {
    reduction_op(
        "Min",
        "{realnumbertype, quantizedtype}",
        "Computes the minimum of elements across dimensions of a tensor.",
    )
}

/// `All`.
pub fn all() -> OpDefBuilder {
    bool_reduction_op(
        "All",
        "Computes the \"logical and\" of elements across dimensions of a tensor.",
    )
}

/// `Any`.
pub fn any() -> OpDefBuilder {
    bool_reduction_op(
        "Any",
        "Computes the \"logical or\" of elements across dimensions of a tensor.",
    )
}

/// `ArgMax`.
pub fn arg_max() -> OpDefBuilder {
    OpDefBuilder::new("ArgMax")
        .input("input: T")
        .input("dimension: Tidx")
        .output("output: output_type")
        .attr("T: {realnumbertype, quantizedtype, bool}")
        .attr("Tidx: {int16, int32, int64} = DT_INT32")
        .attr("output_type: {int16, uint16, int32, int64} = DT_INT64")
        .set_shape_fn(arg_op_shape)
        .doc(
            "Returns the index with the largest value across dimensions of a tensor.\n\n\
             Ties are broken in favour of the smallest index. `dimension` is a scalar in\n\
             `[-rank(input), rank(input))`; the output has the shape of `input` without\n\
             that dimension.",
        )
}

/// `ArgMin`.
pub fn arg_min() -> OpDefBuilder {
    OpDefBuilder::new("ArgMin")
        .input("input: T")
        .input("dimension: Tidx")
        .output("output: output_type")
        .attr("T: {realnumbertype, quantizedtype, bool}")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .attr("output_type: {int32, int64} = DT_INT64")
        .set_shape_fn(arg_op_shape)
        .doc(
            "Returns the index with the smallest value across dimensions of a tensor.\n\n\
             Ties are broken in favour of the smallest index. `dimension` is a scalar in\n\
             `[-rank(input), rank(input))`; the output has the shape of `input` without\n\
             that dimension.",
        )
}

/// TensorFlow's `ArgOpShape`: input 0 without the constant `dimension`
/// (input 1); unknown values give unknown dims of rank `rank - 1`, and
/// inputs of rank 0 or 1 a scalar.
fn arg_op_shape(c: &mut InferenceContext) -> Result<()> {
    let dim_in = c.input(1);
    c.with_rank(dim_in, 0)?;
    let input = c.input(0);
    let Some(rank) = c.rank(input) else {
        return common::unknown_shape(c);
    };
    if rank <= 1 {
        return common::scalar_shape(c);
    }
    let Some(t) = c.input_tensor(1) else {
        let dims = (0..rank - 1).map(|_| c.unknown_dim()).collect();
        let out = c.make_shape_from_dims(dims);
        c.set_output(0, out);
        return Ok(());
    };
    let value: i64 = match t.dtype() {
        DataType::Int16 => t.flat::<i16>()?.first().map(|&v| v as i64),
        DataType::Int32 => t.flat::<i32>()?.first().map(|&v| v as i64),
        DataType::Int64 => t.flat::<i64>()?.first().copied(),
        other => {
            return Err(Status::invalid_argument(format!(
                "dimension must be int16, int32 or int64, not {other}"
            )))
        }
    }
    .ok_or_else(|| Status::invalid_argument("dimension must be a scalar"))?;
    let r = rank as i64;
    let axis = if value < 0 { value + r } else { value };
    ensure!(
        (0..r).contains(&axis),
        InvalidArgument,
        "Dimension ({}) must be in the range [{}, {}), where {} is the number of dimensions in the input.",
        value,
        -r,
        r,
        r
    );
    let dims = (0..r)
        .filter(|&i| i != axis)
        .map(|i| c.dim(input, i))
        .collect();
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

register_op!(sum());
register_op!(mean());
register_op!(max());
register_op!(min());
register_op!(prod());
register_op!(all());
register_op!(any());
register_op!(arg_max());
register_op!(arg_min());

#[derive(Clone, Copy, Debug, PartialEq)]
enum RedOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    All,
    Any,
}

struct ReduceKernel {
    op: RedOp,
    keep_dims: bool,
}

fn reduce_kernel(ctx: &OpKernelConstruction<'_>, op: RedOp) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ReduceKernel {
        op,
        keep_dims: ctx.get_attr("keep_dims")?,
    }))
}

fn unsupported(op: &str, dt: DataType) -> Status {
    Status::unimplemented(format!("{op} has no CPU kernel for {dt}"))
}

impl OpKernel for ReduceKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let axes = index_values(ctx.input(1), "reduction_indices")?;
        let plan = ReducePlan::new(input.dims(), &axes, self.keep_dims)?;
        if plan.is_noop(input.dims()) {
            return ctx.set_output(0, input.reshaped(&plan.out_dims)?);
        }
        let pool = ctx.thread_pool();
        let name = ctx.op_def().name.clone();
        let out = ctx.allocate_output(0, TensorShape::new(&plan.out_dims)?)?;
        let dt = input.dtype();
        let (i, p) = (&input, &plan);
        match self.op {
            // Wrapping sums and products give the same bits for either
            // signedness: one reduction per integer size.
            RedOp::Sum => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                T => run(pool, SumR::<T>::new(), i, p, out), Err(unsupported(&name, dt))),
            RedOp::Mean => numeric_types!(dt, T => run(pool, MeanR::<T>::new(), i, p, out),
                Err(unsupported(&name, dt))),
            RedOp::Prod => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                T => run(pool, ProdR::<T>::new(), i, p, out), Err(unsupported(&name, dt))),
            RedOp::Max => real_types!(dt, T => run(pool, MaxR::<T>::new(), i, p, out),
                Err(unsupported(&name, dt))),
            RedOp::Min => real_types!(dt, T => run(pool, MinR::<T>::new(), i, p, out),
                Err(unsupported(&name, dt))),
            RedOp::All => run(pool, AllR, i, p, out),
            RedOp::Any => run(pool, AnyR, i, p, out),
        }
    }
}

fn reduction_kernel_def(op: &str, types: &[DataType]) -> KernelDefBuilder {
    KernelDefBuilder::new(op)
        .type_constraint_list("T", types)
        .type_constraint_list("Tidx", &[DataType::Int32, DataType::Int64])
        .host_memory("reduction_indices")
}

register_kernel!(reduction_kernel_def("Sum", NUMERIC_KERNEL_TYPES), fn = |c| reduce_kernel(c, RedOp::Sum));
register_kernel!(reduction_kernel_def("Mean", NUMERIC_KERNEL_TYPES), fn = |c| reduce_kernel(c, RedOp::Mean));
register_kernel!(reduction_kernel_def("Prod", NUMERIC_KERNEL_TYPES), fn = |c| reduce_kernel(c, RedOp::Prod));
register_kernel!(reduction_kernel_def("Max", REAL_KERNEL_TYPES), fn = |c| reduce_kernel(c, RedOp::Max));
register_kernel!(reduction_kernel_def("Min", REAL_KERNEL_TYPES), fn = |c| reduce_kernel(c, RedOp::Min));
register_kernel!(
    KernelDefBuilder::new("All")
        .type_constraint_list("Tidx", &[DataType::Int32, DataType::Int64])
        .host_memory("reduction_indices"),
    fn = |c| reduce_kernel(c, RedOp::All)
);
register_kernel!(
    KernelDefBuilder::new("Any")
        .type_constraint_list("Tidx", &[DataType::Int32, DataType::Int64])
        .host_memory("reduction_indices"),
    fn = |c| reduce_kernel(c, RedOp::Any)
);

mod arg;

// ---- Gradients ----

/// Gradient helpers shared by this module, `matmul` and `nn`.
use opforge_core::autodiff::{GradientContext, Ops, OpsExt};
use opforge_core::{register_gradient, register_not_differentiable};
use opforge_ops_base::{numeric_types, real_types};

/// TensorFlow's `_SumGrad`: the gradient reshaped to the kept-dims shape
/// and broadcast to the input's shape.
fn sum_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let (g, _, _) = broadcast_reduced(ctx, g)?;
    ctx.set_input_grad(0, g)
}

/// TensorFlow's `_MeanGrad`: `_SumGrad` divided by the number of reduced
/// elements, `size(input) // max(size(output), 1)`, computed at run time
/// from `Size` ops (so unknown shapes work).
fn mean_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let (g, _, _) = broadcast_reduced(ctx, g)?;
    let i32_attr = [("out_type", DataType::Int32.into_attr_value())];
    let in_size = ctx.op1("Size", &[ctx.input(0)], &i32_attr)?;
    let out_size = ctx.op1("Size", &[ctx.output(0)], &i32_attr)?;
    let one = int_scalar(ctx, 1)?;
    let out_size = ctx.op1("Maximum", &[out_size, one], &[])?;
    let factor = ctx.op1("FloorDiv", &[in_size, out_size], &[])?;
    let dtype = ctx.dtype(g);
    let factor = cast(ctx, factor, dtype)?;
    let dx = ctx.div(g, factor)?;
    ctx.set_input_grad(0, dx)
}

/// TensorFlow's `_MinOrMaxGrad`: the gradient goes to the elements equal to
/// the result, divided evenly between ties.
fn min_or_max_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let (x, axes) = (ctx.input(0), ctx.input(1));
    let input_shape = ctx.shape_of(x)?;
    let (y, g, kept) = if attr_or(ctx, "keep_dims", false)? {
        (ctx.output(0), g, ctx.shape_of(ctx.output(0))?)
    } else {
        let kept = reduced_shape(ctx, x, input_shape, axes)?;
        (
            ctx.reshape(ctx.output(0), kept)?,
            ctx.reshape(g, kept)?,
            kept,
        )
    };
    let dtype = ctx.dtype(g);
    let eq = ctx.op1("Equal", &[y, x], &[])?;
    let indicators = cast(ctx, eq, dtype)?;
    let count = reduce_sum(ctx, indicators, axes, false)?;
    let num_selected = ctx.reshape(count, kept)?;
    let share = ctx.div(indicators, num_selected)?;
    let dx = ctx.mul(share, g)?;
    ctx.set_input_grad(0, dx)
}

/// The gradient of `Prod`: each element gets the product of the other
/// elements of its reduction group times the gradient. TensorFlow computes
/// it with exclusive cumulative products; without a `Cumprod` op this
/// counts the zeros of each group instead (exact for zeros too): with no
/// zero it is `prod / x`, with one zero the product of the nonzero elements
/// at the zero and 0 elsewhere, with more zeros 0.
fn prod_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let (x, axes) = (ctx.input(0), ctx.input(1));
    let (g, _, _) = broadcast_reduced(ctx, g)?;
    let dtype = ctx.dtype(x);
    let zeros = ctx.zeros_like(x)?;
    let ones = ctx.ones_like(x)?;
    let is_zero = ctx.op1("Equal", &[x, zeros], &[])?;
    let x_safe = ctx.op1("SelectV2", &[is_zero, ones, x], &[])?;
    let prod_nonzero = ctx.op1(
        "Prod",
        &[x_safe, axes],
        &[("keep_dims", true.into_attr_value())],
    )?;
    let zero_flags = cast(ctx, is_zero, dtype)?;
    let num_zeros = reduce_sum(ctx, zero_flags, axes, true)?;
    let (zero, one) = (ctx.scalar(dtype, 0.0)?, ctx.scalar(dtype, 1.0)?);
    let no_zero = ctx.op1("Equal", &[num_zeros, zero], &[])?;
    let one_zero = ctx.op1("Equal", &[num_zeros, one], &[])?;
    let others_at_nonzero = ctx.div(prod_nonzero, x_safe)?;
    let at_nonzero = ctx.op1("SelectV2", &[no_zero, others_at_nonzero, zeros], &[])?;
    let prod_b = ctx.mul(prod_nonzero, ones)?;
    let at_zero = ctx.op1("SelectV2", &[one_zero, prod_b, zeros], &[])?;
    let others = ctx.op1("SelectV2", &[is_zero, at_zero, at_nonzero], &[])?;
    let dx = ctx.mul(others, g)?;
    ctx.set_input_grad(0, dx)
}

register_gradient!("Sum", sum_grad);
register_gradient!("Mean", mean_grad);
register_gradient!("Max", min_or_max_grad);
register_gradient!("Min", min_or_max_grad);
register_gradient!("Prod", prod_grad);
register_not_differentiable!("ArgMax", "ArgMin", "All", "Any");

#[cfg(test)]
mod tests;
