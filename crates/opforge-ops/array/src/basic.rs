//! Basic array ops, with TensorFlow 2.21's OpDefs and CPU kernels: `Const`,
//! `Identity`, `IdentityN`, `StopGradient`, `Shape`, `ShapeN`, `Size`,
//! `Rank`, `Reshape`, `ExpandDims`, `Squeeze`, `Fill`, `ZerosLike`,
//! `OnesLike`, `BroadcastTo`, `BroadcastArgs`, `BroadcastGradientArgs`,
//! `Range` and `InvertPermutation`.
//!
//! Ops that only change a tensor's shape (`Identity`, `Reshape`,
//! `ExpandDims`, `Squeeze`, ...) never copy: their output shares the input's
//! storage. Ops that move elements (`Fill`, `BroadcastTo`, and `Transpose`,
//! `GatherV2`, ... in [`crate::array_index`]) go through one crate-internal
//! helper that monomorphises a kernel body once per element *size* (1, 2, 4,
//! 8 or 16 bytes, plus bool, string and resource), so they support every
//! dtype a tensor can hold without compiling a copy per dtype.

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::proto::attr_value::Value;
use opforge_core::proto::{FullTypeDef, FullTypeId, TensorShapeProto};
use opforge_core::shape_inference::common::{self, scalar_shape};
use opforge_core::shape_inference::{DimensionHandle, InferenceContext, ShapeHandle};
use opforge_core::{
    dispatch, ensure, register_kernel, register_op, Code, DataType, Element, OpDefBuilder, Result,
    Status, Tensor, TensorShape,
};
use opforge_ops_base::args::*;
use opforge_ops_base::args::{fmt_shape, index_tensor, index_values};
use opforge_ops_base::cpu::broadcast::{broadcast_reduction_axes, broadcast_shapes, BroadcastPlan};
use opforge_ops_base::cpu::mover::*;
use opforge_ops_base::cpu::par::par_map_inplace;
use opforge_ops_base::types::*;

/// The ops this file registers (its tests check them).
#[cfg(test)]
const OPS: &[&str] = &[
    "Const",
    "Identity",
    "IdentityN",
    "StopGradient",
    "Shape",
    "ShapeN",
    "Size",
    "Rank",
    "Reshape",
    "ExpandDims",
    "Squeeze",
    "Fill",
    "ZerosLike",
    "OnesLike",
    "BroadcastTo",
    "BroadcastArgs",
    "BroadcastGradientArgs",
    "Range",
    "InvertPermutation",
];

// ---------------------------------------------------------------------------
// Dtype lists (TensorFlow's TF_CALL_* groups), for kernel registrations.
// ---------------------------------------------------------------------------

// Shared helpers for data-movement kernels.
// ---------------------------------------------------------------------------

/// Whether a shape is a scalar or a one-element vector (TensorFlow's legacy
/// scalar).
fn is_legacy_scalar(t: &Tensor) -> bool {
    t.rank() == 0 || (t.rank() == 1 && t.dims()[0] == 1)
}

/// Writes `value` into every element of `dst`.
struct FillValue;

impl MoveElements for FillValue {
    fn run<T: Clone + Send + Sync>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let Some(v) = srcs.first().and_then(|s| s.first()) else {
            return;
        };
        for_each_chunk(pool, dst, 1, 1, |_, c| c.fill(v.clone()));
    }
}

/// Broadcasts `srcs[0]` along a [`BroadcastPlan`] whose input `a` is the
/// source and whose output is `dst`.
struct BroadcastRows<'p> {
    plan: &'p BroadcastPlan,
}

impl MoveElements for BroadcastRows<'_> {
    fn run<T: Clone + Send + Sync>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let src = srcs[0];
        let plan = self.plan;
        let Some((&inner, outer)) = plan.dims.split_last() else {
            // Every dimension has size 1.
            if let (Some(d), Some(s)) = (dst.first_mut(), src.first()) {
                d.clone_from(s);
            }
            return;
        };
        let last = outer.len();
        let inner_stride = plan.a_strides[last];
        for_each_chunk(pool, dst, inner, inner, |start, chunk| {
            let first_row = start / inner;
            for (r, row) in chunk.chunks_mut(inner).enumerate() {
                let mut rem = first_row + r;
                let mut off = 0;
                for d in (0..last).rev() {
                    off += (rem % outer[d]) * plan.a_strides[d];
                    rem /= outer[d];
                }
                if inner_stride == 0 {
                    row.fill(src[off].clone());
                } else {
                    row.clone_from_slice(&src[off..off + inner]);
                }
            }
        });
    }
}

// ---------------------------------------------------------------------------
// Const
// ---------------------------------------------------------------------------

/// `Const`.
pub fn const_op() -> OpDefBuilder {
    OpDefBuilder::new("Const")
        .output("output: dtype")
        .attr("value: tensor")
        .attr("dtype: type")
        .doc(
            "Returns a constant tensor.\n\n\
             value: Attr `value` is the tensor to return.",
        )
}

struct ConstOp {
    value: Tensor,
}

impl CreateKernel for ConstOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let value = match ctx.attr("value").and_then(|v| v.value.as_ref()) {
            Some(Value::Tensor(proto)) => Tensor::from_proto(proto)?,
            _ => {
                return Err(Status::invalid_argument(
                    "Const: attr 'value' must be a tensor",
                ))
            }
        };
        let want = ctx.output_types()[0];
        ensure!(
            want == value.dtype(),
            InvalidArgument,
            "Type mismatch between value ({}) and dtype ({want})",
            value.dtype()
        );
        Ok(ConstOp { value })
    }
}

impl OpKernel for ConstOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ctx.set_output(0, self.value.clone())
    }
}

/// TensorFlow's `TensorShapeProto` debug string: `[1,?,3]` (`<unknown>`
/// before it for an unknown rank).
fn proto_shape_string(p: &TensorShapeProto) -> String {
    let dims: Vec<String> = p
        .dim
        .iter()
        .map(|d| {
            if d.size == -1 {
                "?".to_string()
            } else {
                d.size.to_string()
            }
        })
        .collect();
    match (p.unknown_rank, dims.is_empty()) {
        (true, true) => "<unknown>".to_string(),
        (true, false) => format!("<unknown>[{}]", dims.join(",")),
        _ => format!("[{}]", dims.join(",")),
    }
}

/// `Const`: the shape of attr `value`, which must be a valid fully defined
/// shape (TensorFlow's `TensorShape::IsValidShape`).
fn const_shape(c: &mut InferenceContext) -> Result<()> {
    let proto = match c.attrs().get("value").and_then(|v| v.value.as_ref()) {
        Some(Value::Tensor(t)) => t.tensor_shape.clone().unwrap_or_default(),
        _ => {
            return Err(c.get_attr::<Tensor>("value").err().unwrap_or_else(|| {
                Status::invalid_argument("Const: attr 'value' must be a tensor")
            }))
        }
    };
    let shape = proto_shape_string(&proto);
    ensure!(
        proto.dim.len() <= 254,
        InvalidArgument,
        "Shape {shape} has too many dimensions"
    );
    let mut elements: i64 = 1;
    for d in &proto.dim {
        ensure!(
            d.size >= 0,
            InvalidArgument,
            "Shape {shape} is not fully defined"
        );
        elements = elements.checked_mul(d.size).ok_or_else(|| {
            Status::invalid_argument(format!(
                "Shape {shape} is too large (more than 2**63 - 1 entries)"
            ))
        })?;
    }
    let dims: Vec<i64> = proto.dim.iter().map(|d| d.size).collect();
    let out = c.make_partial_shape(Some(&dims));
    c.set_output(0, out);
    Ok(())
}

register_op!(const_op().set_shape_fn(const_shape));
register_kernel!(KernelDefBuilder::new("Const"), ConstOp);

// ---------------------------------------------------------------------------
// Identity, IdentityN, StopGradient
// ---------------------------------------------------------------------------

/// `Identity`.
pub fn identity() -> OpDefBuilder {
    OpDefBuilder::new("Identity")
        .input("input: T")
        .output("output: T")
        .attr("T: type")
        .doc("Return a tensor with the same shape and contents as the input tensor or value.")
}

/// `IdentityN`.
pub fn identity_n() -> OpDefBuilder {
    OpDefBuilder::new("IdentityN")
        .input("input: T")
        .output("output: T")
        .attr("T: list(type)")
        .doc(
            "Returns a list of tensors with the same shapes and contents as the input\n\
             tensors.\n\n\
             This op can be used to override the gradient for complicated functions.",
        )
}

/// `StopGradient`.
pub fn stop_gradient() -> OpDefBuilder {
    OpDefBuilder::new("StopGradient")
        .input("input: T")
        .output("output: T")
        .attr("T: type")
        .doc(
            "Stops gradient computation.\n\n\
             When executed in a graph, this op outputs its input tensor as-is.",
        )
}

/// `Identity`, `IdentityN` and `StopGradient`: every input is passed
/// through to the output of the same index, without a copy.
struct IdentityOp;

impl CreateKernel for IdentityOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(IdentityOp)
    }
}

impl OpKernel for IdentityOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ensure!(
            ctx.num_inputs() == ctx.num_outputs(),
            InvalidArgument,
            "Input and output counts must match"
        );
        for i in 0..ctx.num_inputs() {
            let t = ctx.take_input(i);
            ctx.set_output(i, t)?;
        }
        Ok(())
    }
}

/// `IdentityN`: output `i` is input `i`.
fn identity_n_shape(c: &mut InferenceContext) -> Result<()> {
    let n = c.num_inputs();
    ensure!(
        c.num_outputs() == n,
        InvalidArgument,
        "Must have exactly {n} shapes."
    );
    for i in 0..n {
        let s = c.input(i);
        c.set_output(i, s);
    }
    Ok(())
}

register_op!(identity().set_shape_fn(common::unchanged_shape));
register_op!(identity_n().set_shape_fn(identity_n_shape));
register_op!(stop_gradient().set_shape_fn(common::unchanged_shape));
register_kernel!(KernelDefBuilder::new("Identity"), IdentityOp);
register_kernel!(KernelDefBuilder::new("IdentityN"), IdentityOp);
register_kernel!(KernelDefBuilder::new("StopGradient"), IdentityOp);

// ---------------------------------------------------------------------------
// Shape, ShapeN, Size, Rank
// ---------------------------------------------------------------------------

/// `Shape`.
///
/// TensorFlow 2.21's OpDef also gives the output an
/// `experimental_full_type` (`TFT_SHAPE_TENSOR`), which the spec language
/// cannot express yet.
pub fn shape() -> OpDefBuilder {
    OpDefBuilder::new("Shape")
        .input("input: T")
        .output("output: out_type")
        .output_full_type(
            "output",
            FullTypeDef::unary_var(FullTypeId::TftShapeTensor, "out_type"),
        )
        .attr("T: type")
        .attr("out_type: {int32, int64} = DT_INT32")
        .doc(
            "Returns the shape of a tensor.\n\n\
             This operation returns a 1-D integer tensor representing the shape of `input`.",
        )
}

/// `ShapeN`.
pub fn shape_n() -> OpDefBuilder {
    OpDefBuilder::new("ShapeN")
        .input("input: N * T")
        .output("output: N * out_type")
        .attr("N: int")
        .attr("T: type")
        .attr("out_type: {int32, int64} = DT_INT32")
        .doc(
            "Returns shape of tensors.\n\n\
             This operation returns N 1-D integer tensors representing shape of `input[i]s`.",
        )
}

/// `Size`.
pub fn size() -> OpDefBuilder {
    OpDefBuilder::new("Size")
        .input("input: T")
        .output("output: out_type")
        .attr("T: type")
        .attr("out_type: {int32, int64} = DT_INT32")
        .doc(
            "Returns the size of a tensor.\n\n\
             This operation returns an integer representing the number of elements in\n\
             `input`.",
        )
}

/// `Rank`.
pub fn rank() -> OpDefBuilder {
    OpDefBuilder::new("Rank")
        .input("input: T")
        .output("output: int32")
        .attr("T: type")
        .doc(
            "Returns the rank of a tensor.\n\n\
             This operation returns an integer representing the rank of `input`.",
        )
}

/// `Shape` and `ShapeN`: output `i` is the shape of input `i`.
struct ShapeOp {
    name: &'static str,
}

impl OpKernel for ShapeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        for i in 0..ctx.num_inputs() {
            let dims = ctx.input(i).dims().to_vec();
            let out_type = ctx.output_type(i);
            if out_type == DataType::Int32 {
                for (j, &d) in dims.iter().enumerate() {
                    if d > i32::MAX as i64 {
                        return Err(Status::invalid_argument(if self.name == "ShapeN" {
                            format!("ShapeN output type is 32-bit but shape {i} dim {j} is {d}")
                        } else {
                            format!("Shape output type is 32-bit  but dim {j} is {d}")
                        }));
                    }
                }
            }
            let out = index_tensor(out_type, &[dims.len() as i64], &dims)?;
            ctx.set_output(i, out)?;
        }
        Ok(())
    }
}

/// `Size`.
struct SizeOp;

impl OpKernel for SizeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.input(0).num_elements() as i64;
        let out_type = ctx.output_type(0);
        ensure!(
            out_type != DataType::Int32 || n <= i32::MAX as i64,
            InvalidArgument,
            "Number of elements was larger than representable by 32-bit output type"
        );
        ctx.set_output(0, index_tensor(out_type, &[], &[n])?)
    }
}

/// `Rank`.
struct RankOp;

impl OpKernel for RankOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let r = ctx.input(0).rank() as i32;
        ctx.set_output(0, Tensor::scalar(r))
    }
}

/// `Shape` and `ShapeN`: output `i` is a vector of input `i`'s rank.
fn shape_shape(c: &mut InferenceContext) -> Result<()> {
    for i in 0..c.num_inputs().min(c.num_outputs()) {
        let d = match c.rank(c.input(i)) {
            Some(r) => c.make_dim(r as i64),
            None => c.unknown_dim(),
        };
        let out = c.vector(d);
        c.set_output(i, out);
    }
    Ok(())
}

register_op!(shape().set_shape_fn(shape_shape));
register_op!(shape_n().set_shape_fn(shape_shape));
register_op!(size().set_shape_fn(scalar_shape));
register_op!(rank().set_shape_fn(scalar_shape));
register_kernel!(
    KernelDefBuilder::new("Shape")
        .type_constraint_list("out_type", INDEX_TYPES)
        .host_memory("output"),
    fn = |_| Ok(Box::new(ShapeOp { name: "Shape" }))
);
register_kernel!(
    KernelDefBuilder::new("ShapeN")
        .type_constraint_list("out_type", INDEX_TYPES)
        .host_memory("output"),
    fn = |_| Ok(Box::new(ShapeOp { name: "ShapeN" }))
);
register_kernel!(
    KernelDefBuilder::new("Size")
        .type_constraint_list("out_type", INDEX_TYPES)
        .host_memory("output"),
    fn = |_| Ok(Box::new(SizeOp))
);
register_kernel!(
    KernelDefBuilder::new("Rank").host_memory("output"),
    fn = |_| Ok(Box::new(RankOp))
);

// ---------------------------------------------------------------------------
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
fn reshape_target(input: &TensorShape, sizes: &[i64]) -> Result<Vec<i64>> {
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

struct ReshapeOp;

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

struct ExpandDimsOp;

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

struct SqueezeOp {
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
fn known_elements(
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
fn reshape_shape(c: &mut InferenceContext) -> Result<()> {
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
fn expand_dims_shape(c: &mut InferenceContext) -> Result<()> {
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
fn squeeze_shape(c: &mut InferenceContext) -> Result<()> {
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
// Fill, ZerosLike, OnesLike
// ---------------------------------------------------------------------------

/// `Fill`.
pub fn fill() -> OpDefBuilder {
    OpDefBuilder::new("Fill")
        .input("dims: index_type")
        .input("value: T")
        .output("output: T")
        .attr("T: type")
        .attr("index_type: {int32, int64} = DT_INT32")
        .doc(
            "Creates a tensor filled with a scalar value.\n\n\
             This operation creates a tensor of shape `dims` and fills it with `value`.",
        )
}

/// `ZerosLike`.
pub fn zeros_like() -> OpDefBuilder {
    OpDefBuilder::new("ZerosLike")
        .input("x: T")
        .output("y: T")
        .attr("T: type")
        .doc("Returns a tensor of zeros with the same shape and type as x.")
}

/// `OnesLike`.
pub fn ones_like() -> OpDefBuilder {
    OpDefBuilder::new("OnesLike")
        .input("x: T")
        .output("y: T")
        .attr(
            "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, \
             int64, uint64, complex64, complex128, bool}",
        )
        .doc("Returns a tensor of ones with the same shape and type as x.")
}

struct FillOp;

impl OpKernel for FillOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dims_t = ctx.input(0);
        ensure!(
            dims_t.rank() <= 1,
            InvalidArgument,
            "dims must represent a vector, got shape {}",
            fmt_shape(dims_t.dims())
        );
        let value = ctx.input(1);
        ensure!(
            is_legacy_scalar(value),
            InvalidArgument,
            "value must represent a scalar, got shape {}",
            fmt_shape(value.dims())
        );
        let shape = make_shape(&index_values(dims_t, "dims")?)?;
        let out = move_elements(ctx.device(), value.dtype(), &[value], shape, &FillValue)?;
        ctx.set_output(0, out)
    }
}

struct ZerosLikeOp;

impl OpKernel for ZerosLikeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0);
        let out = Tensor::zeros_with_shape(x.dtype(), x.shape().clone())?;
        ctx.set_output(0, out)
    }
}

struct OnesLikeOp;

fn ones_into<T: Element>(ctx: &mut OpKernelContext<'_>, one: T) -> Result<()> {
    let shape = ctx.input(0).shape().clone();
    ctx.forward_input_or_allocate_output(&[0], 0, &shape)?;
    let pool = ctx.thread_pool();
    par_map_inplace(pool, ctx.output_mut(0)?.flat_mut::<T>()?, 1, |_| one);
    Ok(())
}

impl OpKernel for OnesLikeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        use num_traits::One;
        let dtype = ctx.input(0).dtype();
        if dtype == DataType::Bool {
            return ones_into(ctx, true);
        }
        dispatch!(
            dtype,
            T => ones_into(ctx, T::one()),
            [Float, Double, Int32, UInt8, Int16, Int8, Int64, UInt16, UInt32, UInt64, Half,
             BFloat16, Complex64, Complex128],
            Err(Status::unimplemented(format!("OnesLike of {dtype}")))
        )
    }
}

/// `Fill`: the shape held by `dims` (whose values must be >= 0).
fn fill_shape(c: &mut InferenceContext) -> Result<()> {
    let index_type = match c.get_attr::<DataType>("index_type") {
        Ok(t) => t,
        Err(e) if e.code() == Code::NotFound => DataType::Int32,
        Err(e) => return Err(e),
    };
    let (dims, value) = (c.input(0), c.input(1));
    c.with_rank(dims, 1)?;
    c.with_rank(value, 0)?;
    if let Some(t) = c.input_tensor(0) {
        if matches!(index_type, DataType::Int32 | DataType::Int64) {
            for v in index_values(t, "dims")? {
                ensure!(v >= 0, InvalidArgument, "Fill dimensions must be >= 0");
            }
        }
    }
    let out = c.make_shape_from_shape_tensor(0)?;
    c.set_output(0, out);
    if let Some(data) = c.input_handle_shapes_and_types(1).map(<[_]>::to_vec) {
        c.set_output_handle_shapes_and_types(0, data);
    }
    Ok(())
}

register_op!(fill().set_shape_fn(fill_shape));
register_op!(zeros_like().set_shape_fn(common::unchanged_shape));
register_op!(ones_like().set_shape_fn(common::unchanged_shape));
register_kernel!(
    KernelDefBuilder::new("Fill")
        .type_constraint_list("T", &types(&[&all_types(), QUANTIZED]))
        .type_constraint_list("index_type", INDEX_TYPES)
        .host_memory("dims"),
    fn = |_| Ok(Box::new(FillOp))
);
register_kernel!(
    KernelDefBuilder::new("ZerosLike").type_constraint_list("T", &types(&[POD_TYPES, &[DataType::String]])),
    fn = |_| Ok(Box::new(ZerosLikeOp))
);
register_kernel!(
    KernelDefBuilder::new("OnesLike").type_constraint_list("T", POD_TYPES),
    fn = |_| Ok(Box::new(OnesLikeOp))
);

// ---------------------------------------------------------------------------
// BroadcastTo, BroadcastArgs, BroadcastGradientArgs
// ---------------------------------------------------------------------------

/// `BroadcastTo`.
pub fn broadcast_to() -> OpDefBuilder {
    OpDefBuilder::new("BroadcastTo")
        .input("input: T")
        .input("shape: Tidx")
        .output("output: T")
        .attr("T: type")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .doc(
            "Broadcast an array for a compatible shape.\n\n\
             Broadcasting makes `input` have the shape `shape` by repeating it along\n\
             dimensions of size 1 and new leading dimensions, following NumPy's rules.",
        )
}

/// `BroadcastArgs`.
pub fn broadcast_args() -> OpDefBuilder {
    OpDefBuilder::new("BroadcastArgs")
        .input("s0: T")
        .input("s1: T")
        .output("r0: T")
        .attr("T: {int32, int64} = DT_INT32")
        .doc(
            "Return the shape of s0 op s1 with broadcast.\n\n\
             Given `s0` and `s1`, tensors that represent shapes, compute `r0`, the\n\
             broadcasted shape. `s0`, `s1` and `r0` are all integer vectors.",
        )
}

/// `BroadcastGradientArgs`.
pub fn broadcast_gradient_args() -> OpDefBuilder {
    OpDefBuilder::new("BroadcastGradientArgs")
        .input("s0: T")
        .input("s1: T")
        .output("r0: T")
        .output("r1: T")
        .attr("T: {int32, int64} = DT_INT32")
        .doc(
            "Return the reduction indices for computing gradients of s0 op s1 with broadcast.\n\n\
             This is typically used by gradient computations for a broadcasting operation.",
        )
}

struct BroadcastToOp;

impl OpKernel for BroadcastToOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let shape_t = ctx.input(1);
        ensure!(
            shape_t.rank() == 1,
            InvalidArgument,
            "shape must be a vector of {{int32,int64}}, got shape {}",
            fmt_shape(shape_t.dims())
        );
        let out_shape = make_shape(&index_values(shape_t, "shape")?)?;
        let input = ctx.input(0);
        if &out_shape == input.shape() {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        let (in_dims, out_dims) = (input.dims(), out_shape.dims());
        ensure!(
            in_dims.len() <= out_dims.len(),
            InvalidArgument,
            "Rank of input ({}) must be no greater than rank of output shape ({}).",
            in_dims.len(),
            out_dims.len()
        );
        if out_shape.num_elements() == 0 {
            let out = ctx.allocate_temp(input.dtype(), out_shape)?;
            return ctx.set_output(0, out);
        }
        let out = if in_dims.is_empty() {
            move_elements(ctx.device(), input.dtype(), &[input], out_shape, &FillValue)?
        } else {
            let full = broadcast_shapes(in_dims, out_dims).map_err(|_| {
                Status::invalid_argument(format!(
                    "Incompatible shapes: {} vs. {}",
                    fmt_shape(in_dims),
                    fmt_shape(out_dims)
                ))
            })?;
            ensure!(
                full.as_slice() == out_dims,
                InvalidArgument,
                "Unable to broadcast tensor of shape {} to tensor of shape {}",
                fmt_shape(in_dims),
                fmt_shape(out_dims)
            );
            let plan = BroadcastPlan::new(in_dims, out_dims)?;
            move_elements(
                ctx.device(),
                input.dtype(),
                &[input],
                out_shape,
                &BroadcastRows { plan: &plan },
            )?
        };
        ctx.set_output(0, out)
    }
}

/// Reads the two shape vectors of `BroadcastArgs` / `BroadcastGradientArgs`
/// and checks that they broadcast; returns them and the broadcast shape.
fn shape_pair(ctx: &OpKernelContext<'_>) -> Result<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    let mut shapes = Vec::with_capacity(2);
    for i in 0..2 {
        let t = ctx.input(i);
        ensure!(
            t.rank() == 1,
            InvalidArgument,
            "In[{i}] must be a vector.{}",
            fmt_shape(t.dims())
        );
        shapes.push(index_values(t, "shape")?);
    }
    let s1 = shapes.pop().unwrap_or_default();
    let s0 = shapes.pop().unwrap_or_default();
    let out = broadcast_shapes(&s0, &s1)?;
    Ok((s0, s1, out))
}

struct BroadcastArgsOp;

impl OpKernel for BroadcastArgsOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (_, _, out) = shape_pair(ctx)?;
        let t = index_tensor(ctx.output_type(0), &[out.len() as i64], &out)?;
        ctx.set_output(0, t)
    }
}

struct BroadcastGradientArgsOp;

impl OpKernel for BroadcastGradientArgsOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (s0, s1, out) = shape_pair(ctx)?;
        // TensorFlow's BCast takes a fast path for identical shapes that
        // reports no reduction at all (even for dimensions of size 1).
        let (r0, r1) = if s0 == s1 {
            (Vec::new(), Vec::new())
        } else {
            (
                broadcast_reduction_axes(&s0, &out),
                broadcast_reduction_axes(&s1, &out),
            )
        };
        let dtype = ctx.output_type(0);
        ctx.set_output(0, index_tensor(dtype, &[r0.len() as i64], &r0)?)?;
        ctx.set_output(1, index_tensor(dtype, &[r1.len() as i64], &r1)?)
    }
}

/// `BroadcastTo`: the shape held by `shape`, whose dims must equal the
/// input's dims greater than 1 (aligned at the end).
fn broadcast_to_shape(c: &mut InferenceContext) -> Result<()> {
    let shape_in = c.input(1);
    c.with_rank(shape_in, 1)?;
    let mut out = c.make_shape_from_shape_tensor(1)?;
    let input = c.input(0);
    let (Some(out_rank), true) = (c.rank(out), c.rank_known(input)) else {
        c.set_output(0, out);
        return Ok(());
    };
    let input = c.with_rank_at_most(input, out_rank)?;
    let in_dims = c.dims(input).map(<[_]>::to_vec).unwrap_or_default();
    for (i, &in_dim) in in_dims.iter().rev().enumerate() {
        if c.raw_value(in_dim) > 1 {
            let idx = (out_rank - i - 1) as i64;
            let out_dim = c.dim(out, idx);
            let merged = c.merge_dim(in_dim, out_dim)?;
            out = c.replace_dim(out, idx, merged)?;
        }
    }
    c.set_output(0, out);
    Ok(())
}

/// `BroadcastArgs`: a vector as long as the longer input vector.
fn broadcast_args_shape(c: &mut InferenceContext) -> Result<()> {
    let (x, y) = (c.input(0), c.input(1));
    c.with_rank(x, 1)?;
    c.with_rank(y, 1)?;
    let (dx, dy) = (c.dim(x, 0), c.dim(y, 0));
    let len = match (c.value(dx), c.value(dy)) {
        (Some(a), Some(b)) => a.max(b),
        _ => -1,
    };
    let out = c.vector(len);
    c.set_output(0, out);
    Ok(())
}

/// `BroadcastGradientArgs`: two vectors of unknown length.
fn broadcast_gradient_args_shape(c: &mut InferenceContext) -> Result<()> {
    let (x, y) = (c.input(0), c.input(1));
    c.with_rank(x, 1)?;
    c.with_rank(y, 1)?;
    for i in 0..2 {
        let out = c.vector(-1);
        c.set_output(i, out);
    }
    Ok(())
}

register_op!(broadcast_to().set_shape_fn(broadcast_to_shape));
register_op!(broadcast_args().set_shape_fn(broadcast_args_shape));
register_op!(broadcast_gradient_args().set_shape_fn(broadcast_gradient_args_shape));
register_kernel!(
    KernelDefBuilder::new("BroadcastTo")
        .type_constraint_list("T", &all_types())
        .host_memory("shape"),
    fn = |_| Ok(Box::new(BroadcastToOp))
);
register_kernel!(
    KernelDefBuilder::new("BroadcastArgs")
        .type_constraint_list("T", INDEX_TYPES)
        .host_memory("s0")
        .host_memory("s1")
        .host_memory("r0"),
    fn = |_| Ok(Box::new(BroadcastArgsOp))
);
register_kernel!(
    KernelDefBuilder::new("BroadcastGradientArgs")
        .type_constraint_list("T", INDEX_TYPES)
        .host_memory("s0")
        .host_memory("s1")
        .host_memory("r0")
        .host_memory("r1"),
    fn = |_| Ok(Box::new(BroadcastGradientArgsOp))
);

// ---------------------------------------------------------------------------
// Range
// ---------------------------------------------------------------------------

/// `Range`.
pub fn range() -> OpDefBuilder {
    OpDefBuilder::new("Range")
        .input("start: Tidx")
        .input("limit: Tidx")
        .input("delta: Tidx")
        .output("output: Tidx")
        .attr(
            "Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32, \
             uint64} = DT_INT32",
        )
        .doc(
            "Creates a sequence of numbers.\n\n\
             This operation creates a sequence of numbers that begins at `start` and\n\
             extends by increments of `delta` up to but not including `limit`.",
        )
}

/// The element types of `Range`.
trait RangeValue: Element + PartialOrd {
    fn is_zero(self) -> bool;
    fn is_positive(self) -> bool;
    fn show(self) -> String;
    /// The number of elements of `range(start, limit, delta)`.
    fn count(start: Self, limit: Self, delta: Self) -> Result<i64>;
    /// `out[i] = start + i * delta`, accumulated as TensorFlow does.
    fn fill(start: Self, delta: Self, out: &mut [Self]);
}

fn too_many_range_values() -> Status {
    Status::invalid_argument(format!(
        "Requires ((limit - start) / delta) <= {}",
        i64::MAX
    ))
}

macro_rules! int_range {
    ($($t:ty),*) => {$(
        impl RangeValue for $t {
            fn is_zero(self) -> bool {
                self == 0
            }
            fn is_positive(self) -> bool {
                self > 0
            }
            fn show(self) -> String {
                self.to_string()
            }
            fn count(start: Self, limit: Self, delta: Self) -> Result<i64> {
                let span = (limit as i128 - start as i128).abs();
                let step = (delta as i128).abs();
                i64::try_from((span + step - 1) / step).map_err(|_| too_many_range_values())
            }
            fn fill(start: Self, delta: Self, out: &mut [Self]) {
                let mut v = start as i128;
                for o in out {
                    *o = v as $t;
                    v += delta as i128;
                }
            }
        }
    )*};
}

int_range!(i8, i16, i32, i64, u16, u32, u64);

macro_rules! float_range {
    ($($t:ty, $single:expr);*) => {$(
        impl RangeValue for $t {
            fn is_zero(self) -> bool {
                self == <$t as num_traits::Zero>::zero()
            }
            fn is_positive(self) -> bool {
                self > <$t as num_traits::Zero>::zero()
            }
            fn show(self) -> String {
                fmt_float(num_traits::ToPrimitive::to_f64(&self).unwrap_or(f64::NAN), $single)
            }
            fn count(start: Self, limit: Self, delta: Self) -> Result<i64> {
                let n = num_traits::Float::ceil(num_traits::Float::abs((limit - start) / delta));
                let n = num_traits::ToPrimitive::to_f64(&n).unwrap_or(f64::NAN);
                if n.is_nan() || n > i64::MAX as f64 {
                    return Err(too_many_range_values());
                }
                Ok(n as i64)
            }
            fn fill(start: Self, delta: Self, out: &mut [Self]) {
                let mut v = start;
                for o in out {
                    *o = v;
                    v += delta;
                }
            }
        }
    )*};
}

float_range!(f32, true; f64, false; half::f16, true; half::bf16, true);

struct RangeOp;

fn range_typed<T: RangeValue>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let mut vals = [T::default(); 3];
    for (i, name) in ["start", "limit", "delta"].iter().enumerate() {
        let t = ctx.input(i);
        ensure!(
            is_legacy_scalar(t),
            InvalidArgument,
            "{name} must be a scalar, not shape {}",
            fmt_shape(t.dims())
        );
        vals[i] = t.flat::<T>()?[0];
    }
    let [start, limit, delta] = vals;
    ensure!(
        !delta.is_zero(),
        InvalidArgument,
        "Requires delta != 0: {}",
        delta.show()
    );
    if delta.is_positive() {
        ensure!(
            start <= limit,
            InvalidArgument,
            "Requires start <= limit when delta > 0: {}/{}",
            start.show(),
            limit.show()
        );
    } else {
        ensure!(
            start >= limit,
            InvalidArgument,
            "Requires start >= limit when delta < 0: {}/{}",
            start.show(),
            limit.show()
        );
    }
    let n = T::count(start, limit, delta)?;
    let out = ctx.allocate_output(0, TensorShape::new(&[n])?)?;
    T::fill(start, delta, out.flat_mut::<T>()?);
    Ok(())
}

impl OpKernel for RangeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dtype = ctx.input_dtype(0);
        dispatch!(
            dtype,
            T => range_typed::<T>(ctx),
            [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, UInt16, UInt32, UInt64],
            Err(Status::unimplemented(format!("Range of {dtype}")))
        )
    }
}

/// `Range` with constant `start`, `limit` and `delta` of type `T`: a
/// vector of the number of values (TensorFlow's `RangeSize`).
fn range_size<T: RangeValue>(
    c: &mut InferenceContext,
    start: &Tensor,
    limit: &Tensor,
    delta: &Tensor,
) -> Result<()> {
    let scalar = |t: &Tensor| -> Result<T> {
        t.flat::<T>()?
            .first()
            .copied()
            .ok_or_else(|| Status::invalid_argument("start, limit and delta must be scalars"))
    };
    let (start, limit, delta) = (scalar(start)?, scalar(limit)?, scalar(delta)?);
    let zero = T::default();
    ensure!(
        !(start > limit && delta > zero),
        InvalidArgument,
        "Requires start <= limit when delta > 0: {}/{}",
        start.show(),
        limit.show()
    );
    ensure!(
        !(start < limit && delta < zero),
        InvalidArgument,
        "Requires start >= limit when delta < 0: {}/{}",
        start.show(),
        limit.show()
    );
    ensure!(delta != zero, InvalidArgument, "Requires delta != 0");
    let n = T::count(start, limit, delta)?;
    let out = c.vector(n);
    c.set_output(0, out);
    Ok(())
}

/// `Range`: a vector, of known length when the three inputs are constant.
fn range_shape(c: &mut InferenceContext) -> Result<()> {
    for (i, name) in ["start", "limit", "delta"].iter().enumerate() {
        let s = c.input(i);
        c.with_rank(s, 0)
            .map_err(|e| e.with_context(format!(" for '{name}'")))?;
    }
    let dtype: DataType = c.get_attr("Tidx")?;
    let (Some(start), Some(limit), Some(delta)) = (
        c.input_tensor(0).cloned(),
        c.input_tensor(1).cloned(),
        c.input_tensor(2).cloned(),
    ) else {
        let out = c.vector(-1);
        c.set_output(0, out);
        return Ok(());
    };
    dispatch!(
        dtype,
        T => range_size::<T>(c, &start, &limit, &delta),
        [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, UInt16, UInt32, UInt64],
        Err(Status::invalid_argument(format!("Unsupported dtype{}", dtype as i32)))
    )
}

register_op!(range().set_shape_fn(range_shape));
register_kernel!(
    KernelDefBuilder::new("Range")
        .type_constraint_list(
            "Tidx",
            &[
                DataType::BFloat16,
                DataType::Half,
                DataType::Float,
                DataType::Double,
                DataType::Int8,
                DataType::Int16,
                DataType::Int32,
                DataType::Int64,
                DataType::UInt16,
                DataType::UInt32,
                DataType::UInt64,
            ]
        )
        .host_memory("start")
        .host_memory("limit")
        .host_memory("delta"),
    fn = |_| Ok(Box::new(RangeOp))
);

// ---------------------------------------------------------------------------
// InvertPermutation
// ---------------------------------------------------------------------------

/// `InvertPermutation`.
pub fn invert_permutation() -> OpDefBuilder {
    OpDefBuilder::new("InvertPermutation")
        .input("x: T")
        .output("y: T")
        .attr("T: {int32, int64} = DT_INT32")
        .doc(
            "Computes the inverse permutation of a tensor.\n\n\
             `y[x[i]] = i for i in [0, 1, ..., len(x) - 1]`. The values must be a\n\
             permutation of `0 .. len(x) - 1`.",
        )
}

struct InvertPermutationOp;

impl OpKernel for InvertPermutationOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0);
        ensure!(
            x.rank() == 1,
            InvalidArgument,
            "invert_permutation expects a 1D vector."
        );
        let n = x.num_elements();
        ensure!(
            n < i32::MAX as usize,
            InvalidArgument,
            "permutation of nonnegative int32s must have <= int32 max elements"
        );
        let values = index_values(x, "x")?;
        let mut inverse = vec![-1i64; n];
        for (i, &d) in values.iter().enumerate() {
            ensure!(
                d >= 0 && (d as usize) < n,
                InvalidArgument,
                "{d} is not between 0 and {n}"
            );
            let slot = &mut inverse[d as usize];
            ensure!(
                *slot == -1,
                InvalidArgument,
                "{d} is duplicated in the input."
            );
            *slot = i as i64;
        }
        let out = index_tensor(ctx.output_type(0), &[n as i64], &inverse)?;
        ctx.set_output(0, out)
    }
}

/// `InvertPermutation`: the input vector's shape.
fn invert_permutation_shape(c: &mut InferenceContext) -> Result<()> {
    let x = c.input(0);
    let x = c.with_rank(x, 1)?;
    c.set_output(0, x);
    Ok(())
}

register_op!(invert_permutation().set_shape_fn(invert_permutation_shape));
register_kernel!(
    KernelDefBuilder::new("InvertPermutation").type_constraint_list("T", INDEX_TYPES),
    fn = |_| Ok(Box::new(InvertPermutationOp))
);

// ---- Gradients ----

/// The gradients of the basic array ops, as TensorFlow's `array_grad.py`
/// (and `math_grad.py` for `Range`, `ZerosLike`, `OnesLike`) defines them.
mod gradients {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym, SymArg};
    use opforge_core::{register_gradient, register_not_differentiable, Result};

    type Grads = Result<Vec<Option<Sym>>>;

    fn identity_grad(_: &mut dyn Ops, _: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        Ok(vec![grads[0]])
    }

    fn identity_n_grad(_: &mut dyn Ops, _: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        Ok(grads.to_vec())
    }

    /// `Reshape`, `ExpandDims`, `Squeeze`: the gradient reshaped to the input's shape.
    fn reshape_to_input(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let mut out = vec![None; op.inputs.len()];
        if let Some(g) = grads[0] {
            let s = o.shape_of(op.inputs[0])?;
            out[0] = Some(o.reshape(g, s)?);
        }
        Ok(out)
    }

    /// The sum of `g` over all its axes.
    pub(crate) fn sum_all(o: &mut dyn Ops, g: Sym) -> Result<Sym> {
        let rank = o.op1("Rank", &[g], &[])?;
        let zero = o.constant(opforge_core::Tensor::scalar(0i32))?;
        let one = o.constant(opforge_core::Tensor::scalar(1i32))?;
        let axes = o.op1("Range", &[zero, rank, one], &[])?;
        o.op1("Sum", &[g, axes], &[("keep_dims", false.into_attr_value())])
    }

    /// `Fill(dims, value)`: no gradient for `dims`, the sum of the gradient for `value`.
    fn fill_grad(o: &mut dyn Ops, _: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        Ok(vec![None, Some(sum_all(o, g)?)])
    }

    /// `BroadcastTo(input, shape)`: the gradient summed over the broadcast axes.
    fn broadcast_to_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, shape) = (op.inputs[0], op.inputs[1]);
        let shape_dtype = o.dtype(shape);
        let x_shape = o.op1(
            "Shape",
            &[x],
            &[("out_type", shape_dtype.into_attr_value())],
        )?;
        let r = o.call(
            "BroadcastGradientArgs",
            &[SymArg::One(shape), SymArg::One(x_shape)],
            &opforge_core::attrs::AttrMap::new(),
        )?;
        let summed = o.op1("Sum", &[g, r[1]], &[("keep_dims", true.into_attr_value())])?;
        Ok(vec![Some(o.reshape(summed, x_shape)?), None])
    }

    register_gradient!("Identity", identity_grad);
    register_gradient!("IdentityN", identity_n_grad);
    register_gradient!("Reshape", reshape_to_input);
    register_gradient!("ExpandDims", reshape_to_input);
    register_gradient!("Squeeze", reshape_to_input);
    register_gradient!("Fill", fill_grad);
    register_gradient!("BroadcastTo", broadcast_to_grad);
    register_not_differentiable!(
        "Const",
        "StopGradient",
        "Shape",
        "ShapeN",
        "Size",
        "Rank",
        "ZerosLike",
        "OnesLike",
        "Range",
        "BroadcastArgs",
        "BroadcastGradientArgs",
        "InvertPermutation",
    );
}

#[cfg(test)]
mod gradient_tests {
    use opforge_ops_base::testutil::{check, ctx, t, weighted, X};

    use opforge_core::autodiff::{GradientTape, Ops, OpsExt};
    use opforge_core::Tensor;

    fn x23() -> Vec<(Vec<i64>, Vec<f64>)> {
        vec![(vec![2, 3], X.to_vec())]
    }

    #[test]
    fn identity_family() {
        check("Identity", &|o, x| o.op1("Identity", &[x[0]], &[]), &x23());
        check(
            "IdentityN",
            &|o, x| {
                let outs = o.call(
                    "IdentityN",
                    &[opforge_core::autodiff::SymArg::List(vec![x[0], x[1]])],
                    &opforge_core::attrs::AttrMap::new(),
                )?;
                let a = weighted(o, outs[0])?;
                o.mul(a, outs[1])
            },
            &[
                (vec![2, 3], X.to_vec()),
                (vec![2, 3], X.iter().map(|v| v + 0.5).collect()),
            ],
        );
    }

    #[test]
    fn stop_gradient_blocks() {
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[2], vec![1.0f64, 2.0]));
        let s = tape.op1("StopGradient", &[x], &[]).unwrap();
        let y = tape.mul(s, x).unwrap();
        let g = tape.gradient(y, &[x]).unwrap()[0].unwrap();
        // d(stop(x) * x)/dx = stop(x) = x.
        opforge_ops_base::testutil::assert_close(tape.value(g), &[2], &[1.0, 2.0], 0.0);
    }

    #[test]
    fn reshape_expand_squeeze() {
        check(
            "Reshape",
            &|o, x| {
                let s = o.int_vector(&[3, 2])?;
                let y = o.reshape(x[0], s)?;
                weighted(o, y)
            },
            &x23(),
        );
        check(
            "ExpandDims",
            &|o, x| {
                let a = o.constant(Tensor::scalar(1i32))?;
                let y = o.op1("ExpandDims", &[x[0], a], &[])?;
                weighted(o, y)
            },
            &x23(),
        );
        check(
            "Squeeze",
            &|o, x| {
                let y = o.op1("Squeeze", &[x[0]], &[])?;
                weighted(o, y)
            },
            &[(vec![2, 1, 3], X.to_vec())],
        );
    }

    #[test]
    fn fill_and_broadcast_to() {
        check(
            "Fill",
            &|o, x| {
                let d = o.int_vector(&[2, 3])?;
                let y = o.op1("Fill", &[d, x[0]], &[])?;
                weighted(o, y)
            },
            &[(vec![], vec![0.7])],
        );
        for (dims, vals) in [
            (vec![3], X[..3].to_vec()),
            (vec![2, 1], X[..2].to_vec()),
            (vec![1, 3], X[..3].to_vec()),
            (vec![2, 3], X.to_vec()),
        ] {
            check(
                "BroadcastTo",
                &|o, x| {
                    let d = o.int_vector(&[2, 2, 3])?;
                    let y = o.op1("BroadcastTo", &[x[0], d], &[])?;
                    weighted(o, y)
                },
                &[(dims, vals)],
            );
        }
    }

    #[test]
    fn broadcast_to_hand_checked() {
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[2, 1], vec![1.0f64, 2.0]));
        let d = tape
            .constant(Tensor::from_slice(&[2], &[2i64, 3]).unwrap())
            .unwrap();
        let y = tape.op1("BroadcastTo", &[x, d], &[]).unwrap();
        let g = tape.gradient(y, &[x, d]).unwrap();
        opforge_ops_base::testutil::assert_close(
            tape.value(g[0].unwrap()),
            &[2, 1],
            &[3.0, 3.0],
            0.0,
        );
        assert!(g[1].is_none());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};
    use num_complex::Complex;
    use opforge_core::kernel::KernelRegistry;
    use opforge_core::{Code, OpRegistry};
    use opforge_ops_base::testutil::{assert_close, ctx, t};

    fn err_of(r: Result<Tensor>) -> Status {
        r.expect_err("the op must fail")
    }

    #[track_caller]
    fn assert_err(r: Result<Tensor>, code: Code, text: &str) {
        let e = err_of(r);
        assert_eq!(e.code(), code, "{e}");
        assert!(e.message().contains(text), "{e} does not contain {text:?}");
    }

    fn strs(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn i64s(t: &Tensor) -> Vec<i64> {
        index_values(t, "test").unwrap()
    }

    #[test]
    fn every_op_is_registered_with_a_cpu_kernel() {
        let ops = OpRegistry::global();
        for name in OPS {
            ops.lookup(name).unwrap();
            assert!(
                KernelRegistry::global()
                    .kernels_for(name)
                    .iter()
                    .any(|k| k.def.device_type == "CPU"),
                "{name} has a CPU kernel"
            );
        }
        for name in [
            "Reshape",
            "Fill",
            "ExpandDims",
            "BroadcastTo",
            "Range",
            "Shape",
        ] {
            let k = &KernelRegistry::global().kernels_for(name)[0];
            assert!(
                !k.def.host_memory_args.is_empty(),
                "{name} keeps args in host memory"
            );
        }
    }

    #[test]
    fn const_returns_its_value_without_copying() {
        let value = t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
        let run = || {
            ctx()
                .op("Const")
                .attr("value", &value)
                .attr("dtype", DataType::Float)
                .run1()
                .unwrap()
        };
        let (a, b) = (run(), run());
        assert_eq!(a, value);
        assert!(
            a.shares_storage_with(&b),
            "both runs return the stored tensor"
        );
        let s = Tensor::from_strings(&[2], strs(&["a", "bc"])).unwrap();
        let out = ctx()
            .op("Const")
            .attr("value", &s)
            .attr("dtype", DataType::String)
            .run1()
            .unwrap();
        assert_eq!(out, s);
        assert_err(
            ctx()
                .op("Const")
                .attr("value", &value)
                .attr("dtype", DataType::Int32)
                .run1(),
            Code::InvalidArgument,
            "Type mismatch between value (float) and dtype (int32)",
        );
    }

    #[test]
    fn identity_family_passes_inputs_through() {
        let x = t(&[3], vec![1i64, 2, 3]);
        for op in ["Identity", "StopGradient"] {
            let y = ctx().op(op).input(x.clone()).run1().unwrap();
            assert_eq!(y, x);
            assert!(y.shares_storage_with(&x), "{op} does not copy");
        }
        let s = Tensor::from_strings(&[2], strs(&["x", "y"])).unwrap();
        let y = ctx().op("Identity").input(s.clone()).run1().unwrap();
        assert!(y.shares_storage_with(&s));
        let b = t(&[], vec![true]);
        let outs = ctx()
            .op("IdentityN")
            .input_list(vec![x.clone(), s.clone(), b.clone()])
            .run()
            .unwrap();
        assert_eq!(outs, vec![x.clone(), s, b]);
        assert!(outs[0].shares_storage_with(&x));
        let e = Tensor::zeros(DataType::Half, &[0, 4]).unwrap();
        assert_eq!(ctx().op("Identity").input(e.clone()).run1().unwrap(), e);
    }

    #[test]
    fn shape_size_and_rank() {
        let x = Tensor::zeros(DataType::Float, &[2, 3, 4]).unwrap();
        let s = ctx().op("Shape").input(x.clone()).run1().unwrap();
        assert_eq!(s.dtype(), DataType::Int32);
        assert_eq!(s.flat::<i32>().unwrap(), &[2, 3, 4]);
        let s = ctx()
            .op("Shape")
            .input(x.clone())
            .attr("out_type", DataType::Int64)
            .run1()
            .unwrap();
        assert_eq!(s.flat::<i64>().unwrap(), &[2, 3, 4]);
        let n = ctx().op("Size").input(x.clone()).run1().unwrap();
        assert_eq!(n.dims(), &[] as &[i64]);
        assert_eq!(n.scalar_value::<i32>().unwrap(), 24);
        let r = ctx().op("Rank").input(x.clone()).run1().unwrap();
        assert_eq!(r.scalar_value::<i32>().unwrap(), 3);
        // Scalars and empty tensors.
        let scalar = t(&[], vec![7u8]);
        let s = ctx().op("Shape").input(scalar.clone()).run1().unwrap();
        assert_eq!(s.dims(), &[0]);
        assert_eq!(
            ctx()
                .op("Rank")
                .input(scalar)
                .run1()
                .unwrap()
                .scalar_value::<i32>()
                .unwrap(),
            0
        );
        let e = Tensor::from_strings(&[0, 5], vec![]).unwrap();
        assert_eq!(
            i64s(&ctx().op("Shape").input(e.clone()).run1().unwrap()),
            vec![0, 5]
        );
        assert_eq!(i64s(&ctx().op("Size").input(e).run1().unwrap()), vec![0]);
        // A dimension past int32 (no elements, so no memory).
        let big = Tensor::zeros(DataType::Float, &[0, 3_000_000_000]).unwrap();
        assert_err(
            ctx().op("Shape").input(big.clone()).run1(),
            Code::InvalidArgument,
            "Shape output type is 32-bit  but dim 1 is 3000000000",
        );
        let s = ctx()
            .op("Shape")
            .input(big.clone())
            .attr("out_type", DataType::Int64)
            .run1()
            .unwrap();
        assert_eq!(i64s(&s), vec![0, 3_000_000_000]);
        let outs = ctx().op("ShapeN").input_list(vec![big, x.clone()]).run();
        assert!(outs
            .unwrap_err()
            .message()
            .contains("ShapeN output type is 32-bit but shape 0 dim 1 is 3000000000"));
    }

    #[test]
    fn shape_n_of_two_inputs() {
        let a = t(&[2, 1], vec![1.0f64, 2.0]);
        let b = Tensor::from_strings(&[3], strs(&["a", "b", "c"])).unwrap();
        let outs = ctx()
            .op("ShapeN")
            .input_list(vec![a.clone(), a.clone()])
            .run()
            .unwrap();
        assert_eq!(outs.len(), 2);
        assert_eq!(outs[0].flat::<i32>().unwrap(), &[2, 1]);
        assert_eq!(outs[1].flat::<i32>().unwrap(), &[2, 1]);
        let b2 = Tensor::from_strings(&[1, 1, 2], strs(&["d", "e"])).unwrap();
        let outs = ctx()
            .op("ShapeN")
            .input_list(vec![b, b2])
            .attr("out_type", DataType::Int64)
            .run()
            .unwrap();
        assert_eq!(outs[0].flat::<i64>().unwrap(), &[3]);
        assert_eq!(outs[1].flat::<i64>().unwrap(), &[1, 1, 2]);
    }

    fn reshape(x: &Tensor, shape: Vec<i32>) -> Result<Tensor> {
        let n = shape.len() as i64;
        ctx()
            .op("Reshape")
            .input(x.clone())
            .input(t(&[n], shape))
            .run1()
    }

    #[test]
    fn reshape_infers_minus_one_and_shares_storage() {
        let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
        let y = reshape(&x, vec![3, -1]).unwrap();
        assert_eq!(y.dims(), &[3, 2]);
        assert_eq!(y.flat::<i32>().unwrap(), &[1, 2, 3, 4, 5, 6]);
        assert!(y.shares_storage_with(&x), "Reshape does not copy");
        let y = ctx()
            .op("Reshape")
            .input(x.clone())
            .input(t(&[3], vec![-1i64, 1, 2]))
            .run1()
            .unwrap();
        assert_eq!(y.dims(), &[3, 1, 2]);
        assert_eq!(reshape(&x, vec![6]).unwrap().dims(), &[6]);
        // A scalar shape argument means a vector (TensorFlow's legacy form).
        let s = ctx()
            .op("Reshape")
            .input(x.clone())
            .input(t(&[], vec![6i32]))
            .run1()
            .unwrap();
        assert_eq!(s.dims(), &[6]);
        // To and from scalars.
        let one = t(&[1, 1], vec![9.5f32]);
        assert_eq!(reshape(&one, vec![]).unwrap().dims(), &[] as &[i64]);
        // Empty tensors: -1 next to a 0 is inferred from the other dims.
        let e = Tensor::zeros(DataType::Float, &[2, 0]).unwrap();
        assert_eq!(reshape(&e, vec![0, -1]).unwrap().dims(), &[0, 2]);
        assert_eq!(reshape(&e, vec![5, 0, 7]).unwrap().dims(), &[5, 0, 7]);
        // Strings.
        let s = Tensor::from_strings(&[4], strs(&["a", "b", "c", "d"])).unwrap();
        let r = reshape(&s, vec![2, 2]).unwrap();
        assert_eq!(r.dims(), &[2, 2]);
        assert_eq!(r.strings().unwrap(), s.strings().unwrap());
        assert!(r.shares_storage_with(&s));
    }

    #[test]
    fn reshape_errors_use_tensorflow_wording() {
        let x = t(&[2, 3], vec![0u8; 6]);
        let cases: &[(Vec<i32>, &str)] = &[
            (
                vec![2, 2],
                "Input to reshape is a tensor with 6 values, but the requested shape has 4",
            ),
            (vec![-1, -1], "Only one input size may be -1, not both 0 and 1"),
            (
                vec![-1, 4],
                "Input to reshape is a tensor with 6 values, but the requested shape requires a multiple of 4",
            ),
            (vec![3, -2], "Size 1 must be non-negative, not -2"),
        ];
        for (shape, msg) in cases {
            assert_err(reshape(&x, shape.clone()), Code::InvalidArgument, msg);
        }
        assert_err(
            ctx()
                .op("Reshape")
                .input(x.clone())
                .input(t(&[1, 2], vec![3i32, 2]))
                .run1(),
            Code::InvalidArgument,
            "sizes input must be 1-D, not [1,2]",
        );
        assert_err(
            ctx()
                .op("Reshape")
                .input(x)
                .input(t(&[3], vec![1i64 << 40, 1 << 40, 1 << 40]))
                .run1(),
            Code::InvalidArgument,
            "has too many elements",
        );
    }

    fn expand(x: &Tensor, dim: i32) -> Result<Tensor> {
        ctx()
            .op("ExpandDims")
            .input(x.clone())
            .input(t(&[], vec![dim]))
            .run1()
    }

    #[test]
    fn expand_dims_accepts_minus_rank_minus_one_to_rank() {
        let x = t(&[2, 3], vec![1.0f64; 6]);
        for (dim, want) in [
            (0, vec![1, 2, 3]),
            (1, vec![2, 1, 3]),
            (2, vec![2, 3, 1]),
            (-1, vec![2, 3, 1]),
            (-2, vec![2, 1, 3]),
            (-3, vec![1, 2, 3]),
        ] {
            let y = expand(&x, dim).unwrap();
            assert_eq!(y.dims(), want.as_slice(), "dim {dim}");
            assert!(y.shares_storage_with(&x));
        }
        let y = ctx()
            .op("ExpandDims")
            .input(t(&[], vec![true]))
            .input(t(&[1], vec![0i64]))
            .run1()
            .unwrap();
        assert_eq!(y.dims(), &[1]);
        for dim in [3, -4] {
            assert_err(
                expand(&x, dim),
                Code::InvalidArgument,
                &format!("Tried to expand dim index {dim} for tensor with 2 dimensions."),
            );
        }
        assert_err(
            ctx()
                .op("ExpandDims")
                .input(x)
                .input(t(&[2], vec![0i32, 1]))
                .run1(),
            Code::InvalidArgument,
            "'dim' must be a tensor with a single value",
        );
    }

    fn squeeze(x: &Tensor, dims: Vec<i64>) -> Result<Tensor> {
        ctx()
            .op("Squeeze")
            .input(x.clone())
            .attr("squeeze_dims", dims)
            .run1()
    }

    #[test]
    fn squeeze_all_or_specific_dims() {
        let x = t(&[1, 2, 1, 3], (0..6).collect::<Vec<i32>>());
        let y = squeeze(&x, vec![]).unwrap();
        assert_eq!(y.dims(), &[2, 3]);
        assert_eq!(y.flat::<i32>().unwrap(), &[0, 1, 2, 3, 4, 5]);
        assert!(y.shares_storage_with(&x));
        assert_eq!(squeeze(&x, vec![0]).unwrap().dims(), &[2, 1, 3]);
        assert_eq!(squeeze(&x, vec![-2]).unwrap().dims(), &[1, 2, 3]);
        assert_eq!(squeeze(&x, vec![2, 0]).unwrap().dims(), &[2, 3]);
        let ones = t(&[1, 1], vec![5i8]);
        assert_eq!(squeeze(&ones, vec![]).unwrap().dims(), &[] as &[i64]);
        let y = t(&[1, 3], vec![1u16, 2, 3]);
        assert_err(
            squeeze(&y, vec![1]),
            Code::InvalidArgument,
            "Can not squeeze dim[1], expected a dimension of 1, got 3",
        );
        assert_err(
            squeeze(&x, vec![4]),
            Code::InvalidArgument,
            "Tried to squeeze dim index 4 for tensor with 4 dimensions.",
        );
        let e = Tensor::zeros(DataType::Float, &[1, 0, 1]).unwrap();
        assert_eq!(squeeze(&e, vec![]).unwrap().dims(), &[0]);
    }

    fn fill(dims: Vec<i32>, value: Tensor) -> Result<Tensor> {
        let n = dims.len() as i64;
        ctx().op("Fill").input(t(&[n], dims)).input(value).run1()
    }

    #[test]
    fn fill_every_dtype_family() {
        let y = fill(vec![2, 3], t(&[], vec![7.5f32])).unwrap();
        assert_close(&y, &[2, 3], &[7.5; 6], 0.0);
        let y = ctx()
            .op("Fill")
            .input(t(&[2], vec![2i64, 2]))
            .input(t(&[], vec![-3i64]))
            .run1()
            .unwrap();
        assert_eq!(y.flat::<i64>().unwrap(), &[-3; 4]);
        let y = fill(vec![3], t(&[], vec![true])).unwrap();
        assert_eq!(y.flat::<bool>().unwrap(), &[true; 3]);
        let c = Complex::new(1.5f64, -2.0);
        let y = fill(vec![2], t(&[], vec![c])).unwrap();
        assert_eq!(y.flat::<Complex<f64>>().unwrap(), &[c, c]);
        let y = fill(vec![2], t(&[], vec![Complex::new(0.5f32, 1.0)])).unwrap();
        assert_eq!(y.dtype(), DataType::Complex64);
        assert_eq!(y.flat::<Complex<f32>>().unwrap()[1], Complex::new(0.5, 1.0));
        let y = fill(vec![1, 2], t(&[], vec![f16::from_f32(0.25)])).unwrap();
        assert_eq!(y.flat::<f16>().unwrap(), &[f16::from_f32(0.25); 2]);
        let y = fill(vec![2], t(&[], vec![bf16::from_f32(-1.0)])).unwrap();
        assert_eq!(y.flat::<bf16>().unwrap(), &[bf16::from_f32(-1.0); 2]);
        let y = fill(vec![2], t(&[], vec![200u8])).unwrap();
        assert_eq!(y.flat::<u8>().unwrap(), &[200, 200]);
        let q = t(&[], vec![-5i8]).bitcast(DataType::QInt8).unwrap();
        let y = fill(vec![3], q).unwrap();
        assert_eq!(y.dtype(), DataType::QInt8);
        assert_eq!(
            y.bitcast(DataType::Int8).unwrap().flat::<i8>().unwrap(),
            &[-5; 3]
        );
        let s = Tensor::from_strings(&[], strs(&["hi"])).unwrap();
        let y = fill(vec![2, 1], s).unwrap();
        assert_eq!(y.dims(), &[2, 1]);
        assert_eq!(y.strings().unwrap(), &strs(&["hi", "hi"])[..]);
        // A one-element vector value and a scalar dims (legacy forms).
        let y = ctx()
            .op("Fill")
            .input(t(&[], vec![2i32]))
            .input(t(&[1], vec![4u32]))
            .run1()
            .unwrap();
        assert_eq!(y.flat::<u32>().unwrap(), &[4, 4]);
        // Empty and large (sharded) outputs.
        assert_eq!(
            fill(vec![0, 3], t(&[], vec![1.0f64])).unwrap().dims(),
            &[0, 3]
        );
        let y = fill(vec![300, 301], t(&[], vec![9i16])).unwrap();
        assert!(y.flat::<i16>().unwrap().iter().all(|&v| v == 9));
        assert_eq!(y.num_elements(), 300 * 301);
    }

    #[test]
    fn fill_errors() {
        assert_err(
            fill(vec![2, -1], t(&[], vec![1.0f32])),
            Code::InvalidArgument,
            "Dimension -1 must be >= 0",
        );
        assert_err(
            fill(vec![2], t(&[2], vec![1.0f32, 2.0])),
            Code::InvalidArgument,
            "value must represent a scalar, got shape [2]",
        );
        assert_err(
            ctx()
                .op("Fill")
                .input(t(&[1, 1], vec![2i32]))
                .input(t(&[], vec![1.0f32]))
                .run1(),
            Code::InvalidArgument,
            "dims must represent a vector, got shape [1,1]",
        );
    }

    #[test]
    fn zeros_like_and_ones_like() {
        let x = t(&[2, 2], vec![1.5f32, -2.0, 3.0, 4.0]);
        let z = ctx().op("ZerosLike").input(x.clone()).run1().unwrap();
        assert_close(&z, &[2, 2], &[0.0; 4], 0.0);
        let o = ctx().op("OnesLike").input(x.clone()).run1().unwrap();
        assert_close(&o, &[2, 2], &[1.0; 4], 0.0);
        assert_eq!(
            x.flat::<f32>().unwrap()[0],
            1.5,
            "the shared input is untouched"
        );
        let o = ctx()
            .op("OnesLike")
            .input(t(&[3], vec![7i64, 8, 9]))
            .run1()
            .unwrap();
        assert_eq!(o.flat::<i64>().unwrap(), &[1, 1, 1]);
        let o = ctx()
            .op("OnesLike")
            .input(t(&[2], vec![false, true]))
            .run1()
            .unwrap();
        assert_eq!(o.flat::<bool>().unwrap(), &[true, true]);
        let o = ctx()
            .op("OnesLike")
            .input(t(&[1], vec![Complex::new(3.0f64, 4.0)]))
            .run1()
            .unwrap();
        assert_eq!(o.flat::<Complex<f64>>().unwrap(), &[Complex::new(1.0, 0.0)]);
        let o = ctx()
            .op("OnesLike")
            .input(t(&[1], vec![f16::from_f32(5.0)]))
            .run1()
            .unwrap();
        assert_eq!(o.flat::<f16>().unwrap(), &[f16::ONE]);
        let z = ctx()
            .op("ZerosLike")
            .input(t(&[2], vec![true, true]))
            .run1()
            .unwrap();
        assert_eq!(z.flat::<bool>().unwrap(), &[false, false]);
        let s = Tensor::from_strings(&[2], strs(&["a", "b"])).unwrap();
        let z = ctx().op("ZerosLike").input(s).run1().unwrap();
        assert_eq!(z.strings().unwrap(), &strs(&["", ""])[..]);
        let e = Tensor::zeros(DataType::Int32, &[0]).unwrap();
        assert_eq!(ctx().op("OnesLike").input(e).run1().unwrap().dims(), &[0]);
    }

    fn broadcast_to(x: &Tensor, shape: Vec<i32>) -> Result<Tensor> {
        let n = shape.len() as i64;
        ctx()
            .op("BroadcastTo")
            .input(x.clone())
            .input(t(&[n], shape))
            .run1()
    }

    #[test]
    fn broadcast_to_repeats_along_size_one_and_new_dims() {
        let x = t(&[3], vec![1i32, 2, 3]);
        let y = broadcast_to(&x, vec![2, 3]).unwrap();
        assert_eq!(y.dims(), &[2, 3]);
        assert_eq!(y.flat::<i32>().unwrap(), &[1, 2, 3, 1, 2, 3]);
        let c = t(&[2, 1], vec![1.0f32, 2.0]);
        let y = broadcast_to(&c, vec![2, 3]).unwrap();
        assert_close(&y, &[2, 3], &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0], 0.0);
        let y = broadcast_to(&c, vec![2, 2, 2]).unwrap();
        assert_close(
            &y,
            &[2, 2, 2],
            &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0],
            0.0,
        );
        let s = t(&[], vec![4u64]);
        assert_eq!(
            broadcast_to(&s, vec![2, 2]).unwrap().flat::<u64>().unwrap(),
            &[4; 4]
        );
        let one = t(&[1, 1], vec![6i8]);
        assert_eq!(
            broadcast_to(&one, vec![3]).unwrap_err().code(),
            Code::InvalidArgument
        );
        assert_eq!(
            broadcast_to(&one, vec![2, 1, 2])
                .unwrap()
                .flat::<i8>()
                .unwrap(),
            &[6; 4]
        );
        let strings = Tensor::from_strings(&[2, 1], strs(&["a", "b"])).unwrap();
        let y = broadcast_to(&strings, vec![2, 2]).unwrap();
        assert_eq!(y.strings().unwrap(), &strs(&["a", "a", "b", "b"])[..]);
        // Same shape: passed through.
        let y = broadcast_to(&x, vec![3]).unwrap();
        assert!(y.shares_storage_with(&x));
        // Empty output: no check of the values, as TensorFlow.
        assert_eq!(broadcast_to(&x, vec![0, 3]).unwrap().dims(), &[0, 3]);
        // Large: the rows are sharded.
        let row: Vec<f64> = (0..257).map(f64::from).collect();
        let y = broadcast_to(&t(&[1, 257], row.clone()), vec![300, 257]).unwrap();
        let flat = y.flat::<f64>().unwrap();
        for r in [0, 151, 299] {
            assert_eq!(&flat[r * 257..(r + 1) * 257], row.as_slice());
        }
    }

    #[test]
    fn broadcast_to_errors() {
        let x = t(&[2], vec![0i32, 1]);
        assert_err(
            broadcast_to(&x, vec![3]),
            Code::InvalidArgument,
            "Incompatible shapes: [2] vs. [3]",
        );
        assert_err(
            broadcast_to(&x, vec![2, 1]),
            Code::InvalidArgument,
            "Unable to broadcast tensor of shape [2] to tensor of shape [2,1]",
        );
        assert_err(
            broadcast_to(&t(&[1, 2], vec![0i32, 1]), vec![2]),
            Code::InvalidArgument,
            "Rank of input (2) must be no greater than rank of output shape (1).",
        );
        assert_err(
            broadcast_to(&x, vec![-2]),
            Code::InvalidArgument,
            "Dimension -2 must be >= 0",
        );
    }

    fn shape_args(op: &str, a: Vec<i32>, b: Vec<i32>) -> Result<Vec<Tensor>> {
        let (na, nb) = (a.len() as i64, b.len() as i64);
        ctx().op(op).input(t(&[na], a)).input(t(&[nb], b)).run()
    }

    #[test]
    fn broadcast_args() {
        let r = shape_args("BroadcastArgs", vec![2, 1], vec![3]).unwrap();
        assert_eq!(r[0].flat::<i32>().unwrap(), &[2, 3]);
        let r = shape_args("BroadcastArgs", vec![], vec![4, 1]).unwrap();
        assert_eq!(r[0].flat::<i32>().unwrap(), &[4, 1]);
        let r = ctx()
            .op("BroadcastArgs")
            .input(t(&[1], vec![5i64]))
            .input(t(&[3], vec![2i64, 1, 1]))
            .run1()
            .unwrap();
        assert_eq!(r.flat::<i64>().unwrap(), &[2, 1, 5]);
        let e = shape_args("BroadcastArgs", vec![2, 3], vec![4]).unwrap_err();
        assert!(
            e.message().contains("Incompatible shapes: [2,3] vs. [4]"),
            "{e}"
        );
        let e = ctx()
            .op("BroadcastArgs")
            .input(t(&[1, 1], vec![1i32]))
            .input(t(&[1], vec![1i32]))
            .run()
            .unwrap_err();
        assert!(e.message().contains("In[0] must be a vector.[1,1]"), "{e}");
    }

    #[test]
    fn broadcast_gradient_args_match_tensorflow() {
        // (s0, s1, r0, r1) as TensorFlow's BCast computes them.
        // (s0, s1, r0, r1)
        type Case = (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>);
        let cases: &[Case] = &[
            (vec![2, 3], vec![3], vec![], vec![0]),
            (vec![3], vec![2, 3], vec![0], vec![]),
            // Identical shapes take BCast's fast path: nothing to reduce.
            (vec![1], vec![1], vec![], vec![]),
            (vec![2, 3], vec![2, 3], vec![], vec![]),
            (vec![2, 1], vec![1, 3], vec![1], vec![0]),
            // A dimension where both are 1 is reported for both.
            (vec![1, 1], vec![2, 1], vec![0, 1], vec![1]),
            (vec![], vec![2, 3], vec![0, 1], vec![]),
            (vec![4, 1, 5], vec![1, 3, 1], vec![1], vec![0, 2]),
        ];
        for (s0, s1, r0, r1) in cases {
            let r = shape_args("BroadcastGradientArgs", s0.clone(), s1.clone()).unwrap();
            assert_eq!(
                r[0].flat::<i32>().unwrap(),
                r0.as_slice(),
                "{s0:?} vs {s1:?}"
            );
            assert_eq!(
                r[1].flat::<i32>().unwrap(),
                r1.as_slice(),
                "{s0:?} vs {s1:?}"
            );
        }
        let r = ctx()
            .op("BroadcastGradientArgs")
            .input(t(&[2], vec![2i64, 3]))
            .input(t(&[1], vec![3i64]))
            .run()
            .unwrap();
        assert_eq!(r[1].flat::<i64>().unwrap(), &[0]);
        assert_eq!(r[0].dims(), &[0]);
        let e = shape_args("BroadcastGradientArgs", vec![2, 3], vec![4]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message().contains("Incompatible shapes: [2,3] vs. [4]"),
            "{e}"
        );
    }

    fn range<T: Element>(start: T, limit: T, delta: T) -> Result<Tensor> {
        ctx()
            .op("Range")
            .input(t(&[], vec![start]))
            .input(t(&[], vec![limit]))
            .input(t(&[], vec![delta]))
            .run1()
    }

    #[test]
    fn range_integer_and_float() {
        assert_eq!(
            range(0i32, 10, 3).unwrap().flat::<i32>().unwrap(),
            &[0, 3, 6, 9]
        );
        assert_eq!(
            range(10i32, 1, -3).unwrap().flat::<i32>().unwrap(),
            &[10, 7, 4]
        );
        assert_eq!(
            range(-2i64, 2, 1).unwrap().flat::<i64>().unwrap(),
            &[-2, -1, 0, 1]
        );
        assert_eq!(range(3i32, 3, 1).unwrap().dims(), &[0]);
        assert_eq!(
            range(0u32, 5, 2).unwrap().flat::<u32>().unwrap(),
            &[0, 2, 4]
        );
        assert_eq!(
            range(5i8, -5, -4).unwrap().flat::<i8>().unwrap(),
            &[5, 1, -3]
        );
        assert_eq!(
            range(i64::MAX - 2, i64::MAX, 1)
                .unwrap()
                .flat::<i64>()
                .unwrap(),
            &[i64::MAX - 2, i64::MAX - 1]
        );
        let y = range(0.0f32, 1.0, 0.25).unwrap();
        assert_close(&y, &[4], &[0.0, 0.25, 0.5, 0.75], 0.0);
        // ceil(|(2 - 1) / 0.3|) = 4 elements.
        let y = range(1.0f64, 2.0, 0.3).unwrap();
        assert_close(&y, &[4], &[1.0, 1.3, 1.6, 1.9], 1e-12);
        let y = range(1.0f64, 0.0, -0.5).unwrap();
        assert_close(&y, &[2], &[1.0, 0.5], 0.0);
        let y = range(f16::from_f32(0.0), f16::from_f32(2.0), f16::from_f32(0.5)).unwrap();
        assert_close(&y, &[4], &[0.0, 0.5, 1.0, 1.5], 0.0);
        let y = range(
            bf16::from_f32(1.0),
            bf16::from_f32(-1.0),
            bf16::from_f32(-1.0),
        )
        .unwrap();
        assert_close(&y, &[2], &[1.0, 0.0], 0.0);
        // One-element vectors are accepted as scalars.
        let y = ctx()
            .op("Range")
            .input(t(&[1], vec![0i32]))
            .input(t(&[], vec![2i32]))
            .input(t(&[], vec![1i32]))
            .run1()
            .unwrap();
        assert_eq!(y.flat::<i32>().unwrap(), &[0, 1]);
    }

    #[test]
    fn range_errors() {
        assert_err(
            range(1i32, 5, 0),
            Code::InvalidArgument,
            "Requires delta != 0: 0",
        );
        assert_err(
            range(5i32, 1, 1),
            Code::InvalidArgument,
            "Requires start <= limit when delta > 0: 5/1",
        );
        assert_err(
            range(1i64, 5, -1),
            Code::InvalidArgument,
            "Requires start >= limit when delta < 0: 1/5",
        );
        assert_err(
            range(20.0f32, 1.0, 2.0),
            Code::InvalidArgument,
            "Requires start <= limit when delta > 0: 20/1",
        );
        assert_err(
            range(0.5f64, 1.5, -0.25),
            Code::InvalidArgument,
            "Requires start >= limit when delta < 0: 0.5/1.5",
        );
        assert_err(
            range(0.0f32, f32::INFINITY, 1.0),
            Code::InvalidArgument,
            "Requires ((limit - start) / delta) <= 9223372036854775807",
        );
        assert_err(
            ctx()
                .op("Range")
                .input(t(&[], vec![1.0f32]))
                .input(t(&[], vec![20.0f32]))
                .input(t(&[1, 1], vec![2.0f32]))
                .run1(),
            Code::InvalidArgument,
            "delta must be a scalar, not shape [1,1]",
        );
    }

    fn invert(x: Tensor) -> Result<Tensor> {
        ctx().op("InvertPermutation").input(x).run1()
    }

    #[test]
    fn invert_permutation() {
        let y = invert(t(&[5], vec![3i32, 4, 0, 2, 1])).unwrap();
        assert_eq!(y.flat::<i32>().unwrap(), &[2, 4, 3, 0, 1]);
        let y = invert(t(&[3], vec![1i64, 2, 0])).unwrap();
        assert_eq!(y.flat::<i64>().unwrap(), &[2, 0, 1]);
        assert_eq!(invert(t(&[0], Vec::<i32>::new())).unwrap().dims(), &[0]);
        assert_err(
            invert(t(&[3], vec![0i32, 3, 1])),
            Code::InvalidArgument,
            "3 is not between 0 and 3",
        );
        assert_err(
            invert(t(&[3], vec![0i32, -1, 1])),
            Code::InvalidArgument,
            "-1 is not between 0 and 3",
        );
        assert_err(
            invert(t(&[3], vec![1i32, 1, 0])),
            Code::InvalidArgument,
            "1 is duplicated in the input.",
        );
        assert_err(
            invert(t(&[1, 1], vec![0i32])),
            Code::InvalidArgument,
            "invert_permutation expects a 1D vector.",
        );
    }

    #[test]
    fn floats_print_as_tensorflow_does() {
        assert_eq!(fmt_float(5.0, true), "5");
        assert_eq!(fmt_float(0.25, true), "0.25");
        assert_eq!(fmt_float(f64::from(0.1f32), true), "0.1");
        assert_eq!(fmt_float(0.1, false), "0.1");
        assert_eq!(fmt_float(1e20, false), "1e+20");
        assert_eq!(fmt_float(1e-5, true), "1e-05");
        assert_eq!(fmt_float(123456.0, true), "123456");
        assert_eq!(fmt_float(1234567.0, true), "1234567");
        assert_eq!(fmt_float(-2.5, false), "-2.5");
        assert_eq!(fmt_float(f64::NEG_INFINITY, true), "-inf");
    }

    #[test]
    fn helpers() {
        assert_eq!(strides_of(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(strides_of(&[]), Vec::<usize>::new());
        assert_eq!(
            int_values(&t(&[2], vec![200u8, 3]), "x").unwrap(),
            vec![200, 3]
        );
        assert!(int_values(&t(&[1], vec![1.0f32]), "x").is_err());
        assert_eq!(carrier_of(DataType::Half).unwrap(), DataType::UInt16);
        assert_eq!(carrier_of(DataType::Complex64).unwrap(), DataType::UInt64);
        assert_eq!(carrier_of(DataType::Bool).unwrap(), DataType::Bool);
    }
}

#[cfg(test)]
mod shape_fn_tests {
    use super::*;
    use opforge_core::attrs::AttrMap;
    use opforge_core::proto::attr_value::Value;
    use opforge_core::proto::{tensor_shape_proto::Dim, AttrValue, TensorProto};
    use opforge_core::shape_inference::testutil::ShapeTestOp;
    use opforge_core::shape_inference::ShapeAndType;
    use opforge_core::{infer_error, infer_ok, OpRegistry};

    fn ints(v: &[i32]) -> Tensor {
        Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
    }

    fn longs(v: &[i64]) -> Tensor {
        Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
    }

    #[test]
    fn const_shape_fn() {
        let value = Tensor::from_vec(&[2, 3], vec![0f32; 6]).unwrap();
        let op = ShapeTestOp::new("Const")
            .attr("value", &value)
            .attr("dtype", DataType::Float);
        infer_ok!(op, "", "[2,3]");
        let op = ShapeTestOp::new("Const").attr("value", &Tensor::scalar(1i32));
        infer_ok!(op, "", "[]");
        let op = ShapeTestOp::new("Const")
            .attr("value", &Tensor::zeros(DataType::Int64, &[0, 4]).unwrap());
        infer_ok!(op, "", "[0,4]");
        let proto = |dims: &[i64]| AttrValue {
            value: Some(Value::Tensor(TensorProto {
                tensor_shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&size| Dim {
                            size,
                            name: String::new(),
                        })
                        .collect(),
                    unknown_rank: false,
                }),
                ..Default::default()
            })),
        };
        let op = ShapeTestOp::new("Const").attr("value", proto(&[1, -1]));
        infer_error!(op, "", "Shape [1,?] is not fully defined");
        let op = ShapeTestOp::new("Const").attr("value", proto(&[1 << 40, 1 << 40]));
        infer_error!(op, "", "is too large (more than 2**63 - 1 entries)");
        infer_error!(ShapeTestOp::new("Const"), "", "No attr named 'value'");
    }

    #[test]
    fn pass_through_shape_fns() {
        for name in ["Identity", "StopGradient", "ZerosLike", "OnesLike"] {
            let op = ShapeTestOp::new(name);
            infer_ok!(op, "?", "in0");
            infer_ok!(op, "[]", "in0");
            infer_ok!(op, "[1,?,3]", "in0");
        }
        let op = ShapeTestOp::new("IdentityN").attr("T", vec![DataType::Float, DataType::Int32]);
        infer_ok!(op, "[1,?];?", "in0;in1");
        infer_error!(op, "[1]", "Must have exactly 1 shapes.");
    }

    #[test]
    fn unchanged_shape_keeps_resource_data() {
        let op_def = OpRegistry::global().op_def("Identity").unwrap();
        let mut c = InferenceContext::new(&op_def, "n", &AttrMap::new(), &[Some(vec![])], 1);
        let held = c.make_partial_shape(Some(&[2, -1]));
        let data = vec![ShapeAndType {
            shape: held,
            dtype: DataType::Float,
        }];
        c.set_input_handle_shapes_and_types(0, data.clone());
        common::unchanged_shape(&mut c).unwrap();
        assert_eq!(c.output(0), Some(c.input(0)));
        assert_eq!(c.output_handle_shapes_and_types(0), Some(&data[..]));
    }

    #[test]
    fn shape_size_rank_shape_fns() {
        let op = ShapeTestOp::new("Shape");
        infer_ok!(op, "?", "[?]");
        infer_ok!(op, "[]", "[0]");
        infer_ok!(op, "[1,?,3]", "[3]");
        let op = ShapeTestOp::new("ShapeN")
            .attr("N", 3i64)
            .attr("T", DataType::Float)
            .attr("out_type", DataType::Int32);
        infer_ok!(op, "?;[];[?,2]", "[?];[0];[2]");
        for name in ["Size", "Rank"] {
            let op = ShapeTestOp::new(name);
            infer_ok!(op, "?", "[]");
            infer_ok!(op, "[1,?,3]", "[]");
        }
    }

    #[test]
    fn reshape_shape_fn() {
        let op = ShapeTestOp::new("Reshape");
        infer_ok!(op, "?;?", "?");
        infer_ok!(op, "[2,3];[?]", "?");
        infer_ok!(op, "[2,3];[3]", "[?,?,?]");
        infer_error!(op, "[2,3];[3,1]", "Shape must be rank 1 but is rank 2");
        let with = |t: Tensor| ShapeTestOp::new("Reshape").input_tensor(1, t);
        infer_ok!(with(ints(&[3, 2])), "[2,3];[2]", "[3,2]");
        infer_ok!(with(ints(&[3, 2])), "?;[2]", "[3,2]");
        infer_error!(
            with(ints(&[3, 3])),
            "[2,3];[2]",
            "Cannot reshape a tensor with 6 elements to shape [3,3] (9 elements)"
        );
        // One unknown output dim, inferred from a known input.
        infer_ok!(with(longs(&[-1, 2])), "[2,3];[2]", "[3,2]");
        infer_error!(
            with(ints(&[-1, 4])),
            "[2,3];[2]",
            "Dimension size must be evenly divisible by 4 but is 6"
        );
        // One unknown input dim: checked against a known output.
        infer_ok!(with(ints(&[3, 4])), "[2,?];[2]", "[3,4]");
        infer_error!(
            with(ints(&[5, 3])),
            "[2,?];[2]",
            "Dimension size must be evenly divisible by 2 but is 15"
        );
        // One unknown dim on each side, with equal known parts: the same dim.
        infer_ok!(with(ints(&[-1, 6])), "[6,?];[2]", "[d0_1,6]");
        infer_ok!(with(ints(&[-1, 5])), "[6,?];[2]", "[?,5]");
        // Two unknown input dims: nothing to infer.
        infer_ok!(with(ints(&[-1, 4])), "[?,?];[2]", "[?,4]");
        infer_ok!(with(ints(&[0, -1])), "[0,5];[2]", "[0,?]");
        infer_ok!(with(ints(&[])), "[1,1];[0]", "[]");
        infer_error!(
            with(ints(&[2, -2])),
            "[4];[2]",
            "Invalid value in tensor used for shape: -2"
        );
    }

    #[test]
    fn expand_dims_shape_fn() {
        let op = ShapeTestOp::new("ExpandDims");
        infer_ok!(op, "?;?", "?");
        infer_ok!(op, "[2,?];[]", "?");
        let with = |t: Tensor| ShapeTestOp::new("ExpandDims").input_tensor(1, t);
        infer_ok!(with(Tensor::scalar(0i32)), "?;[]", "?");
        infer_ok!(with(Tensor::scalar(0i32)), "[2,?];[]", "[1,d0_0,d0_1]");
        infer_ok!(with(Tensor::scalar(1i64)), "[2,?];[]", "[d0_0,1,d0_1]");
        infer_ok!(with(Tensor::scalar(2i32)), "[2,?];[]", "[d0_0,d0_1,1]");
        infer_ok!(with(Tensor::scalar(-1i32)), "[2,?];[]", "[d0_0,d0_1,1]");
        infer_ok!(with(Tensor::scalar(-3i64)), "[2,?];[]", "[1,d0_0,d0_1]");
        infer_ok!(with(ints(&[0])), "[];[1]", "[1]");
        infer_error!(
            with(Tensor::scalar(3i32)),
            "[2,?];[]",
            "dim 3 not in the interval [-3, 2]."
        );
        infer_error!(
            with(Tensor::scalar(-4i32)),
            "[2,?];[]",
            "dim -4 not in the interval [-3, 2]."
        );
        infer_error!(
            with(ints(&[0, 1])),
            "?;[2]",
            "'dim' input must be a tensor with a single value"
        );
    }

    #[test]
    fn squeeze_shape_fn() {
        let all = ShapeTestOp::new("Squeeze").attr("squeeze_dims", Vec::<i64>::new());
        infer_ok!(all, "?", "?");
        infer_ok!(all, "[1,4,1,5,1]", "[d0_1,d0_3]");
        infer_ok!(all, "[1,?,1]", "?");
        infer_ok!(all, "[1,1]", "[]");
        let some = ShapeTestOp::new("Squeeze").attr("squeeze_dims", vec![1i64, -1]);
        infer_ok!(some, "?", "?");
        infer_ok!(some, "[4,1,?]", "[d0_0]");
        infer_ok!(some, "[1,?,1,1]", "[d0_0,d0_2]");
        infer_error!(
            some,
            "[4,6,1]",
            "Can not squeeze dim[1], expected a dimension of 1, got 6"
        );
        infer_error!(some, "[1]", "squeeze_dims[0] not in [-1,1).");
        infer_error!(
            ShapeTestOp::new("Squeeze"),
            "[1]",
            "No attr named 'squeeze_dims'"
        );
    }

    #[test]
    fn fill_shape_fn() {
        let op = ShapeTestOp::new("Fill");
        infer_ok!(op, "?;?", "?");
        infer_ok!(op, "[?];[]", "?");
        infer_ok!(op, "[3];[]", "[?,?,?]");
        infer_error!(op, "[2,2];[]", "Shape must be rank 1 but is rank 2");
        infer_error!(op, "[2];[1]", "Shape must be rank 0 but is rank 1");
        let with = |t: Tensor| ShapeTestOp::new("Fill").input_tensor(0, t);
        infer_ok!(with(ints(&[2, 0, 3])), "[3];[]", "[2,0,3]");
        infer_ok!(with(ints(&[2, 3])), "?;?", "[2,3]");
        infer_error!(
            with(ints(&[2, -1])),
            "[2];[]",
            "Fill dimensions must be >= 0"
        );
        let op = ShapeTestOp::new("Fill")
            .attr("index_type", DataType::Int64)
            .input_tensor(0, longs(&[4]));
        infer_ok!(op, "[1];[]", "[4]");
    }

    #[test]
    fn broadcast_shape_fns() {
        let op = ShapeTestOp::new("BroadcastTo");
        infer_ok!(op, "?;[?]", "?");
        infer_ok!(op, "?;[2]", "[?,?]");
        infer_ok!(op, "[2,1];[3]", "[?,d0_0,?]");
        infer_error!(op, "[2];[]", "Shape must be rank 1 but is rank 0");
        infer_error!(
            op,
            "[1,2,3];[2]",
            "Shape must be at most rank 2 but is rank 3"
        );
        let with = |t: Tensor| ShapeTestOp::new("BroadcastTo").input_tensor(1, t);
        infer_ok!(with(ints(&[2, 5])), "[5];[2]", "[2,d0_0]");
        infer_ok!(with(ints(&[2, 5])), "[?];[2]", "[2,5]");
        infer_ok!(with(longs(&[4, 3])), "?;[2]", "[4,3]");
        infer_ok!(with(ints(&[-1, 3])), "[7,1];[2]", "[d0_0,3]");
        infer_error!(
            with(ints(&[2, 4])),
            "[3];[2]",
            "Dimensions must be equal, but are 3 and 4"
        );
        let op = ShapeTestOp::new("BroadcastArgs");
        infer_ok!(op, "?;?", "[?]");
        infer_ok!(op, "[3];[?]", "[?]");
        infer_ok!(op, "[2];[4]", "[4]");
        infer_error!(op, "[2,2];[2]", "Shape must be rank 1 but is rank 2");
        let op = ShapeTestOp::new("BroadcastGradientArgs");
        infer_ok!(op, "?;?", "[?];[?]");
        infer_ok!(op, "[2];[4]", "[?];[?]");
        infer_error!(op, "[2];[]", "Shape must be rank 1 but is rank 0");
    }

    #[test]
    fn range_shape_fn() {
        let op = ShapeTestOp::new("Range").attr("Tidx", DataType::Int32);
        infer_ok!(op, "?;?;?", "[?]");
        infer_ok!(op, "[];[];[]", "[?]");
        infer_error!(
            op,
            "[1];[];[]",
            "Shape must be rank 0 but is rank 1\n\t for 'start'"
        );
        infer_error!(op, "[];[];[2]", "for 'delta'");
        infer_error!(
            ShapeTestOp::new("Range"),
            "[];[];[]",
            "No attr named 'Tidx'"
        );
        let consts = |dtype: DataType, s: Tensor, l: Tensor, d: Tensor| {
            ShapeTestOp::new("Range")
                .attr("Tidx", dtype)
                .input_tensor(0, s)
                .input_tensor(1, l)
                .input_tensor(2, d)
        };
        let i32s = |s: i32, l: i32, d: i32| {
            consts(
                DataType::Int32,
                Tensor::scalar(s),
                Tensor::scalar(l),
                Tensor::scalar(d),
            )
        };
        infer_ok!(i32s(0, 10, 3), "[];[];[]", "[4]");
        infer_ok!(i32s(10, 0, -2), "[];[];[]", "[5]");
        infer_ok!(i32s(3, 3, 1), "[];[];[]", "[0]");
        infer_error!(
            i32s(5, 1, 1),
            "[];[];[]",
            "Requires start <= limit when delta > 0: 5/1"
        );
        infer_error!(
            i32s(1, 5, -1),
            "[];[];[]",
            "Requires start >= limit when delta < 0: 1/5"
        );
        infer_error!(i32s(1, 1, 0), "[];[];[]", "Requires delta != 0");
        let f = consts(
            DataType::Float,
            Tensor::scalar(0f32),
            Tensor::scalar(1f32),
            Tensor::scalar(0.3f32),
        );
        infer_ok!(f, "[];[];[]", "[4]");
        let big = consts(
            DataType::Int64,
            Tensor::scalar(-(1i64 << 62)),
            Tensor::scalar(1i64 << 62),
            Tensor::scalar(1i64 << 61),
        );
        infer_ok!(big, "[];[];[]", "[4]");
    }

    #[test]
    fn invert_permutation_shape_fn() {
        let op = ShapeTestOp::new("InvertPermutation");
        infer_ok!(op, "?", "[?]");
        infer_ok!(op, "[3]", "in0");
        infer_error!(op, "[]", "Shape must be rank 1 but is rank 0");
    }
}
