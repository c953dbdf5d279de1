//! Segment reductions with TensorFlow 2.21's OpDefs and CPU kernel
//! semantics: `UnsortedSegmentSum`.
//!
//! The kernel sums the rows of `data` (viewed as `[segment_ids.size,
//! slice]`) into the rows of the output given by `segment_ids` with the
//! scatter-add engine of `opforge_ops_base::cpu::scatter` (deterministic:
//! each output row adds its rows in input order, as TensorFlow's CPU kernel
//! does; sharded over output rows). Negative segment ids are dropped.

use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym};
use opforge_core::kernel::{KernelDefBuilder, OpKernel, OpKernelContext};
use opforge_core::shape_inference::InferenceContext;
use opforge_core::{
    ensure, register_gradient, register_kernel, register_op, DataType, OpDefBuilder, Result,
    Status, Tensor, TensorShape,
};
use opforge_ops_base::args::{dims_product, index_values, int_values, slice_debug_string};
use opforge_ops_base::cpu::elem::Num;
use opforge_ops_base::cpu::scatter::{scatter_add_rows, SKIP};
use opforge_ops_base::grad::concat_vectors;
use opforge_ops_base::shape::{dim_for_scalar_input, with_inputs};
use opforge_ops_base::types::{unsupported, NUMERIC_KERNEL_TYPES};

/// `UnsortedSegmentSum`.
pub fn unsorted_segment_sum() -> OpDefBuilder {
    OpDefBuilder::new("UnsortedSegmentSum")
        .input("data: T")
        .input("segment_ids: Tindices")
        .input("num_segments: Tnumsegments")
        .output("output: T")
        .attr("T: numbertype")
        .attr("Tindices: {int16, int32, int64}")
        .attr("Tnumsegments: {int32, int64} = DT_INT32")
        .doc(
            "Computes the sum along segments of a tensor.\n\n\
             `output[i, ...] = sum(data[j..., ...])` over the `j...` such that\n\
             `segment_ids[j...] == i`; a segment no id names is 0, and a negative id\n\
             drops its row. The output has shape\n\
             `[num_segments] + data.shape[segment_ids.rank:]`.",
        )
}

/// TensorFlow's `UnsortedSegmentReductionShapeFn`: `[num_segments] +
/// data.shape[rank(segment_ids):]`, `data`'s leading dims merged with
/// `segment_ids`' shape.
pub(crate) fn unsorted_segment_shape(c: &mut InferenceContext) -> Result<()> {
    let data = c.input(0);
    let ids = c.input(1);
    let num_segments = c.input(2);
    c.with_rank(num_segments, 0)?;
    let Some(ids_rank) = c.rank(ids) else {
        let out = c.unknown_shape();
        c.set_output(0, out);
        return Ok(());
    };
    let (data, _) = c.merge_prefix(data, ids)?;
    let n = dim_for_scalar_input(c, 2)?;
    let suffix = c.subshape(data, ids_rank as i64, None)?;
    let head = c.vector(n);
    let out = c.concatenate(head, suffix)?;
    c.set_output(0, out);
    Ok(())
}

/// The `UnsortedSegmentSum` kernel, with TensorFlow's checks and messages.
pub(crate) struct UnsortedSegmentSumOp;

impl OpKernel for UnsortedSegmentSumOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (data, ids, num_segments) = (ctx.input(0), ctx.input(1), ctx.input(2));
        ensure!(
            num_segments.rank() == 0,
            InvalidArgument,
            "num_segments should be a scalar, not shape {}",
            num_segments.shape()
        );
        let (ddims, idims) = (data.dims(), ids.dims());
        ensure!(
            ddims.starts_with(idims),
            InvalidArgument,
            "data.shape = {} does not start with segment_ids.shape = {}",
            data.shape(),
            ids.shape()
        );
        let rows = index_values(num_segments, "num_segments")?[0];
        ensure!(
            rows >= 0,
            InvalidArgument,
            "Input num_segments == {rows} must not be negative."
        );
        let mut out_dims = vec![rows];
        out_dims.extend_from_slice(&ddims[idims.len()..]);
        let shape = TensorShape::new(&out_dims)?;
        // Saturates only for an empty output (no rows, or a zero slice).
        let slice = dims_product(&shape.dims()[1..]) as usize;
        // The output row of every row of `data` (`SKIP` for a negative id).
        let mut targets = Vec::new();
        if data.num_elements() > 0 {
            let values = int_values(ids, "segment_ids")?;
            targets.reserve(values.len());
            for (i, &j) in values.iter().enumerate() {
                ensure!(
                    j < rows,
                    InvalidArgument,
                    "segment_ids{} = {j} is out of range [0, {rows})",
                    slice_debug_string(idims, i)
                );
                targets.push(if j < 0 { SKIP } else { j as usize });
            }
        }
        let dt = data.dtype();
        let data = data.clone();
        let pool = ctx.thread_pool();
        if !NUMERIC_KERNEL_TYPES.contains(&dt) {
            return Err(unsupported(ctx, dt));
        }
        let out = ctx.allocate_output(0, shape)?;
        opforge_ops_base::numeric_types!(dt, T => scatter_add_rows(
            pool,
            out.flat_mut::<T>()?,
            slice,
            data.flat::<T>()?,
            &targets,
            &T::ZERO,
            |a, b| *a = a.add(*b),
        ), {
            return Err(Status::internal(format!(
                "UnsortedSegmentSum has no CPU implementation for dtype {dt}"
            )))
        });
        Ok(())
    }
}

register_op!(unsorted_segment_sum().set_shape_fn(with_inputs(3, unsorted_segment_shape)));
register_kernel!(
    KernelDefBuilder::new("UnsortedSegmentSum")
        .type_constraint_list("T", NUMERIC_KERNEL_TYPES)
        .type_constraint_list(
            "Tindices",
            &[DataType::Int16, DataType::Int32, DataType::Int64]
        )
        .type_constraint_list("Tnumsegments", &[DataType::Int32, DataType::Int64])
        .host_memory("num_segments"),
    fn = |_| Ok(Box::new(UnsortedSegmentSumOp) as Box<dyn OpKernel>)
);

// ---- Gradient ----

/// TensorFlow's `_GatherDropNegatives`: the rows of `params` at `ids`,
/// zeros where an id is negative: `SelectV2(ids >= 0, GatherV2(params,
/// max(ids, 0)), 0)`, the mask reshaped to broadcast over the rows.
pub(crate) fn gather_drop_negatives(o: &mut dyn Ops, params: Sym, ids: Sym) -> Result<Sym> {
    let zeros = o.op1("ZerosLike", &[ids], &[])?;
    let clipped = o.op1("Maximum", &[ids, zeros], &[])?;
    let axis = o.constant(Tensor::scalar(0i32))?;
    let gathered = o.op1("GatherV2", &[params, clipped, axis], &[])?;
    let positive = o.op1("GreaterEqual", &[ids, zeros], &[])?;
    // [ids.shape] + [1] * (rank(gathered) - rank(ids)).
    let mask_shape = o.op1("Shape", &[positive], &[])?;
    let rank_g = o.op1("Rank", &[gathered], &[])?;
    let rank_m = o.op1("Rank", &[positive], &[])?;
    let extra = o.sub(rank_g, rank_m)?;
    let one_v = o.int_vector(&[1])?;
    let extra = o.reshape(extra, one_v)?;
    let one = o.constant(Tensor::scalar(1i32))?;
    let ones = o.op1("Fill", &[extra, one], &[])?;
    let shape = concat_vectors(o, &[mask_shape, ones])?;
    let positive = o.reshape(positive, shape)?;
    let zero_rows = o.op1("ZerosLike", &[gathered], &[])?;
    o.op1("SelectV2", &[positive, gathered, zero_rows], &[])
}

/// `UnsortedSegmentSum`: TensorFlow's `_UnsortedSegmentSumGrad`, the
/// gradient's rows gathered back by segment id (zeros for negative ids).
fn unsorted_segment_sum_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, ids) = (ctx.grad()?, ctx.input(1));
    let dx = gather_drop_negatives(ctx, g, ids)?;
    ctx.set_input_grad(0, dx)
}

register_gradient!("UnsortedSegmentSum", unsorted_segment_sum_grad);

#[cfg(test)]
mod tests;
