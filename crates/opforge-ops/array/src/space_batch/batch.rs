//! The CPU kernels of `SpaceToBatchND`, `BatchToSpaceND` and their 4-D
//! forms `SpaceToBatch` / `BatchToSpace` (a `block_size` attr for both
//! spatial dims): one engine for both directions, TensorFlow's checks and
//! messages (`spacetobatch_op.cc`, `batchtospace_op.cc`).
//!
//! As in TensorFlow, leading and trailing block dims with block 1 and no
//! padding (cropping) are folded into the batch and depth dims; the other
//! ("internal") block dims may be at most [`MAX_BLOCK_DIMS`]; with none the
//! input is the output.

use super::rows::RowGather;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::{ensure, register_kernel, Result, Status, Tensor, TensorShape};
use opforge_ops_base::args::{fmt_shape, index_values};
use opforge_ops_base::cpu::mover::move_to_output;
use opforge_ops_base::types::REAL_KERNEL_TYPES;

/// TensorFlow's `kMaxSpaceToBatchBlockDims`: the most block dims that are
/// not folded into the batch or depth dims.
pub(crate) const MAX_BLOCK_DIMS: usize = 4;

/// The direction of a space/batch move.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Direction {
    /// `SpaceToBatch(ND)`: pad, then move blocks into the batch dim.
    ToBatch,
    /// `BatchToSpace(ND)`: move the batch dim's blocks into space, then crop.
    ToSpace,
}

/// The folded layout of a move: the space tensor is
/// `[space_batch, space[0], ..., space[k-1], depth]` and the batch tensor
/// `[space_batch * prod(block), batch[0], ..., batch[k-1], depth]` (row
/// major), for the `k` internal block dims. For `ToBatch` the space tensor
/// is the (unpadded) input; for `ToSpace` it is the (cropped) output.
#[derive(Clone, Debug)]
struct Layout {
    direction: Direction,
    space_batch: usize,
    space: Vec<usize>,
    batch: Vec<usize>,
    block: Vec<usize>,
    /// Padding (`ToBatch`) or cropping (`ToSpace`) at the start of each dim.
    start: Vec<usize>,
    depth: usize,
}

impl Layout {
    /// The offset of the source row of output row `r` (rows of `depth`
    /// elements), or `None` for a row of padding.
    fn source(&self, r: usize) -> Option<usize> {
        let k = self.block.len();
        let out_dims = match self.direction {
            Direction::ToBatch => &self.batch,
            Direction::ToSpace => &self.space,
        };
        // Unravel r over [out_batch, out_dims...] (k <= MAX_BLOCK_DIMS).
        let mut idx = [0usize; MAX_BLOCK_DIMS];
        let mut rem = r;
        for (i, &n) in idx[..k].iter_mut().zip(out_dims).rev() {
            *i = rem % n;
            rem /= n;
        }
        let out_b = rem;
        match self.direction {
            Direction::ToBatch => {
                // Output batch entry out_b is block `out_b / space_batch` of
                // space batch entry `out_b % space_batch`; the block's
                // offsets are its index unravelled over the block shape.
                let mut offsets = [0usize; MAX_BLOCK_DIMS];
                let mut block_index = out_b / self.space_batch;
                for (o, &b) in offsets[..k].iter_mut().zip(&self.block).rev() {
                    *o = block_index % b;
                    block_index /= b;
                }
                let mut off = out_b % self.space_batch;
                for d in 0..k {
                    let p = (idx[d] * self.block[d] + offsets[d]).checked_sub(self.start[d])?;
                    if p >= self.space[d] {
                        return None;
                    }
                    off = off * self.space[d] + p;
                }
                Some(off * self.depth)
            }
            Direction::ToSpace => {
                // Space position p is position p / block of the batch entry
                // of block offset p % block.
                let mut block_index = 0usize;
                let mut pos = [0usize; MAX_BLOCK_DIMS];
                for (d, q) in pos[..k].iter_mut().enumerate() {
                    let p = idx[d] + self.start[d];
                    *q = p / self.block[d];
                    block_index = block_index * self.block[d] + p % self.block[d];
                }
                let mut off = block_index * self.space_batch + out_b;
                for (&q, &n) in pos[..k].iter().zip(&self.batch) {
                    off = off * n + q;
                }
                Some(off * self.depth)
            }
        }
    }
}

/// TensorFlow's checks of the arguments' shapes, shared by both directions:
/// the block shape and the padding (`what` = "paddings") or cropping
/// ("crops") values.
fn read_args(
    input: &Tensor,
    block_shape: &Tensor,
    amounts: &Tensor,
    what: &str,
) -> Result<(Vec<i64>, Vec<i64>)> {
    ensure!(
        block_shape.rank() == 1,
        InvalidArgument,
        "block_shape rank should be 1 instead of {}",
        block_shape.rank()
    );
    let block_dims = block_shape.dims()[0] as usize;
    ensure!(
        input.rank() > block_dims,
        InvalidArgument,
        "input rank should be >= {} instead of {}",
        block_dims + 1,
        input.rank()
    );
    ensure!(
        amounts.rank() == 2 && amounts.dims()[0] as usize == block_dims && amounts.dims()[1] == 2,
        InvalidArgument,
        "{what} should have shape [{block_dims}, 2] instead of {}",
        fmt_shape(amounts.dims())
    );
    Ok((
        index_values(block_shape, "block_shape")?,
        index_values(amounts, what)?,
    ))
}

/// The number of leading and trailing block dims TensorFlow folds into the
/// batch and depth dims: block 1, no padding or cropping.
fn folded_dims(block: &[i64], amounts: &[i64]) -> (usize, usize) {
    let trivial = |d: usize| block[d] == 1 && amounts[2 * d] == 0 && amounts[2 * d + 1] == 0;
    let n = block.len();
    let prefix = (0..n).take_while(|&d| trivial(d)).count();
    let suffix = (prefix..n).rev().take_while(|&d| trivial(d)).count();
    (prefix, suffix)
}

fn check_internal_dims(internal: usize) -> Result<()> {
    ensure!(
        internal <= MAX_BLOCK_DIMS,
        InvalidArgument,
        "Maximum number of non-combined block dimensions is {internal} but must not exceed {MAX_BLOCK_DIMS}"
    );
    Ok(())
}

/// `SpaceToBatchND` of `input` with the values of `block_shape` and
/// `paddings` (TensorFlow's `SpaceToBatchOpCompute`).
pub(crate) fn space_to_batch(
    ctx: &mut OpKernelContext<'_>,
    input: &Tensor,
    block_shape: &Tensor,
    paddings: &Tensor,
) -> Result<()> {
    let (block, pads) = read_args(input, block_shape, paddings, "paddings")?;
    let n = block.len();
    let (prefix, suffix) = folded_dims(&block, &pads);
    let mut product: i64 = 1;
    for (d, &b) in block.iter().enumerate() {
        ensure!(
            b >= 1,
            InvalidArgument,
            "All values in block_shape must be positive, got value, {b} at index {d}."
        );
        product = product.checked_mul(b).ok_or_else(|| {
            Status::invalid_argument(format!(
                "Product of block sizes must be positive, got an int64 overflow of block_shape {}",
                fmt_shape(&block)
            ))
        })?;
    }
    let internal = n - prefix - suffix;
    check_internal_dims(internal)?;
    if internal == 0 {
        return ctx.set_output(0, input.clone());
    }
    let dims = input.dims();
    let out_batch = dims[0].checked_mul(product).ok_or_else(|| {
        Status::invalid_argument(format!(
            "Negative output dimension size caused by overflow when multiplying {} and {product}",
            dims[0]
        ))
    })?;
    let mut out_dims = vec![out_batch];
    out_dims.extend_from_slice(&dims[1..=prefix]);
    let mut space = Vec::with_capacity(internal);
    let mut batch = Vec::with_capacity(internal);
    for d in prefix..n - suffix {
        let (start, end) = (pads[2 * d], pads[2 * d + 1]);
        ensure!(
            start >= 0 && end >= 0,
            InvalidArgument,
            "Paddings must be non-negative"
        );
        let size = dims[d + 1];
        let padded = size
            .checked_add(start)
            .and_then(|v| v.checked_add(end))
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "padded_shape[{d}] overflows int64: {size} + {start} + {end}"
                ))
            })?;
        ensure!(
            padded % block[d] == 0,
            InvalidArgument,
            "padded_shape[{d}]={padded} is not divisible by block_shape[{d}]={}",
            block[d]
        );
        space.push(size as usize);
        batch.push((padded / block[d]) as usize);
        out_dims.push(padded / block[d]);
    }
    out_dims.extend_from_slice(&dims[n - suffix + 1..]);
    let shape = TensorShape::new(&out_dims)?;
    let layout = Layout {
        direction: Direction::ToBatch,
        space_batch: dims[..=prefix].iter().product::<i64>() as usize,
        space,
        batch,
        block: block[prefix..n - suffix]
            .iter()
            .map(|&b| b as usize)
            .collect(),
        start: (prefix..n - suffix).map(|d| pads[2 * d] as usize).collect(),
        depth: dims[n - suffix + 1..].iter().product::<i64>() as usize,
    };
    run(ctx, input, shape, layout)
}

/// `BatchToSpaceND` of `input` with the values of `block_shape` and `crops`
/// (TensorFlow's `BatchToSpaceOpCompute`).
pub(crate) fn batch_to_space(
    ctx: &mut OpKernelContext<'_>,
    input: &Tensor,
    block_shape: &Tensor,
    crops: &Tensor,
) -> Result<()> {
    let (block, crops) = read_args(input, block_shape, crops, "crops")?;
    let n = block.len();
    let (prefix, suffix) = folded_dims(&block, &crops);
    // TensorFlow checks the product, not each value (negative pairs pass
    // here, and fail below unless their dims are empty).
    let product = block
        .iter()
        .try_fold(1i64, |p, &b| p.checked_mul(b))
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "Product of block sizes must be positive, got an int64 overflow of block_shape {}",
                fmt_shape(&block)
            ))
        })?;
    ensure!(
        product > 0,
        InvalidArgument,
        "Product of block sizes must be positive, got {product}"
    );
    let dims = input.dims();
    ensure!(
        dims[0] % product == 0,
        InvalidArgument,
        "Input batch dimension ({}) is not divisible by product of block sizes ({product})",
        dims[0]
    );
    let internal = n - prefix - suffix;
    check_internal_dims(internal)?;
    if internal == 0 {
        return ctx.set_output(0, input.clone());
    }
    let mut out_dims = vec![dims[0] / product];
    out_dims.extend_from_slice(&dims[1..=prefix]);
    let mut space = Vec::with_capacity(internal);
    let mut batch = Vec::with_capacity(internal);
    for d in prefix..n - suffix {
        let (start, end) = (crops[2 * d], crops[2 * d + 1]);
        ensure!(
            start >= 0 && end >= 0,
            InvalidArgument,
            "Crops must be non-negative"
        );
        let size = dims[d + 1];
        let cropped = size
            .checked_mul(block[d])
            .and_then(|v| v.checked_sub(start))
            .and_then(|v| v.checked_sub(end))
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "cropped_shape[{d}] overflows int64: {size} * {} - {start} - {end}",
                    block[d]
                ))
            })?;
        ensure!(
            cropped >= 0,
            InvalidArgument,
            "cropped_shape[{d}]={cropped} must be non-negative"
        );
        space.push(cropped as usize);
        batch.push(size as usize);
        out_dims.push(cropped);
    }
    out_dims.extend_from_slice(&dims[n - suffix + 1..]);
    let shape = TensorShape::new(&out_dims)?;
    if shape.num_elements() > 0 {
        // A negative block passes the product check only with an empty dim.
        ensure!(
            block[prefix..n - suffix].iter().all(|&b| b >= 1),
            Internal,
            "BatchToSpace: negative block_shape {} with a non-empty output",
            fmt_shape(&block)
        );
    }
    let layout = Layout {
        direction: Direction::ToSpace,
        space_batch: out_dims[..=prefix].iter().product::<i64>() as usize,
        space,
        batch,
        block: block[prefix..n - suffix]
            .iter()
            .map(|&b| b.max(1) as usize)
            .collect(),
        start: (prefix..n - suffix)
            .map(|d| crops[2 * d] as usize)
            .collect(),
        depth: dims[n - suffix + 1..].iter().product::<i64>() as usize,
    };
    run(ctx, input, shape, layout)
}

/// Moves `input` into output 0 of `shape` by `layout`.
fn run(
    ctx: &mut OpKernelContext<'_>,
    input: &Tensor,
    shape: TensorShape,
    layout: Layout,
) -> Result<()> {
    if shape.num_elements() == 0 || layout.depth == 0 {
        // Nothing to move (and a folded dim may divide by zero below).
        let body = RowGather::new(0, |_| None);
        return move_to_output(ctx, 0, &[input], shape, &body);
    }
    let body = RowGather::new(layout.depth, move |r| layout.source(r));
    move_to_output(ctx, 0, &[input], shape, &body)
}

/// `SpaceToBatchND` and `BatchToSpaceND`.
struct SpaceBatchNdOp {
    direction: Direction,
}

impl CreateKernel for SpaceBatchNdOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let direction = if ctx.op_def().name == "SpaceToBatchND" {
            Direction::ToBatch
        } else {
            Direction::ToSpace
        };
        Ok(SpaceBatchNdOp { direction })
    }
}

impl OpKernel for SpaceBatchNdOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, block, amounts) = (
            ctx.input(0).clone(),
            ctx.input(1).clone(),
            ctx.input(2).clone(),
        );
        match self.direction {
            Direction::ToBatch => space_to_batch(ctx, &input, &block, &amounts),
            Direction::ToSpace => batch_to_space(ctx, &input, &block, &amounts),
        }
    }
}

/// `SpaceToBatch` and `BatchToSpace`: the ND ops on a 4-D input with the
/// block shape `[block_size, block_size]`.
struct SpaceBatchOp {
    direction: Direction,
    block_shape: Tensor,
}

impl CreateKernel for SpaceBatchOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let direction = if ctx.op_def().name == "SpaceToBatch" {
            Direction::ToBatch
        } else {
            Direction::ToSpace
        };
        let block_size: i32 = ctx.get_attr("block_size")?;
        ensure!(
            block_size > 1,
            InvalidArgument,
            "Block size should be > 1: {block_size}"
        );
        let b = i64::from(block_size);
        Ok(SpaceBatchOp {
            direction,
            block_shape: Tensor::from_vec(&[2], vec![b, b])?,
        })
    }
}

impl OpKernel for SpaceBatchOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, amounts) = (ctx.input(0).clone(), ctx.input(1).clone());
        // TensorFlow's message, without a space before "instead".
        ensure!(
            input.rank() == 4,
            InvalidArgument,
            "Input rank should be: 4instead of: {}",
            input.rank()
        );
        match self.direction {
            Direction::ToBatch => space_to_batch(ctx, &input, &self.block_shape, &amounts),
            Direction::ToSpace => batch_to_space(ctx, &input, &self.block_shape, &amounts),
        }
    }
}

register_kernel!(
    KernelDefBuilder::new("SpaceToBatchND")
        .type_constraint_list("T", REAL_KERNEL_TYPES)
        .host_memory("block_shape")
        .host_memory("paddings"),
    SpaceBatchNdOp
);
register_kernel!(
    KernelDefBuilder::new("BatchToSpaceND")
        .type_constraint_list("T", REAL_KERNEL_TYPES)
        .host_memory("block_shape")
        .host_memory("crops"),
    SpaceBatchNdOp
);
register_kernel!(
    KernelDefBuilder::new("SpaceToBatch")
        .type_constraint_list("T", REAL_KERNEL_TYPES)
        .host_memory("paddings"),
    SpaceBatchOp
);
register_kernel!(
    KernelDefBuilder::new("BatchToSpace")
        .type_constraint_list("T", REAL_KERNEL_TYPES)
        .host_memory("crops"),
    SpaceBatchOp
);
