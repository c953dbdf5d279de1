//! `StridedSlice`: NumPy-style basic indexing (`x[1:, ::-1, ..., tf.newaxis, 3]`)
//! with TensorFlow 2.21's OpDef, its validation (`ValidateStridedSliceOp`:
//! the sparse spec of the call is expanded into a dense per-dimension spec,
//! then begin/end are made canonical and clamped as Python slicing does) and
//! a CPU kernel for every dtype.

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::InferenceContext;
use opforge_core::{
    ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};
use opforge_ops_base::cpu::mover::layout::{CopyView, StridedView};
use opforge_ops_base::cpu::mover::{
    movable_types, move_in_place, move_to_output, Carrier, MoveElements,
};
use opforge_ops_base::shape::*;

register_op!(OpDefBuilder::new("StridedSlice")
    .input("input: T")
    .input("begin: Index")
    .input("end: Index")
    .input("strides: Index")
    .output("output: T")
    .attr("T: type")
    .attr("Index: {int16, int32, int64}")
    .attr("begin_mask: int = 0")
    .attr("end_mask: int = 0")
    .attr("ellipsis_mask: int = 0")
    .attr("new_axis_mask: int = 0")
    .attr("shrink_axis_mask: int = 0")
    .doc(
        "Return a strided slice from `input`.\n\n\
         `begin`, `end` and `strides` (all of length `n`) and the masks encode a\n\
         Python slice spec `input[spec_0, ..., spec_{n-1}]`: spec `i` is\n\
         `begin[i]:end[i]:strides[i]`, where bit `i` of `begin_mask` (`end_mask`)\n\
         leaves the begin (end) out; of `ellipsis_mask`, makes the spec `...` (at\n\
         most one); of `new_axis_mask`, `tf.newaxis`; of `shrink_axis_mask`, the\n\
         single index `begin[i]`, which removes the dimension. Negative indices\n\
         count from the end, out-of-range begins and ends are clamped as in\n\
         Python, and negative strides walk backwards.\n\n\
         begin: `begin[k]` specifies the offset into the `k`th range specification.\n\n\
         end: `end[i]` is like `begin` with the exception that `end_mask` is used to\n\
         determine full ranges.\n\n\
         strides: `strides[i]` specifies the increment in the `i`th specification\n\
         after extracting a given element. Negative indices will reverse the original\n\
         slice order. Out or range values are clamped to `[0,dim[i]) if slice[i]>0` or\n\
         `[-1,dim[i]-1] if slice[i] < 0`\n\n\
         begin_mask: a bitmask where a bit `i` being 1 means to ignore the begin value\n\
         and instead use the largest interval possible.\n\n\
         end_mask: analogous to `begin_mask`.\n\n\
         ellipsis_mask: a bitmask where bit `i` being 1 means the `i`th position is\n\
         actually an ellipsis.\n\n\
         new_axis_mask: a bitmask where bit `i` being 1 means the `i`th specification\n\
         creates a new shape 1 dimension.\n\n\
         shrink_axis_mask: a bitmask where bit `i` implies that the `i`th\n\
         specification should shrink the dimensionality."
    )
    .set_shape_fn(strided_slice_shape));

/// `StridedSlice`: the final shape of [`validate_strided_slice_partial`] on
/// what is known of the input shape, with the constant `strides` (and
/// `begin`/`end` where constant); unknown without `strides`, the input's
/// rank or the spec's length.
fn strided_slice_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let (b, e, s) = (c.input(1), c.input(2), c.input(3));
    let begin_shape = c.with_rank(b, 1)?;
    let end_shape = c.with_rank(e, 1)?;
    let strides_shape = c.with_rank(s, 1)?;
    let spec_shape = c.merge(begin_shape, end_shape)?;
    let spec_shape = c.merge(spec_shape, strides_shape)?;
    let sparse_dims = c.dim(spec_shape, 0);
    let (Some(input_shape), Some(_), Some(strides)) = (
        c.shape_values(input),
        c.value(sparse_dims),
        c.input_tensor(3).cloned(),
    ) else {
        let out = c.unknown_shape();
        c.set_output(0, out);
        return Ok(());
    };
    let masks = StridedSliceMasks {
        begin: c.get_attr("begin_mask")?,
        end: c.get_attr("end_mask")?,
        ellipsis: c.get_attr("ellipsis_mask")?,
        new_axis: c.get_attr("new_axis_mask")?,
        shrink_axis: c.get_attr("shrink_axis_mask")?,
    };
    let info = validate_strided_slice_partial(
        &input_shape,
        c.input_tensor(1),
        c.input_tensor(2),
        &strides,
        &masks,
    )?;
    let out = c.make_partial_shape(Some(&info.final_shape));
    c.set_output(0, out);
    if let Some(data) = c.input_handle_shapes_and_types(0).map(<[_]>::to_vec) {
        c.set_output_handle_shapes_and_types(0, data);
    }
    Ok(())
}

/// The five mask attrs of a strided slice (TensorFlow reads them as int32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StridedSliceMasks {
    /// Bit `i`: spec `i` has no begin.
    pub begin: i32,
    /// Bit `i`: spec `i` has no end.
    pub end: i32,
    /// Bit `i`: spec `i` is `...`.
    pub ellipsis: i32,
    /// Bit `i`: spec `i` is `tf.newaxis`.
    pub new_axis: i32,
    /// Bit `i`: spec `i` is a single index.
    pub shrink_axis: i32,
}

impl StridedSliceMasks {
    /// The masks of a node's attrs.
    pub(crate) fn from_attrs(ctx: &OpKernelConstruction<'_>) -> Result<StridedSliceMasks> {
        Ok(StridedSliceMasks {
            begin: ctx.get_attr("begin_mask")?,
            end: ctx.get_attr("end_mask")?,
            ellipsis: ctx.get_attr("ellipsis_mask")?,
            new_axis: ctx.get_attr("new_axis_mask")?,
            shrink_axis: ctx.get_attr("shrink_axis_mask")?,
        })
    }
}

/// A validated strided slice of an input of known shape (TensorFlow's
/// `ValidateStridedSliceOp` outputs), for `StridedSlice` and for ops that
/// share its semantics (its gradient, strided assignment).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StridedSliceInfo {
    /// Canonical begin per input dimension (in range wherever the size is non-zero).
    pub begin: Vec<i64>,
    /// Canonical end per input dimension.
    pub end: Vec<i64>,
    /// Stride per input dimension (non-zero).
    pub strides: Vec<i64>,
    /// The sliced shape, one dimension per input dimension.
    pub processing_shape: Vec<i64>,
    /// The output shape: the processing shape with shrunk dimensions
    /// removed and new axes inserted.
    pub final_shape: Vec<i64>,
    /// The slice takes the whole input.
    pub is_identity: bool,
    /// Every stride is 1.
    pub is_simple_slice: bool,
    /// Only dimension 0 is sliced, with stride 1 (a contiguous run of the input).
    pub slice_dim0: bool,
}

/// The values of an int16, int32 or int64 index tensor.
fn index_vec(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    match t.dtype() {
        DataType::Int16 => Ok(t.flat::<i16>()?.iter().map(|&v| v as i64).collect()),
        _ => opforge_ops_base::args::index_values(t, what),
    }
}

/// Where each output dimension comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Gather {
    /// Dense (input) dimension `k`.
    Dim(usize),
    /// A new axis of size 1.
    NewAxis,
    /// A shrunk dimension (not in the output).
    Shrink,
}

fn bit(mask: u32, i: usize) -> bool {
    i < 32 && (mask >> i) & 1 == 1
}

/// TensorFlow's `ValidateStridedSliceOp` for a fully known input shape.
pub(crate) fn validate_strided_slice(
    input_shape: &[i64],
    begin_t: &Tensor,
    end_t: &Tensor,
    strides_t: &Tensor,
    masks: &StridedSliceMasks,
) -> Result<StridedSliceInfo> {
    validate_strided_slice_partial(input_shape, Some(begin_t), Some(end_t), strides_t, masks)
}

/// TensorFlow's `ValidateStridedSliceOp` on a partially known input shape
/// (`-1` dims are unknown) with `begin` and `end` possibly unknown, as shape
/// inference uses it: the shapes then hold `-1` where a size is unknown (the
/// `begin`/`end` fields are meaningful only when both are known).
pub(crate) fn validate_strided_slice_partial(
    input_shape: &[i64],
    begin_t: Option<&Tensor>,
    end_t: Option<&Tensor>,
    strides_t: &Tensor,
    masks: &StridedSliceMasks,
) -> Result<StridedSliceInfo> {
    let n = strides_t.num_elements();
    let begin_ok = begin_t.is_none_or(|b| b.rank() == 1 && b.num_elements() == n && n < 32);
    let end_ok = end_t.is_none_or(|e| e.rank() == 1 && e.num_elements() == n);
    if !(begin_ok && end_ok && strides_t.rank() == 1) {
        return Err(match (begin_t, end_t) {
            (Some(b), Some(e)) => Status::invalid_argument(format!(
                "Expected begin, end, and strides to be 1D equal size tensors, but got shapes {}, {}, and {} instead.",
                b.shape(),
                e.shape(),
                strides_t.shape()
            )),
            _ => Status::invalid_argument(format!(
                "Expected begin, end, and strides to be 1D equal size tensors, but got shape {} for strides.",
                strides_t.shape()
            )),
        });
    }
    let ellipsis_mask = masks.ellipsis as u32;
    ensure!(
        ellipsis_mask & ellipsis_mask.wrapping_sub(1) == 0,
        InvalidArgument,
        "Multiple ellipses in slice spec not allowed"
    );
    let begin = begin_t.map(|t| index_vec(t, "begin")).transpose()?;
    let end = end_t.map(|t| index_vec(t, "end")).transpose()?;
    let (begin_valid, end_valid) = (begin.is_some(), end.is_some());
    let strides = index_vec(strides_t, "strides")?;
    let (begin_mask, end_mask) = (masks.begin as u32, masks.end as u32);
    let (new_axis_mask, shrink_mask) = (masks.new_axis as u32, masks.shrink_axis as u32);

    // Step 1: count the new axes after the ellipsis; without an ellipsis,
    // one is implied after the last spec.
    let mut sparse_ellipsis = ellipsis_mask;
    let mut sparse_dims = n;
    let mut num_add_axis_after_ellipsis = 0i64;
    let mut ellipsis_seen = false;
    for i in 0..n {
        if ellipsis_seen && bit(new_axis_mask, i) {
            num_add_axis_after_ellipsis += 1;
        }
        if bit(ellipsis_mask, i) {
            ellipsis_seen = true;
        }
    }
    if !ellipsis_seen {
        sparse_ellipsis |= 1 << n;
        sparse_dims += 1;
    }

    // Step 2: the dense spec, one entry per input dimension.
    let dims = input_shape.len();
    let mut d_begin = vec![0i64; dims];
    let mut d_end = vec![0i64; dims];
    let mut d_strides = vec![0i64; dims];
    let mut d_begin_mask = vec![false; dims];
    let mut d_end_mask = vec![false; dims];
    let mut d_shrink = vec![false; dims];
    let mut gather_indices: Vec<Gather> = Vec::with_capacity(sparse_dims + dims);
    let mut full_index = 0usize;
    for i in 0..sparse_dims {
        if bit(sparse_ellipsis, i) {
            let next_index =
                (dims as i64 - (sparse_dims as i64 - i as i64) + 1 + num_add_axis_after_ellipsis)
                    .min(dims as i64);
            while (full_index as i64) < next_index {
                d_begin[full_index] = 0;
                d_end[full_index] = 0;
                d_strides[full_index] = 1;
                d_begin_mask[full_index] = true;
                d_end_mask[full_index] = true;
                gather_indices.push(Gather::Dim(full_index));
                full_index += 1;
            }
        } else if bit(new_axis_mask, i) {
            gather_indices.push(Gather::NewAxis);
        } else {
            ensure!(
                full_index < dims,
                InvalidArgument,
                "Index out of range using input dim {}; input has only {} dims",
                full_index,
                dims
            );
            d_begin[full_index] = begin.as_ref().map_or(0, |b| b[i]);
            d_end[full_index] = end.as_ref().map_or(0, |e| e[i]);
            d_strides[full_index] = strides[i];
            d_begin_mask[full_index] = bit(begin_mask, i);
            d_end_mask[full_index] = bit(end_mask, i);
            if bit(shrink_mask, i) {
                gather_indices.push(Gather::Shrink);
                d_shrink[full_index] = true;
            } else {
                gather_indices.push(Gather::Dim(full_index));
            }
            full_index += 1;
        }
    }

    // Step 3: canonical, clamped begin and end, and the processing shape.
    let mut is_identity = true;
    let mut slice_dim0 = true;
    let mut is_simple_slice = true;
    let mut processing_shape = Vec::with_capacity(dims);
    for i in 0..dims {
        let stride = d_strides[i];
        let dim = input_shape[i];
        ensure!(
            stride != 0,
            InvalidArgument,
            "strides[{}] must be non-zero",
            i
        );
        let shrink = d_shrink[i];
        if dim == -1 {
            // An unknown dim (shape inference only): a shrunk one is 1.
            processing_shape.push(if shrink { 1 } else { -1 });
            continue;
        }
        ensure!(
            !(shrink && stride <= 0),
            InvalidArgument,
            "only stride 1 allowed on non-range indexing."
        );
        is_simple_slice &= stride == 1;
        // Python's slice.indices: [0, dim] going forwards, [-1, dim - 1] backwards.
        let (lo, hi) = if stride > 0 { (0, dim) } else { (-1, dim - 1) };
        let canonical = |x: i64, masked: bool, is_begin: bool| -> i64 {
            if masked {
                // A missing begin starts at the first element in the
                // direction of travel; a missing end stops after the last.
                match (stride > 0, is_begin) {
                    (true, true) | (false, false) => lo,
                    _ => hi,
                }
            } else {
                let fwd = if x < 0 { dim.saturating_add(x) } else { x };
                fwd.clamp(lo, hi)
            }
        };
        let both_masked = d_begin_mask[i] && d_end_mask[i];
        let interval = if begin_valid && end_valid {
            if shrink {
                let b = d_begin[i];
                let fwd = if b < 0 { dim.saturating_add(b) } else { b };
                ensure!(
                    0 <= fwd && fwd < dim,
                    InvalidArgument,
                    "slice index {} of dimension {} out of bounds.",
                    fwd,
                    i
                );
                d_begin[i] = fwd;
                d_end[i] = fwd + 1;
            } else {
                d_begin[i] = canonical(d_begin[i], d_begin_mask[i], true);
                d_end[i] = canonical(d_end[i], d_end_mask[i], false);
            }
            let take_all = stride == 1 && d_begin[i] == 0 && d_end[i] == dim;
            is_identity &= take_all;
            slice_dim0 &= (i == 0 && stride == 1) || take_all;
            Some(d_end[i] - d_begin[i])
        } else {
            // Unknown begin or end (shape inference only): a shrunk dim has
            // size 1, a fully masked one covers the whole dim.
            is_identity &= stride == 1 && both_masked;
            slice_dim0 &= (i == 0 && stride == 1) || both_masked;
            if shrink {
                Some(1)
            } else if both_masked {
                Some(if stride < 0 { -dim } else { dim })
            } else {
                None
            }
        };
        let size = match interval {
            None => -1,
            Some(interval) if interval == 0 || ((interval < 0) != (stride < 0)) => 0,
            Some(interval) => interval / stride + i64::from(interval % stride != 0),
        };
        processing_shape.push(size);
    }

    // Step 4: the final shape.
    let final_shape = gather_indices
        .iter()
        .filter_map(|g| match *g {
            Gather::Dim(k) => Some(processing_shape[k]),
            Gather::NewAxis => Some(1),
            Gather::Shrink => None,
        })
        .collect();
    Ok(StridedSliceInfo {
        begin: d_begin,
        end: d_end,
        strides: d_strides,
        processing_shape,
        final_shape,
        is_identity,
        is_simple_slice,
        slice_dim0,
    })
}

struct StridedSliceOp {
    masks: StridedSliceMasks,
}

impl CreateKernel for StridedSliceOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(StridedSliceOp {
            masks: StridedSliceMasks::from_attrs(ctx)?,
        })
    }
}

impl OpKernel for StridedSliceOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let info = validate_strided_slice(
            input.dims(),
            ctx.input(1),
            ctx.input(2),
            ctx.input(3),
            &self.masks,
        )?;
        if info.is_identity {
            return ctx.set_output(0, input.reshaped(&info.final_shape)?);
        }
        if info.slice_dim0 {
            // A contiguous run of whole rows: a view of the input. begin may
            // exceed end for an empty slice.
            let (b, e) = (info.begin[0], info.end[0]);
            let view = input.slice_outer(b.min(e) as usize, e as usize)?;
            return ctx.set_output(0, view.reshaped(&info.final_shape)?);
        }
        let shape = TensorShape::new(&info.final_shape)?;
        if info.processing_shape.contains(&0) {
            ctx.allocate_output(0, shape)?;
            return Ok(());
        }
        let view = StridedView::of_slice(
            input.dims(),
            &info.begin,
            &info.processing_shape,
            &info.strides,
        );
        move_to_output(ctx, 0, &[&input], shape, &CopyView { view: &view })
    }
}

register_kernel!(
    KernelDefBuilder::new("StridedSlice")
        .type_constraint_list("T", &movable_types())
        .host_memory("begin")
        .host_memory("end")
        .host_memory("strides"),
    StridedSliceOp
);

// ---- Gradients ----

/// `StridedSliceGrad`'s CPU kernel: `dy` scattered into zeros of shape
/// `shape` where `StridedSlice(begin, end, strides)` of that shape reads.
struct StridedSliceGradOp {
    masks: StridedSliceMasks,
}

impl CreateKernel for StridedSliceGradOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(StridedSliceGradOp {
            masks: StridedSliceMasks::from_attrs(ctx)?,
        })
    }
}

/// The offset in the output (of `shape`, `len` elements) of each of the
/// `n` elements of `dy`, in order.
fn scatter_offsets(
    info: &StridedSliceInfo,
    shape: &[i64],
    n: usize,
    len: usize,
) -> Result<Vec<usize>> {
    let rank = shape.len();
    let mut in_strides = vec![1i64; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * shape[i + 1];
    }
    let mut idx = vec![0i64; rank];
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        let mut off = 0i64;
        for i in 0..rank {
            off += (info.begin[i] + idx[i] * info.strides[i]) * in_strides[i];
        }
        let off = usize::try_from(off)
            .ok()
            .filter(|&o| o < len)
            .ok_or_else(|| Status::internal("StridedSliceGrad: offset out of range"))?;
        offsets.push(off);
        for i in (0..rank).rev() {
            idx[i] += 1;
            if idx[i] < info.processing_shape[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    Ok(offsets)
}

/// `dst[offsets[k]] = srcs[0][k]`: the scatter of `StridedSliceGrad`.
struct Scatter {
    offsets: Vec<usize>,
}

impl MoveElements for Scatter {
    fn run<T: Carrier>(&self, _: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        for (&o, v) in self.offsets.iter().zip(srcs[0]) {
            dst[o].clone_from(v);
        }
    }
}

impl OpKernel for StridedSliceGradOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let shape_t = ctx.input(0);
        ensure!(
            shape_t.rank() == 1,
            InvalidArgument,
            "shape must be 1-D, got shape {}",
            shape_t.shape()
        );
        let shape = index_vec(shape_t, "shape")?;
        ensure!(
            shape.iter().all(|&d| d >= 0),
            InvalidArgument,
            "shape must not have negative dimensions, got {}",
            opforge_ops_base::args::fmt_shape(&shape)
        );
        let info = validate_strided_slice(
            &shape,
            ctx.input(1),
            ctx.input(2),
            ctx.input(3),
            &self.masks,
        )?;
        let dy = ctx.input(4).clone();
        ensure!(
            dy.dims() == info.final_shape.as_slice(),
            InvalidArgument,
            "shape of dy was {} instead of {}",
            opforge_ops_base::args::fmt_shape(dy.dims()),
            opforge_ops_base::args::fmt_shape(&info.final_shape)
        );
        let mut out = Tensor::zeros(dy.dtype(), &shape)?;
        if !info.processing_shape.contains(&0) {
            let body = Scatter {
                offsets: scatter_offsets(&info, &shape, dy.num_elements(), out.num_elements())?,
            };
            move_in_place(ctx.thread_pool(), &mut out, &[&dy], &body)?;
        }
        ctx.set_output(0, out)
    }
}

register_kernel!(
    KernelDefBuilder::new("StridedSliceGrad")
        .type_constraint_list(
            "T",
            &[
                DataType::Float,
                DataType::Double,
                DataType::Half,
                DataType::BFloat16,
                DataType::Int32,
                DataType::Int64,
                DataType::Complex64,
                DataType::Complex128,
            ]
        )
        .host_memory("shape")
        .host_memory("begin")
        .host_memory("end")
        .host_memory("strides"),
    StridedSliceGradOp
);

/// The gradients of `StridedSlice` (through `StridedSliceGrad`) and of
/// `StridedSliceGrad` (a `StridedSlice` of the gradient), as TensorFlow's
/// `array_grad.py` defines them.
mod gradients;

#[cfg(test)]
mod gradient_tests;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod shape_fn_tests;

// `StridedSliceGrad`: OpDef and shape function only (no CPU kernel
// yet: running it eagerly fails with TensorFlow's "No OpKernel was registered" error).

register_op!(OpDefBuilder::new("StridedSliceGrad")
    .input("shape: Index")
    .input("begin: Index")
    .input("end: Index")
    .input("strides: Index")
    .input("dy: T")
    .output("output: T")
    .attr("T: type")
    .attr("Index: {int32, int64}")
    .attr("begin_mask: int = 0")
    .attr("end_mask: int = 0")
    .attr("ellipsis_mask: int = 0")
    .attr("new_axis_mask: int = 0")
    .attr("shrink_axis_mask: int = 0")
    .set_shape_fn(with_inputs(1, strided_slice_grad_shape))
    .doc(
        "Returns the gradient of `StridedSlice`.\n\n\
         `dy` is scattered into a zero tensor of shape `shape` where `StridedSlice` read it.",
    ));

fn strided_slice_grad_shape(c: &mut InferenceContext) -> Result<()> {
    let out = c.make_shape_from_shape_tensor(0)?;
    c.set_output(0, out);
    Ok(())
}
