//! The gradients of the space/batch/depth ops, as TensorFlow's
//! `array_grad.py` defines them: each of `SpaceToBatch(ND)`,
//! `BatchToSpace(ND)`, `SpaceToDepth` and `DepthToSpace` is differentiated
//! by its opposite op (with the same block shape and paddings/crops, or
//! block size and data format); `ExtractImagePatches` by scattering the
//! gradient of every patch element back onto the input pixel it was taken
//! from.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym};
use opforge_core::{register_gradient, DataType, Result, Status, Tensor};
use opforge_ops_base::grad::{attr_or, concat_vectors};

/// `SpaceToBatchND` <-> `BatchToSpaceND`: the opposite op on the gradient,
/// with the forward op's block shape and paddings (crops).
fn nd_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, block_shape, paddings) = (ctx.grad()?, ctx.input(1), ctx.input(2));
    let opposite = if ctx.op_name() == "SpaceToBatchND" {
        "BatchToSpaceND"
    } else {
        "SpaceToBatchND"
    };
    let dx = ctx.op1(opposite, &[g, block_shape, paddings], &[])?;
    ctx.set_input_grad(0, dx)
}

/// `SpaceToBatch` <-> `BatchToSpace`: the opposite op on the gradient, with
/// the forward op's paddings (crops) and block size.
fn v1_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, paddings) = (ctx.grad()?, ctx.input(1));
    let opposite = if ctx.op_name() == "SpaceToBatch" {
        "BatchToSpace"
    } else {
        "SpaceToBatch"
    };
    let block_size: i64 = ctx.get_attr("block_size")?;
    let dx = ctx.op1(
        opposite,
        &[g, paddings],
        &[("block_size", block_size.into_attr_value())],
    )?;
    ctx.set_input_grad(0, dx)
}

/// `SpaceToDepth` <-> `DepthToSpace`: the opposite op on the gradient, with
/// the forward op's block size and data format (NCHW_VECT_C, for qint8,
/// has no gradient, as in TensorFlow).
pub(super) fn depth_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let block_size: i64 = ctx.get_attr("block_size")?;
    let format: String = attr_or(ctx, "data_format", "NHWC".to_string())?;
    if format == "NCHW_VECT_C" {
        return Err(Status::invalid_argument(format!(
            "Cannot compute {} gradient with NCHW_VECT_C. NCHW_VECT_C requires qint8 data type.",
            ctx.op_name()
        )));
    }
    let opposite = if ctx.op_name() == "SpaceToDepth" {
        "DepthToSpace"
    } else {
        "SpaceToDepth"
    };
    let dx = ctx.op1(
        opposite,
        &[g],
        &[
            ("block_size", block_size.into_attr_value()),
            ("data_format", format.into_attr_value()),
        ],
    )?;
    ctx.set_input_grad(0, dx)
}

register_gradient!("SpaceToBatchND", nd_grad);
register_gradient!("BatchToSpaceND", nd_grad);
register_gradient!("SpaceToBatch", v1_grad);
register_gradient!("BatchToSpace", v1_grad);
register_gradient!("SpaceToDepth", depth_grad);
register_gradient!("DepthToSpace", depth_grad);

/// Elements `idx` of vector `v` (`GatherV2` on axis 0).
fn pick(o: &mut dyn Ops, v: Sym, idx: &[i32]) -> Result<Sym> {
    let idx = o.int_vector(idx)?;
    let axis = o.constant(Tensor::scalar(0i32))?;
    o.op1("GatherV2", &[v, idx, axis], &[])
}

/// The product of the elements of vector `v`, as a vector of one element.
fn product(o: &mut dyn Ops, v: Sym) -> Result<Sym> {
    let axis = o.int_vector(&[0])?;
    o.op1("Prod", &[v, axis], &[("keep_dims", true.into_attr_value())])
}

/// `ExtractImagePatches`: TensorFlow's `_ExtractImagePatchesGrad`. An image
/// of the pixels' indices `1..=rows*cols` (0 stands for padding) goes
/// through the same `ExtractImagePatches`, which tells the input pixel of
/// every patch element; the gradient, as `[patch elements, batch *
/// channels]`, is summed per pixel with `UnsortedSegmentSum` (segment
/// `pixel - 1`: a padding element's -1 is dropped), as TensorFlow's sparse
/// sum does. Memory stays linear in the image size. The index image is
/// int64 (TensorFlow uses float32 for XLA's sake, exact only up to 2^24
/// pixels).
fn extract_image_patches_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, y) = (ctx.grad()?, ctx.input(0), ctx.output(0));
    let forward_attrs: Vec<(&str, _)> = ["ksizes", "strides", "rates", "padding"]
        .into_iter()
        .filter_map(|name| ctx.attrs().get(name).map(|v| (name, v.clone())))
        .collect();
    let i64t = DataType::Int64.into_attr_value();
    let x_shape = ctx.op1("Shape", &[x], &[("out_type", i64t.clone())])?;
    let y_shape = ctx.op1("Shape", &[y], &[("out_type", i64t)])?;
    let ksizes: Vec<i64> = ctx.get_attr("ksizes")?;
    let (ksize_rows, ksize_cols) = match ksizes.as_slice() {
        [_, r, c, _, ..] => (*r, *c),
        _ => {
            return Err(Status::invalid_argument(format!(
            "ExtractImagePatches requires the ksizes attribute to contain 4 values, but got: {}",
            ksizes.len()
        )))
        }
    };

    // The index image [1, rows, cols, 1] and its patches.
    let rows_cols = pick(ctx, x_shape, &[1, 2])?;
    let pixels = product(ctx, rows_cols)?;
    let scalar_shape = ctx.constant(Tensor::from_vec::<i64>(&[0], vec![])?)?;
    let pixels = ctx.reshape(pixels, scalar_shape)?;
    let one = ctx.constant(Tensor::scalar(1i64))?;
    let limit = ctx.add(pixels, one)?;
    let ids = ctx.op1("Range", &[one, limit, one], &[])?;
    let ones = ctx.constant(Tensor::from_vec(&[1], vec![1i64])?)?;
    let image_shape = concat_vectors(ctx, &[ones, rows_cols, ones])?;
    let image = ctx.reshape(ids, image_shape)?;
    let patches = ctx.op1("ExtractImagePatches", &[image], &forward_attrs)?;
    let minus_one = ctx.constant(Tensor::from_vec(&[1], vec![-1i64])?)?;
    let flat = ctx.reshape(patches, minus_one)?;
    let segments = ctx.sub(flat, one)?;

    // The gradient as [out_rows * out_cols * ksize_rows * ksize_cols, batch * channels].
    let batch = pick(ctx, x_shape, &[0])?;
    let out_rows_cols = pick(ctx, y_shape, &[1, 2])?;
    let kernel = ctx.constant(Tensor::from_vec(&[2], vec![ksize_rows, ksize_cols])?)?;
    let channels = pick(ctx, x_shape, &[3])?;
    let g6_shape = concat_vectors(ctx, &[batch, out_rows_cols, kernel, channels])?;
    let g6 = ctx.reshape(g, g6_shape)?;
    let perm = ctx.int_vector(&[1, 2, 3, 4, 0, 5])?;
    let g6 = ctx.op1("Transpose", &[g6, perm], &[])?;
    let batch_channels = pick(ctx, x_shape, &[0, 3])?;
    let batch_channels = product(ctx, batch_channels)?;
    let g2_shape = concat_vectors(ctx, &[minus_one, batch_channels])?;
    let g2 = ctx.reshape(g6, g2_shape)?;

    // The segment sum: [pixels, batch * channels] (padding's -1 dropped).
    let summed = ctx.op1("UnsortedSegmentSum", &[g2, segments, pixels], &[])?;
    let hwbc = pick(ctx, x_shape, &[1, 2, 0, 3])?;
    let summed = ctx.reshape(summed, hwbc)?;
    let perm = ctx.int_vector(&[2, 0, 1, 3])?;
    let dx = ctx.op1("Transpose", &[summed, perm], &[])?;
    ctx.set_input_grad(0, dx)
}

register_gradient!("ExtractImagePatches", extract_image_patches_grad);
