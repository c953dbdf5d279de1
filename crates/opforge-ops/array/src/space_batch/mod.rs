//! Moving data between space and batch or depth: `SpaceToBatch(ND)`,
//! `BatchToSpace(ND)`, `SpaceToDepth`, `DepthToSpace` and
//! `ExtractImagePatches`: OpDefs and shape functions (here), TensorFlow's
//! CPU kernels, as bodies of the element mover (`batch`: the four
//! space/batch ops on one engine; `depth`; `patches`), and the
//! gradients of `array_grad.py` (`gradients`).

mod batch;
mod depth;
mod gradients;
mod patches;
mod rows;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod gradient_tests;

use depth::DepthSpaceParams;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext, ShapeHandle};
use opforge_core::{register_op, OpDefBuilder, Result, Status};
use opforge_ops_base::args::int_values;
use opforge_ops_base::shape::*;
use opforge_ops_base::types::NUMERIC_KERNEL_TYPES;

opforge_ops_base::dtype_table! {
    /// `ExtractImagePatches`' `T`, in TensorFlow's order: its kernel runs
    /// every numeric type; `bool` has none.
    PATCHES_SPEC = NUMERIC_KERNEL_TYPES, no_kernel [Bool] in [
        BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
        Complex64, Complex128, Bool
    ]
}

/// The block shape and the number of block dims of a space/batch op.
fn num_block_dims(c: &mut InferenceContext, block_shape_shape: ShapeHandle) -> Result<usize> {
    if c.rank(block_shape_shape) != Some(1) {
        return Err(Status::invalid_argument("block_shape must have rank 1."));
    }
    let d = c.dim(block_shape_shape, 0);
    let Some(n) = c.value(d) else {
        return Err(Status::invalid_argument(
            "block_shape must have known size.",
        ));
    };
    // The input must have rank n + 1 at least.
    rank_arg(n.saturating_add(1))?;
    Ok(n as usize)
}

/// TensorFlow's `SpaceToBatchShapeHelper`. `block` is the block shape's
/// value (if known); `paddings` the paddings' value.
fn space_to_batch_helper(
    c: &mut InferenceContext,
    input_shape: ShapeHandle,
    block_shape_shape: ShapeHandle,
    block: Option<Vec<i64>>,
    paddings_shape: ShapeHandle,
    paddings: Option<Vec<i64>>,
) -> Result<()> {
    let n = num_block_dims(c, block_shape_shape)?;
    let input_shape = c.with_rank_at_least(input_shape, n + 1)?;
    let m = c.matrix(n as i64, 2);
    c.merge(paddings_shape, m)?;
    let mut batch = c.dim(input_shape, 0);
    match &block {
        Some(b) if !b.is_empty() => {
            for dim in 0..n {
                let v = at(b, dim, "block_shape", n)?;
                if v < 1 {
                    return Err(Status::invalid_argument("block_shape must be positive"));
                }
                batch = if c.value(batch).is_some() {
                    c.multiply(batch, v)?
                } else {
                    c.unknown_dim()
                };
            }
        }
        _ if n > 0 => batch = c.unknown_dim(),
        _ => {}
    }
    let unknown = c.unknown_dim();
    let mut out = vec![unknown; n + 1];
    out[0] = batch;
    if let Some(p) = paddings.filter(|p| !p.is_empty()) {
        for dim in 0..n {
            let (start, end) = (
                at(&p, 2 * dim, "paddings", 2 * n)?,
                at(&p, 2 * dim + 1, "paddings", 2 * n)?,
            );
            if start < 0 || end < 0 {
                return Err(Status::invalid_argument("paddings cannot be negative"));
            }
            if let Some(b) = &block {
                let d = c.dim(input_shape, dim as i64 + 1);
                let padded = c.add(d, start)?;
                let padded = c.add(padded, end)?;
                out[dim + 1] = c.divide(padded, at(b, dim, "block_shape", n)?, true)?;
            }
        }
    }
    let rest = c.subshape(input_shape, 1 + n as i64, None)?;
    let head = c.make_shape_from_dims(out);
    let result = c.concatenate(head, rest)?;
    c.set_output(0, result);
    Ok(())
}

/// TensorFlow's `BatchToSpaceShapeHelper`. `block` is the block shape's
/// value (if known); `crops` the crops' value.
fn batch_to_space_helper(
    c: &mut InferenceContext,
    input_shape: ShapeHandle,
    block_shape_shape: ShapeHandle,
    block: Option<Vec<i64>>,
    crops_shape: ShapeHandle,
    crops: Option<Vec<i64>>,
) -> Result<()> {
    let n = num_block_dims(c, block_shape_shape)?;
    let input_shape = c.with_rank_at_least(input_shape, n + 1)?;
    let m = c.matrix(n as i64, 2);
    c.merge(crops_shape, m)?;
    let mut batch = c.dim(input_shape, 0);
    match &block {
        Some(b) => {
            for dim in 0..n {
                let v = at(b, dim, "block_shape", n)?;
                if v < 1 {
                    return Err(Status::invalid_argument("block_shape must be positive"));
                }
                batch = if c.value(batch).is_some() {
                    c.divide(batch, v, true)?
                } else {
                    c.unknown_dim()
                };
            }
        }
        None if n > 0 => batch = c.unknown_dim(),
        None => {}
    }
    let unknown = c.unknown_dim();
    let mut out = vec![unknown; n + 1];
    out[0] = batch;
    if let Some(cr) = crops {
        for dim in 0..n {
            let (start, end) = (
                at(&cr, 2 * dim, "crops", 2 * n)?,
                at(&cr, 2 * dim + 1, "crops", 2 * n)?,
            );
            if start < 0 || end < 0 {
                return Err(Status::invalid_argument("crops cannot be negative"));
            }
            if let Some(b) = &block {
                let d = c.dim(input_shape, dim as i64 + 1);
                let size = c.multiply(d, at(b, dim, "block_shape", n)?)?;
                let size = c.subtract(size, start)?;
                out[dim + 1] = c.subtract(size, end)?;
            }
        }
    }
    let rest = c.subshape(input_shape, 1 + n as i64, None)?;
    let head = c.make_shape_from_dims(out);
    let result = c.concatenate(head, rest)?;
    c.set_output(0, result);
    Ok(())
}

/// The value of constant input `i` as integers, if known.
fn const_ints(c: &InferenceContext, i: usize, what: &str) -> Result<Option<Vec<i64>>> {
    c.input_tensor(i).map(|t| int_values(t, what)).transpose()
}

register_op!(OpDefBuilder::new("SpaceToBatchND")
    .input("input: T")
    .input("block_shape: Tblock_shape")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tblock_shape: {int32, int64} = DT_INT32")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(3, space_to_batch_nd_shape))
    .doc(
        "SpaceToBatch for N-D tensors of type T.\n\n\
         Zero-pads the spatial dimensions, then moves blocks of them into the batch dimension.",
    ));

fn space_to_batch_nd_shape(c: &mut InferenceContext) -> Result<()> {
    let (input, block_shape, paddings) = (c.input(0), c.input(1), c.input(2));
    let block = const_ints(c, 1, "block_shape")?;
    let pads = const_ints(c, 2, "paddings")?;
    space_to_batch_helper(c, input, block_shape, block, paddings, pads)
}

register_op!(OpDefBuilder::new("SpaceToBatch")
    .input("input: T")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .attr("block_size: int >= 2")
    .set_shape_fn(with_inputs(2, space_to_batch_shape))
    .doc(
        "SpaceToBatch for 4-D tensors of type T.\n\n\
         `SpaceToBatchND` with a block of `block_size` x `block_size`.",
    ));

fn space_to_batch_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let input = c.with_rank(i, 4)?;
    let block_size: i32 = c.get_attr("block_size")?;
    let block_shape = c.make_shape(&[2.into()]);
    let paddings = c.input(1);
    let pads = const_ints(c, 1, "paddings")?;
    let b = i64::from(block_size);
    space_to_batch_helper(c, input, block_shape, Some(vec![b, b]), paddings, pads)
}

register_op!(OpDefBuilder::new("BatchToSpaceND")
    .input("input: T")
    .input("block_shape: Tblock_shape")
    .input("crops: Tcrops")
    .output("output: T")
    .attr("T: type")
    .attr("Tblock_shape: {int32, int64} = DT_INT32")
    .attr("Tcrops: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(3, batch_to_space_nd_shape))
    .doc(
        "BatchToSpace for N-D tensors of type T.\n\n\
         Moves blocks of the batch dimension back into the spatial dimensions, then crops them.",
    ));

fn batch_to_space_nd_shape(c: &mut InferenceContext) -> Result<()> {
    let (input, block_shape, crops) = (c.input(0), c.input(1), c.input(2));
    let block = const_ints(c, 1, "block_shape")?;
    let cr = const_ints(c, 2, "crops")?;
    batch_to_space_helper(c, input, block_shape, block, crops, cr)
}

register_op!(OpDefBuilder::new("BatchToSpace")
    .input("input: T")
    .input("crops: Tidx")
    .output("output: T")
    .attr("T: type")
    .attr("block_size: int >= 2")
    .attr("Tidx: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(2, batch_to_space_shape))
    .doc(
        "BatchToSpace for 4-D tensors of type T.\n\n\
         `BatchToSpaceND` with a block of `block_size` x `block_size`.",
    ));

fn batch_to_space_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let input = c.with_rank(i, 4)?;
    let block_size: i32 = c.get_attr("block_size")?;
    let block_shape = c.make_shape(&[2.into()]);
    let crops = c.input(1);
    let cr = const_ints(c, 1, "crops")?;
    let b = i64::from(block_size);
    batch_to_space_helper(c, input, block_shape, Some(vec![b, b]), crops, cr)
}

/// A data format of the depth/space ops: the rank and the indices of the
/// batch, height, width and (outer) channel dims.
fn image_format(name: &str) -> Result<(usize, [i64; 4])> {
    match name {
        "NHWC" => Ok((4, [0, 1, 2, 3])),
        "NCHW" => Ok((4, [0, 2, 3, 1])),
        "NCHW_VECT_C" => Ok((5, [0, 2, 3, 1])),
        other => Err(Status::invalid_argument(format!(
            "Invalid data format string: {other}"
        ))),
    }
}

/// TensorFlow's `MakeShapeFromFormat` for two spatial dims.
fn shape_from_format(
    c: &mut InferenceContext,
    format: &str,
    [n, h, w, ch]: [DimensionHandle; 4],
) -> ShapeHandle {
    match format {
        "NHWC" => c.make_shape_from_dims(vec![n, h, w, ch]),
        "NCHW" => c.make_shape_from_dims(vec![n, ch, h, w]),
        _ => {
            let four = c.make_dim(4);
            c.make_shape_from_dims(vec![n, ch, h, w, four])
        }
    }
}

/// Reads the depth/space ops' input dims: `[batch, height, width, depth]`,
/// the format and the block size.
fn depth_space_inputs(c: &mut InferenceContext) -> Result<([DimensionHandle; 4], String, i64)> {
    let format: String = c.get_attr("data_format")?;
    let (rank, idx) = image_format(&format)?;
    let i = c.input(0);
    let input = c.with_rank(i, rank)?;
    let block_size: i32 = c.get_attr("block_size")?;
    let dims = idx.map(|k| c.dim(input, k));
    Ok((dims, format, i64::from(block_size)))
}

register_op!(OpDefBuilder::new("SpaceToDepth")
    .input("input: T")
    .output("output: T")
    .attr("T: type")
    .params::<DepthSpaceParams>()
    .set_shape_fn(with_inputs(1, space_to_depth_shape))
    .doc(
        "SpaceToDepth for tensors of type T.\n\n\
         Moves `block_size` x `block_size` blocks of the spatial dims into the depth dim.",
    ));

fn space_to_depth_shape(c: &mut InferenceContext) -> Result<()> {
    let ([n, h, w, d], format, block) = depth_space_inputs(c)?;
    let oh = c.divide(h, block, true)?;
    let ow = c.divide(w, block, true)?;
    let sq = block
        .checked_mul(block)
        .ok_or_else(|| Status::invalid_argument("block_size is too large"))?;
    let od = c.multiply(d, sq)?;
    let out = shape_from_format(c, &format, [n, oh, ow, od]);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("DepthToSpace")
    .input("input: T")
    .output("output: T")
    .attr("T: type")
    .params::<DepthSpaceParams>()
    .set_shape_fn(with_inputs(1, depth_to_space_shape))
    .doc(
        "DepthToSpace for tensors of type T.\n\n\
         Moves depth data into `block_size` x `block_size` blocks of the spatial dims.",
    ));

fn depth_to_space_shape(c: &mut InferenceContext) -> Result<()> {
    let ([n, h, w, d], format, block) = depth_space_inputs(c)?;
    let oh = c.multiply(h, block)?;
    let ow = c.multiply(w, block)?;
    let sq = block
        .checked_mul(block)
        .ok_or_else(|| Status::invalid_argument("block_size is too large"))?;
    let od = c.divide(d, sq, true)?;
    let out = shape_from_format(c, &format, [n, oh, ow, od]);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("ExtractImagePatches")
    .input("images: T")
    .output("patches: T")
    .attr("ksizes: list(int) >= 4")
    .attr("strides: list(int) >= 4")
    .attr("rates: list(int) >= 4")
    .attr(format!("T: {{{PATCHES_SPEC}}}"))
    .attr("padding: {'SAME', 'VALID'}")
    .set_shape_fn(with_inputs(1, extract_image_patches_shape))
    .doc(
        "Extract `patches` from `images` and put them in the \"depth\" output dimension.\n\n\
         Each patch of `ksizes` (sampled every `rates`, placed every `strides`) becomes a \
         depth vector.",
    ));

/// TensorFlow's `GetWindowedOutputSizeVerbose` without dilation: the output
/// size of a window of `filter` moved by `stride` over `input` elements.
pub(crate) fn windowed_output_size(
    input: i64,
    filter: i64,
    stride: i64,
    padding: &str,
) -> Result<i64> {
    if stride <= 0 {
        return Err(Status::invalid_argument(format!(
            "Stride must be > 0, but got {stride}"
        )));
    }
    let overflow = || Status::invalid_argument("Windowed output size overflows int64");
    let out = match padding {
        "VALID" => {
            input
                .checked_sub(filter)
                .and_then(|v| v.checked_add(stride))
                .ok_or_else(overflow)?
                / stride
        }
        _ => input.checked_add(stride - 1).ok_or_else(overflow)? / stride,
    };
    if out < 0 {
        return Err(Status::invalid_argument(format!(
            "Computed output size would be negative: {out} [input_size: {input}, \
             effective_filter_size: {filter}, stride: {stride}]"
        )));
    }
    Ok(out)
}

/// A `list(int)` attr that must have 4 values.
fn four_ints(c: &InferenceContext, name: &str, what: &str) -> Result<Vec<i64>> {
    let v: Vec<i64> = c.get_attr(name)?;
    if v.len() != 4 {
        return Err(Status::invalid_argument(format!(
            "ExtractImagePatches requires the {what} attribute to contain 4 values, but got: {}",
            v.len()
        )));
    }
    Ok(v)
}

fn extract_image_patches_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let input = c.with_rank(i, 4)?;
    let ksizes = four_ints(c, "ksizes", "ksizes")?;
    let strides = four_ints(c, "strides", "stride")?;
    let rates = four_ints(c, "rates", "rates")?;
    let overflow = || Status::invalid_argument("ExtractImagePatches sizes overflow");
    // ksize + (ksize - 1) * (rate - 1)
    let effective = |k: i64, r: i64| -> Result<i64> {
        // Checked throughout: the attrs are any i64 (i64::MIN included).
        k.checked_sub(1)
            .zip(r.checked_sub(1))
            .and_then(|(k1, r1)| k1.checked_mul(r1))
            .and_then(|v| v.checked_add(k))
            .ok_or_else(overflow)
    };
    let k_rows_eff = effective(ksizes[1], rates[1])?;
    let k_cols_eff = effective(ksizes[2], rates[2])?;
    let batch = c.dim(input, 0);
    let (in_rows, in_cols) = (c.dim(input, 1), c.dim(input, 2));
    let depth = c.dim(input, 3);
    let k_area = ksizes[1].checked_mul(ksizes[2]).ok_or_else(overflow)?;
    let out_depth = c.multiply(depth, k_area)?;
    let (Some(rows), Some(cols)) = (c.value(in_rows), c.value(in_cols)) else {
        let (r, cl) = (c.unknown_dim(), c.unknown_dim());
        let out = c.make_shape_from_dims(vec![batch, r, cl, out_depth]);
        c.set_output(0, out);
        return Ok(());
    };
    let padding: String = c.get_attr("padding")?;
    if !matches!(padding.as_str(), "SAME" | "VALID" | "EXPLICIT") {
        return Err(Status::not_found(format!(
            "{padding} is not an allowed padding type"
        )));
    }
    let out_rows = windowed_output_size(rows, k_rows_eff, strides[1], &padding)?;
    let out_cols = windowed_output_size(cols, k_cols_eff, strides[2], &padding)?;
    let (r, cl) = (c.make_dim(out_rows), c.make_dim(out_cols));
    let out = c.make_shape_from_dims(vec![batch, r, cl, out_depth]);
    c.set_output(0, out);
    Ok(())
}
