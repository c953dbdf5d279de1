//! `Reshape`, `ExpandDims` and `Squeeze`: zero-copy shape changes.

use super::*;
use opforge_core::shape_inference::common::*;
use opforge_ops_base::shape::*;

// Reshape, ExpandDims, Squeeze
// ---------------------------------------------------------------------------

/// `Reshape`.
pub fn reshape() -> OpDefBuilder {
    OpDefBuilder::new("Reshape")
        .input("tensor: T")
        .input("shape: Tshape")
        .output("output: T")
        .attr("T: type")
        .attr("Tshape: {int32, int64} = DT_INT32")
        .doc(
            "Reshapes a tensor.\n\n\
             Given `tensor`, this operation returns a tensor that has the same values\n\
             as `tensor` with shape `shape`. At most one component of `shape` may be -1:\n\
             its size is computed so that the total size remains constant.",
        )
}

/// `ExpandDims`.
pub fn expand_dims() -> OpDefBuilder {
    OpDefBuilder::new("ExpandDims")
        .input("input: T")
        .input("dim: Tdim")
        .output("output: T")
        .attr("T: type")
        .attr("Tdim: {int32, int64} = DT_INT32")
        .doc(
            "Inserts a dimension of 1 into a tensor's shape.\n\n\
             Given a tensor `input`, this operation inserts a dimension of 1 at the\n\
             dimension index `dim` of `input`'s shape; `dim` must be in\n\
             `[-rank(input) - 1, rank(input)]`.",
        )
}

/// `Squeeze`.
pub fn squeeze() -> OpDefBuilder {
    OpDefBuilder::new("Squeeze")
        .input("input: T")
        .output("output: T")
        .attr("T: type")
        .attr("squeeze_dims: list(int) >= 0 = []")
        .doc(
            "Removes dimensions of size 1 from the shape of a tensor.\n\n\
             By default all dimensions of size 1 are removed; `squeeze_dims` names the\n\
             ones to remove instead.",
        )
}

/// The output shape of `Reshape` (TensorFlow's `ReshapeOp::Compute`).
pub(super) fn reshape_target(input: &TensorShape, sizes: &[i64]) -> Result<Vec<i64>> {
    ensure!(
        sizes.len() < 254,
        InvalidArgument,
        "too many dimensions: must be < 254, but received {}",
        sizes.len()
    );
    let mut shape = Vec::with_capacity(sizes.len());
    let mut product: i64 = 1;
    let mut unknown: Option<usize> = None;
    let mut has_zero = false;
    let mut elements: i64 = 1;
    for (d, &size) in sizes.iter().enumerate() {
        if size == -1 {
            if let Some(u) = unknown {
                return Err(Status::invalid_argument(format!(
                    "Only one input size may be -1, not both {u} and {d}"
                )));
            }
            unknown = Some(d);
            shape.push(1);
        } else if size < 0 {
            return Err(Status::invalid_argument(format!(
                "Size {d} must be non-negative, not {size}"
            )));
        } else if size == 0 {
            shape.push(0);
            has_zero = true;
            elements = 0;
        } else {
            let e = elements.checked_mul(size);
            let p = product.checked_mul(size);
            match (e, p) {
                (Some(e), Some(p)) => {
                    elements = e;
                    product = p;
                }
                _ => {
                    let parts: Vec<String> = sizes.iter().map(i64::to_string).collect();
                    return Err(Status::invalid_argument(format!(
                        "Shape [{}] has too many elements",
                        parts.join(", ")
                    )));
                }
            }
            shape.push(size);
        }
    }
    if let Some(u) = unknown {
        let mut input_elements: i64 = 1;
        let mut input_has_zero = false;
        for &d in input.dims() {
            if d > 0 || !has_zero {
                input_elements = input_elements.saturating_mul(d);
            } else {
                input_has_zero = true;
            }
        }
        let missing = input_elements / product;
        if !input_has_zero {
            ensure!(
                product.checked_mul(missing) == Some(input_elements),
                InvalidArgument,
                "Input to reshape is a tensor with {input_elements} values, but the requested shape requires a multiple of {product}"
            );
        }
        shape[u] = missing;
    }
    let n: Option<i64> = shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d));
    let have = input.num_elements() as i64;
    ensure!(
        n == Some(have),
        InvalidArgument,
        "Input to reshape is a tensor with {have} values, but the requested shape has {}",
        n.map_or_else(|| "more than 2**63 - 1".to_string(), |n| n.to_string())
    );
    Ok(shape)
}

pub(crate) struct ReshapeOp;

impl OpKernel for ReshapeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let sizes = ctx.input(1);
        ensure!(
            sizes.rank() <= 1,
            InvalidArgument,
            "sizes input must be 1-D, not {}",
            fmt_shape(sizes.dims())
        );
        let sizes = index_values(sizes, "shape")?;
        let dims = reshape_target(ctx.input(0).shape(), &sizes)?;
        let input = ctx.take_input(0);
        ctx.set_output(0, input.reshaped(&dims)?)
    }
}

pub(super) struct ExpandDimsOp;

impl OpKernel for ExpandDimsOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dim_t = ctx.input(1);
        ensure!(
            dim_t.num_elements() == 1,
            InvalidArgument,
            "'dim' must be a tensor with a single value"
        );
        let dim = index_values(dim_t, "dim")?[0];
        let rank = ctx.input(0).rank() as i64;
        ensure!(
            dim >= -1 - rank && dim <= rank,
            InvalidArgument,
            "Tried to expand dim index {dim} for tensor with {rank} dimensions."
        );
        let dim = (if dim < 0 {
            (dim + rank + 1).min(rank)
        } else {
            dim
        }) as usize;
        let mut dims = ctx.input(0).dims().to_vec();
        dims.insert(dim, 1);
        let input = ctx.take_input(0);
        ctx.set_output(0, input.reshaped(&dims)?)
    }
}

pub(super) struct SqueezeOp {
    squeeze_dims: Vec<i32>,
}

impl CreateKernel for SqueezeOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(SqueezeOp {
            squeeze_dims: ctx.get_attr("squeeze_dims")?,
        })
    }
}

impl OpKernel for SqueezeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let existing = ctx.input(0).dims().to_vec();
        let rank = existing.len() as i64;
        let mut wrapped = vec![false; existing.len()];
        for &dim in &self.squeeze_dims {
            let dim = i64::from(dim);
            ensure!(
                dim >= -rank && dim < rank,
                InvalidArgument,
                "Tried to squeeze dim index {dim} for tensor with {rank} dimensions."
            );
            wrapped[(if dim < 0 { dim + rank } else { dim }) as usize] = true;
        }
        let mut new_shape = Vec::with_capacity(existing.len());
        for (i, &d) in existing.iter().enumerate() {
            if self.squeeze_dims.is_empty() {
                if d != 1 {
                    new_shape.push(d);
                }
            } else if wrapped[i] {
                ensure!(
                    d == 1,
                    InvalidArgument,
                    "Can not squeeze dim[{i}], expected a dimension of 1, got {d}"
                );
            } else {
                new_shape.push(d);
            }
        }
        let input = ctx.take_input(0);
        ctx.set_output(0, input.reshaped(&new_shape)?)
    }
}

/// For `Reshape`: the product of the known dims of `s` (of known rank) and
/// the index of its only unknown dim; a second unknown dim sets `too_many`.
pub(super) fn known_elements(
    c: &mut InferenceContext,
    s: ShapeHandle,
    too_many: &mut bool,
) -> Result<(DimensionHandle, Option<usize>)> {
    let mut known = c.num_elements_dim(s);
    let mut unknown_idx = None;
    if c.value(known).is_none() {
        known = c.make_dim(1);
        let dims = c.dims(s).map(<[_]>::to_vec).unwrap_or_default();
        for (i, d) in dims.into_iter().enumerate() {
            if c.value(d).is_none() {
                if unknown_idx.is_some() {
                    *too_many = true;
                    break;
                }
                unknown_idx = Some(i);
            } else {
                known = c.multiply(known, d)?;
            }
        }
    }
    Ok((known, unknown_idx))
}

/// `Reshape` (TensorFlow's `SetOutputShapeForReshape`): the shape held by
/// input 1, with its one unknown dim inferred from the element count where
/// the input's is known.
pub(super) fn reshape_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let mut out = c.make_shape_from_shape_tensor(1)?;
    if c.rank_known(out) && c.rank_known(input) {
        let mut too_many = false;
        let (known_out, out_unknown) = known_elements(c, out, &mut too_many)?;
        let (known_in, in_unknown) = known_elements(c, input, &mut too_many)?;
        if !too_many {
            let (n_in, n_out) = (c.raw_value(known_in), c.raw_value(known_out));
            match (in_unknown, out_unknown) {
                (None, None) => ensure!(
                    n_in == n_out,
                    InvalidArgument,
                    "Cannot reshape a tensor with {} elements to shape {} ({} elements)",
                    c.dim_string(known_in),
                    c.debug_string(out),
                    c.dim_string(known_out)
                ),
                (None, Some(o)) if n_out > 0 => {
                    let inferred = c.divide(known_in, n_out, true)?;
                    out = c.replace_dim(out, o as i64, inferred)?;
                }
                (Some(i), None) if n_in != 0 => {
                    let inferred = c.divide(known_out, n_in, true)?;
                    let d = c.dim(input, i as i64);
                    c.merge_dim(d, inferred)?;
                }
                (Some(i), Some(o)) if n_in == n_out => {
                    let d = c.dim(input, i as i64);
                    out = c.replace_dim(out, o as i64, d)?;
                }
                _ => {}
            }
        }
    }
    c.set_output(0, out);
    Ok(())
}

/// `ExpandDims`: input 0 with a dim of 1 inserted at the constant `dim`.
pub(super) fn expand_dims_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let dim_t = c.input_tensor(1).cloned();
    if let Some(t) = &dim_t {
        ensure!(
            t.num_elements() == 1,
            InvalidArgument,
            "'dim' input must be a tensor with a single value"
        );
    }
    let (Some(t), Some(rank)) = (dim_t, c.rank(input)) else {
        let out = c.unknown_shape();
        c.set_output(0, out);
        return Ok(());
    };
    let dim = index_values(&t, "dim")?[0];
    let rank = rank as i64;
    let min_dim = -rank - 1;
    ensure!(
        dim >= min_dim && dim <= rank,
        InvalidArgument,
        "dim {dim} not in the interval [{min_dim}, {rank}]."
    );
    let dim = if dim < 0 { dim + rank + 1 } else { dim };
    let end = c.subshape(input, dim, None)?;
    let start = c.subshape(input, 0, Some(dim))?;
    let one = c.vector(1);
    let out = c.concatenate(start, one)?;
    let out = c.concatenate(out, end)?;
    c.set_output(0, out);
    Ok(())
}

/// `Squeeze`: input 0 without the listed dims (or, with none listed,
/// without every dim known to be 1; unknown if a dim is unknown).
pub(super) fn squeeze_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let Some(dims) = c.dims(input).map(<[_]>::to_vec) else {
        let out = c.unknown_shape();
        c.set_output(0, out);
        return Ok(());
    };
    let rank = dims.len() as i64;
    let mut squeeze_dims: Vec<i32> = c.get_attr("squeeze_dims")?;
    for (i, d) in squeeze_dims.iter_mut().enumerate() {
        let v = i64::from(*d);
        ensure!(
            v >= -rank && v < rank,
            InvalidArgument,
            "squeeze_dims[{i}] not in [{},{rank}).",
            -rank
        );
        if v < 0 {
            *d = (v + rank) as i32;
        }
    }
    let mut result = Vec::with_capacity(dims.len());
    for (i, &d) in dims.iter().enumerate() {
        let explicit = squeeze_dims.contains(&(i as i32));
        match c.value(d) {
            None if explicit => continue,
            None if squeeze_dims.is_empty() => {
                let out = c.unknown_shape();
                c.set_output(0, out);
                return Ok(());
            }
            Some(1) if explicit || squeeze_dims.is_empty() => continue,
            Some(v) if v != 1 && explicit => {
                return Err(Status::invalid_argument(format!(
                    "Can not squeeze dim[{i}], expected a dimension of 1, got {v}"
                )))
            }
            _ => {}
        }
        result.push(d);
    }
    let out = c.make_shape_from_dims(result);
    c.set_output(0, out);
    Ok(())
}

register_op!(reshape().set_shape_fn(reshape_shape));
register_op!(expand_dims().set_shape_fn(expand_dims_shape));
register_op!(squeeze().set_shape_fn(squeeze_shape));
register_kernel!(
    KernelDefBuilder::new("Reshape")
        .type_constraint_list("Tshape", INDEX_TYPES)
        .host_memory("shape"),
    fn = |_| Ok(Box::new(ReshapeOp))
);
register_kernel!(
    KernelDefBuilder::new("ExpandDims")
        .type_constraint_list("Tdim", INDEX_TYPES)
        .host_memory("dim"),
    fn = |_| Ok(Box::new(ExpandDimsOp))
);
register_kernel!(KernelDefBuilder::new("Squeeze"), SqueezeOp);

// ---------------------------------------------------------------------------

// `Bitcast`: the same bytes as another type, without copying (the output
// shares the input's storage; TensorFlow's `BitcastOp`). No gradient, as in
// TensorFlow (`array_grad.py` has none).

opforge_ops_base::dtype_table! {
    /// The types of `Bitcast`'s `T` and `type` (every fixed-size numeric
    /// type), in TensorFlow's order, and its kernel's.
    BITCAST_TYPES, BITCAST_SPEC => [
        BFloat16, Half, Float, Double, Int64, Int32, UInt8, UInt16, UInt32, UInt64, Int8, Int16,
        Complex64, Complex128, QInt8, QUInt8, QInt16, QUInt16, QInt32
    ]
}

register_op!(OpDefBuilder::new("Bitcast")
    .input("input: T")
    .output("output: type")
    .attr(format!("T: {{{BITCAST_SPEC}}}"))
    .attr(format!("type: {{{BITCAST_SPEC}}}"))
    .set_shape_fn(with_inputs(1, bitcast_shape))
    .doc(
        "Bitcasts a tensor from one type to another without copying data.\n\n\
         A narrower output type adds a last dimension; a wider one consumes the last dimension.",
    ));

fn bitcast_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    if !c.rank_known(input) {
        return unknown_shape(c);
    }
    let from: DataType = c.get_attr("T")?;
    let to: DataType = c.get_attr("type")?;
    let (in_size, out_size) = (from.size(), to.size());
    // TensorFlow's C API shape function prints the types' enum values.
    let (fc, tc) = (from as i32, to as i32);
    if in_size == 0 || out_size == 0 {
        return Err(Status::invalid_argument(format!(
            "Cannot bitcast type {fc} to {tc} because one of the type sizes is zero"
        )));
    }
    let out = if in_size < out_size {
        let s = c.with_rank_at_least(input, 1)?;
        let divisor = (out_size / in_size) as i64;
        let last = c.dim(s, -1);
        match c.value(last) {
            Some(v) if v != divisor => {
                return Err(Status::invalid_argument(format!(
                    "Cannot bitcast from {fc} to {tc} due to shape. {v} does not match {divisor}"
                )))
            }
            _ => c.subshape(s, 0, Some(-1))?,
        }
    } else if in_size > out_size {
        let ext = c.vector((in_size / out_size) as i64);
        c.concatenate(input, ext)?
    } else {
        input
    };
    c.set_output(0, out);
    Ok(())
}

/// `Bitcast`: the input's bytes as `type` elements. A narrower type adds a
/// last dimension of `in_size / out_size`; a wider one needs a last
/// dimension of `out_size / in_size` and drops it. The output shares the
/// input's storage (one copy only if the data is not aligned for `type`).
pub(super) struct BitcastOp {
    from: DataType,
    to: DataType,
}

impl CreateKernel for BitcastOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(BitcastOp {
            from: ctx.get_attr("T")?,
            to: ctx.get_attr("type")?,
        })
    }
}

impl OpKernel for BitcastOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (in_size, out_size) = (self.from.size(), self.to.size());
        let mut dims = ctx.input(0).dims().to_vec();
        // TensorFlow 2.21 prints the types' enum values here.
        let refuse = || {
            Status::invalid_argument(format!(
                "Cannot bitcast from {} to {}",
                self.from as i32, self.to as i32
            ))
        };
        if in_size == 0 || out_size == 0 || in_size.max(out_size) % in_size.min(out_size) != 0 {
            return Err(refuse());
        }
        if out_size > in_size {
            match dims.last() {
                Some(&last) if last == (out_size / in_size) as i64 => {
                    dims.pop();
                }
                _ => return Err(refuse()),
            }
        } else if out_size < in_size {
            dims.push((in_size / out_size) as i64);
        }
        let input = ctx.take_input(0);
        ctx.set_output(0, input.bitcast_reshaped(self.to, &dims)?)
    }
}

register_kernel!(
    KernelDefBuilder::new("Bitcast")
        .type_constraint_list("T", BITCAST_TYPES)
        .type_constraint_list("type", BITCAST_TYPES),
    BitcastOp
);
