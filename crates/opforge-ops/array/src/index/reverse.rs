//! `Reverse`, `ReverseV2` and `ReverseSequence`.

use super::*;
use opforge_core::shape_inference::common::*;
use opforge_ops_base::shape::*;

// Reverse, ReverseV2
// ---------------------------------------------------------------------------

opforge_ops_base::dtype_table! {
    /// `Reverse`'s `T`, in TensorFlow's order (its kernel's types).
    REVERSE_SPEC = POD_STRING_TYPES in [
        UInt8, Int8, UInt16, Int16, UInt32, Int32, UInt64, Int64, Bool, BFloat16, Half, Float,
        Double, Complex64, Complex128, String
    ]
}

opforge_ops_base::dtype_table! {
    /// `ReverseV2`'s `T`, in TensorFlow's order (its kernel's types).
    REVERSE_V2_SPEC = POD_STRING_TYPES in [
        UInt8, Int8, UInt16, Int16, Int32, UInt32, Int64, UInt64, Bool, BFloat16, Half, Float,
        Double, Complex64, Complex128, String
    ]
}

/// `Reverse`.
pub fn reverse() -> OpDefBuilder {
    OpDefBuilder::new("Reverse")
        .input("tensor: T")
        .input("dims: bool")
        .output("output: T")
        .attr(format!("T: {{{REVERSE_SPEC}}}"))
        .doc(
            "Reverses specific dimensions of a tensor.\n\n\
             `dims` has one bool per dimension of `tensor`; the dimensions where it is\n\
             true are reversed.",
        )
}

/// `ReverseV2`.
pub fn reverse_v2() -> OpDefBuilder {
    OpDefBuilder::new("ReverseV2")
        .input("tensor: T")
        .input("axis: Tidx")
        .output("output: T")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .attr(format!("T: {{{REVERSE_V2_SPEC}}}"))
        .doc(
            "Reverses specific dimensions of a tensor.\n\n\
             `axis` lists the dimensions to reverse (negative values count from the\n\
             end); a dimension may be listed at most once.",
        )
}

/// Reverses the flagged axes of a (merged) shape, one innermost row at a time.
pub(super) struct ReverseMover {
    dims: Vec<usize>,
    flags: Vec<bool>,
}

impl MoveElements for ReverseMover {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let src = srcs[0];
        let strides = strides_of(&self.dims);
        let last = self.dims.len() - 1;
        let n = self.dims[last];
        for_each_chunk(pool, dst, n, n, |start, chunk| {
            let first = start / n;
            for (r, row) in chunk.chunks_mut(n).enumerate() {
                let mut rem = first + r;
                let mut off = 0;
                for k in (0..last).rev() {
                    let d = self.dims[k];
                    let i = rem % d;
                    rem /= d;
                    off += if self.flags[k] { d - 1 - i } else { i } * strides[k];
                }
                if self.flags[last] {
                    for (o, s) in row.iter_mut().zip(src[off..off + n].iter().rev()) {
                        o.clone_from(s);
                    }
                } else {
                    row.clone_from_slice(&src[off..off + n]);
                }
            }
        });
    }
}

/// Output 0 = input 0 with the axes flagged in `flags` reversed.
pub(super) fn reverse_axes(ctx: &mut OpKernelContext<'_>, flags: &[bool]) -> Result<()> {
    let input = ctx.input(0);
    ensure!(
        input.rank() <= 8,
        Unimplemented,
        "reverse is not implemented for tensors of rank > 8."
    );
    // Drop dimensions of size 1; merge neighbours reversed alike.
    let mut dims: Vec<usize> = Vec::new();
    let mut merged: Vec<bool> = Vec::new();
    for (&d, &f) in input.dims().iter().zip(flags) {
        if d == 1 {
            continue;
        }
        match (dims.last_mut(), merged.last()) {
            (Some(prev), Some(&pf)) if pf == f => *prev *= d as usize,
            _ => {
                dims.push(d as usize);
                merged.push(f);
            }
        }
    }
    let out = if !merged.contains(&true) {
        // Nothing (of size > 1) is reversed: the data order is unchanged.
        let t = ctx.take_input(0);
        return ctx.set_output(0, t);
    } else if input.num_elements() == 0 {
        empty(input.dtype(), input.shape().clone())?
    } else {
        let mover = ReverseMover {
            dims,
            flags: merged,
        };
        move_elements(
            ctx.device(),
            input.dtype(),
            &[input],
            input.shape().clone(),
            &mover,
        )?
    };
    ctx.set_output(0, out)
}

pub(super) struct ReverseOp;

impl OpKernel for ReverseOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, dims) = (ctx.input(0), ctx.input(1));
        if input.rank() > 0 {
            ensure!(
                input.dims()[0] != 0,
                InvalidArgument,
                "Invalid input first dimension. Found 0."
            );
        }
        if input.rank() == 0 {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        ensure!(
            dims.rank() == 1,
            InvalidArgument,
            "'dims' must be 1-dimension, not {}",
            dims.rank()
        );
        let rank = input.rank();
        ensure!(
            dims.dims()[0] == rank as i64,
            InvalidArgument,
            "'dims' must have the same number of values as 'input' has dimensions. 'input' has {rank}'dims' has {} values",
            dims.dims()[0]
        );
        let flags = dims.flat::<bool>()?.to_vec();
        reverse_axes(ctx, &flags)
    }
}

pub(super) struct ReverseV2Op;

impl OpKernel for ReverseV2Op {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, axes) = (ctx.input(0), ctx.input(1));
        if input.rank() == 0 || input.num_elements() == 0 {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        ensure!(
            axes.rank() == 1,
            InvalidArgument,
            "'dims' must be 1-dimension, not {}",
            axes.rank()
        );
        let rank = input.rank() as i64;
        let mut flags = vec![false; rank as usize];
        for (k, &axis) in index_values(axes, "axis")?.iter().enumerate() {
            let c = if axis < 0 { axis + rank } else { axis };
            ensure!(
                c >= 0 && c < rank,
                InvalidArgument,
                "'axis'[{k}] = {axis} is out of valid range [0, {}",
                rank - 1
            );
            ensure!(
                !flags[c as usize],
                InvalidArgument,
                "axis {c} specified more than once."
            );
            flags[c as usize] = true;
        }
        reverse_axes(ctx, &flags)
    }
}

/// `Reverse`: the input's shape, of rank `len(dims)` (at most 8).
pub(super) fn reverse_shape(c: &mut InferenceContext) -> Result<()> {
    let mut input = c.input(0);
    let dims = c.input(1);
    let dims = c.with_rank(dims, 1)?;
    let n = c.dim(dims, 0);
    if let Some(n) = c.value(n) {
        input = c.with_rank(input, n as usize)?;
    }
    ensure!(
        c.rank(input).is_none_or(|r| r <= 8),
        InvalidArgument,
        "reverse does not work on tensors with more than 8 dimensions"
    );
    c.set_output(0, input);
    Ok(())
}

/// `ReverseV2`: the input's shape (rank at most 8), checking a constant
/// `axis` against it.
pub(super) fn reverse_v2_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let axis = c.input(1);
    c.with_rank(axis, 1)?;
    ensure!(
        c.rank(input).is_none_or(|r| r <= 8),
        InvalidArgument,
        "reverse does not work on tensors with more than 8 dimensions"
    );
    if let (Some(t), Some(rank)) = (c.input_tensor(1), c.rank(input)) {
        let rank = rank as i64;
        let mut seen = vec![false; rank as usize];
        for (i, &a) in index_values(t, "axis")?.iter().enumerate() {
            let canonical = if a < 0 { rank + a } else { a };
            ensure!(
                (0..rank).contains(&canonical),
                InvalidArgument,
                "'axis'[{i}] = {a} is out of valid range [0, {}",
                rank - 1
            );
            ensure!(
                !seen[canonical as usize],
                InvalidArgument,
                "axis {canonical} specified more than once."
            );
            seen[canonical as usize] = true;
        }
    }
    c.set_output(0, input);
    Ok(())
}

register_op!(reverse().set_shape_fn(reverse_shape));
register_op!(reverse_v2().set_shape_fn(reverse_v2_shape));
register_kernel!(
    KernelDefBuilder::new("Reverse")
        .type_constraint_list("T", POD_STRING_TYPES)
        .host_memory("dims"),
    fn = |_| Ok(Box::new(ReverseOp))
);
register_kernel!(
    KernelDefBuilder::new("ReverseV2")
        .type_constraint_list("T", POD_STRING_TYPES)
        .type_constraint_list("Tidx", INDEX_TYPES)
        .host_memory("axis"),
    fn = |_| Ok(Box::new(ReverseV2Op))
);

// ReverseSequence
// ---------------------------------------------------------------------------

register_op!(OpDefBuilder::new("ReverseSequence")
    .input("input: T")
    .input("seq_lengths: Tlen")
    .output("output: T")
    .attr("seq_dim: int")
    .attr("batch_dim: int = 0")
    .attr("T: type")
    .attr("Tlen: {int32, int64} = DT_INT64")
    .set_shape_fn(with_inputs(2, reverse_sequence_shape))
    .doc(
        "Reverses variable length slices.\n\n\
         For each batch entry `i` along `batch_dim`, the first `seq_lengths[i]` elements along \
         `seq_dim` are reversed.",
    ));

fn reverse_sequence_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let l = c.input(1);
    let seq_lens = c.with_rank(l, 1)?;
    let seq_dim: i64 = c.get_attr("seq_dim")?;
    let batch_dim: i64 = c.get_attr("batch_dim")?;
    let Some(rank) = c.rank(input) else {
        return unknown_shape(c);
    };
    let rank = rank as i64;
    if batch_dim >= rank {
        return Err(Status::invalid_argument(format!(
            "batch_dim must be < input rank: {batch_dim} vs. {rank}"
        )));
    }
    if seq_dim >= rank {
        return Err(Status::invalid_argument(format!(
            "seq_dim must be < input rank: {seq_dim} vs. {rank}"
        )));
    }
    if batch_dim < 0 {
        return Err(Status::invalid_argument(format!(
            "batch_dim must be >=0, got {batch_dim}"
        )));
    }
    let batch = c.dim(input, batch_dim);
    let n = c.dim(seq_lens, 0);
    let batch = c.merge_dim(batch, n)?;
    let out = c.replace_dim(input, batch_dim, batch)?;
    c.set_output(0, out);
    Ok(())
}

/// Reverses the first `lens[b]` entries along the sequence axis of each
/// batch entry `b`, for an input viewed as `[a, x, b, y, c]` where `x` and
/// `y` are the batch and sequence axes (in either order), a row at a time
/// (a row is `c` elements).
pub(super) struct ReverseSequenceMover {
    /// `[a, x, b, y, c]`.
    dims: [usize; 5],
    /// Whether `x` (else `y`) is the batch axis.
    batch_first: bool,
    lens: Vec<usize>,
}

impl MoveElements for ReverseSequenceMover {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let src = srcs[0];
        let [_, x, b, y, c] = self.dims;
        for_each_chunk(pool, dst, c, c, |start, chunk| {
            let first = start / c;
            for (r, row) in chunk.chunks_mut(c).enumerate() {
                let mut rem = first + r;
                let iy = rem % y;
                rem /= y;
                let ib = rem % b;
                rem /= b;
                let ix = rem % x;
                let ia = rem / x;
                let (batch, seq) = if self.batch_first { (ix, iy) } else { (iy, ix) };
                let len = self.lens[batch];
                let seq = if seq < len { len - 1 - seq } else { seq };
                let (ix, iy) = if self.batch_first {
                    (ix, seq)
                } else {
                    (seq, iy)
                };
                let s = (((ia * x + ix) * b + ib) * y + iy) * c;
                row.clone_from_slice(&src[s..s + c]);
            }
        });
    }
}

/// `ReverseSequence`, with TensorFlow's checks (ranks 2 to 5).
pub(super) struct ReverseSequenceOp {
    seq_dim: i64,
    batch_dim: i64,
}

impl CreateKernel for ReverseSequenceOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let batch_dim: i64 = ctx.get_attr("batch_dim")?;
        let seq_dim: i64 = ctx.get_attr("seq_dim")?;
        ensure!(
            batch_dim >= 0,
            InvalidArgument,
            "Invalid batch_dim {batch_dim}"
        );
        ensure!(seq_dim >= 0, InvalidArgument, "Invalid seq_dim {seq_dim}");
        Ok(ReverseSequenceOp { seq_dim, batch_dim })
    }
}

impl OpKernel for ReverseSequenceOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, lens_t) = (ctx.input(0), ctx.input(1));
        let (seq_dim, batch_dim) = (self.seq_dim, self.batch_dim);
        ensure!(
            lens_t.rank() == 1,
            InvalidArgument,
            "seq_lengths must be 1-dim, not {}",
            lens_t.rank()
        );
        ensure!(
            batch_dim != seq_dim,
            InvalidArgument,
            "batch_dim == seq_dim == {seq_dim}"
        );
        let rank = input.rank() as i64;
        ensure!(
            seq_dim < rank,
            InvalidArgument,
            "seq_dim must be < input rank ( {seq_dim} vs. {rank})"
        );
        ensure!(
            batch_dim < rank,
            InvalidArgument,
            "batch_dim must be < input rank ( {batch_dim} vs. {rank})"
        );
        let (sd, bd) = (seq_dim as usize, batch_dim as usize);
        let dims = input.dims();
        ensure!(
            lens_t.num_elements() as i64 == dims[bd],
            InvalidArgument,
            "Length of seq_lengths != input.dims({batch_dim}), ({} vs. {})",
            lens_t.num_elements(),
            dims[bd]
        );
        let lens = index_values(lens_t, "seq_lengths")?;
        for (d, &l) in lens.iter().enumerate() {
            ensure!(l >= 0, InvalidArgument, "seq_lens({d}) < 0");
            ensure!(
                l <= dims[sd],
                InvalidArgument,
                "seq_lens({d}) > input.dims({seq_dim})"
            );
        }
        ensure!(
            rank <= 5,
            InvalidArgument,
            "ReverseSequenceOp : Unhandled input dimensions: {rank}"
        );
        if input.num_elements() == 0 {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        let (lo, hi) = (bd.min(sd), bd.max(sd));
        let size = |r: &[i64]| r.iter().map(|&d| d as usize).product::<usize>();
        let mover = ReverseSequenceMover {
            dims: [
                size(&dims[..lo]),
                dims[lo] as usize,
                size(&dims[lo + 1..hi]),
                dims[hi] as usize,
                size(&dims[hi + 1..]),
            ],
            batch_first: bd < sd,
            lens: lens.iter().map(|&l| l as usize).collect(),
        };
        let out = move_elements(
            ctx.device(),
            input.dtype(),
            &[input],
            input.shape().clone(),
            &mover,
        )?;
        ctx.set_output(0, out)
    }
}

register_kernel!(
    KernelDefBuilder::new("ReverseSequence")
        .type_constraint_list("T", POD_STRING_TYPES)
        .type_constraint_list("Tlen", INDEX_TYPES),
    ReverseSequenceOp
);
