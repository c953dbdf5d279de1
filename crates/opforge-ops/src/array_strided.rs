//! `StridedSlice`: NumPy-style basic indexing (`x[1:, ::-1, ..., tf.newaxis, 3]`)
//! with TensorFlow 2.21's OpDef, its validation (`ValidateStridedSliceOp`:
//! the sparse spec of the call is expanded into a dense per-dimension spec,
//! then begin/end are made canonical and clamped as Python slicing does) and
//! a CPU kernel for every dtype.

use crate::array_slice::{
    gather, movable_types, produce_output, to_carrier, with_carrier, Elem,
    StridedView,
};
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::{
    ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};

/// The names of the ops this module registers.
pub const OPS: &[&str] = &["StridedSlice"];

/// Keeps this module's object code, and so its registrations, in the binary
/// (see [`crate::link`]).
#[inline(never)]
pub fn link() {
    std::hint::black_box(OPS);
}

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
    ));

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
        _ => crate::util::index_values(t, what),
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
    let n = strides_t.num_elements();
    let begin_ok = begin_t.rank() == 1 && begin_t.num_elements() == n && n < 32;
    let end_ok = end_t.rank() == 1 && end_t.num_elements() == n;
    ensure!(
        begin_ok && end_ok && strides_t.rank() == 1,
        InvalidArgument,
        "Expected begin, end, and strides to be 1D equal size tensors, but got shapes {}, {}, and {} instead.",
        begin_t.shape(),
        end_t.shape(),
        strides_t.shape()
    );
    let ellipsis_mask = masks.ellipsis as u32;
    ensure!(
        ellipsis_mask & ellipsis_mask.wrapping_sub(1) == 0,
        InvalidArgument,
        "Multiple ellipses in slice spec not allowed"
    );
    let begin = index_vec(begin_t, "begin")?;
    let end = index_vec(end_t, "end")?;
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
            let next_index = (dims as i64 - (sparse_dims as i64 - i as i64)
                + 1
                + num_add_axis_after_ellipsis)
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
            d_begin[full_index] = begin[i];
            d_end[full_index] = end[i];
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
        let interval = d_end[i] - d_begin[i];
        let size = if interval == 0 || ((interval < 0) != (stride < 0)) {
            0
        } else {
            interval / stride + i64::from(interval % stride != 0)
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
    KernelDefBuilder::new("StridedSlice")
        .type_constraint_list("T", &movable_types())
        .host_memory("begin")
        .host_memory("end")
        .host_memory("strides"),
    StridedSliceOp
);
