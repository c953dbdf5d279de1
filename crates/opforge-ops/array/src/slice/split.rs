//! `Unpack` and `Split` kernels.

use super::*;

// Unpack and Split

/// Sets outputs `0..num` to the `num` equal parts of `input` along `axis`
/// (which must divide evenly), as views when `axis` is 0. `keep_dim` keeps
/// the axis in the outputs (Split) instead of removing it (Unpack).
pub(super) fn split_equal(
    ctx: &mut OpKernelContext<'_>,
    input: &Tensor,
    axis: usize,
    num: usize,
    keep_dim: bool,
) -> Result<()> {
    let dims = input.dims().to_vec();
    let part = if num == 0 { 0 } else { dims[axis] / num as i64 };
    let mut out_dims = dims.clone();
    if keep_dim {
        out_dims[axis] = part;
    } else {
        out_dims.remove(axis);
    }
    if axis == 0 {
        for i in 0..num {
            let (s, e) = (i * part as usize, (i + 1) * part as usize);
            ctx.set_output(i, input.slice_outer(s, e)?.reshaped(&out_dims)?)?;
        }
        return Ok(());
    }
    let shape = TensorShape::new(&out_dims)?;
    let mut sizes = dims.clone();
    sizes[axis] = part;
    let ones = vec![1i64; dims.len()];
    for i in 0..num {
        let mut begin = vec![0i64; dims.len()];
        begin[axis] = i as i64 * part;
        let view = StridedView::of_slice(&dims, &begin, &sizes, &ones);
        move_to_output(ctx, i, &[input], shape.clone(), &CopyView { view: &view })?;
    }
    Ok(())
}

pub(super) struct UnpackOp {
    axis: i64,
}

impl CreateKernel for UnpackOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(UnpackOp {
            axis: ctx.get_attr("axis")?,
        })
    }
}

impl OpKernel for UnpackOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let num = ctx.num_outputs();
        let input = ctx.input(0).clone();
        let rank = input.rank() as i64;
        let axis = if self.axis < 0 {
            self.axis + rank
        } else {
            self.axis
        };
        ensure!(
            0 <= axis && axis < rank,
            InvalidArgument,
            "axis = {} not in [{}, {})",
            self.axis,
            -rank,
            rank
        );
        ensure!(
            input.dims()[axis as usize] == num as i64,
            InvalidArgument,
            "Input shape axis {} must equal {}, got shape {}",
            axis,
            num,
            input.shape()
        );
        split_equal(ctx, &input, axis as usize, num, false)
    }
}

register_kernel!(
    KernelDefBuilder::new("Unpack").type_constraint_list("T", &movable_types()),
    UnpackOp
);

pub(super) struct SplitOp;

impl CreateKernel for SplitOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(SplitOp)
    }
}

impl OpKernel for SplitOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let num_split = ctx.num_outputs();
        let split_dim_t = ctx.input(0);
        ensure!(
            split_dim_t.rank() == 0,
            InvalidArgument,
            "split_dim must be a scalar but has rank {}",
            split_dim_t.rank()
        );
        let orig = split_dim_t.scalar_value::<i32>()? as i64;
        let input = ctx.input(1).clone();
        let rank = input.rank() as i64;
        let split_dim = if orig < 0 { orig + rank } else { orig };
        ensure!(
            0 <= split_dim && split_dim < rank,
            InvalidArgument,
            "-input rank(-{}) <= split_dim < input rank ({}), but got {}",
            rank,
            rank,
            orig
        );
        ensure!(
            num_split > 0,
            InvalidArgument,
            "Number of ways to split should be > 0, but got {}",
            num_split
        );
        let size = input.dims()[split_dim as usize];
        ensure!(
            size % num_split as i64 == 0,
            InvalidArgument,
            "Number of ways to split should evenly divide the split dimension, but got split_dim {} (size = {}) and num_split {}",
            split_dim,
            size,
            num_split
        );
        if num_split == 1 {
            return ctx.set_output(0, input);
        }
        split_equal(ctx, &input, split_dim as usize, num_split, true)
    }
}

register_kernel!(
    KernelDefBuilder::new("Split")
        .type_constraint_list("T", &movable_types())
        .host_memory("split_dim"),
    SplitOp
);

// ---------------------------------------------------------------------------
