//! `ConcatV2` and `Pack` kernels.

use super::*;
use opforge_core::shape_inference::common::*;
use opforge_ops_base::shape::*;

// ConcatV2

pub(super) struct ConcatV2Op;

impl CreateKernel for ConcatV2Op {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(ConcatV2Op)
    }
}

impl OpKernel for ConcatV2Op {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs() - 1;
        let axis_t = ctx.input(n);
        ensure!(
            axis_t.rank() == 0 || (axis_t.rank() == 1 && axis_t.dims()[0] == 1),
            InvalidArgument,
            "axis tensor should be a scalar integer, but got shape {}",
            axis_t.shape()
        );
        let concat_dim = index_values(axis_t, "axis")?[0];
        let values = &ctx.inputs()[..n];
        let first = values[0].shape().clone();
        let rank = first.rank() as i64;
        let axis = if concat_dim < 0 {
            concat_dim + rank
        } else {
            concat_dim
        };
        ensure!(
            0 <= axis && axis < rank,
            InvalidArgument,
            "ConcatOp : Expected concatenating dimensions in the range [{}, {}), but got {}",
            -rank,
            rank,
            concat_dim
        );
        let axis = axis as usize;
        let mut out_dim: i64 = 0;
        for (i, v) in values.iter().enumerate() {
            ensure!(
                v.rank() == first.rank(),
                InvalidArgument,
                "ConcatOp : Ranks of all input tensors should match: shape[0] = {} vs. shape[{}] = {}",
                first,
                i,
                v.shape()
            );
            for j in 0..first.rank() {
                ensure!(
                    j == axis || v.dims()[j] == first.dims()[j],
                    InvalidArgument,
                    "ConcatOp : Dimension {} in both shapes must be equal: shape[0] = {} vs. shape[{}] = {}",
                    j,
                    first,
                    i,
                    v.shape()
                );
            }
            out_dim = out_dim
                .checked_add(v.dims()[axis])
                .ok_or_else(|| Status::invalid_argument("ConcatOp : the output is too large"))?;
        }
        let mut out_dims = first.dims().to_vec();
        out_dims[axis] = out_dim;
        let shape = TensorShape::new(&out_dims)?;
        let outer: usize = first.dims()[..axis].iter().product::<i64>() as usize;
        let row_lens: Vec<usize> = values
            .iter()
            .map(|v| v.num_elements().checked_div(outer).unwrap_or(0))
            .collect();
        let values = values.to_vec();
        let srcs: Vec<&Tensor> = values.iter().collect();
        let body = ConcatRows {
            row_lens: &row_lens,
        };
        move_to_output(ctx, 0, &srcs, shape, &body)
    }
}

register_kernel!(
    KernelDefBuilder::new("ConcatV2")
        .type_constraint_list("T", &movable_types())
        .host_memory("axis"),
    ConcatV2Op
);

// ---------------------------------------------------------------------------
// Pack

pub(super) struct PackOp {
    axis: i64,
}

impl CreateKernel for PackOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(PackOp {
            axis: ctx.get_attr("axis")?,
        })
    }
}

impl OpKernel for PackOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs();
        let first = ctx.input(0).clone();
        let expanded = first.rank() as i64 + 1;
        let axis = if self.axis < 0 {
            self.axis + expanded
        } else {
            self.axis
        };
        ensure!(
            0 <= axis && axis < expanded,
            InvalidArgument,
            "axis = {} not in [{}, {})",
            self.axis,
            -expanded,
            expanded
        );
        let axis = axis as usize;
        let mut out_dims = first.dims().to_vec();
        out_dims.insert(axis, n as i64);
        if n == 1 {
            return ctx.set_output(0, first.reshaped(&out_dims)?);
        }
        for (i, v) in ctx.inputs().iter().enumerate() {
            ensure!(
                v.shape() == first.shape(),
                InvalidArgument,
                "Shapes of all inputs must match: values[0].shape = {} != values[{}].shape = {}",
                first.shape(),
                i,
                v.shape()
            );
        }
        let shape = TensorShape::new(&out_dims)?;
        let outer = first.dims()[..axis].iter().product::<i64>() as usize;
        let row = first.num_elements().checked_div(outer).unwrap_or(0);
        let values = ctx.inputs().to_vec();
        let srcs: Vec<&Tensor> = values.iter().collect();
        let row_lens = vec![row; n];
        let body = ConcatRows {
            row_lens: &row_lens,
        };
        move_to_output(ctx, 0, &srcs, shape, &body)
    }
}

register_kernel!(
    KernelDefBuilder::new("Pack").type_constraint_list("T", &movable_types()),
    PackOp
);

// ---------------------------------------------------------------------------

// `Concat`, `ConcatOffset`, `_ParallelConcatStart`: OpDef and shape function only (no CPU kernel
// yet: running it eagerly fails with TensorFlow's "No OpKernel was registered" error).

register_op!(OpDefBuilder::new("Concat")
    .input("concat_dim: int32")
    .input("values: N * T")
    .output("output: T")
    .attr("N: int >= 2")
    .attr("T: type")
    .set_shape_fn(with_inputs(1, concat_shape))
    .doc(
        "Concatenates tensors along one dimension.\n\n\
         The dimension comes first; `ConcatV2` takes it last.",
    ));

register_op!(OpDefBuilder::new("ConcatOffset")
    .input("concat_dim: int32")
    .input("shape: N * shape_type")
    .output("offset: N * shape_type")
    .attr("N: int >= 2")
    .attr("shape_type: {int32, int64} = DT_INT32")
    .set_shape_fn(concat_offset_shape)
    .doc(
        "Computes offsets of concat inputs within its output.\n\n\
         Used by the gradient of `Concat`: offset `i` is where input `i` starts in the output.",
    ));

fn concat_offset_shape(c: &mut InferenceContext) -> Result<()> {
    for i in 1..c.num_inputs().min(c.num_outputs() + 1) {
        let s = c.input(i);
        c.set_output(i - 1, s);
    }
    Ok(())
}

register_op!(OpDefBuilder::new("_ParallelConcatStart")
    .output("output: dtype")
    .attr("shape: shape")
    .attr("dtype: type")
    .stateful()
    .set_shape_fn(explicit_shape)
    .doc(
        "Creates an empty Tensor with shape `shape` and type `dtype`.\n\n\
         Used with in-place updates by `parallel_stack`.",
    ));
