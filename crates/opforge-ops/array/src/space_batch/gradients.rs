//! The gradients of the space/batch/depth ops, as TensorFlow's
//! `array_grad.py` defines them: each of `SpaceToBatch(ND)`,
//! `BatchToSpace(ND)`, `SpaceToDepth` and `DepthToSpace` is differentiated
//! by its opposite op (with the same block shape and paddings/crops, or
//! block size and data format); `ExtractImagePatches` by scattering the
//! gradient of every patch element back onto the input pixel it was taken
//! from.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym, SymArg};
use opforge_core::{register_gradient, DataType, Result, Status, Tensor};
use opforge_ops_base::grad::attr_or;

type Grads = Result<Vec<Option<Sym>>>;

/// `SpaceToBatchND` <-> `BatchToSpaceND`: the opposite op on the gradient,
/// with the forward op's block shape and paddings (crops).
fn nd_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None, None]);
    };
    let opposite = if op.op == "SpaceToBatchND" {
        "BatchToSpaceND"
    } else {
        "SpaceToBatchND"
    };
    let dx = o.op1(opposite, &[g, op.inputs[1], op.inputs[2]], &[])?;
    Ok(vec![Some(dx), None, None])
}

/// `SpaceToBatch` <-> `BatchToSpace`: the opposite op on the gradient, with
/// the forward op's paddings (crops) and block size.
fn v1_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let opposite = if op.op == "SpaceToBatch" {
        "BatchToSpace"
    } else {
        "SpaceToBatch"
    };
    let block_size: i64 = op.attr("block_size")?;
    let dx = o.op1(
        opposite,
        &[g, op.inputs[1]],
        &[("block_size", block_size.into_attr_value())],
    )?;
    Ok(vec![Some(dx), None])
}

/// `SpaceToDepth` <-> `DepthToSpace`: the opposite op on the gradient, with
/// the forward op's block size and data format (NCHW_VECT_C, for qint8,
/// has no gradient, as in TensorFlow).
pub(super) fn depth_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let block_size: i64 = op.attr("block_size")?;
    let format: String = attr_or(op, "data_format", "NHWC".to_string())?;
    if format == "NCHW_VECT_C" {
        return Err(Status::invalid_argument(format!(
            "Cannot compute {} gradient with NCHW_VECT_C. NCHW_VECT_C requires qint8 data type.",
            op.op
        )));
    }
    let opposite = if op.op == "SpaceToDepth" {
        "DepthToSpace"
    } else {
        "SpaceToDepth"
    };
    let dx = o.op1(
        opposite,
        &[g],
        &[
            ("block_size", block_size.into_attr_value()),
            ("data_format", format.into_attr_value()),
        ],
    )?;
    Ok(vec![Some(dx)])
}

register_gradient!("SpaceToBatchND", nd_grad);
register_gradient!("BatchToSpaceND", nd_grad);
register_gradient!("SpaceToBatch", v1_grad);
register_gradient!("BatchToSpace", v1_grad);
register_gradient!("SpaceToDepth", depth_grad);
register_gradient!("DepthToSpace", depth_grad);

/// `ConcatV2` of vectors.
fn concat(o: &mut dyn Ops, xs: &[Sym]) -> Result<Sym> {
    let axis = o.constant(Tensor::scalar(0i32))?;
    o.call(
        "ConcatV2",
        &[SymArg::List(xs.to_vec()), SymArg::One(axis)],
        &AttrMap::new(),
    )?
    .pop()
    .ok_or_else(|| Status::internal("ConcatV2 has no output"))
}

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
fn extract_image_patches_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let i64t = DataType::Int64.into_attr_value();
    let x_shape = o.op1("Shape", &[op.inputs[0]], &[("out_type", i64t.clone())])?;
    let y_shape = o.op1("Shape", &[op.outputs[0]], &[("out_type", i64t)])?;
    let ksizes: Vec<i64> = op.attr("ksizes")?;
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
    let rows_cols = pick(o, x_shape, &[1, 2])?;
    let pixels = product(o, rows_cols)?;
    let scalar_shape = o.constant(Tensor::from_vec::<i64>(&[0], vec![])?)?;
    let pixels = o.reshape(pixels, scalar_shape)?;
    let one = o.constant(Tensor::scalar(1i64))?;
    let limit = o.add(pixels, one)?;
    let ids = o.op1("Range", &[one, limit, one], &[])?;
    let ones = o.constant(Tensor::from_vec(&[1], vec![1i64])?)?;
    let image_shape = concat(o, &[ones, rows_cols, ones])?;
    let image = o.reshape(ids, image_shape)?;
    let forward_attrs: Vec<(&str, _)> = ["ksizes", "strides", "rates", "padding"]
        .into_iter()
        .filter_map(|name| op.attrs.get(name).map(|v| (name, v.clone())))
        .collect();
    let patches = o.op1("ExtractImagePatches", &[image], &forward_attrs)?;
    let minus_one = o.constant(Tensor::from_vec(&[1], vec![-1i64])?)?;
    let flat = o.reshape(patches, minus_one)?;
    let segments = o.sub(flat, one)?;

    // The gradient as [out_rows * out_cols * ksize_rows * ksize_cols, batch * channels].
    let batch = pick(o, x_shape, &[0])?;
    let out_rows_cols = pick(o, y_shape, &[1, 2])?;
    let kernel = o.constant(Tensor::from_vec(&[2], vec![ksize_rows, ksize_cols])?)?;
    let channels = pick(o, x_shape, &[3])?;
    let g6_shape = concat(o, &[batch, out_rows_cols, kernel, channels])?;
    let g6 = o.reshape(g, g6_shape)?;
    let perm = o.int_vector(&[1, 2, 3, 4, 0, 5])?;
    let g6 = o.op1("Transpose", &[g6, perm], &[])?;
    let batch_channels = pick(o, x_shape, &[0, 3])?;
    let batch_channels = product(o, batch_channels)?;
    let g2_shape = concat(o, &[minus_one, batch_channels])?;
    let g2 = o.reshape(g6, g2_shape)?;

    // The segment sum: [pixels, batch * channels] (padding's -1 dropped).
    let summed = o.op1("UnsortedSegmentSum", &[g2, segments, pixels], &[])?;
    let hwbc = pick(o, x_shape, &[1, 2, 0, 3])?;
    let summed = o.reshape(summed, hwbc)?;
    let perm = o.int_vector(&[2, 0, 1, 3])?;
    Ok(vec![Some(o.op1("Transpose", &[summed, perm], &[])?)])
}

register_gradient!("ExtractImagePatches", extract_image_patches_grad);
