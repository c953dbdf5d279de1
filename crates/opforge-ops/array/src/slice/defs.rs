//! The OpDefs and shape functions of the joining, splitting, slicing and padding ops.

use super::*;
use opforge_ops_base::shape::pad_shape;

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
pub(super) fn concat_v2_shape(c: &mut InferenceContext) -> Result<()> {
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
pub(super) fn pack_axis(c: &InferenceContext, rank_after_pack: i64) -> Result<usize> {
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
pub(super) fn pack_shape(c: &mut InferenceContext) -> Result<()> {
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
pub(super) fn unpack_shape(c: &mut InferenceContext) -> Result<()> {
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
pub(super) fn axis_dim_for_scalar_input(
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
pub(super) fn split_shape(c: &mut InferenceContext) -> Result<()> {
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
pub(super) fn slice_shape(c: &mut InferenceContext) -> Result<()> {
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
pub(super) fn tile_shape(c: &mut InferenceContext) -> Result<()> {
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
