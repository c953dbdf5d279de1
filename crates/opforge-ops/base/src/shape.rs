//! Shape-function helpers with TensorFlow's exact semantics (following
//! TensorFlow's `InferenceContext`, including which dimension handle a
//! merge returns), shared by the op families' shape functions.

use crate::args::{int_values, scalar_input_value};
use opforge_core::proto::TensorShapeProto;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext, ShapeHandle};
use opforge_core::{ensure, Result, Status, Tensor};

/// A shape function.
pub type ShapeFnPtr = fn(&mut InferenceContext) -> Result<()>;

/// `f`, after checking that the node has at least `n` inputs (a node built
/// by hand may have fewer than the op declares; TensorFlow would crash).
pub fn with_inputs(
    n: usize,
    f: ShapeFnPtr,
) -> impl Fn(&mut InferenceContext) -> Result<()> + Send + Sync + 'static {
    move |c: &mut InferenceContext| {
        if c.num_inputs() < n {
            return Err(Status::invalid_argument(format!(
                "{} expects at least {n} inputs, got {}",
                c.op_def().name,
                c.num_inputs()
            )));
        }
        f(c)
    }
}

/// A rank read from a dimension value or attr, checked as TensorFlow's
/// `WithRank` checks it.
pub fn rank_arg(rank: i64) -> Result<usize> {
    if rank > i64::from(i32::MAX) {
        return Err(Status::invalid_argument("Rank cannot exceed kint32max"));
    }
    usize::try_from(rank)
        .map_err(|_| Status::invalid_argument(format!("Rank must be non-negative, got {rank}")))
}

/// TensorFlow's `ExplicitShape`: output 0 has the shape of attr `shape`.
pub fn explicit_shape(c: &mut InferenceContext) -> Result<()> {
    let shape: TensorShapeProto = c.get_attr("shape")?;
    let out = c.make_shape_from_proto(&shape)?;
    c.set_output(0, out);
    Ok(())
}

/// Value `i` of a constant index tensor, with a clear error instead of
/// TensorFlow's out-of-bounds read when the tensor is too short.
pub fn at(values: &[i64], i: usize, what: &str, want: usize) -> Result<i64> {
    values.get(i).copied().ok_or_else(|| {
        Status::invalid_argument(format!(
            "{what} must have at least {want} elements, but has {}",
            values.len()
        ))
    })
}

/// Checks that `t` is a `[rows, 2]` matrix (a paddings or crops value).
pub fn check_pairs(t: &Tensor, what: &str) -> Result<usize> {
    match t.dims() {
        &[rows, 2] => Ok(rows as usize),
        dims => Err(Status::invalid_argument(format!(
            "{what} must be a matrix with 2 columns, but has shape {}",
            crate::args::fmt_shape(dims)
        ))),
    }
}

/// TensorFlow's `PadShapeFn` (`Pad`, `PadV2`, `MirrorPad`): the input grown
/// by the constant paddings, or of the paddings' row count rank.
pub fn pad_shape(c: &mut InferenceContext) -> Result<()> {
    let p = c.input(1);
    let paddings = c.with_rank(p, 2)?;
    let cols = c.dim(paddings, 1);
    c.with_value(cols, 2)?;
    let mut input = c.input(0);
    let mut n_dim = c.dim(paddings, 0);
    if let Some(n) = c.value(n_dim) {
        input = c.with_rank(input, rank_arg(n)?)?;
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
    let num_dims = check_pairs(&t, "paddings")?;
    let input = c.with_rank(input, num_dims)?;
    c.with_value(n_dim, num_dims as i64)?;
    let values = int_values(&t, "paddings")?;
    let mut dims = Vec::with_capacity(num_dims);
    for i in 0..num_dims {
        let (pad0, pad1) = (values[2 * i], values[2 * i + 1]);
        if pad0 < 0 || pad1 < 0 {
            return Err(Status::invalid_argument("Paddings must be non-negative"));
        }
        let total = pad0.checked_add(pad1).ok_or_else(|| {
            Status::invalid_argument(format!("Paddings {pad0} + {pad1} overflow"))
        })?;
        let d = c.dim(input, i as i64);
        dims.push(c.add(d, total)?);
    }
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow's `SetOutputShapeForReshape` (`Reshape`, `QuantizedReshape`):
/// the shape in input 1, with its one unknown dim inferred from input 0's
/// element count where it can be (and the element counts checked).
pub fn reshape_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let mut out = c.make_shape_from_shape_tensor(1)?;
    let (Some(out_dims), Some(in_dims)) = (
        c.dims(out).map(<[DimensionHandle]>::to_vec),
        c.dims(input).map(<[DimensionHandle]>::to_vec),
    ) else {
        c.set_output(0, out);
        return Ok(());
    };
    let mut too_many_unknown = false;
    // The product of the known dims, and the index of the one unknown dim.
    let mut known_elements = |c: &mut InferenceContext,
                              s: ShapeHandle,
                              dims: &[DimensionHandle]|
     -> Result<(DimensionHandle, Option<usize>)> {
        let mut known = c.num_elements_dim(s);
        let mut unknown_idx = None;
        if c.value(known).is_none() {
            known = c.make_dim(1i64);
            for (i, &d) in dims.iter().enumerate() {
                if c.value(d).is_none() {
                    if unknown_idx.is_some() {
                        too_many_unknown = true;
                        break;
                    }
                    unknown_idx = Some(i);
                } else {
                    known = c.multiply(known, d)?;
                }
            }
        }
        Ok((known, unknown_idx))
    };
    let (known_out, out_unknown) = known_elements(c, out, &out_dims)?;
    let (known_in, in_unknown) = known_elements(c, input, &in_dims)?;
    if !too_many_unknown {
        let (n_in, n_out) = (c.raw_value(known_in), c.raw_value(known_out));
        match (in_unknown, out_unknown) {
            (None, None) if n_in != n_out => {
                return Err(Status::invalid_argument(format!(
                    "Cannot reshape a tensor with {} elements to shape {} ({} elements)",
                    c.dim_string(known_in),
                    c.debug_string(out),
                    c.dim_string(known_out)
                )));
            }
            (None, Some(oi)) if n_out > 0 => {
                let inferred = c.divide(known_in, n_out, true)?;
                out = c.replace_dim(out, oi as i64, inferred)?;
            }
            (Some(ii), None) if n_in != 0 => {
                let inferred = c.divide(known_out, n_in, true)?;
                c.merge_dim(in_dims[ii], inferred)?;
            }
            (Some(ii), Some(oi)) if n_in == n_out => {
                out = c.replace_dim(out, oi as i64, in_dims[ii])?;
            }
            _ => {}
        }
    }
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow's `ValidateSparseTensor`: indices `[N, R]`, values `[N]`,
/// shape `[R]`.
pub fn validate_sparse_tensor(
    c: &mut InferenceContext,
    indices: ShapeHandle,
    values: ShapeHandle,
    shape: ShapeHandle,
) -> Result<()> {
    c.with_rank(indices, 2)?;
    c.with_rank(values, 1)?;
    c.with_rank(shape, 1)?;
    let num_index = c.dim(indices, 0);
    if let Some(n) = c.value(num_index) {
        let num_values = c.dim(values, 0);
        if let Some(v) = c.value(num_values) {
            if n != v {
                return Err(Status::invalid_argument(format!(
                    "Number of elements in index ({n}) and values ({v}) do not match."
                )));
            }
        }
    }
    let index_rank = c.dim(indices, 1);
    if let Some(r) = c.value(index_rank) {
        let shape_rank = c.dim(shape, 0);
        if let Some(s) = c.value(shape_rank) {
            if r != s {
                return Err(Status::invalid_argument(format!(
                    "Index rank ({r}) and shape rank ({s}) do not match."
                )));
            }
        }
    }
    Ok(())
}

/// A dim of the value of constant scalar input `idx`, unknown if the value
/// is (TensorFlow's `MakeDimForScalarInput`).
pub fn dim_for_scalar_input(c: &mut InferenceContext, idx: usize) -> Result<DimensionHandle> {
    match scalar_input_value(c, idx)? {
        None => Ok(c.unknown_dim()),
        Some(v) => {
            ensure!(
                v >= 0,
                InvalidArgument,
                "Dimension size, given by scalar input {idx}, must be non-negative but is {v}"
            );
            Ok(c.make_dim(v))
        }
    }
}
