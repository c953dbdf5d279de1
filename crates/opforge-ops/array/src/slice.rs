//! Joining, splitting and slicing ops: `ConcatV2`, `Pack`, `Unpack`, `Split`,
//! `Slice`, `Tile`, `Pad` and `PadV2` (`StridedSlice` is in
//! [`crate::array_strided`]), with TensorFlow 2.21's OpDefs, error messages
//! and CPU kernels for every dtype a dense tensor can hold, and `string`.
//!
//! These ops only move elements, so their kernels move each element as a
//! plain value of the same size (a "carrier": `u8`, `u16`, `u32`, `u64`,
//! `Complex<f64>` for 16-byte elements, `bool`, and `Vec<u8>` for strings),
//! reached by a zero-copy bitcast. That keeps one monomorphic copy loop per
//! element size instead of one per dtype. Contiguous runs are copied with
//! `clone_from_slice` (a `memcpy` for plain types), and large outputs are
//! split into shards of whole rows over the intra-op pool. Where the result
//! is a contiguous run of the input's outermost dimension (`Unpack` and
//! `Split` along axis 0, most `Slice`s of dimension 0) the output is a
//! zero-copy view of the input's buffer, as in TensorFlow.

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::common::concat_shape_helper;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext};
use opforge_core::{
    ensure, register_kernel, register_op, OpDefBuilder, Result, Status, Tensor, TensorShape,
};
use opforge_ops_base::args::scalar_input_value;
use opforge_ops_base::args::{fmt_shape, index_values};
use opforge_ops_base::cpu::carrier::*;
use opforge_ops_base::with_carrier;

/// The ops this file registers (its tests check them).
#[cfg(test)]
const OPS: &[&str] = &[
    "ConcatV2", "Pack", "Unpack", "Split", "Slice", "Tile", "Pad", "PadV2",
];

// ---------------------------------------------------------------------------
// OpDefs (TensorFlow 2.21, tensorflow/core/ops/array_ops.cc)

register_op!(OpDefBuilder::new("ConcatV2")
    .input("values: N * T")
    .input("axis: Tidx")
    .output("output: T")
    .attr("N: int >= 2")
    .attr("T: type")
    .attr("Tidx: {int32, int64} = DT_INT32")
    .set_shape_fn(concat_v2_shape)
    .doc(
        "Concatenates tensors along one dimension.\n\n\
         Every input must have the same rank and the same size in every dimension\n\
         but `axis`; the output's size along `axis` is the sum of the inputs' sizes.\n\
         A negative `axis` counts from the end: `axis + rank`.\n\n\
         values: List of `N` tensors to concatenate.\n\n\
         axis: 0-D. The dimension along which to concatenate, in `[-rank(values), rank(values))`.\n\n\
         output: The concatenated tensor."
    ));

/// `ConcatV2` (TensorFlow's `ConcatV2Shape`): the values joined along the
/// constant `axis` (the last input).
fn concat_v2_shape(c: &mut InferenceContext) -> Result<()> {
    let n = c.num_inputs();
    ensure!(
        n >= 2,
        InvalidArgument,
        "ConcatV2 needs at least one value and the axis, got {n} inputs"
    );
    if let Some(t) = c.input_tensor(n - 1) {
        ensure!(
            t.num_elements() > 0,
            InvalidArgument,
            "axis must be a scalar, got shape {}",
            fmt_shape(t.dims())
        );
    }
    concat_shape_helper(c, 0, n - 1, n - 1)
}

register_op!(OpDefBuilder::new("Pack")
    .input("values: N * T")
    .output("output: T")
    .attr("N: int >= 1")
    .attr("T: type")
    .attr("axis: int = 0")
    .set_shape_fn(pack_shape)
    .doc(
        "Packs a list of `N` rank-`R` tensors into one rank-`(R+1)` tensor.\n\n\
         The tensors, which must all have the same shape, are stacked along a new\n\
         dimension `axis` (negative values count from the end, `axis + R + 1`): packing\n\
         tensors of shape `(A, B, C)` along axis 1 gives shape `(A, N, B, C)`.\n\n\
         values: Must be of same shape and type.\n\n\
         axis: Dimension along which to pack, in `[-(R+1), R+1)`.\n\n\
         output: The packed tensor."
    ));

/// Attr `axis` of `Pack` / `Unpack`, checked against the rank of the
/// packed tensor and made non-negative (TensorFlow's `GetAxisForPackAndUnpack`).
fn pack_axis(c: &InferenceContext, rank_after_pack: i64) -> Result<usize> {
    let axis = i64::from(c.get_attr::<i32>("axis")?);
    ensure!(
        axis >= -rank_after_pack && axis < rank_after_pack,
        InvalidArgument,
        "Invalid axis: {axis}; must be in [{},{rank_after_pack})",
        -rank_after_pack
    );
    Ok(if axis < 0 {
        axis + rank_after_pack
    } else {
        axis
    } as usize)
}

/// `Pack`: the merged input shapes with a dim of `N` inserted at `axis`.
fn pack_shape(c: &mut InferenceContext) -> Result<()> {
    let n = c.num_inputs();
    let Some(last) = n.checked_sub(1) else {
        let out = c.unknown_shape();
        c.set_output(0, out);
        return Ok(());
    };
    let mut cur = c.input(last);
    for i in (0..last).rev() {
        let s = c.input(i);
        cur = c
            .merge(s, cur)
            .map_err(|e| e.with_context(format!("From merging shape {i} with other shapes.")))?;
    }
    let Some(dims) = c.dims(cur).map(<[_]>::to_vec) else {
        let out = c.unknown_shape();
        c.set_output(0, out);
        return Ok(());
    };
    let axis = pack_axis(c, dims.len() as i64 + 1)?;
    let mut out: Vec<DimensionHandle> = Vec::with_capacity(dims.len() + 1);
    out.extend_from_slice(&dims[..axis]);
    out.push(c.make_dim(n as i64));
    out.extend_from_slice(&dims[axis..]);
    let out = c.make_shape_from_dims(out);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("Unpack")
    .input("value: T")
    .output("output: num * T")
    .attr("num: int >= 0")
    .attr("T: type")
    .attr("axis: int = 0")
    .set_shape_fn(unpack_shape)
    .doc(
        "Unpacks a given dimension of a rank-`R` tensor into `num` rank-`(R-1)` tensors.\n\n\
         The dimension `axis` of `value` (negative values count from the end) must have\n\
         size `num`; output `i` is the slice `value[..., i, ...]` along that dimension.\n\
         This is the opposite of `Pack`.\n\n\
         value: 1-D or higher, with `axis` dimension size equal to `num`.\n\n\
         axis: Dimension along which to unpack, in `[-R, R)`.\n\n\
         output: The list of tensors unpacked from `value`."
    ));

/// `Unpack`: every output is the input's shape without dim `axis`, which
/// must be `num`.
fn unpack_shape(c: &mut InferenceContext) -> Result<()> {
    let s = c.input(0);
    let out = match c.dims(s).map(<[_]>::to_vec) {
        Some(dims) => {
            let axis = pack_axis(c, dims.len() as i64)?;
            c.with_value(dims[axis], c.num_outputs() as i64)?;
            let kept: Vec<DimensionHandle> = dims
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != axis)
                .map(|(_, &d)| d)
                .collect();
            c.make_shape_from_dims(kept)
        }
        None => c.unknown_shape(),
    };
    for i in 0..c.num_outputs() {
        c.set_output(i, out);
    }
    Ok(())
}

register_op!(OpDefBuilder::new("Split")
    .input("split_dim: int32")
    .input("value: T")
    .output("output: num_split * T")
    .attr("num_split: int >= 1")
    .attr("T: type")
    .set_shape_fn(split_shape)
    .doc(
        "Splits a tensor into `num_split` tensors along one dimension.\n\n\
         The size of dimension `split_dim` must be a multiple of `num_split`; every\n\
         output has `1/num_split` of it.\n\n\
         split_dim: 0-D. The dimension along which to split, in `[-rank(value), rank(value))`.\n\n\
         value: The tensor to split.\n\n\
         num_split: The number of ways to split.\n\n\
         output: Identically shaped tensors, whose shape matches that of `value`\n\
         except along `split_dim`, where their sizes are `value.shape[split_dim] / num_split`."
    ));

/// A dim of the value of constant scalar input `idx`, an axis of a tensor
/// of `input_rank` (negative values count from the end); unknown if the
/// value is (TensorFlow's `MakeDimForScalarInputWithNegativeIndexing`).
fn axis_dim_for_scalar_input(
    c: &mut InferenceContext,
    idx: usize,
    input_rank: Option<usize>,
) -> Result<DimensionHandle> {
    let Some(mut v) = scalar_input_value(c, idx)? else {
        return Ok(c.unknown_dim());
    };
    match input_rank {
        None if v < 0 => return Ok(c.unknown_dim()),
        None => {}
        Some(r) => {
            let r = r as i64;
            ensure!(
                v >= -r && v < r,
                InvalidArgument,
                "Dimension size, given by scalar input {v} must be in range [-{r}, {r})"
            );
            if v < 0 {
                v += r;
            }
        }
    }
    Ok(c.make_dim(v))
}

/// `Split`: every output is the input's shape with dim `split_dim` divided
/// by `num_split`.
fn split_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(1);
    let rank = c.rank(input);
    let split_dim = axis_dim_for_scalar_input(c, 0, rank)?;
    let num_split = c.num_outputs();
    let out = match (c.value(split_dim), rank) {
        (None, Some(r)) => c.unknown_shape_of_rank(r),
        (None, None) => c.unknown_shape(),
        (Some(d), _) => {
            let input = c.with_rank_at_least(input, d as usize + 1)?;
            let dim = c.dim(input, d);
            let size = c.divide(dim, num_split as i64, true).map_err(|e| {
                e.with_context("Number of ways to split should evenly divide the split dimension")
            })?;
            c.replace_dim(input, d, size)?
        }
    };
    for i in 0..num_split {
        c.set_output(i, out);
    }
    Ok(())
}

register_op!(OpDefBuilder::new("Slice")
    .input("input: T")
    .input("begin: Index")
    .input("size: Index")
    .output("output: T")
    .attr("T: type")
    .attr("Index: {int32,int64}")
    .set_shape_fn(slice_shape)
    .doc(
        "Returns a slice from 'input'.\n\n\
         The output is the part of `input` of size `size` whose first element is at\n\
         `begin`. `size[i] = -1` takes every element from `begin[i]` to the end of\n\
         dimension `i`. Requires `0 <= begin[i] <= begin[i] + size[i] <= shape(input)[i]`.\n\n\
         begin: `begin[i]` is the offset into the i'th dimension of `input` to slice from.\n\n\
         size: `size[i]` is the number of elements of the i'th dimension of `input` to\n\
         slice, or -1 for all remaining elements."
    ));

/// `Slice` (TensorFlow's `SliceShape`): the constant `size` (`-1` is the
/// rest of the dim after `begin`), or what is known of it.
fn slice_shape(c: &mut InferenceContext) -> Result<()> {
    let mut input = c.input(0);
    let (b, s) = (c.input(1), c.input(2));
    let begin_shape = c.with_rank(b, 1)?;
    let sizes_shape = c.with_rank(s, 1)?;
    let begin_shape = c.merge(begin_shape, sizes_shape)?;
    let ndims = c.dim(begin_shape, 0);
    if let Some(n) = c.value(ndims) {
        input = c.with_rank(input, n as usize)?;
    }
    // `begin` read as a shape, to keep partially known values.
    let begin = c.make_shape_from_shape_tensor(1)?;
    if let Some(sizes_t) = c.input_tensor(2).cloned() {
        let sizes = index_values(&sizes_t, "size")?;
        let begin = c.with_rank(begin, sizes.len())?;
        if c.rank_known(input) {
            c.with_rank(input, sizes.len())?;
        }
        let input = c.input(0);
        let mut dims = Vec::with_capacity(sizes.len());
        for (i, &size) in sizes.iter().enumerate() {
            let dim = c.dim(input, i as i64);
            if size == -1 {
                let b = c.dim(begin, i as i64);
                dims.push(c.subtract(dim, b)?);
            } else {
                ensure!(
                    size >= 0,
                    InvalidArgument,
                    "Out of bounds slicing on dimension {i} of length {}: sizes vector cannot be < -1, but was {size}",
                    c.raw_value(dim)
                );
                dims.push(c.make_dim(size));
            }
        }
        let out = c.make_shape_from_dims(dims);
        c.set_output(0, out);
        return Ok(());
    }
    let sizes = c.make_shape_from_shape_tensor(2)?;
    let out = if let Some(dims) = c.dims(sizes).map(<[_]>::to_vec) {
        c.with_rank(begin, dims.len())?;
        c.make_shape_from_dims(dims)
    } else if let Some(r) = c.rank(input) {
        c.unknown_shape_of_rank(r)
    } else {
        c.unknown_shape()
    };
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("Tile")
    .input("input: T")
    .input("multiples: Tmultiples")
    .output("output: T")
    .attr("T: type")
    .attr("Tmultiples: {int32, int64} = DT_INT32")
    .set_shape_fn(tile_shape)
    .doc(
        "Constructs a tensor by tiling a given tensor.\n\n\
         The output replicates `input` `multiples[i]` times along dimension `i`: its\n\
         i'th dimension has `input.dims(i) * multiples[i]` elements. Tiling `[a b c d]`\n\
         by `[2]` gives `[a b c d a b c d]`.\n\n\
         input: 1-D or higher.\n\n\
         multiples: 1-D. Length must be the same as the number of dimensions in `input`."
    ));

/// `Tile`: each input dim times the constant `multiples` entry.
fn tile_shape(c: &mut InferenceContext) -> Result<()> {
    let mut input = c.input(0);
    // `multiples` read as a shape, to keep partially known values.
    let mut multiples = c.make_shape_from_shape_tensor(1)?;
    if let Some(r) = c.rank(input) {
        multiples = c.with_rank(multiples, r)?;
        let (m, v) = (c.input(1), c.vector(r as i64));
        c.merge(m, v)?;
    }
    let Some(rank) = c.rank(multiples) else {
        let out = c.unknown_shape();
        c.set_output(0, out);
        return Ok(());
    };
    input = c.with_rank(input, rank)?;
    let mut dims = Vec::with_capacity(rank);
    for i in 0..rank as i64 {
        let (d, m) = (c.dim(input, i), c.dim(multiples, i));
        dims.push(c.multiply(d, m)?);
    }
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("Pad")
    .input("input: T")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .set_shape_fn(pad_shape)
    .doc(
        "Pads a tensor with zeros.\n\n\
         `paddings` is an integer tensor of shape `[rank(input), 2]`: for each dimension\n\
         `D`, `paddings[D, 0]` zeros are added before the contents and `paddings[D, 1]`\n\
         after, so the output's dimension `D` has size\n\
         `paddings(D, 0) + input.dim_size(D) + paddings(D, 1)`."
    ));

/// `Pad`, `PadV2` (TensorFlow's `PadShapeFn`): each input dim plus the two
/// constant paddings of that dim; `paddings` is `[rank, 2]`.
pub(crate) fn pad_shape(c: &mut InferenceContext) -> Result<()> {
    let paddings = c.input(1);
    let paddings = c.with_rank(paddings, 2)?;
    let cols = c.dim(paddings, 1);
    c.with_value(cols, 2)?;
    let mut input = c.input(0);
    let mut n_dim = c.dim(paddings, 0);
    if let Some(n) = c.value(n_dim) {
        input = c.with_rank(input, n as usize)?;
    } else if let Some(r) = c.rank(input) {
        n_dim = c.with_value(n_dim, r as i64)?;
    }
    let Some(t) = c.input_tensor(1).cloned() else {
        let out = match c.value(n_dim) {
            Some(n) => c.unknown_shape_of_rank(n as usize),
            None => c.unknown_shape(),
        };
        c.set_output(0, out);
        return Ok(());
    };
    ensure!(
        t.rank() == 2 && t.dims()[1] == 2,
        InvalidArgument,
        "paddings must be a matrix with 2 columns, got shape {}",
        fmt_shape(t.dims())
    );
    let num_dims = t.dims()[0];
    let input = c.with_rank(input, num_dims as usize)?;
    c.with_value(n_dim, num_dims)?;
    let values = index_values(&t, "paddings")?;
    let mut dims = Vec::with_capacity(num_dims as usize);
    for (i, pads) in values.chunks_exact(2).enumerate() {
        ensure!(
            pads[0] >= 0 && pads[1] >= 0,
            InvalidArgument,
            "Paddings must be non-negative"
        );
        let d = c.dim(input, i as i64);
        dims.push(c.add(d, pads[0].saturating_add(pads[1]))?);
    }
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("PadV2")
    .input("input: T")
    .input("paddings: Tpaddings")
    .input("constant_values: T")
    .output("output: T")
    .attr("T: type")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .set_shape_fn(pad_shape)
    .doc(
        "Pads a tensor.\n\n\
         Like `Pad`, but the added elements have the value of the scalar\n\
         `constant_values` instead of zero."
    ));

/// Tiles `src` (of shape `dims`) `multiples[i]` times along each dimension `i`.
fn tile<T: Elem>(pool: &ThreadPool, src: &[T], dims: &[usize], multiples: &[usize], out: &mut [T]) {
    // (input size, multiple) per dimension; a dimension with multiple 1 is
    // contiguous with the one before it and merges into it.
    let mut plan: Vec<(usize, usize)> = Vec::new();
    for (&n, &m) in dims.iter().zip(multiples) {
        match plan.last_mut() {
            Some(last) if m == 1 => last.0 *= n,
            _ if n == 1 && m == 1 => {}
            _ => plan.push((n, m)),
        }
    }
    if plan.is_empty() {
        plan.push((1, 1));
    }
    let (inner_n, inner_m) = plan[plan.len() - 1];
    let outer = &plan[..plan.len() - 1];
    let out_dims: Vec<usize> = outer.iter().map(|&(n, m)| n * m).collect();
    let in_dims: Vec<usize> = plan.iter().map(|&(n, _)| n).collect();
    let in_strides = strides_of(&in_dims);
    par_rows(pool, out, inner_n * inner_m, |first, chunk| {
        let mut idx = unravel(first, &out_dims);
        for orow in chunk.chunks_mut(inner_n * inner_m) {
            let off: usize = idx
                .iter()
                .zip(outer)
                .zip(&in_strides)
                .map(|((&i, &(n, _)), &s)| (i % n) * s)
                .sum();
            let row = &src[off..off + inner_n];
            for rep in orow.chunks_mut(inner_n) {
                rep.clone_from_slice(row);
            }
            advance(&mut idx, &out_dims);
        }
    });
}

/// Pads `src` (dimensions `(size, before, after)`) with `value`.
fn pad<T: Elem>(
    pool: &ThreadPool,
    src: &[T],
    dims: &[(usize, usize, usize)],
    value: &T,
    out: &mut [T],
) {
    // A dimension without padding is contiguous with the one before it and merges into it.
    let mut plan: Vec<(usize, usize, usize)> = Vec::new();
    for &(n, b, a) in dims {
        match plan.last_mut() {
            Some(last) if b == 0 && a == 0 => *last = (last.0 * n, last.1 * n, last.2 * n),
            _ if n == 1 && b == 0 && a == 0 => {}
            _ => plan.push((n, b, a)),
        }
    }
    if plan.is_empty() {
        plan.push((1, 0, 0));
    }
    let (n_l, b_l, a_l) = plan[plan.len() - 1];
    let row_len = b_l + n_l + a_l;
    let outer = &plan[..plan.len() - 1];
    let out_dims: Vec<usize> = outer.iter().map(|&(n, b, a)| b + n + a).collect();
    let in_dims: Vec<usize> = plan.iter().map(|&(n, _, _)| n).collect();
    let in_strides = strides_of(&in_dims);
    par_rows(pool, out, row_len, |first, chunk| {
        let mut idx = unravel(first, &out_dims);
        for orow in chunk.chunks_mut(row_len) {
            let inside = idx
                .iter()
                .zip(outer)
                .all(|(&i, &(n, b, _))| i >= b && i < b + n);
            if inside {
                let off: usize = idx
                    .iter()
                    .zip(outer)
                    .zip(&in_strides)
                    .map(|((&i, &(_, b, _)), &s)| (i - b) * s)
                    .sum();
                orow[..b_l].fill(value.clone());
                orow[b_l..b_l + n_l].clone_from_slice(&src[off..off + n_l]);
                orow[b_l + n_l..].fill(value.clone());
            } else {
                orow.fill(value.clone());
            }
            advance(&mut idx, &out_dims);
        }
    });
}

/// The first element of a non-empty tensor of `T`'s carrier dtype.
fn first_element<T: Elem>(t: &Tensor) -> Result<T> {
    T::view(t)?
        .first()
        .cloned()
        .ok_or_else(|| Status::invalid_argument("Expected a non-empty tensor"))
}

fn to_usize(dims: &[i64]) -> Vec<usize> {
    dims.iter().map(|&d| d as usize).collect()
}

// ---------------------------------------------------------------------------
// ConcatV2

struct ConcatV2Op;

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
        let pool = ctx.thread_pool();
        produce_output(ctx, 0, shape, |out, carrier| {
            let ins = values
                .iter()
                .map(|v| to_carrier(v, carrier))
                .collect::<Result<Vec<_>>>()?;
            with_carrier!(carrier, T => {
                let srcs = ins.iter().map(|t| T::view(t)).collect::<Result<Vec<_>>>()?;
                concat_rows::<T>(pool, &srcs, &row_lens, T::view_mut(out)?);
                Ok(())
            })
        })
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

struct PackOp {
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
        let pool = ctx.thread_pool();
        produce_output(ctx, 0, shape, |out, carrier| {
            let ins = values
                .iter()
                .map(|v| to_carrier(v, carrier))
                .collect::<Result<Vec<_>>>()?;
            with_carrier!(carrier, T => {
                let srcs = ins.iter().map(|t| T::view(t)).collect::<Result<Vec<_>>>()?;
                concat_rows::<T>(pool, &srcs, &vec![row; n], T::view_mut(out)?);
                Ok(())
            })
        })
    }
}

register_kernel!(
    KernelDefBuilder::new("Pack").type_constraint_list("T", &movable_types()),
    PackOp
);

// ---------------------------------------------------------------------------
// Unpack and Split

/// Sets outputs `0..num` to the `num` equal parts of `input` along `axis`
/// (which must divide evenly), as views when `axis` is 0. `keep_dim` keeps
/// the axis in the outputs (Split) instead of removing it (Unpack).
fn split_equal(
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
    let pool = ctx.thread_pool();
    let dtype = input.dtype();
    let carrier = carrier_dtype(dtype)?;
    let src = to_carrier(input, carrier)?;
    for i in 0..num {
        let mut begin = vec![0i64; dims.len()];
        begin[axis] = i as i64 * part;
        let view = StridedView::of_slice(&dims, &begin, &sizes, &ones);
        produce_output(ctx, i, shape.clone(), |out, carrier| {
            with_carrier!(carrier, T => {
                gather::<T>(pool, T::view(&src)?, &view, T::view_mut(out)?);
                Ok(())
            })
        })?;
    }
    Ok(())
}

struct UnpackOp {
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

struct SplitOp;

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
// Slice

struct SliceOp;

impl CreateKernel for SliceOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(SliceOp)
    }
}

impl OpKernel for SliceOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let (begin_t, size_t) = (ctx.input(1), ctx.input(2));
        let rank = input.rank();
        ensure!(
            begin_t.rank() == 1
                && size_t.rank() == 1
                && begin_t.num_elements() == rank
                && size_t.num_elements() == rank,
            InvalidArgument,
            "Expected begin and size arguments to be 1-D tensors of size {}, but got shapes {} and {} instead.",
            rank,
            begin_t.shape(),
            size_t.shape()
        );
        let begin = index_values(begin_t, "begin")?;
        let mut size = index_values(size_t, "size")?;
        let dims = input.dims().to_vec();
        let mut is_identity = true;
        let mut slice_dim0 = true;
        for i in 0..rank {
            let (b, d) = (begin[i], dims[i]);
            if size[i] == -1 {
                size[i] = d.saturating_sub(b);
            }
            let s = size[i];
            if d == 0 {
                ensure!(
                    b == 0 && s == 0,
                    InvalidArgument,
                    "Expected begin[{}] == 0 (got {}) and size[{}] == 0 (got {}) when input.dim_size({}) == 0",
                    i,
                    b,
                    i,
                    s,
                    i
                );
            } else {
                ensure!(
                    0 <= b && b <= d,
                    InvalidArgument,
                    "Expected begin[{}] in [0, {}], but got {}",
                    i,
                    d,
                    b
                );
                ensure!(
                    0 <= s && s <= d - b,
                    InvalidArgument,
                    "Expected size[{}] in [0, {}], but got {}",
                    i,
                    d - b,
                    s
                );
            }
            let take_all = b == 0 && s == d;
            is_identity &= take_all;
            slice_dim0 &= i == 0 || take_all;
        }
        if is_identity {
            return ctx.set_output(0, input);
        }
        if slice_dim0 {
            let (b, s) = (begin[0] as usize, size[0] as usize);
            return ctx.set_output(0, input.slice_outer(b, b + s)?);
        }
        let shape = TensorShape::new(&size)?;
        if shape.num_elements() == 0 {
            ctx.allocate_output(0, shape)?;
            return Ok(());
        }
        let view = StridedView::of_slice(&dims, &begin, &size, &vec![1; rank]);
        let pool = ctx.thread_pool();
        produce_output(ctx, 0, shape, |out, carrier| {
            let src = to_carrier(&input, carrier)?;
            with_carrier!(carrier, T => {
                gather::<T>(pool, T::view(&src)?, &view, T::view_mut(out)?);
                Ok(())
            })
        })
    }
}

register_kernel!(
    KernelDefBuilder::new("Slice")
        .type_constraint_list("T", &movable_types())
        .host_memory("begin")
        .host_memory("size"),
    SliceOp
);

// ---------------------------------------------------------------------------
// Tile

struct TileOp;

impl CreateKernel for TileOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(TileOp)
    }
}

impl OpKernel for TileOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let multiples_t = ctx.input(1);
        let rank = input.rank();
        ensure!(
            multiples_t.rank() == 1 && multiples_t.num_elements() == rank,
            InvalidArgument,
            "Expected multiples argument to be a vector of length {} but got length {}",
            rank,
            multiples_t
                .dims()
                .first()
                .copied()
                .unwrap_or(multiples_t.num_elements() as i64)
        );
        if rank == 0 {
            return ctx.set_output(0, input);
        }
        let multiples = index_values(multiples_t, "multiples")?;
        let mut out_dims = Vec::with_capacity(rank);
        for (&d, &m) in input.dims().iter().zip(&multiples) {
            ensure!(
                m >= 0,
                InvalidArgument,
                "Expected multiples argument to be non-negative, but got {}",
                m
            );
            out_dims.push(d.checked_mul(m).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "Tiling {} by {} gives too many elements",
                    input.shape(),
                    fmt_shape(&multiples)
                ))
            })?);
        }
        let shape = TensorShape::new(&out_dims)?;
        if &shape == input.shape() {
            return ctx.set_output(0, input);
        }
        if shape.num_elements() == 0 {
            ctx.allocate_output(0, shape)?;
            return Ok(());
        }
        let dims = to_usize(input.dims());
        let multiples = to_usize(&multiples);
        let pool = ctx.thread_pool();
        produce_output(ctx, 0, shape, |out, carrier| {
            let src = to_carrier(&input, carrier)?;
            with_carrier!(carrier, T => {
                tile::<T>(pool, T::view(&src)?, &dims, &multiples, T::view_mut(out)?);
                Ok(())
            })
        })
    }
}

register_kernel!(
    KernelDefBuilder::new("Tile")
        .type_constraint_list("T", &movable_types())
        .host_memory("multiples"),
    TileOp
);

// ---------------------------------------------------------------------------
// Pad and PadV2

struct PadOp {
    with_constant: bool,
}

impl OpKernel for PadOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let paddings_t = ctx.input(1);
        let rank = input.rank();
        ensure!(
            paddings_t.rank() == 2 && paddings_t.dims()[1] == 2,
            InvalidArgument,
            "paddings must be a matrix with 2 columns: {}",
            paddings_t.shape()
        );
        ensure!(
            paddings_t.dims()[0] == rank as i64,
            InvalidArgument,
            "The first dimension of paddings must be the rank of inputs{}, {}",
            paddings_t.shape(),
            input.shape()
        );
        let constant = if self.with_constant {
            let c = ctx.input(2);
            ensure!(
                c.rank() == 0,
                InvalidArgument,
                "constant_values must be a scalar. Found: {}",
                c.shape()
            );
            Some(c.clone())
        } else {
            None
        };
        let paddings = index_values(paddings_t, "paddings")?;
        let mut out_dims = Vec::with_capacity(rank);
        let mut plan = Vec::with_capacity(rank);
        for (d, &size) in input.dims().iter().enumerate() {
            let (before, after) = (paddings[2 * d], paddings[2 * d + 1]);
            ensure!(
                before >= 0 && after >= 0,
                InvalidArgument,
                "Paddings must be non-negative: {} {}",
                before,
                after
            );
            let total = before
                .checked_add(size)
                .and_then(|v| v.checked_add(after))
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "Padding dimension {d} of {} by {before} and {after} overflows",
                        input.shape()
                    ))
                })?;
            out_dims.push(total);
            plan.push((size as usize, before as usize, after as usize));
        }
        let shape = TensorShape::new(&out_dims)?;
        if shape.num_elements() == input.num_elements() {
            return ctx.set_output(0, input.reshaped(&out_dims)?);
        }
        let pool = ctx.thread_pool();
        produce_output(ctx, 0, shape, |out, carrier| {
            let src = to_carrier(&input, carrier)?;
            let constant = constant.map(|c| to_carrier(&c, carrier)).transpose()?;
            with_carrier!(carrier, T => {
                let value = match &constant {
                    Some(c) => first_element::<T>(c)?,
                    None => T::default(),
                };
                pad::<T>(pool, T::view(&src)?, &plan, &value, T::view_mut(out)?);
                Ok(())
            })
        })
    }
}

register_kernel!(
    KernelDefBuilder::new("Pad")
        .type_constraint_list("T", &movable_types())
        .host_memory("paddings"),
    fn = |_| Ok(Box::new(PadOp { with_constant: false }) as Box<dyn OpKernel>)
);

register_kernel!(
    KernelDefBuilder::new("PadV2")
        .type_constraint_list("T", &movable_types())
        .host_memory("paddings")
        .host_memory("constant_values"),
    fn = |_| Ok(Box::new(PadOp { with_constant: true }) as Box<dyn OpKernel>)
);

// ---- Gradients ----

/// The gradients of the concat/split/slice/pad ops, as TensorFlow's
/// `array_grad.py` defines them. `ConcatV2`'s offsets (TensorFlow's
/// `ConcatOffset`) are computed at run time from the inputs' `Shape`s: input
/// `i`'s slice begins at `onehot(axis) * sum(sizes[..i])`.
mod gradients {
    use opforge_core::attrs::{AttrMap, IntoAttrValue};
    use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym, SymArg};
    use opforge_core::{register_gradient, DataType, Result, Status, Tensor};

    type Grads = Result<Vec<Option<Sym>>>;

    /// An index vector constant of `dtype` (int32 or int64).
    fn index_vector(o: &mut dyn Ops, dtype: DataType, v: &[i64]) -> Result<Sym> {
        let t = if dtype == DataType::Int64 {
            Tensor::from_slice(&[v.len() as i64], v)?
        } else {
            let v32: Vec<i32> = v.iter().map(|&x| x as i32).collect();
            Tensor::from_slice(&[v.len() as i64], &v32)?
        };
        o.constant(t)
    }

    fn one_output(mut r: Vec<Sym>, op: &str) -> Result<Sym> {
        r.pop()
            .ok_or_else(|| Status::internal(format!("{op} has no output")))
    }

    fn concat_list(o: &mut dyn Ops, xs: &[Sym], axis: Sym) -> Result<Sym> {
        if let [one] = xs {
            return Ok(*one);
        }
        let r = o.call(
            "ConcatV2",
            &[SymArg::List(xs.to_vec()), SymArg::One(axis)],
            &AttrMap::new(),
        )?;
        one_output(r, "ConcatV2")
    }

    fn pack_list(o: &mut dyn Ops, xs: &[Sym], axis: i64) -> Result<Sym> {
        let mut attrs = AttrMap::new();
        attrs.insert("axis".to_string(), axis.into_attr_value());
        let r = o.call("Pack", &[SymArg::List(xs.to_vec())], &attrs)?;
        one_output(r, "Pack")
    }

    fn concat_v2_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let n = op.inputs.len() - 1;
        let mut out = vec![None; n + 1];
        let Some(g) = grads[0] else {
            return Ok(out);
        };
        let values = &op.inputs[..n];
        let i32t = DataType::Int32.into_attr_value();
        let rank = o.op1("Rank", &[values[0]], &[])?;
        let ax = o.op1("Cast", &[op.inputs[n]], &[("DstT", i32t)])?;
        let ax = o.op1("FloorMod", &[ax, rank], &[])?;
        let one_i = o.constant(Tensor::scalar(1i32))?;
        let zero_i = o.constant(Tensor::scalar(0i32))?;
        let mask = o.op1("OneHot", &[ax, rank, one_i, zero_i], &[])?;
        let ax_v = o.int_vector(&[1])?;
        let ax_v = o.reshape(ax, ax_v)?;
        let one_v = o.int_vector(&[1])?;
        let mut offset: Option<Sym> = None;
        for (i, &x) in values.iter().enumerate() {
            let s = o.shape_of(x)?;
            let begin = match offset {
                None => o.zeros_like(s)?,
                Some(off) => o.mul(mask, off)?,
            };
            out[i] = Some(o.op1("Slice", &[g, begin, s], &[])?);
            let size = o.op1("Slice", &[s, ax_v, one_v], &[])?;
            offset = Some(match offset {
                None => size,
                Some(off) => o.add(off, size)?,
            });
        }
        Ok(out)
    }

    fn pack_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let n = op.inputs.len();
        let Some(g) = grads[0] else {
            return Ok(vec![None; n]);
        };
        let axis: i64 = op.attr("axis")?;
        let mut attrs = AttrMap::new();
        attrs.insert("num".to_string(), (n as i64).into_attr_value());
        attrs.insert("axis".to_string(), axis.into_attr_value());
        let r = o.call("Unpack", &[SymArg::One(g)], &attrs)?;
        Ok(r.into_iter().map(Some).collect())
    }

    /// Gradients of a multi-output op, with zeros for the outputs without one.
    fn filled(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Result<Vec<Sym>> {
        grads
            .iter()
            .zip(op.outputs)
            .map(|(g, &y)| match g {
                Some(g) => Ok(*g),
                None => o.zeros_like(y),
            })
            .collect()
    }

    fn unpack_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        if grads.iter().all(Option::is_none) {
            return Ok(vec![None]);
        }
        let axis: i64 = op.attr("axis")?;
        let gs = filled(o, op, grads)?;
        Ok(vec![Some(pack_list(o, &gs, axis)?)])
    }

    fn split_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        if grads.iter().all(Option::is_none) {
            return Ok(vec![None, None]);
        }
        let gs = filled(o, op, grads)?;
        Ok(vec![None, Some(concat_list(o, &gs, op.inputs[0])?)])
    }

    fn slice_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None, None]);
        };
        let (x, begin) = (op.inputs[0], op.inputs[1]);
        let idx = o.dtype(begin).into_attr_value();
        let out_size = o.op1("Shape", &[op.outputs[0]], &[("out_type", idx.clone())])?;
        let in_size = o.op1("Shape", &[x], &[("out_type", idx)])?;
        let col = o.int_vector(&[-1, 1])?;
        let before = o.reshape(begin, col)?;
        let rest = o.sub(in_size, out_size)?;
        let rest = o.sub(rest, begin)?;
        let after = o.reshape(rest, col)?;
        let one = o.constant(Tensor::scalar(1i32))?;
        let paddings = concat_list(o, &[before, after], one)?;
        Ok(vec![Some(o.op1("Pad", &[g, paddings], &[])?), None, None])
    }

    fn tile_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, multiples) = (op.inputs[0], op.inputs[1]);
        let idx = o.dtype(multiples).into_attr_value();
        let in_shape = o.op1("Shape", &[x], &[("out_type", idx)])?;
        // [m0, d0, m1, d1, ...]
        let pairs = pack_list(o, &[multiples, in_shape], 1)?;
        let mdt = o.dtype(multiples);
        let flat = index_vector(o, mdt, &[-1])?;
        let split_shape = o.reshape(pairs, flat)?;
        let n = o.op1("Size", &[split_shape], &[])?;
        let zero = o.constant(Tensor::scalar(0i32))?;
        let two = o.constant(Tensor::scalar(2i32))?;
        let axes = o.op1("Range", &[zero, n, two], &[])?;
        let g = o.reshape(g, split_shape)?;
        let summed = o.op1("Sum", &[g, axes], &[("keep_dims", false.into_attr_value())])?;
        Ok(vec![Some(summed), None])
    }

    fn pad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let mut out = vec![None; op.inputs.len()];
        let Some(g) = grads[0] else {
            return Ok(out);
        };
        let (x, paddings) = (op.inputs[0], op.inputs[1]);
        let dt = o.dtype(paddings);
        let b = index_vector(o, dt, &[0, 0])?;
        let s = index_vector(o, dt, &[-1, 1])?;
        let before = o.op1("Slice", &[paddings, b, s], &[])?;
        let flat = index_vector(o, dt, &[-1])?;
        let begin = o.reshape(before, flat)?;
        let sizes = o.op1("Shape", &[x], &[("out_type", dt.into_attr_value())])?;
        out[0] = Some(o.op1("Slice", &[g, begin, sizes], &[])?);
        Ok(out)
    }

    register_gradient!("ConcatV2", concat_v2_grad);
    register_gradient!("Pack", pack_grad);
    register_gradient!("Unpack", unpack_grad);
    register_gradient!("Split", split_grad);
    register_gradient!("Slice", slice_grad);
    register_gradient!("Tile", tile_grad);
    register_gradient!("Pad", pad_grad);
    register_gradient!("PadV2", pad_grad);
}

#[cfg(test)]
mod gradient_tests {
    use opforge_core::attrs::{AttrMap, IntoAttrValue};
    use opforge_core::autodiff::{GradientTape, Ops, OpsExt, Sym, SymArg};
    use opforge_core::{Result, Tensor};
    use opforge_ops_base::testutil::{assert_close, ctx, t};
    use opforge_ops_base::testutil::{check, weighted, X};

    fn xs(n: usize, off: f64) -> Vec<f64> {
        (0..n).map(|i| (i as f64) * 0.37 - off).collect()
    }

    fn concat(o: &mut dyn Ops, xs: &[Sym], axis: i32) -> Result<Sym> {
        let a = o.constant(Tensor::scalar(axis))?;
        let r = o.call(
            "ConcatV2",
            &[SymArg::List(xs.to_vec()), SymArg::One(a)],
            &AttrMap::new(),
        )?;
        Ok(r[0])
    }

    #[test]
    fn concat_v2_grad() {
        for axis in [0, 1, -1] {
            check(
                "ConcatV2",
                &move |o, x| {
                    let y = concat(o, x, axis)?;
                    weighted(o, y)
                },
                &if axis == 0 {
                    vec![
                        (vec![1, 3], xs(3, 1.0)),
                        (vec![2, 3], xs(6, 2.0)),
                        (vec![1, 3], xs(3, 0.5)),
                    ]
                } else {
                    vec![
                        (vec![2, 1], xs(2, 1.0)),
                        (vec![2, 3], xs(6, 2.0)),
                        (vec![2, 2], xs(4, 0.5)),
                    ]
                },
            );
        }
    }

    /// In a graph with inputs of unknown shape: the offsets come from run-time shapes.
    #[test]
    fn concat_v2_grad_in_a_graph_with_unknown_shapes() {
        use opforge_core::autodiff::gradients;
        use opforge_core::graph::{Graph, NodeSpec, Output, Session};
        use opforge_core::DataType;
        let mut g = Graph::new();
        let add = |g: &mut Graph, spec: NodeSpec| Output::new(g.add(spec).unwrap(), 0);
        let a = add(
            &mut g,
            NodeSpec::new("Placeholder", "a").attr("dtype", DataType::Double),
        );
        let b = add(
            &mut g,
            NodeSpec::new("Placeholder", "b").attr("dtype", DataType::Double),
        );
        let axis = add(
            &mut g,
            NodeSpec::new("Const", "axis")
                .attr("value", &Tensor::scalar(-1i32))
                .attr("dtype", DataType::Int32),
        );
        let c = add(
            &mut g,
            NodeSpec::new("ConcatV2", "c")
                .input_list(vec![a, b])
                .input(axis),
        );
        let y = add(&mut g, NodeSpec::new("Mul", "y").input(c).input(c));
        let gr = gradients(&mut g, &[y], &[a, b], None).unwrap();
        let (ga, gb) = (gr[0].unwrap(), gr[1].unwrap());
        let sess = Session::new(g).unwrap();
        let out = sess
            .run(
                vec![
                    (a, t(&[2, 1], vec![1.0f64, 2.0])),
                    (b, t(&[2, 2], vec![3.0f64, 4.0, 5.0, 6.0])),
                ],
                &[ga, gb],
                &[],
            )
            .unwrap();
        assert_close(&out[0], &[2, 1], &[2.0, 4.0], 0.0);
        assert_close(&out[1], &[2, 2], &[6.0, 8.0, 10.0, 12.0], 0.0);
    }

    #[test]
    fn pack_unpack_grad() {
        for axis in [0i64, 1, -1] {
            check(
                "Pack",
                &move |o, x| {
                    let mut attrs = AttrMap::new();
                    attrs.insert("axis".into(), axis.into_attr_value());
                    let y = o.call("Pack", &[SymArg::List(x.to_vec())], &attrs)?[0];
                    weighted(o, y)
                },
                &[(vec![2, 3], xs(6, 1.0)), (vec![2, 3], xs(6, 2.5))],
            );
            check(
                "Unpack",
                &move |o, x| {
                    let mut attrs = AttrMap::new();
                    attrs.insert("axis".into(), axis.into_attr_value());
                    attrs.insert("num".into(), 2i64.into_attr_value());
                    let ys = o.call("Unpack", &[SymArg::One(x[0])], &attrs)?;
                    // Only output 0 is used: output 1's gradient is zeros.
                    let a = weighted(o, ys[0])?;
                    let b = o.mul(ys[1], ys[1])?;
                    let y = o.add(a, b)?;
                    weighted(o, y)
                },
                &[(vec![2, 2, 2], xs(8, 1.3))],
            );
        }
        // Unpack with an unused output: zeros for it.
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]));
        let mut attrs = AttrMap::new();
        attrs.insert("axis".into(), 0i64.into_attr_value());
        attrs.insert("num".into(), 2i64.into_attr_value());
        let ys = tape.call("Unpack", &[SymArg::One(x)], &attrs).unwrap();
        let g = tape.gradient(ys[1], &[x]).unwrap()[0].unwrap();
        assert_close(tape.value(g), &[2, 2], &[0.0, 0.0, 1.0, 1.0], 0.0);
    }

    #[test]
    fn split_grad() {
        for axis in [0i32, 1] {
            check(
                "Split",
                &move |o, x| {
                    let a = o.constant(Tensor::scalar(axis))?;
                    let mut attrs = AttrMap::new();
                    attrs.insert("num_split".into(), 2i64.into_attr_value());
                    let ys = o.call("Split", &[SymArg::One(a), SymArg::One(x[0])], &attrs)?;
                    let y = o.mul(ys[0], ys[1])?;
                    weighted(o, y)
                },
                &[(vec![2, 4], xs(8, 1.4))],
            );
        }
        // Only one output used.
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[4], vec![1.0f64, 2.0, 3.0, 4.0]));
        let a = tape.constant(Tensor::scalar(0i32)).unwrap();
        let mut attrs = AttrMap::new();
        attrs.insert("num_split".into(), 2i64.into_attr_value());
        let ys = tape
            .call("Split", &[SymArg::One(a), SymArg::One(x)], &attrs)
            .unwrap();
        let g = tape.gradient(ys[0], &[x]).unwrap()[0].unwrap();
        assert_close(tape.value(g), &[4], &[1.0, 1.0, 0.0, 0.0], 0.0);
    }

    #[test]
    fn slice_grad() {
        check(
            "Slice",
            &|o, x| {
                let b = o.int_vector(&[1, 0, 1])?;
                let s = o.int_vector(&[1, -1, 2])?;
                let y = o.op1("Slice", &[x[0], b, s], &[])?;
                weighted(o, y)
            },
            &[(vec![2, 3, 4], xs(24, 4.0))],
        );
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[4], vec![1.0f64, 2.0, 3.0, 4.0]));
        let b = tape
            .constant(Tensor::from_slice(&[1], &[1i64]).unwrap())
            .unwrap();
        let s = tape
            .constant(Tensor::from_slice(&[1], &[2i64]).unwrap())
            .unwrap();
        let y = tape.op1("Slice", &[x, b, s], &[]).unwrap();
        let g = tape.gradient(y, &[x, b, s]).unwrap();
        assert_close(tape.value(g[0].unwrap()), &[4], &[0.0, 1.0, 1.0, 0.0], 0.0);
        assert!(g[1].is_none() && g[2].is_none());
    }

    #[test]
    fn tile_grad() {
        check(
            "Tile",
            &|o, x| {
                let m = o.int_vector(&[2, 1, 3])?;
                let y = o.op1("Tile", &[x[0], m], &[])?;
                weighted(o, y)
            },
            &[(vec![2, 3, 1], X.to_vec())],
        );
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[2], vec![1.0f64, 2.0]));
        let m = tape
            .constant(Tensor::from_slice(&[1], &[3i64]).unwrap())
            .unwrap();
        let y = tape.op1("Tile", &[x, m], &[]).unwrap();
        let g = tape.gradient(y, &[x]).unwrap()[0].unwrap();
        assert_close(tape.value(g), &[2], &[3.0, 3.0], 0.0);
    }

    #[test]
    fn pad_grads() {
        check(
            "Pad",
            &|o, x| {
                let p = o.constant(Tensor::from_slice(&[2, 2], &[1i32, 0, 2, 1]).unwrap())?;
                let y = o.op1("Pad", &[x[0], p], &[])?;
                weighted(o, y)
            },
            &[(vec![2, 3], X.to_vec())],
        );
        check(
            "PadV2",
            &|o, x| {
                let p = o.constant(Tensor::from_slice(&[2, 2], &[0i64, 1, 1, 1]).unwrap())?;
                let dt = o.dtype(x[0]);
                let c = o.scalar(dt, 0.5)?;
                let y = o.op1("PadV2", &[x[0], p, c], &[])?;
                weighted(o, y)
            },
            &[(vec![2, 3], X.to_vec())],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::half::{bf16, f16};
    use opforge_core::num_complex::Complex;
    use opforge_core::DataType;
    use opforge_core::{Code, Element};
    use opforge_ops_base::testutil::{assert_close, ctx, t};

    fn v<T: Element>(x: &Tensor) -> Vec<T> {
        x.flat::<T>().unwrap().to_vec()
    }

    fn strs(dims: &[i64], s: &[&str]) -> Tensor {
        Tensor::from_strings(dims, s.iter().map(|x| x.as_bytes().to_vec()).collect()).unwrap()
    }

    fn sv(x: &Tensor) -> Vec<String> {
        x.strings()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8(b.clone()).unwrap())
            .collect()
    }

    fn iota(dims: &[i64]) -> Tensor {
        let n: i64 = dims.iter().product();
        t(dims, (0..n as i32).collect())
    }

    #[track_caller]
    fn assert_err<T: std::fmt::Debug>(r: Result<T>, code: Code, msg: &str) {
        let e = r.unwrap_err();
        assert_eq!(e.code(), code, "{e}");
        assert!(e.message().contains(msg), "{e}\nexpected to contain: {msg}");
    }

    fn concat(values: Vec<Tensor>, axis: Tensor) -> Result<Tensor> {
        ctx().op("ConcatV2").input_list(values).input(axis).run1()
    }

    fn pack(values: Vec<Tensor>, axis: i64) -> Result<Tensor> {
        ctx()
            .op("Pack")
            .input_list(values)
            .attr("axis", axis)
            .run1()
    }

    fn unpack(value: Tensor, num: i64, axis: i64) -> Result<Vec<Tensor>> {
        ctx()
            .op("Unpack")
            .input(value)
            .attr("num", num)
            .attr("axis", axis)
            .run()
    }

    fn split(dim: i32, value: Tensor, num: i64) -> Result<Vec<Tensor>> {
        ctx()
            .op("Split")
            .input(Tensor::scalar(dim))
            .input(value)
            .attr("num_split", num)
            .run()
    }

    fn slice(x: Tensor, begin: Vec<i32>, size: Vec<i32>) -> Result<Tensor> {
        let (b, s) = (begin.len() as i64, size.len() as i64);
        ctx()
            .op("Slice")
            .input(x)
            .input(t(&[b], begin))
            .input(t(&[s], size))
            .run1()
    }

    fn tile(x: Tensor, m: Vec<i32>) -> Result<Tensor> {
        let n = m.len() as i64;
        ctx().op("Tile").input(x).input(t(&[n], m)).run1()
    }

    fn pad(x: Tensor, p: Vec<i32>) -> Result<Tensor> {
        let n = p.len() as i64 / 2;
        ctx().op("Pad").input(x).input(t(&[n, 2], p)).run1()
    }

    fn pad_v2(x: Tensor, p: Vec<i32>, c: Tensor) -> Result<Tensor> {
        let n = p.len() as i64 / 2;
        ctx()
            .op("PadV2")
            .input(x)
            .input(t(&[n, 2], p))
            .input(c)
            .run1()
    }

    // ---- ConcatV2

    #[test]
    fn concat_hand_checked() {
        let a = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
        let b = t(&[2, 3], vec![7f32, 8., 9., 10., 11., 12.]);
        let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(0i32)).unwrap();
        assert_eq!(r.dims(), &[4, 3]);
        assert_eq!(v::<f32>(&r), (1..=12).map(|x| x as f32).collect::<Vec<_>>());
        let want1 = vec![1f32, 2., 3., 7., 8., 9., 4., 5., 6., 10., 11., 12.];
        let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(1i32)).unwrap();
        assert_eq!((r.dims(), v::<f32>(&r)), (&[2i64, 6][..], want1.clone()));
        // Negative axes, and an int64 axis.
        let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(-1i64)).unwrap();
        assert_eq!((r.dims(), v::<f32>(&r)), (&[2i64, 6][..], want1));
        let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(-2i32)).unwrap();
        assert_eq!(r.dims(), &[4, 3]);
        // An axis given as a 1-element vector.
        let r = concat(vec![a, b], t(&[1], vec![1i32])).unwrap();
        assert_eq!(r.dims(), &[2, 6]);
        // Inputs of different widths, three of them.
        let x = t(&[2, 1], vec![1i32, 2]);
        let y = t(&[2, 2], vec![3i32, 4, 5, 6]);
        let z = t(&[2, 1], vec![7i32, 8]);
        let r = concat(vec![x, y, z], Tensor::scalar(1i32)).unwrap();
        assert_eq!(r.dims(), &[2, 4]);
        assert_eq!(v::<i32>(&r), vec![1, 3, 4, 7, 2, 5, 6, 8]);
        // The middle axis of a rank-3 tensor.
        let p = iota(&[2, 1, 2]);
        let q = t(&[2, 2, 2], vec![10i32, 11, 12, 13, 14, 15, 16, 17]);
        let r = concat(vec![p, q], Tensor::scalar(1i32)).unwrap();
        assert_eq!(r.dims(), &[2, 3, 2]);
        assert_eq!(
            v::<i32>(&r),
            vec![0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17]
        );
    }

    #[test]
    fn concat_empty_inputs() {
        let b = t(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]);
        let e = Tensor::zeros(DataType::Int64, &[2, 0]).unwrap();
        let r = concat(vec![e.clone(), b.clone()], Tensor::scalar(1i32)).unwrap();
        assert_eq!((r.dims(), v::<i64>(&r)), (&[2i64, 3][..], v::<i64>(&b)));
        let r = concat(vec![b.clone(), e], Tensor::scalar(1i32)).unwrap();
        assert_eq!(v::<i64>(&r), v::<i64>(&b));
        let e0 = Tensor::zeros(DataType::Int64, &[0, 3]).unwrap();
        let r = concat(
            vec![e0.clone(), b.clone(), e0.clone()],
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!((r.dims(), v::<i64>(&r)), (&[2i64, 3][..], v::<i64>(&b)));
        let r = concat(vec![e0.clone(), e0], Tensor::scalar(0i32)).unwrap();
        assert_eq!(r.dims(), &[0, 3]);
        let a = Tensor::zeros(DataType::Float, &[2, 0]).unwrap();
        let c = Tensor::zeros(DataType::Float, &[1, 0]).unwrap();
        assert_eq!(
            concat(vec![a, c], Tensor::scalar(0i32)).unwrap().dims(),
            &[3, 0]
        );
    }

    #[test]
    fn concat_every_dtype_family() {
        let r = concat(
            vec![t(&[2], vec![1.5f64, 2.5]), t(&[1], vec![3.5f64])],
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(v::<f64>(&r), vec![1.5, 2.5, 3.5]);
        let r = concat(
            vec![t(&[1, 2], vec![true, false]), t(&[1, 1], vec![true])],
            Tensor::scalar(1i32),
        )
        .unwrap();
        assert_eq!(v::<bool>(&r), vec![true, false, true]);
        let c = |re: f32| Complex::new(re, -re);
        let r = concat(
            vec![t(&[1], vec![c(1.0)]), t(&[2], vec![c(2.0), c(3.0)])],
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(v::<Complex<f32>>(&r), vec![c(1.0), c(2.0), c(3.0)]);
        let r = concat(
            vec![
                t(&[1], vec![Complex::new(1.0f64, 2.0)]),
                t(&[1], vec![Complex::new(3.0f64, 4.0)]),
            ],
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(
            v::<Complex<f64>>(&r),
            vec![Complex::new(1.0, 2.0), Complex::new(3.0, 4.0)]
        );
        let h = |x: f32| f16::from_f32(x);
        let r = concat(
            vec![t(&[1], vec![h(1.0)]), t(&[1], vec![h(-2.0)])],
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(v::<f16>(&r), vec![h(1.0), h(-2.0)]);
        let b = |x: f32| bf16::from_f32(x);
        let r = concat(
            vec![t(&[1], vec![b(0.5)]), t(&[1], vec![b(8.0)])],
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(v::<bf16>(&r), vec![b(0.5), b(8.0)]);
        let r = concat(
            vec![t(&[1], vec![-1i8]), t(&[1], vec![7i8])],
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(v::<i8>(&r), vec![-1, 7]);
        let r = concat(
            vec![t(&[1], vec![u64::MAX]), t(&[1], vec![1u64])],
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(v::<u64>(&r), vec![u64::MAX, 1]);
        // A quantized dtype, which only has a byte representation.
        let q = |x: Vec<u8>| t(&[x.len() as i64], x).bitcast(DataType::QInt8).unwrap();
        let r = concat(vec![q(vec![1, 2]), q(vec![200])], Tensor::scalar(0i32)).unwrap();
        assert_eq!(r.dtype(), DataType::QInt8);
        assert_eq!(
            v::<u8>(&r.bitcast(DataType::UInt8).unwrap()),
            vec![1, 2, 200]
        );
        // Strings.
        let r = concat(
            vec![
                strs(&[2, 1], &["a", "b"]),
                strs(&[2, 2], &["c", "d", "e", "f"]),
            ],
            Tensor::scalar(-1i32),
        )
        .unwrap();
        assert_eq!(r.dims(), &[2, 3]);
        assert_eq!(sv(&r), ["a", "c", "d", "b", "e", "f"]);
    }

    #[test]
    fn concat_errors() {
        let a = Tensor::zeros(DataType::Float, &[2, 3]).unwrap();
        let b = Tensor::zeros(DataType::Float, &[2, 4]).unwrap();
        assert_err(
            concat(vec![a.clone(), b], Tensor::scalar(0i32)),
            Code::InvalidArgument,
            "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,3] vs. shape[1] = [2,4]",
        );
        assert_err(
            concat(
                vec![a.clone(), Tensor::zeros(DataType::Float, &[3]).unwrap()],
                Tensor::scalar(0i32),
            ),
            Code::InvalidArgument,
            "ConcatOp : Ranks of all input tensors should match: shape[0] = [2,3] vs. shape[1] = [3]",
        );
        assert_err(
            concat(vec![a.clone(), a.clone()], Tensor::scalar(2i32)),
            Code::InvalidArgument,
            "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got 2",
        );
        assert_err(
            concat(vec![a.clone(), a.clone()], Tensor::scalar(-3i64)),
            Code::InvalidArgument,
            "in the range [-2, 2), but got -3",
        );
        assert_err(
            concat(vec![a.clone(), a], t(&[2], vec![0i32, 1])),
            Code::InvalidArgument,
            "axis tensor should be a scalar integer, but got shape [2]",
        );
        assert_err(
            concat(
                vec![Tensor::scalar(1f32), Tensor::scalar(2f32)],
                Tensor::scalar(0i32),
            ),
            Code::InvalidArgument,
            "in the range [0, 0), but got 0",
        );
    }

    #[test]
    fn concat_large_inputs_shard_correctly() {
        let (rows, cols) = (300i64, 257i64);
        let a = t(&[rows, cols], (0..rows * cols).map(|x| x as i32).collect());
        let b = t(&[rows, 2], (0..rows * 2).map(|x| -(x as i32)).collect());
        // Along axis 1: many rows.
        let r = concat(vec![a.clone(), b.clone()], Tensor::scalar(1i32)).unwrap();
        assert_eq!(r.dims(), &[rows, cols + 2]);
        let got = v::<i32>(&r);
        for i in [0, 1, 150, 299] {
            for j in [0, 1, 256, 257, 258] {
                let want = if j < cols {
                    (i * cols + j) as i32
                } else {
                    -((i * 2 + j - cols) as i32)
                };
                assert_eq!(got[(i * (cols + 2) + j) as usize], want, "({i}, {j})");
            }
        }
        // Along axis 0: one long row per input.
        let c = t(
            &[rows, cols],
            (0..rows * cols).map(|x| x as i32 + 1).collect(),
        );
        let r = concat(vec![a.clone(), c], Tensor::scalar(0i32)).unwrap();
        let got = v::<i32>(&r);
        let n = (rows * cols) as usize;
        assert_eq!(got.len(), 2 * n);
        assert!((0..n).all(|k| got[k] == k as i32 && got[n + k] == k as i32 + 1));
        // Strings, sharded.
        let s = Tensor::from_strings(
            &[40000],
            (0..40000).map(|k| format!("{k}").into_bytes()).collect(),
        )
        .unwrap();
        let r = concat(vec![s.clone(), s], Tensor::scalar(0i32)).unwrap();
        assert_eq!(r.strings().unwrap()[40001], b"1".to_vec());
    }

    // ---- Pack

    #[test]
    fn pack_hand_checked() {
        let x = t(&[2], vec![1i32, 4]);
        let y = t(&[2], vec![2i32, 5]);
        let z = t(&[2], vec![3i32, 6]);
        let r = pack(vec![x.clone(), y.clone(), z.clone()], 0).unwrap();
        assert_eq!(
            (r.dims(), v::<i32>(&r)),
            (&[3i64, 2][..], vec![1, 4, 2, 5, 3, 6])
        );
        let r = pack(vec![x.clone(), y.clone(), z.clone()], 1).unwrap();
        assert_eq!(
            (r.dims(), v::<i32>(&r)),
            (&[2i64, 3][..], vec![1, 2, 3, 4, 5, 6])
        );
        let r = pack(vec![x.clone(), y.clone(), z], -1).unwrap();
        assert_eq!(
            (r.dims(), v::<i32>(&r)),
            (&[2i64, 3][..], vec![1, 2, 3, 4, 5, 6])
        );
        let r = pack(vec![x.clone(), y], -2).unwrap();
        assert_eq!((r.dims(), v::<i32>(&r)), (&[2i64, 2][..], vec![1, 4, 2, 5]));
        // Rank 2 along the middle axis.
        let a = iota(&[2, 3]);
        let b = t(&[2, 3], vec![10i32, 11, 12, 13, 14, 15]);
        let r = pack(vec![a, b], 1).unwrap();
        assert_eq!(r.dims(), &[2, 2, 3]);
        assert_eq!(v::<i32>(&r), vec![0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15]);
        // Scalars, a single input (a view), empty inputs.
        let r = pack(vec![Tensor::scalar(1.5f32), Tensor::scalar(2.5f32)], 0).unwrap();
        assert_eq!((r.dims(), v::<f32>(&r)), (&[2i64][..], vec![1.5, 2.5]));
        let r = pack(vec![x.clone()], 1).unwrap();
        assert_eq!((r.dims(), v::<i32>(&r)), (&[2i64, 1][..], vec![1, 4]));
        assert!(r.shares_storage_with(&x));
        let e = Tensor::zeros(DataType::Bool, &[0, 2]).unwrap();
        assert_eq!(pack(vec![e.clone(), e], 2).unwrap().dims(), &[0, 2, 2]);
        // Strings and bools.
        let r = pack(vec![strs(&[2], &["a", "b"]), strs(&[2], &["c", "d"])], 1).unwrap();
        assert_eq!(
            (r.dims(), sv(&r)),
            (
                &[2i64, 2][..],
                vec!["a", "c", "b", "d"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )
        );
        let r = pack(vec![t(&[1], vec![true]), t(&[1], vec![false])], 0).unwrap();
        assert_eq!(v::<bool>(&r), vec![true, false]);
    }

    #[test]
    fn pack_errors() {
        assert_err(
            pack(vec![t(&[2], vec![1i32, 2]), t(&[3], vec![1i32, 2, 3])], 0),
            Code::InvalidArgument,
            "Shapes of all inputs must match: values[0].shape = [2] != values[1].shape = [3]",
        );
        assert_err(
            pack(vec![t(&[2], vec![1i32, 2]), t(&[2], vec![1i32, 2])], 2),
            Code::InvalidArgument,
            "axis = 2 not in [-2, 2)",
        );
        assert_err(
            pack(vec![t(&[2], vec![1i32, 2])], -3),
            Code::InvalidArgument,
            "axis = -3 not in [-2, 2)",
        );
    }

    // ---- Unpack

    #[test]
    fn unpack_hand_checked() {
        let x = iota(&[3, 2]);
        let r = unpack(x.clone(), 3, 0).unwrap();
        assert_eq!(r.len(), 3);
        for (i, o) in r.iter().enumerate() {
            assert_eq!(o.dims(), &[2]);
            assert_eq!(v::<i32>(o), vec![2 * i as i32, 2 * i as i32 + 1]);
            assert!(o.shares_storage_with(&x), "axis 0 outputs are views");
        }
        let y = iota(&[2, 3]);
        for axis in [1, -1] {
            let r = unpack(y.clone(), 3, axis).unwrap();
            let got: Vec<Vec<i32>> = r.iter().map(v::<i32>).collect();
            assert_eq!(got, vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
        }
        let z = iota(&[2, 3, 2]);
        let r = unpack(z, 3, 1).unwrap();
        assert_eq!(r[1].dims(), &[2, 2]);
        assert_eq!(v::<i32>(&r[1]), vec![2, 3, 8, 9]);
        // Zero outputs, and empty outputs.
        let e = Tensor::zeros(DataType::Float, &[0, 2]).unwrap();
        assert!(unpack(e, 0, 0).unwrap().is_empty());
        let e = Tensor::zeros(DataType::Float, &[2, 0]).unwrap();
        let r = unpack(e, 2, 0).unwrap();
        assert_eq!(r[1].dims(), &[0]);
        // Strings along axis 1, complex along axis 0.
        let s = strs(&[2, 2], &["a", "b", "c", "d"]);
        let r = unpack(s, 2, 1).unwrap();
        assert_eq!(sv(&r[0]), ["a", "c"]);
        assert_eq!(sv(&r[1]), ["b", "d"]);
        let c = t(
            &[2],
            vec![Complex::new(1.0f64, 1.0), Complex::new(2.0, 2.0)],
        );
        let r = unpack(c, 2, 0).unwrap();
        assert_eq!(r[1].dims(), &[] as &[i64]);
        assert_eq!(v::<Complex<f64>>(&r[1]), vec![Complex::new(2.0, 2.0)]);
    }

    #[test]
    fn unpack_errors() {
        assert_err(
            unpack(iota(&[2, 3]), 3, 0),
            Code::InvalidArgument,
            "Input shape axis 0 must equal 3, got shape [2,3]",
        );
        assert_err(
            unpack(iota(&[2, 3]), 2, 2),
            Code::InvalidArgument,
            "axis = 2 not in [-2, 2)",
        );
        assert_err(
            unpack(Tensor::scalar(1i32), 1, 0),
            Code::InvalidArgument,
            "axis = 0 not in [0, 0)",
        );
    }

    // ---- Split

    #[test]
    fn split_hand_checked() {
        let x = iota(&[4, 2]);
        let r = split(0, x.clone(), 2).unwrap();
        assert_eq!(
            (r[0].dims(), v::<i32>(&r[0])),
            (&[2i64, 2][..], vec![0, 1, 2, 3])
        );
        assert_eq!(v::<i32>(&r[1]), vec![4, 5, 6, 7]);
        assert!(r[1].shares_storage_with(&x));
        let y = iota(&[2, 4]);
        for dim in [1, -1] {
            let r = split(dim, y.clone(), 2).unwrap();
            assert_eq!(r[0].dims(), &[2, 2]);
            assert_eq!(v::<i32>(&r[0]), vec![0, 1, 4, 5]);
            assert_eq!(v::<i32>(&r[1]), vec![2, 3, 6, 7]);
        }
        let r = split(1, y.clone(), 4).unwrap();
        assert_eq!(v::<i32>(&r[3]), vec![3, 7]);
        let r = split(-2, y.clone(), 1).unwrap();
        assert!(r[0].shares_storage_with(&y));
        // Empty.
        let e = Tensor::zeros(DataType::Double, &[0, 4]).unwrap();
        let r = split(1, e, 2).unwrap();
        assert_eq!(r[1].dims(), &[0, 2]);
        let e = Tensor::zeros(DataType::Double, &[2, 0]).unwrap();
        let r = split(1, e, 3).unwrap();
        assert_eq!(r[2].dims(), &[2, 0]);
        // Strings and half.
        let s = strs(&[1, 4], &["a", "b", "c", "d"]);
        let r = split(1, s, 2).unwrap();
        assert_eq!(sv(&r[1]), ["c", "d"]);
        let h = t(&[2, 2], [1.0f32, 2.0, 3.0, 4.0].map(f16::from_f32).to_vec());
        let r = split(1, h, 2).unwrap();
        assert_eq!(v::<f16>(&r[1]), [2.0f32, 4.0].map(f16::from_f32).to_vec());
    }

    #[test]
    fn split_errors() {
        assert_err(
            split(0, iota(&[5]), 2),
            Code::InvalidArgument,
            "Number of ways to split should evenly divide the split dimension, but got split_dim 0 (size = 5) and num_split 2",
        );
        assert_err(
            split(2, iota(&[2, 2]), 2),
            Code::InvalidArgument,
            "-input rank(-2) <= split_dim < input rank (2), but got 2",
        );
        assert_err(
            split(-3, iota(&[2, 2]), 2),
            Code::InvalidArgument,
            "but got -3",
        );
        let r = ctx()
            .op("Split")
            .input(t(&[1], vec![0i32]))
            .input(iota(&[2]))
            .attr("num_split", 2i64)
            .run();
        assert_err(
            r,
            Code::InvalidArgument,
            "split_dim must be a scalar but has rank 1",
        );
    }

    // ---- Slice

    #[test]
    fn slice_hand_checked() {
        let x = iota(&[3, 4]);
        let r = slice(x.clone(), vec![1, 1], vec![2, 2]).unwrap();
        assert_eq!(
            (r.dims(), v::<i32>(&r)),
            (&[2i64, 2][..], vec![5, 6, 9, 10])
        );
        let r = slice(x.clone(), vec![1, 2], vec![-1, -1]).unwrap();
        assert_eq!(
            (r.dims(), v::<i32>(&r)),
            (&[2i64, 2][..], vec![6, 7, 10, 11])
        );
        let r = slice(x.clone(), vec![0, 3], vec![3, 1]).unwrap();
        assert_eq!(v::<i32>(&r), vec![3, 7, 11]);
        // Whole rows: a view.
        let r = slice(x.clone(), vec![1, 0], vec![2, -1]).unwrap();
        assert_eq!(
            (r.dims(), v::<i32>(&r)),
            (&[2i64, 4][..], (4..12).collect::<Vec<_>>())
        );
        assert!(r.shares_storage_with(&x));
        // Everything: the input itself.
        let r = slice(x.clone(), vec![0, 0], vec![-1, 4]).unwrap();
        assert!(r.shares_storage_with(&x));
        // Size 0.
        let r = slice(x.clone(), vec![1, 1], vec![0, 2]).unwrap();
        assert_eq!(r.dims(), &[0, 2]);
        let r = slice(x.clone(), vec![3, 4], vec![-1, -1]).unwrap();
        assert_eq!(r.dims(), &[0, 0]);
        // Rank 3, int64 indices.
        let y = iota(&[2, 3, 4]);
        let r = ctx()
            .op("Slice")
            .input(y)
            .input(t(&[3], vec![1i64, 0, 1]))
            .input(t(&[3], vec![1i64, 2, 2]))
            .run1()
            .unwrap();
        assert_eq!(
            (r.dims(), v::<i32>(&r)),
            (&[1i64, 2, 2][..], vec![13, 14, 17, 18])
        );
        // Strings, bools, an empty input.
        let s = strs(&[2, 3], &["a", "b", "c", "d", "e", "f"]);
        let r = slice(s, vec![0, 1], vec![2, 1]).unwrap();
        assert_eq!(sv(&r), ["b", "e"]);
        let b = t(&[4], vec![true, false, false, true]);
        assert_eq!(
            v::<bool>(&slice(b, vec![2], vec![2]).unwrap()),
            vec![false, true]
        );
        let e = Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
        assert_eq!(slice(e, vec![0, 1], vec![0, 2]).unwrap().dims(), &[0, 2]);
        // A scalar.
        let r = slice(Tensor::scalar(7i32), vec![], vec![]).unwrap();
        assert_eq!(v::<i32>(&r), vec![7]);
    }

    #[test]
    fn slice_errors() {
        let x = iota(&[3]);
        assert_err(
            slice(x.clone(), vec![4], vec![0]),
            Code::InvalidArgument,
            "Expected begin[0] in [0, 3], but got 4",
        );
        assert_err(
            slice(x.clone(), vec![-1], vec![1]),
            Code::InvalidArgument,
            "Expected begin[0] in [0, 3], but got -1",
        );
        assert_err(
            slice(x.clone(), vec![0], vec![5]),
            Code::InvalidArgument,
            "Expected size[0] in [0, 3], but got 5",
        );
        assert_err(
            slice(x.clone(), vec![1], vec![-2]),
            Code::InvalidArgument,
            "Expected size[0] in [0, 2], but got -2",
        );
        assert_err(
            slice(iota(&[2, 2]), vec![0], vec![1, 1]),
            Code::InvalidArgument,
            "Expected begin and size arguments to be 1-D tensors of size 2, but got shapes [1] and [2] instead.",
        );
        let e = Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
        assert_err(
            slice(e, vec![1, 0], vec![0, 1]),
            Code::InvalidArgument,
            "Expected begin[0] == 0 (got 1) and size[0] == 0 (got 0) when input.dim_size(0) == 0",
        );
    }

    // ---- Tile

    #[test]
    fn tile_hand_checked() {
        let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
        let r = tile(x.clone(), vec![2, 1]).unwrap();
        assert_eq!(r.dims(), &[4, 3]);
        assert_eq!(v::<i32>(&r), vec![1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6]);
        let r = tile(x.clone(), vec![1, 2]).unwrap();
        assert_eq!(r.dims(), &[2, 6]);
        assert_eq!(v::<i32>(&r), vec![1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]);
        let r = tile(x.clone(), vec![2, 2]).unwrap();
        assert_eq!(r.dims(), &[4, 6]);
        assert_eq!(
            v::<i32>(&r),
            vec![1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]
        );
        let r = tile(x.clone(), vec![1, 1]).unwrap();
        assert!(r.shares_storage_with(&x));
        assert_eq!(tile(x.clone(), vec![0, 2]).unwrap().dims(), &[0, 6]);
        let r = tile(Tensor::scalar(3.5f64), vec![]).unwrap();
        assert_eq!((r.dims(), v::<f64>(&r)), (&[] as &[i64], vec![3.5]));
        // A rank-3 tile checked against out[i][j][k] = in[i % 2][j % 1][k % 2].
        let y = t(&[2, 1, 2], vec![1i64, 2, 3, 4]);
        let r = ctx()
            .op("Tile")
            .input(y.clone())
            .input(t(&[3], vec![2i64, 3, 2]))
            .run1()
            .unwrap();
        assert_eq!(r.dims(), &[4, 3, 4]);
        let got = v::<i64>(&r);
        let yv = v::<i64>(&y);
        for i in 0..4 {
            for j in 0..3 {
                for k in 0..4 {
                    assert_eq!(got[i * 12 + j * 4 + k], yv[(i % 2) * 2 + k % 2]);
                }
            }
        }
        // Strings, bools.
        let r = tile(strs(&[2], &["a", "b"]), vec![3]).unwrap();
        assert_eq!(sv(&r), ["a", "b", "a", "b", "a", "b"]);
        let r = tile(t(&[1, 2], vec![true, false]), vec![2, 1]).unwrap();
        assert_eq!(v::<bool>(&r), vec![true, false, true, false]);
    }

    #[test]
    fn tile_large_shards_correctly() {
        let x = t(&[3, 300], (0..900).map(|k| k as f32).collect());
        let r = tile(x, vec![40, 3]).unwrap();
        assert_eq!(r.dims(), &[120, 900]);
        let got = v::<f32>(&r);
        for i in [0usize, 1, 2, 3, 59, 119] {
            for j in [0usize, 299, 300, 899] {
                assert_eq!(
                    got[i * 900 + j],
                    ((i % 3) * 300 + j % 300) as f32,
                    "({i}, {j})"
                );
            }
        }
    }

    #[test]
    fn tile_errors() {
        assert_err(
            tile(iota(&[2, 2]), vec![1, -1]),
            Code::InvalidArgument,
            "Expected multiples argument to be non-negative, but got -1",
        );
        assert_err(
            tile(iota(&[2, 2]), vec![1, 2, 3]),
            Code::InvalidArgument,
            "Expected multiples argument to be a vector of length 2 but got length 3",
        );
        let r = ctx()
            .op("Tile")
            .input(iota(&[2]))
            .input(Tensor::scalar(2i32))
            .run1();
        assert_err(
            r,
            Code::InvalidArgument,
            "Expected multiples argument to be a vector of length 1",
        );
        assert_err(
            tile(iota(&[2, 2]), vec![i32::MAX, i32::MAX]).map(|_| ()),
            Code::InvalidArgument,
            "",
        );
    }

    // ---- Pad / PadV2

    #[test]
    fn pad_hand_checked() {
        let x = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
        let r = pad(x.clone(), vec![1, 0, 0, 2]).unwrap();
        assert_eq!(r.dims(), &[3, 5]);
        assert_eq!(
            v::<f32>(&r),
            vec![0., 0., 0., 0., 0., 1., 2., 3., 0., 0., 4., 5., 6., 0., 0.]
        );
        let r = pad_v2(x.clone(), vec![0, 1, 1, 1], Tensor::scalar(9f32)).unwrap();
        assert_close(
            &r,
            &[3, 5],
            &[9., 1., 2., 3., 9., 9., 4., 5., 6., 9., 9., 9., 9., 9., 9.],
            0.0,
        );
        let h = |x: f32| f16::from_f32(x);
        let r = pad_v2(t(&[1], vec![h(0.5)]), vec![1, 0], Tensor::scalar(h(-1.0))).unwrap();
        assert_close(&r, &[2], &[-1.0, 0.5], 0.0);
        // int64 paddings.
        let r = ctx()
            .op("Pad")
            .input(t(&[2], vec![7i32, 8]))
            .input(t(&[1, 2], vec![2i64, 1]))
            .run1()
            .unwrap();
        assert_eq!(v::<i32>(&r), vec![0, 0, 7, 8, 0]);
        // No padding: the input itself.
        let r = pad(x.clone(), vec![0, 0, 0, 0]).unwrap();
        assert!(r.shares_storage_with(&x));
        // Empty input, scalar input.
        let e = Tensor::zeros(DataType::Int32, &[0, 2]).unwrap();
        let r = pad_v2(e.clone(), vec![1, 1, 0, 0], Tensor::scalar(5i32)).unwrap();
        assert_eq!((r.dims(), v::<i32>(&r)), (&[2i64, 2][..], vec![5; 4]));
        let r = pad(e, vec![0, 0, 1, 1]).unwrap();
        assert_eq!(r.dims(), &[0, 4]);
        let r = ctx()
            .op("Pad")
            .input(Tensor::scalar(3u8))
            .input(Tensor::zeros(DataType::Int32, &[0, 2]).unwrap())
            .run1()
            .unwrap();
        assert_eq!((r.dims(), v::<u8>(&r)), (&[] as &[i64], vec![3]));
        // Strings, bools, complex.
        let r = pad_v2(
            strs(&[1, 2], &["a", "b"]),
            vec![0, 0, 1, 0],
            strs(&[], &["x"]),
        )
        .unwrap();
        assert_eq!(sv(&r), ["x", "a", "b"]);
        let r = pad(strs(&[1], &["a"]), vec![1, 1]).unwrap();
        assert_eq!(sv(&r), ["", "a", ""]);
        let r = pad(t(&[1], vec![true]), vec![1, 1]).unwrap();
        assert_eq!(v::<bool>(&r), vec![false, true, false]);
        let r = pad_v2(
            t(&[1], vec![Complex::new(1f32, 2.)]),
            vec![0, 1],
            Tensor::scalar(Complex::new(3f32, 4.)),
        )
        .unwrap();
        assert_eq!(
            v::<Complex<f32>>(&r),
            vec![Complex::new(1., 2.), Complex::new(3., 4.)]
        );
    }

    #[test]
    fn pad_rank3_against_a_formula() {
        let (d0, d1, d2) = (2usize, 3usize, 4usize);
        let pads = [(1usize, 2usize), (0, 1), (2, 0)];
        let x = iota(&[d0 as i64, d1 as i64, d2 as i64]);
        let flat: Vec<i32> = pads
            .iter()
            .flat_map(|&(b, a)| [b as i32, a as i32])
            .collect();
        let r = pad_v2(x, flat, Tensor::scalar(-1i32)).unwrap();
        let o = [d0 + 3, d1 + 1, d2 + 2];
        assert_eq!(r.dims(), &[o[0] as i64, o[1] as i64, o[2] as i64]);
        let got = v::<i32>(&r);
        let mut k = 0;
        for i in 0..o[0] {
            for j in 0..o[1] {
                for l in 0..o[2] {
                    let inside = (pads[0].0..pads[0].0 + d0).contains(&i)
                        && (pads[1].0..pads[1].0 + d1).contains(&j)
                        && (pads[2].0..pads[2].0 + d2).contains(&l);
                    let want = if inside {
                        (((i - pads[0].0) * d1 + (j - pads[1].0)) * d2 + (l - pads[2].0)) as i32
                    } else {
                        -1
                    };
                    assert_eq!(got[k], want, "({i}, {j}, {l})");
                    k += 1;
                }
            }
        }
        // Large: sharded.
        let y = t(&[200, 300], vec![1u16; 60000]);
        let r = pad(y, vec![1, 2, 3, 4]).unwrap();
        assert_eq!(r.dims(), &[203, 307]);
        let got = v::<u16>(&r);
        let sum: u64 = got.iter().map(|&x| x as u64).sum();
        assert_eq!(sum, 60000);
        assert_eq!((got[307], got[307 + 3], got[307 + 302]), (0, 1, 1));
    }

    #[test]
    fn pad_errors() {
        let x = iota(&[2, 3]);
        assert_err(
            pad(x.clone(), vec![-1, 0, 0, 0]),
            Code::InvalidArgument,
            "Paddings must be non-negative: -1 0",
        );
        let r = ctx().op("Pad").input(x.clone()).input(iota(&[2, 3])).run1();
        assert_err(
            r,
            Code::InvalidArgument,
            "paddings must be a matrix with 2 columns: [2,3]",
        );
        assert_err(
            pad(x.clone(), vec![0, 0]),
            Code::InvalidArgument,
            "The first dimension of paddings must be the rank of inputs[1,2], [2,3]",
        );
        assert_err(
            pad_v2(x, vec![0, 0, 0, 0], t(&[2], vec![0i32, 1])),
            Code::InvalidArgument,
            "constant_values must be a scalar. Found: [2]",
        );
    }

    // ---- Helpers

    #[test]
    fn strided_views_merge_contiguous_dims() {
        // A [2, 3, 4] tensor, rows 0..2, all columns: one contiguous run.
        let v = StridedView::of_slice(&[2, 3, 4], &[0, 0, 0], &[2, 3, 4], &[1, 1, 1]);
        assert_eq!(
            (v.sizes.as_slice(), v.strides.as_slice()),
            (&[24usize][..], &[1i64][..])
        );
        // x[:, 1:3, :] keeps two dims; x[1, :, ::-1] reverses rows of 4.
        let v = StridedView::of_slice(&[2, 3, 4], &[0, 1, 0], &[2, 2, 4], &[1, 1, 1]);
        assert_eq!(
            (v.base, v.sizes.as_slice(), v.strides.as_slice()),
            (4, &[2usize, 8][..], &[12i64, 1][..])
        );
        let v = StridedView::of_slice(&[2, 3, 4], &[1, 0, 3], &[1, 3, 4], &[1, 1, -1]);
        assert_eq!(
            (v.base, v.sizes.as_slice(), v.strides.as_slice()),
            (15, &[3usize, 4][..], &[4i64, -1][..])
        );
        let pool = ThreadPool::new(1).unwrap();
        let src: Vec<u32> = (0..24).collect();
        let mut out = vec![0u32; 12];
        gather(&pool, &src, &v, &mut out);
        assert_eq!(out, vec![15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20]);
    }

    #[test]
    fn concat_rows_pieces_and_rows_agree() {
        // The same concat computed with the few-long-rows path (2 threads)
        // and the sequential path (1 thread).
        let a: Vec<u64> = (0..50_000).collect();
        let b: Vec<u64> = (0..30_000).map(|x| x + 1_000_000).collect();
        for (rows, pool_threads) in [(1usize, 2usize), (2, 2), (10, 2), (1, 1), (10, 1)] {
            let pool = ThreadPool::new(pool_threads).unwrap();
            let (la, lb) = (a.len() / rows, b.len() / rows);
            let mut out = vec![0u64; a.len() + b.len()];
            concat_rows(&pool, &[&a, &b], &[la, lb], &mut out);
            for r in 0..rows {
                let row = &out[r * (la + lb)..(r + 1) * (la + lb)];
                assert_eq!(&row[..la], &a[r * la..(r + 1) * la]);
                assert_eq!(&row[la..], &b[r * lb..(r + 1) * lb]);
            }
        }
    }

    #[test]
    fn every_op_is_registered_with_kernels() {
        let registry = opforge_core::OpRegistry::global();
        let kernels = opforge_core::kernel::KernelRegistry::global();
        for op in OPS {
            assert!(registry.lookup(op).is_ok(), "{op}");
            assert_eq!(kernels.kernels_for(op).len(), 1, "{op}");
        }
        let pad = &kernels.kernels_for("PadV2")[0].def;
        assert_eq!(pad.host_memory_args, ["paddings", "constant_values"]);
        assert!(pad.constraints[0].1.contains(&DataType::String));
        assert!(pad.constraints[0].1.contains(&DataType::QUInt16));
        assert!(!pad.constraints[0].1.contains(&DataType::Resource));
    }
}

#[cfg(test)]
mod shape_fn_tests {
    use opforge_core::shape_inference::testutil::ShapeTestOp;
    use opforge_core::{infer_error, infer_ok, DataType, Tensor};

    fn ints(v: &[i32]) -> Tensor {
        Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
    }

    fn concat(n: i64) -> ShapeTestOp {
        ShapeTestOp::new("ConcatV2")
            .attr("N", n)
            .attr("T", DataType::Float)
    }

    #[test]
    fn concat_v2_shape_fn() {
        let op = concat(2);
        infer_ok!(op, "?;?;[]", "?");
        infer_ok!(op, "?;[1,?];[]", "[?,?]");
        infer_error!(op, "[1];[2];[1]", "Shape must be rank 0 but is rank 1");
        infer_error!(
            op,
            "[];?;[]",
            "Can't concatenate scalars (use tf.stack instead)"
        );
        infer_error!(op, "[1,2];[1,2,3];[]", "Shape must be rank 2 but is rank 3");
        let with = |n: i64, axis: i32| concat(n).input_tensor(n as usize, Tensor::scalar(axis));
        infer_ok!(with(2, 0), "[1,2];[3,2];[]", "[4,d0_1|d1_1]");
        infer_ok!(with(2, 0), "[1,?];[3,2];[]", "[4,d1_1]");
        infer_ok!(with(2, 1), "[?,2];[3,?];[]", "[d1_0,?]");
        infer_ok!(with(2, -1), "[5,2];[5,3];[]", "[d0_0|d1_0,5]");
        infer_ok!(with(3, 0), "?;[2,3];?;[]", "[?,d1_1]");
        infer_ok!(with(2, 0), "?;?;[]", "?");
        infer_error!(
            with(2, 0),
            "[1,2];[3,4];[]",
            "Dimension 0 in both shapes must be equal, but are 2 and 4"
        );
        infer_error!(
            with(2, 2),
            "[1,2];[3,4];[]",
            "Shape must be at least rank 3 but is rank 2"
        );
        infer_error!(
            concat(2).input_tensor(2, ints(&[])),
            "[1];[1];[]",
            "axis must be a scalar"
        );
    }

    #[test]
    fn pack_unpack_shape_fns() {
        let pack = |axis: i64| {
            ShapeTestOp::new("Pack")
                .attr("N", 2i64)
                .attr("T", DataType::Float)
                .attr("axis", axis)
        };
        infer_ok!(pack(0), "?;?", "?");
        infer_ok!(pack(0), "[];?", "[2]");
        infer_ok!(pack(0), "[2,?];[?,3]", "[2,d0_0,d1_1]");
        infer_ok!(pack(1), "[2,3];?", "[d0_0,2,d0_1]");
        infer_ok!(pack(-1), "[2,3];[2,3]", "[d0_0,d0_1,2]");
        infer_error!(pack(3), "[2,3];?", "Invalid axis: 3; must be in [-3,3)");
        infer_error!(pack(-4), "[2,3];?", "Invalid axis: -4; must be in [-3,3)");
        infer_error!(
            pack(0),
            "[2,3];[2,4]",
            "Dimension 1 in both shapes must be equal, but are 3 and 4"
        );
        infer_error!(
            pack(0),
            "[2,3];[2]",
            "From merging shape 0 with other shapes."
        );
        let unpack = |num: i64, axis: i64| {
            ShapeTestOp::new("Unpack")
                .attr("num", num)
                .attr("T", DataType::Float)
                .attr("axis", axis)
        };
        infer_ok!(unpack(2, 0), "?", "?;?");
        infer_ok!(unpack(2, 0), "[2,?,3]", "[d0_1,d0_2];[d0_1,d0_2]");
        infer_ok!(unpack(2, 1), "[4,?,3]", "[d0_0,d0_2];[d0_0,d0_2]");
        infer_ok!(
            unpack(3, -1),
            "[4,?,3]",
            "[d0_0,d0_1];[d0_0,d0_1];[d0_0,d0_1]"
        );
        infer_ok!(unpack(0, 0), "[0,2]", "");
        infer_error!(unpack(2, 0), "[3,2]", "Dimension must be 2 but is 3");
        infer_error!(unpack(1, 0), "[]", "Invalid axis: 0; must be in [0,0)");
        infer_error!(unpack(1, 2), "[1,1]", "Invalid axis: 2; must be in [-2,2)");
    }

    #[test]
    fn split_shape_fn() {
        let op = ShapeTestOp::new("Split")
            .attr("num_split", 2i64)
            .attr("T", DataType::Float);
        infer_ok!(op, "?;?", "?;?");
        infer_ok!(op, "[];[4,?]", "[?,?];[?,?]");
        let with = |d: i32| op.clone().input_tensor(0, Tensor::scalar(d));
        infer_ok!(with(0), "[];[4,?]", "[2,d1_1];[2,d1_1]");
        infer_ok!(with(-1), "[];[4,?]", "[d1_0,?];[d1_0,?]");
        infer_ok!(with(1), "[];?", "?;?");
        infer_ok!(with(-1), "[];?", "?;?");
        infer_error!(
            with(0),
            "[];[5,?]",
            "Dimension size must be evenly divisible by 2 but is 5"
        );
        infer_error!(
            with(0),
            "[];[5,?]",
            "Number of ways to split should evenly divide the split dimension"
        );
        infer_error!(
            with(2),
            "[];[4,?]",
            "Dimension size, given by scalar input 2 must be in range [-2, 2)"
        );
        infer_error!(
            with(-3),
            "[];[4,?]",
            "Dimension size, given by scalar input -3 must be in range [-2, 2)"
        );
        infer_error!(
            op.clone().input_tensor(0, ints(&[0])),
            "[1];[4]",
            "Input must be scalar but has rank 1"
        );
    }

    #[test]
    fn slice_shape_fn() {
        let op = ShapeTestOp::new("Slice");
        infer_ok!(op, "?;?;?", "?");
        infer_ok!(op, "[2,3];?;?", "[?,?]");
        infer_ok!(op, "?;[2];[2]", "[?,?]");
        infer_ok!(op, "?;[2];?", "[?,?]");
        infer_error!(op, "[2,3];[2,1];[2]", "Shape must be rank 1 but is rank 2");
        infer_error!(op, "[2,3];[3];[3]", "Shape must be rank 3 but is rank 2");
        infer_error!(
            op,
            "?;[2];[3]",
            "Dimension 0 in both shapes must be equal, but are 2 and 3"
        );
        let with = |begin: &[i32], size: &[i32]| {
            ShapeTestOp::new("Slice")
                .input_tensor(1, ints(begin))
                .input_tensor(2, ints(size))
        };
        infer_ok!(with(&[0, 1], &[2, 1]), "[2,3];[2];[2]", "[2,1]");
        infer_ok!(with(&[0, 1], &[-1, -1]), "[2,?];[2];[2]", "[d0_0,?]");
        infer_ok!(with(&[1, 1], &[-1, -1]), "[2,3];[2];[2]", "[1,2]");
        infer_ok!(with(&[0, 0], &[1, -1]), "?;[2];[2]", "[1,?]");
        infer_error!(
            with(&[0, 4], &[1, -1]),
            "[2,3];[2];[2]",
            "Negative dimension size caused by subtracting 4 from 3"
        );
        infer_error!(
            with(&[0, 0], &[1, -2]),
            "[2,3];[2];[2]",
            "Out of bounds slicing on dimension 1 of length 3: sizes vector cannot be < -1, but was -2"
        );
        // Only `size` known: the begin is not needed for explicit sizes.
        let sizes_only = ShapeTestOp::new("Slice").input_tensor(2, ints(&[1, 2]));
        infer_ok!(sizes_only, "[4,5];[2];[2]", "[1,2]");
        let sizes_only = ShapeTestOp::new("Slice").input_tensor(2, ints(&[1, -1]));
        infer_ok!(sizes_only, "[4,5];[2];[2]", "[1,?]");
    }

    #[test]
    fn tile_shape_fn() {
        let op = ShapeTestOp::new("Tile");
        infer_ok!(op, "?;?", "?");
        infer_ok!(op, "[2,3];?", "[?,?]");
        infer_ok!(op, "?;[2]", "[?,?]");
        infer_error!(op, "[2,3];[3]", "Shape must be rank 2 but is rank 3");
        infer_error!(op, "[2,3];[2,1]", "Shape must be rank 1 but is rank 2");
        let with = |m: Tensor| ShapeTestOp::new("Tile").input_tensor(1, m);
        infer_ok!(with(ints(&[1, 3])), "[2,?];[2]", "[d0_0,?]");
        infer_ok!(with(ints(&[2, 3])), "[2,4];[2]", "[4,12]");
        infer_ok!(with(ints(&[0, 3])), "[?,4];[2]", "[0,12]");
        infer_ok!(
            with(Tensor::from_vec(&[2], vec![2i64, 1]).unwrap()),
            "?;[2]",
            "[?,?]"
        );
        infer_ok!(with(ints(&[-1, 2])), "[5,1];[2]", "[?,2]");
    }

    #[test]
    fn pad_shape_fns() {
        for (name, ins) in [("Pad", ""), ("PadV2", ";[]")] {
            let op = ShapeTestOp::new(name);
            let i = |s: &str| format!("{s}{ins}");
            infer_ok!(op, &i("?;?"), "?");
            infer_ok!(op, &i("[2,?];?"), "[?,?]");
            infer_ok!(op, &i("?;[3,2]"), "[?,?,?]");
            infer_error!(op, &i("?;[3]"), "Shape must be rank 2 but is rank 1");
            infer_error!(op, &i("?;[3,3]"), "Dimension must be 2 but is 3");
            infer_error!(op, &i("[1,2];[3,2]"), "Shape must be rank 3 but is rank 2");
            infer_ok!(op, &i("[1,2];[?,2]"), "[?,?]");
            let pads = Tensor::from_vec(&[2, 2], vec![1i32, 2, 0, 0]).unwrap();
            let op = ShapeTestOp::new(name).input_tensor(1, pads);
            infer_ok!(op, &i("[4,?];[2,2]"), "[7,d0_1]");
            infer_ok!(op, &i("?;?"), "[?,?]");
            let pads = Tensor::from_vec(&[1, 2], vec![-1i64, 2]).unwrap();
            let op = ShapeTestOp::new(name).input_tensor(1, pads);
            infer_error!(op, &i("[4];[1,2]"), "Paddings must be non-negative");
        }
    }
}
