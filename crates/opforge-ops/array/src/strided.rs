//! `StridedSlice`: NumPy-style basic indexing (`x[1:, ::-1, ..., tf.newaxis, 3]`)
//! with TensorFlow 2.21's OpDef, its validation (`ValidateStridedSliceOp`:
//! the sparse spec of the call is expanded into a dense per-dimension spec,
//! then begin/end are made canonical and clamped as Python slicing does) and
//! a CPU kernel for every dtype.

use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::InferenceContext;
use opforge_core::{
    ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};
use opforge_ops_base::cpu::carrier::{
    gather, movable_types, produce_output, to_carrier, Elem, StridedView,
};
use opforge_ops_base::with_carrier;

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

/// Adds `dy` (in the slice's row-major order) into `out` at the slice's positions.
fn strided_scatter<T: opforge_core::Element + Copy>(
    info: &StridedSliceInfo,
    shape: &[i64],
    dy: &Tensor,
    out: &mut Tensor,
) -> Result<()> {
    let src = dy.flat::<T>()?;
    let dst = out.flat_mut::<T>()?;
    let rank = shape.len();
    let mut in_strides = vec![1i64; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * shape[i + 1];
    }
    let mut idx = vec![0i64; rank];
    for &v in src {
        let mut off = 0i64;
        for i in 0..rank {
            off += (info.begin[i] + idx[i] * info.strides[i]) * in_strides[i];
        }
        let slot = usize::try_from(off)
            .ok()
            .and_then(|o| dst.get_mut(o))
            .ok_or_else(|| Status::internal("StridedSliceGrad: offset out of range"))?;
        *slot = v;
        for i in (0..rank).rev() {
            idx[i] += 1;
            if idx[i] < info.processing_shape[i] {
                break;
            }
            idx[i] = 0;
        }
    }
    Ok(())
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
            opforge_core::dispatch!(dy.dtype(), T => strided_scatter::<T>(&info, &shape, &dy, &mut out)?,
                [Float, Double, Half, BFloat16, Int32, Int64, Complex64, Complex128],
                return Err(Status::unimplemented(format!("StridedSliceGrad for {}", dy.dtype()))));
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
mod gradients {
    use opforge_core::attrs::{AttrMap, IntoAttrValue};
    use opforge_core::autodiff::{GradOp, Ops, Sym, SymArg};
    use opforge_core::{register_gradient, Result, Status};

    type Grads = Result<Vec<Option<Sym>>>;

    const MASKS: [&str; 5] = [
        "begin_mask",
        "end_mask",
        "ellipsis_mask",
        "new_axis_mask",
        "shrink_axis_mask",
    ];

    fn masks(op: &GradOp<'_>) -> AttrMap {
        MASKS
            .iter()
            .filter_map(|&k| op.attrs.get(k).map(|v| (k.to_string(), v.clone())))
            .collect()
    }

    fn call1(o: &mut dyn Ops, name: &str, inputs: &[Sym], attrs: &AttrMap) -> Result<Sym> {
        let args: Vec<SymArg> = inputs.iter().map(|&s| SymArg::One(s)).collect();
        o.call(name, &args, attrs)?
            .pop()
            .ok_or_else(|| Status::internal(format!("{name} has no output")))
    }

    fn strided_slice_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None; 4]);
        };
        let (begin, end, strides) = (op.inputs[1], op.inputs[2], op.inputs[3]);
        let idx = o.dtype(begin).into_attr_value();
        let mut attrs = AttrMap::new();
        attrs.insert("out_type".to_string(), idx);
        let x = call1(o, "Shape", &[op.inputs[0]], &attrs)?;
        let dx = call1(
            o,
            "StridedSliceGrad",
            &[x, begin, end, strides, g],
            &masks(op),
        )?;
        Ok(vec![Some(dx), None, None, None])
    }

    fn strided_slice_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None; 5]);
        };
        let (begin, end, strides) = (op.inputs[1], op.inputs[2], op.inputs[3]);
        let ddy = call1(o, "StridedSlice", &[g, begin, end, strides], &masks(op))?;
        Ok(vec![None, None, None, None, Some(ddy)])
    }

    register_gradient!("StridedSlice", strided_slice_grad);
    register_gradient!("StridedSliceGrad", strided_slice_grad_grad);
}

#[cfg(test)]
mod gradient_tests {
    use opforge_core::attrs::{AttrMap, IntoAttrValue};
    use opforge_core::autodiff::{GradientTape, Ops, OpsExt, Sym, SymArg};
    use opforge_core::{Result, Tensor};
    use opforge_ops_base::testutil::{assert_close, ctx, t};
    use opforge_ops_base::testutil::{check, weighted};

    fn ss(o: &mut dyn Ops, x: Sym, b: &[i32], e: &[i32], s: &[i32], m: [i64; 5]) -> Result<Sym> {
        let (b, e, s) = (o.int_vector(b)?, o.int_vector(e)?, o.int_vector(s)?);
        let mut attrs = AttrMap::new();
        for (k, v) in [
            "begin_mask",
            "end_mask",
            "ellipsis_mask",
            "new_axis_mask",
            "shrink_axis_mask",
        ]
        .iter()
        .zip(m)
        {
            attrs.insert(k.to_string(), v.into_attr_value());
        }
        let args = [x, b, e, s].map(SymArg::One);
        Ok(o.call("StridedSlice", &args, &attrs)?[0])
    }

    #[test]
    fn strided_slice_grad() {
        let x: Vec<f64> = (0..24).map(|i| (i as f64) * 0.37 - 4.0).collect();
        type Case = (&'static [i32], &'static [i32], &'static [i32], [i64; 5]);
        let cases: [Case; 4] = [
            // x[:, ::-2, 1:3]
            (&[0, 0, 1], &[0, 0, 3], &[1, -2, 1], [1 | 2, 1 | 2, 0, 0, 0]),
            // x[1, ..., ::2]
            (&[1, 0, 0], &[2, 0, 0], &[1, 1, 2], [4, 4, 2, 0, 1]),
            // x[tf.newaxis, 0:2, 2]
            (&[0, 0, 2], &[0, 2, 3], &[1, 1, 1], [0, 0, 0, 1, 4]),
            // x[-1:0:-1, 1:]
            (&[-1, 1], &[0, 0], &[-1, 1], [0, 2, 0, 0, 0]),
        ];
        for (b, e, s, m) in cases {
            check(
                "StridedSlice",
                &move |o, xs| {
                    let y = ss(o, xs[0], b, e, s, m)?;
                    weighted(o, y)
                },
                &[(vec![2, 3, 4], x.clone())],
            );
        }
        // Hand-checked: x[1::2] of [5].
        let mut tape = GradientTape::new(ctx(), false);
        let xv = tape.watch(t(&[5], vec![1.0f64, 2.0, 3.0, 4.0, 5.0]));
        let y = ss(&mut tape, xv, &[1], &[5], &[2], [0; 5]).unwrap();
        let g = tape.gradient(y, &[xv]).unwrap()[0].unwrap();
        assert_close(tape.value(g), &[5], &[0.0, 1.0, 0.0, 1.0, 0.0], 0.0);
    }

    #[test]
    fn strided_slice_grad_kernel_and_its_gradient() {
        let c = ctx();
        let shape = Tensor::from_slice(&[2], &[2i64, 3]).unwrap();
        let b = Tensor::from_slice(&[2], &[0i64, 2]).unwrap();
        let e = Tensor::from_slice(&[2], &[2i64, 0]).unwrap();
        let s = Tensor::from_slice(&[2], &[1i64, -2]).unwrap();
        let dy = t(&[2, 1], vec![5.0f32, 7.0]);
        let out = c
            .op("StridedSliceGrad")
            .input(shape.clone())
            .input(b.clone())
            .input(e.clone())
            .input(s.clone())
            .input(dy)
            .run1()
            .unwrap();
        assert_close(&out, &[2, 3], &[0.0, 0.0, 5.0, 0.0, 0.0, 7.0], 0.0);
        let bad = c
            .op("StridedSliceGrad")
            .input(shape)
            .input(b)
            .input(e)
            .input(s)
            .input(t(&[3], vec![1.0f32, 2.0, 3.0]))
            .run1()
            .unwrap_err();
        assert!(
            bad.message()
                .contains("shape of dy was [3] instead of [2,1]"),
            "{bad}"
        );
        // Second order: the gradient of StridedSliceGrad w.r.t. dy.
        check(
            "StridedSliceGrad",
            &|o, xs| {
                let shape = o.int_vector(&[2, 3])?;
                let (b, e, s) = (
                    o.int_vector(&[0, 2])?,
                    o.int_vector(&[2, 0])?,
                    o.int_vector(&[1, -2])?,
                );
                let y = o.op1("StridedSliceGrad", &[shape, b, e, s, xs[0]], &[])?;
                weighted(o, y)
            },
            &[(vec![2, 1], vec![0.3, -1.2])],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::num_complex::Complex;
    use opforge_core::{Code, Element};
    use opforge_ops_base::testutil::{ctx, t};
    use proptest::prelude::*;

    fn v<T: Element>(x: &Tensor) -> Vec<T> {
        x.flat::<T>().unwrap().to_vec()
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

    /// One item of a Python subscript.
    #[derive(Clone, Debug)]
    enum Spec {
        /// `start:stop:step`, each optional.
        S(Option<i64>, Option<i64>, Option<i64>),
        /// A single index.
        I(i64),
        /// `tf.newaxis`.
        New,
        /// `...`.
        Ell,
    }
    use Spec::{Ell, New, I, S};

    fn s(a: Option<i64>, b: Option<i64>, c: Option<i64>) -> Spec {
        S(a, b, c)
    }

    /// The StridedSlice call TensorFlow's Python `__getitem__` makes for a subscript.
    fn encode(specs: &[Spec]) -> (Vec<i64>, Vec<i64>, Vec<i64>, StridedSliceMasks) {
        let (mut b, mut e, mut st) = (Vec::new(), Vec::new(), Vec::new());
        let mut m = StridedSliceMasks::default();
        for (i, spec) in specs.iter().enumerate() {
            let bit = 1 << i;
            match *spec {
                S(start, stop, step) => {
                    b.push(start.unwrap_or(0));
                    e.push(stop.unwrap_or(0));
                    st.push(step.unwrap_or(1));
                    if start.is_none() {
                        m.begin |= bit;
                    }
                    if stop.is_none() {
                        m.end |= bit;
                    }
                }
                I(k) => {
                    b.push(k);
                    e.push(k + 1);
                    st.push(1);
                    m.shrink_axis |= bit;
                }
                New => {
                    b.push(0);
                    e.push(0);
                    st.push(1);
                    m.new_axis |= bit;
                }
                Ell => {
                    b.push(0);
                    e.push(0);
                    st.push(1);
                    m.ellipsis |= bit;
                }
            }
        }
        (b, e, st, m)
    }

    fn run_raw(
        x: Tensor,
        b: &[i64],
        e: &[i64],
        st: &[i64],
        m: StridedSliceMasks,
        index: DataType,
    ) -> Result<Tensor> {
        let idx = |v: &[i64]| -> Tensor {
            let n = v.len() as i64;
            match index {
                DataType::Int16 => t(&[n], v.iter().map(|&x| x as i16).collect()),
                DataType::Int32 => t(&[n], v.iter().map(|&x| x as i32).collect()),
                _ => t(&[n], v.to_vec()),
            }
        };
        ctx()
            .op("StridedSlice")
            .input(x)
            .input(idx(b))
            .input(idx(e))
            .input(idx(st))
            .attr("begin_mask", m.begin as i64)
            .attr("end_mask", m.end as i64)
            .attr("ellipsis_mask", m.ellipsis as i64)
            .attr("new_axis_mask", m.new_axis as i64)
            .attr("shrink_axis_mask", m.shrink_axis as i64)
            .run1()
    }

    /// `x[specs]` through StridedSlice, as TensorFlow's Python front end calls it.
    fn sl(x: &Tensor, specs: &[Spec]) -> Result<Tensor> {
        let (b, e, st, m) = encode(specs);
        run_raw(x.clone(), &b, &e, &st, m, DataType::Int32)
    }

    fn masks(
        begin: i32,
        end: i32,
        ellipsis: i32,
        new_axis: i32,
        shrink_axis: i32,
    ) -> StridedSliceMasks {
        StridedSliceMasks {
            begin,
            end,
            ellipsis,
            new_axis,
            shrink_axis,
        }
    }

    #[track_caller]
    fn check(r: Result<Tensor>, dims: &[i64], want: &[i32]) {
        let r = r.unwrap();
        assert_eq!(r.dims(), dims, "{r:?}");
        assert_eq!(v::<i32>(&r), want);
    }

    #[test]
    fn python_subscripts_hand_checked() {
        let x = iota(&[3, 4]); // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
                               // x[1:] is rows 1 and 2, a view of the input.
        let r = sl(&x, &[s(Some(1), None, None)]).unwrap();
        assert_eq!(
            (r.dims(), v::<i32>(&r)),
            (&[2i64, 4][..], (4..12).collect())
        );
        assert!(r.shares_storage_with(&x));
        // x[::-1]
        check(
            sl(&x, &[s(None, None, Some(-1))]),
            &[3, 4],
            &[8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3],
        );
        // x[..., 0]
        check(sl(&x, &[Ell, I(0)]), &[3], &[0, 4, 8]);
        // x[:, tf.newaxis]
        check(
            sl(&x, &[s(None, None, None), New]),
            &[3, 1, 4],
            &(0..12).collect::<Vec<_>>(),
        );
        // x[-2:-1]
        check(
            sl(&x, &[s(Some(-2), Some(-1), None)]),
            &[1, 4],
            &[4, 5, 6, 7],
        );
        // x[1, ::-2]
        check(sl(&x, &[I(1), s(None, None, Some(-2))]), &[2], &[7, 5]);
        // x[1, 2], x[-1], x[-1, -1]
        check(sl(&x, &[I(1), I(2)]), &[], &[6]);
        check(sl(&x, &[I(-1)]), &[4], &[8, 9, 10, 11]);
        check(sl(&x, &[I(-1), I(-1)]), &[], &[11]);
        // Shrink and new axis combined: x[tf.newaxis, 1, tf.newaxis, 2:]
        check(
            sl(&x, &[New, I(1), New, s(Some(2), None, None)]),
            &[1, 1, 2],
            &[6, 7],
        );
        // x[..., tf.newaxis], x[tf.newaxis, ..., 1]
        check(
            sl(&x, &[Ell, New]),
            &[3, 4, 1],
            &(0..12).collect::<Vec<_>>(),
        );
        check(sl(&x, &[New, Ell, I(1)]), &[1, 3], &[1, 5, 9]);
        // x[:, 1:3], x[1:, ::3], x[::2, 1]
        check(
            sl(&x, &[s(None, None, None), s(Some(1), Some(3), None)]),
            &[3, 2],
            &[1, 2, 5, 6, 9, 10],
        );
        check(
            sl(&x, &[s(Some(1), None, None), s(None, None, Some(3))]),
            &[2, 2],
            &[4, 7, 8, 11],
        );
        check(sl(&x, &[s(None, None, Some(2)), I(1)]), &[2], &[1, 9]);
        // Whole input: the input itself.
        for spec in [vec![s(None, None, None)], vec![Ell], vec![]] {
            let r = sl(&x, &spec).unwrap();
            assert!(r.shares_storage_with(&x));
            assert_eq!(r.dims(), &[3, 4]);
        }
        let r = sl(&x, &[I(0)]).unwrap(); // a whole row: a view
        assert!(r.shares_storage_with(&x));

        let y = iota(&[2, 3, 4]);
        // y[1, ..., ::2]
        check(
            sl(&y, &[I(1), Ell, s(None, None, Some(2))]),
            &[3, 2],
            &[12, 14, 16, 18, 20, 22],
        );
        // y[..., 1, :]
        check(
            sl(&y, &[Ell, I(1), s(None, None, None)]),
            &[2, 4],
            &[4, 5, 6, 7, 16, 17, 18, 19],
        );
        // y[:, tf.newaxis, ..., tf.newaxis, 0]
        check(
            sl(&y, &[s(None, None, None), New, Ell, New, I(0)]),
            &[2, 1, 3, 1],
            &[0, 4, 8, 12, 16, 20],
        );
        // y[::-1, 2, 3:0:-2]
        check(
            sl(
                &y,
                &[s(None, None, Some(-1)), I(2), s(Some(3), Some(0), Some(-2))],
            ),
            &[2, 2],
            &[23, 21, 11, 9],
        );
        // y[-1:, :, -1]
        check(
            sl(&y, &[s(Some(-1), None, None), s(None, None, None), I(-1)]),
            &[1, 3],
            &[15, 19, 23],
        );
    }

    #[test]
    fn out_of_range_begins_and_ends_clamp_like_python() {
        let x = iota(&[3, 4]);
        // x[0:100:50]: only row 0.
        check(
            sl(&x, &[s(Some(0), Some(100), Some(50))]),
            &[1, 4],
            &[0, 1, 2, 3],
        );
        // x[10:] and x[5:2:-1]: empty.
        assert_eq!(sl(&x, &[s(Some(10), None, None)]).unwrap().dims(), &[0, 4]);
        assert_eq!(
            sl(&x, &[s(Some(5), Some(2), Some(-1))]).unwrap().dims(),
            &[0, 4]
        );
        // x[5::-1] starts at the last row; x[-100:2] is rows 0 and 1.
        check(
            sl(&x, &[s(Some(5), None, Some(-1))]),
            &[3, 4],
            &[8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3],
        );
        check(
            sl(&x, &[s(Some(-100), Some(2), None)]),
            &[2, 4],
            &(0..8).collect::<Vec<_>>(),
        );
        // x[::-5]: only the last row; x[:, 3:-100:-1]: every column, reversed.
        check(sl(&x, &[s(None, None, Some(-5))]), &[1, 4], &[8, 9, 10, 11]);
        check(
            sl(&x, &[s(None, None, None), s(Some(3), Some(-100), Some(-1))]),
            &[3, 4],
            &[3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8],
        );
        // x[:, -100:100:1000], x[:, 100:-100:-1000]
        check(
            sl(
                &x,
                &[s(None, None, None), s(Some(-100), Some(100), Some(1000))],
            ),
            &[3, 1],
            &[0, 4, 8],
        );
        check(
            sl(
                &x,
                &[s(None, None, None), s(Some(100), Some(-100), Some(-1000))],
            ),
            &[3, 1],
            &[3, 7, 11],
        );
        // Huge values do not overflow.
        let (b, e, st, m) = encode(&[s(Some(i64::MIN), Some(i64::MAX), Some(i64::MAX))]);
        check(
            run_raw(x.clone(), &b, &e, &st, m, DataType::Int64),
            &[1, 4],
            &[0, 1, 2, 3],
        );
        let r = run_raw(
            x.clone(),
            &[i64::MAX, 0],
            &[i64::MIN, 0],
            &[i64::MIN, 1],
            masks(0, 0, 0, 0, 0),
            DataType::Int64,
        );
        check(r, &[1, 0], &[]);
        // begin > end with stride 1 on dimension 0: empty.
        assert_eq!(
            sl(&x, &[s(Some(2), Some(1), None)]).unwrap().dims(),
            &[0, 4]
        );
    }

    #[test]
    fn raw_masks_follow_tensorflow() {
        let x = iota(&[3, 4]);
        // begin_mask / end_mask: x[:2, 1:] from begin [2, 1], end [2, 3].
        let r = run_raw(
            x.clone(),
            &[2, 1],
            &[2, 3],
            &[1, 1],
            masks(1, 2, 0, 0, 0),
            DataType::Int32,
        );
        check(r, &[2, 3], &[1, 2, 3, 5, 6, 7]);
        // Masks on a negative stride: x[::-1, ::-1] from zeros.
        let r = run_raw(
            x.clone(),
            &[0, 0],
            &[0, 0],
            &[-1, -1],
            masks(3, 3, 0, 0, 0),
            DataType::Int32,
        );
        check(r, &[3, 4], &[11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
        // A shrink ignores begin_mask: begin 2 is used.
        let r = run_raw(
            x.clone(),
            &[2],
            &[0],
            &[1],
            masks(1, 1, 0, 0, 1),
            DataType::Int32,
        );
        check(r, &[4], &[8, 9, 10, 11]);
        // new_axis wins over shrink on the same bit.
        let r = run_raw(
            x.clone(),
            &[1],
            &[2],
            &[1],
            masks(0, 0, 0, 1, 1),
            DataType::Int32,
        );
        check(r, &[1, 3, 4], &(0..12).collect::<Vec<_>>());
        // Bits past the spec are ignored (an ellipsis bit there too).
        let r = run_raw(
            x.clone(),
            &[1],
            &[2],
            &[1],
            masks(4, 4, 4, 8, 16),
            DataType::Int32,
        );
        check(r, &[1, 4], &[4, 5, 6, 7]);
        // An ellipsis ignores its begin, end and stride.
        let r = run_raw(
            x.clone(),
            &[5, 1],
            &[-5, 3],
            &[0, 1],
            masks(0, 0, 1, 0, 0),
            DataType::Int32,
        );
        check(r, &[3, 2], &[1, 2, 5, 6, 9, 10]);
        // int16 and int64 index tensors.
        for dt in [DataType::Int16, DataType::Int64] {
            let r = run_raw(
                x.clone(),
                &[1, -1],
                &[3, 0],
                &[1, -2],
                masks(0, 0, 0, 0, 0),
                dt,
            );
            check(r, &[2, 2], &[7, 5, 11, 9]);
        }
    }

    #[test]
    fn every_dtype_family_and_empty_tensors() {
        let strs = Tensor::from_strings(
            &[4],
            ["a", "b", "c", "d"].map(|s| s.as_bytes().to_vec()).to_vec(),
        )
        .unwrap();
        let r = sl(&strs, &[s(None, None, Some(-1))]).unwrap();
        assert_eq!(
            r.strings().unwrap(),
            ["d", "c", "b", "a"].map(|s| s.as_bytes().to_vec())
        );
        let r = sl(&strs, &[s(Some(1), Some(3), None)]).unwrap();
        assert_eq!(
            r.strings().unwrap(),
            ["b", "c"].map(|s| s.as_bytes().to_vec())
        );
        let r = sl(&strs, &[I(2)]).unwrap();
        assert_eq!(
            (r.dims(), r.strings().unwrap()),
            (&[] as &[i64], &[b"c".to_vec()][..])
        );
        let b = t(&[2, 2], vec![true, false, false, false]);
        assert_eq!(v::<bool>(&sl(&b, &[Ell, I(0)]).unwrap()), vec![true, false]);
        let c = t(
            &[3],
            vec![
                Complex::new(1.0f64, 0.0),
                Complex::new(2.0, 0.0),
                Complex::new(3.0, 0.0),
            ],
        );
        assert_eq!(
            v::<Complex<f64>>(&sl(&c, &[s(None, None, Some(-2))]).unwrap()),
            vec![Complex::new(3.0, 0.0), Complex::new(1.0, 0.0)]
        );
        let f = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
        assert_eq!(
            v::<f32>(&sl(&f, &[s(None, None, None), I(-1)]).unwrap()),
            vec![3., 6.]
        );
        let d = t(&[2, 2], vec![1f64, 2., 3., 4.]);
        assert_eq!(
            v::<f64>(&sl(&d, &[s(None, None, Some(-1)), s(None, None, Some(-1))]).unwrap()),
            vec![4., 3., 2., 1.]
        );
        // Empty tensors.
        let e = Tensor::zeros(DataType::Int32, &[0, 3]).unwrap();
        assert_eq!(sl(&e, &[s(None, None, None), I(1)]).unwrap().dims(), &[0]);
        assert_eq!(
            sl(&e, &[s(None, None, Some(-1)), s(Some(1), None, None)])
                .unwrap()
                .dims(),
            &[0, 2]
        );
        assert_eq!(
            sl(&iota(&[3, 4]), &[s(Some(1), Some(1), None)])
                .unwrap()
                .dims(),
            &[0, 4]
        );
        assert_eq!(
            sl(
                &iota(&[3, 4]),
                &[s(None, None, None), s(Some(2), Some(1), None)]
            )
            .unwrap()
            .dims(),
            &[3, 0]
        );
        // A scalar input.
        check(sl(&Tensor::scalar(5i32), &[New]), &[1], &[5]);
        check(sl(&Tensor::scalar(5i32), &[Ell]), &[], &[5]);
        check(sl(&Tensor::scalar(5i32), &[New, Ell, New]), &[1, 1], &[5]);
    }

    #[test]
    fn large_strided_slices_shard_correctly() {
        let n = 400i64;
        let x = t(&[n, n], (0..n * n).map(|k| k as i32).collect());
        // x[::-1, 1::3]
        let r = sl(&x, &[s(None, None, Some(-1)), s(Some(1), None, Some(3))]).unwrap();
        let cols = (n - 1 + 2) / 3;
        assert_eq!(r.dims(), &[n, cols]);
        let got = v::<i32>(&r);
        for i in [0, 1, 200, 399] {
            for j in [0, 1, cols - 1] {
                assert_eq!(
                    got[(i * cols + j) as usize],
                    ((n - 1 - i) * n + 1 + 3 * j) as i32
                );
            }
        }
        // x[:, ::-1] (rows reversed element by element)
        let r = sl(&x, &[s(None, None, None), s(None, None, Some(-1))]).unwrap();
        let got = v::<i32>(&r);
        assert!(
            (0..n).all(|i| (0..n).all(|j| got[(i * n + j) as usize] == (i * n + n - 1 - j) as i32))
        );
    }

    #[test]
    fn errors() {
        let x = iota(&[3, 4]);
        let r = run_raw(
            x.clone(),
            &[0, 0],
            &[1, 1],
            &[1, 1],
            masks(0, 0, 3, 0, 0),
            DataType::Int32,
        );
        assert_err(
            r,
            Code::InvalidArgument,
            "Multiple ellipses in slice spec not allowed",
        );
        assert_err(
            sl(&x, &[s(None, None, Some(0))]),
            Code::InvalidArgument,
            "strides[0] must be non-zero",
        );
        assert_err(
            sl(&x, &[s(None, None, None), s(None, None, Some(0))]),
            Code::InvalidArgument,
            "strides[1] must be non-zero",
        );
        assert_err(
            sl(&iota(&[3]), &[I(5)]),
            Code::InvalidArgument,
            "slice index 5 of dimension 0 out of bounds.",
        );
        assert_err(
            sl(&x, &[Ell, I(4)]),
            Code::InvalidArgument,
            "slice index 4 of dimension 1 out of bounds.",
        );
        // TensorFlow reports a negative index after adding the dimension.
        assert_err(
            sl(&iota(&[3]), &[I(-4)]),
            Code::InvalidArgument,
            "slice index -1 of dimension 0 out of bounds.",
        );
        assert_err(
            sl(&Tensor::zeros(DataType::Float, &[0]).unwrap(), &[I(0)]),
            Code::InvalidArgument,
            "slice index 0 of dimension 0 out of bounds.",
        );
        assert_err(
            sl(&x, &[I(1), I(2), I(0)]),
            Code::InvalidArgument,
            "Index out of range using input dim 2; input has only 2 dims",
        );
        assert_err(
            sl(&x, &[I(1), Ell, I(2), I(0)]),
            Code::InvalidArgument,
            "Index out of range using input dim 2; input has only 2 dims",
        );
        let r = run_raw(
            x.clone(),
            &[1],
            &[2],
            &[-1],
            masks(0, 0, 0, 0, 1),
            DataType::Int32,
        );
        assert_err(
            r,
            Code::InvalidArgument,
            "only stride 1 allowed on non-range indexing.",
        );
        let r = ctx()
            .op("StridedSlice")
            .input(x.clone())
            .input(t(&[2], vec![0i32, 0]))
            .input(t(&[1], vec![1i32]))
            .input(t(&[2], vec![1i32, 1]))
            .run1();
        assert_err(
            r,
            Code::InvalidArgument,
            "Expected begin, end, and strides to be 1D equal size tensors, but got shapes [2], [1], and [2] instead.",
        );
        let r = run_raw(
            x,
            &[0; 32],
            &[1; 32],
            &[1; 32],
            masks(0, 0, 0, 0, 0),
            DataType::Int32,
        );
        assert_err(
            r,
            Code::InvalidArgument,
            "but got shapes [32], [32], and [32] instead.",
        );
    }

    // ---- The reference: NumPy's basic indexing, written from Python's rules.

    /// Python's `slice(start, stop, step).indices(n)` as a list of indices.
    fn py_slice(n: i64, start: Option<i64>, stop: Option<i64>, step: Option<i64>) -> Vec<i64> {
        let step = step.unwrap_or(1);
        let (lower, upper) = if step < 0 { (-1, n - 1) } else { (0, n) };
        let fix = |x: Option<i64>, default: i64| match x {
            None => default,
            Some(mut x) => {
                if x < 0 {
                    x = x.saturating_add(n);
                }
                x.clamp(lower, upper)
            }
        };
        let start = fix(start, if step < 0 { upper } else { lower });
        let stop = fix(stop, if step < 0 { lower } else { upper });
        let mut out = Vec::new();
        let mut i = start;
        while (step > 0 && i < stop) || (step < 0 && i > stop) {
            out.push(i);
            i = match i.checked_add(step) {
                Some(j) => j,
                None => break,
            };
        }
        out
    }

    enum Sel {
        Range(Vec<i64>),
        Index(i64),
        New,
    }

    /// `x[specs]` by NumPy's rules (`None` where NumPy raises).
    fn reference(dims: &[i64], data: &[i32], specs: &[Spec]) -> Option<(Vec<i64>, Vec<i32>)> {
        let consuming = specs.iter().filter(|s| matches!(s, S(..) | I(_))).count();
        let ellipses = specs.iter().filter(|s| matches!(s, Ell)).count();
        if ellipses > 1 || consuming > dims.len() {
            return None;
        }
        let mut specs = specs.to_vec();
        if ellipses == 0 {
            specs.push(Ell);
        }
        let mut sels = Vec::new();
        let mut d = 0;
        for spec in &specs {
            match *spec {
                S(a, b, c) => {
                    sels.push(Sel::Range(py_slice(dims[d], a, b, c)));
                    d += 1;
                }
                I(i) => {
                    let j = if i < 0 { i + dims[d] } else { i };
                    if j < 0 || j >= dims[d] {
                        return None;
                    }
                    sels.push(Sel::Index(j));
                    d += 1;
                }
                New => sels.push(Sel::New),
                Ell => {
                    for _ in 0..dims.len() - consuming {
                        sels.push(Sel::Range((0..dims[d]).collect()));
                        d += 1;
                    }
                }
            }
        }
        let shape: Vec<i64> = sels
            .iter()
            .filter_map(|s| match s {
                Sel::Range(r) => Some(r.len() as i64),
                Sel::Index(_) => None,
                Sel::New => Some(1),
            })
            .collect();
        let mut strides = vec![1i64; dims.len()];
        for k in (0..dims.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * dims[k + 1];
        }
        fn walk(
            sels: &[Sel],
            strides: &[i64],
            d: usize,
            offset: i64,
            data: &[i32],
            out: &mut Vec<i32>,
        ) {
            match sels.first() {
                None => out.push(data[offset as usize]),
                Some(Sel::New) => walk(&sels[1..], strides, d, offset, data, out),
                Some(Sel::Index(i)) => walk(
                    &sels[1..],
                    strides,
                    d + 1,
                    offset + i * strides[d],
                    data,
                    out,
                ),
                Some(Sel::Range(r)) => {
                    for &i in r {
                        walk(
                            &sels[1..],
                            strides,
                            d + 1,
                            offset + i * strides[d],
                            data,
                            out,
                        );
                    }
                }
            }
        }
        let mut out = Vec::new();
        if shape.iter().all(|&n| n > 0) {
            walk(&sels, &strides, 0, 0, data, &mut out);
        }
        Some((shape, out))
    }

    #[test]
    fn reference_agrees_with_hand_values() {
        let data: Vec<i32> = (0..12).collect();
        assert_eq!(py_slice(5, None, None, Some(-2)), vec![4, 2, 0]);
        assert_eq!(py_slice(5, Some(-100), Some(100), Some(3)), vec![0, 3]);
        assert_eq!(py_slice(5, Some(10), Some(-10), Some(-4)), vec![4, 0]);
        assert_eq!(
            reference(&[3, 4], &data, &[I(1), s(None, None, Some(-2))]),
            Some((vec![2], vec![7, 5]))
        );
        assert_eq!(
            reference(&[3, 4], &data, &[New, Ell, I(-1)]),
            Some((vec![1, 3], vec![3, 7, 11]))
        );
        assert_eq!(reference(&[3, 4], &data, &[I(3)]), None);
    }

    fn spec_strategy() -> impl Strategy<Value = Spec> {
        let bound = || prop::option::weighted(0.7, -6i64..7);
        prop_oneof![
            5 => (bound(), bound(), prop::option::weighted(0.6, prop_oneof![-4i64..0, 1i64..5]))
                .prop_map(|(a, b, c)| S(a, b, c)),
            2 => (-5i64..5).prop_map(I),
            1 => Just(New),
            1 => Just(Ell),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]
        #[test]
        fn strided_slice_matches_python_indexing(
            dims in prop::collection::vec(0i64..5, 0..5),
            specs in prop::collection::vec(spec_strategy(), 0..6),
            index in prop::sample::select(vec![DataType::Int16, DataType::Int32, DataType::Int64]),
        ) {
            let n: i64 = dims.iter().product();
            let data: Vec<i32> = (0..n as i32).map(|k| k * 7 + 1).collect();
            let x = t(&dims, data.clone());
            let (b, e, st, m) = encode(&specs);
            let got = run_raw(x, &b, &e, &st, m, index);
            match reference(&dims, &data, &specs) {
                None => {
                    let err = got.expect_err("NumPy raises, so StridedSlice must fail");
                    prop_assert_eq!(err.code(), Code::InvalidArgument);
                }
                Some((shape, want)) => {
                    let got = got.map_err(|e| TestCaseError::fail(format!("{e}")))?;
                    prop_assert_eq!(got.dims(), &shape[..]);
                    prop_assert_eq!(v::<i32>(&got), want);
                }
            }
        }
    }
}

#[cfg(test)]
mod shape_fn_tests {
    use super::*;
    use opforge_core::shape_inference::testutil::ShapeTestOp;
    use opforge_core::{infer_error, infer_ok};

    fn ints(v: &[i32]) -> Tensor {
        Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
    }

    /// A `StridedSlice` node with these masks (begin, end, ellipsis,
    /// new_axis, shrink_axis) and constant `strides`.
    fn ss(masks: [i64; 5], strides: &[i32]) -> ShapeTestOp {
        ShapeTestOp::new("StridedSlice")
            .attr("begin_mask", masks[0])
            .attr("end_mask", masks[1])
            .attr("ellipsis_mask", masks[2])
            .attr("new_axis_mask", masks[3])
            .attr("shrink_axis_mask", masks[4])
            .input_tensor(3, ints(strides))
    }

    fn ss_const(masks: [i64; 5], begin: &[i32], end: &[i32], strides: &[i32]) -> ShapeTestOp {
        ss(masks, strides)
            .input_tensor(1, ints(begin))
            .input_tensor(2, ints(end))
    }

    #[test]
    fn unknown_without_strides_rank_or_spec_length() {
        let no_strides = ShapeTestOp::new("StridedSlice");
        infer_ok!(no_strides, "[2,3];[1];[1];[1]", "?");
        infer_ok!(ss([0; 5], &[1]), "?;[1];[1];[1]", "?");
        infer_ok!(ss([0; 5], &[1]), "[2,3];[?];[?];[?]", "?");
        infer_error!(
            no_strides,
            "[2,3];[2];[3];[?]",
            "Dimension 0 in both shapes must be equal, but are 2 and 3"
        );
        infer_error!(
            no_strides,
            "[2,3];[2,1];[2];[2]",
            "Shape must be rank 1 but is rank 2"
        );
        // The masks are read only once the slice can be worked out.
        infer_error!(
            ShapeTestOp::new("StridedSlice").input_tensor(3, ints(&[1])),
            "[2,3];[1];[1];[1]",
            "No attr named 'begin_mask'"
        );
    }

    #[test]
    fn unknown_begin_and_end() {
        // x[b:e] with b and e unknown: dim 0 unknown, the rest kept.
        infer_ok!(ss([0; 5], &[1]), "[2,3];[1];[1];[1]", "[?,3]");
        // x[b] (shrink): the dim goes away.
        infer_ok!(
            ss([0, 0, 0, 0, 1], &[1]),
            "[2,3,4,5];[1];[1];[1]",
            "[3,4,5]"
        );
        infer_ok!(
            ss([0, 0, 0, 0, 1], &[1]),
            "[2,0,3,4];[1];[1];[1]",
            "[0,3,4]"
        );
        // x[:, :, ::2] with every begin and end masked: sizes known.
        infer_ok!(
            ss([7, 7, 0, 0, 0], &[1, 1, 2]),
            "[10,?,5];[3];[3];[3]",
            "[10,?,3]"
        );
        infer_ok!(
            ss([7, 7, 0, 0, 0], &[1, 1, -2]),
            "[10,?,5];[3];[3];[3]",
            "[10,?,3]"
        );
    }

    #[test]
    fn constant_spec_on_partially_known_input() {
        // x[2:8, :, ::-1]
        infer_ok!(
            ss_const([6, 6, 0, 0, 0], &[2, 0, 0], &[8, 0, 0], &[1, 1, -1]),
            "[10,?,4];[3];[3];[3]",
            "[6,?,4]"
        );
        // x[-3:], x[:100], x[5:2]
        infer_ok!(
            ss_const([0; 5], &[-3], &[100], &[1]),
            "[10,2];[1];[1];[1]",
            "[3,2]"
        );
        infer_ok!(
            ss_const([1, 0, 0, 0, 0], &[0], &[100], &[1]),
            "[10];[1];[1];[1]",
            "[10]"
        );
        infer_ok!(
            ss_const([0; 5], &[5], &[2], &[1]),
            "[10];[1];[1];[1]",
            "[0]"
        );
        infer_ok!(
            ss_const([0; 5], &[1], &[8], &[3]),
            "[10];[1];[1];[1]",
            "[3]"
        );
        // x[tf.newaxis, ..., 1]
        infer_ok!(
            ss_const([0, 0, 2, 1, 4], &[0, 0, 1], &[0, 0, 2], &[1, 1, 1]),
            "[?,3,4];[3];[3];[3]",
            "[1,?,3]"
        );
        // x[0] on an unknown dim: shrunk without a bounds check.
        infer_ok!(
            ss_const([0, 0, 0, 0, 1], &[7], &[8], &[1]),
            "[?,3];[1];[1];[1]",
            "[3]"
        );
        // x[..., 1:5] with an ellipsis first.
        infer_ok!(
            ss_const([0, 0, 1, 0, 0], &[0, 1], &[0, 5], &[1, 1]),
            "[2,?,6];[2];[2];[2]",
            "[2,?,4]"
        );
    }

    #[test]
    fn invalid_specs() {
        infer_error!(
            ss_const([0; 5], &[0], &[1], &[0]),
            "[10];[1];[1];[1]",
            "strides[0] must be non-zero"
        );
        infer_error!(
            ss_const([0, 0, 3, 0, 0], &[0, 0], &[1, 1], &[1, 1]),
            "[10];[2];[2];[2]",
            "Multiple ellipses in slice spec not allowed"
        );
        infer_error!(
            ss_const([0, 0, 0, 0, 1], &[5], &[6], &[1]),
            "[2,3];[1];[1];[1]",
            "slice index 5 of dimension 0 out of bounds."
        );
        infer_error!(
            ss_const([0, 0, 0, 0, 1], &[0], &[1], &[-1]),
            "[2,3];[1];[1];[1]",
            "only stride 1 allowed on non-range indexing."
        );
        infer_error!(
            ss_const([0; 5], &[0, 0], &[1, 1], &[1, 1]),
            "[2];[2];[2];[2]",
            "Index out of range using input dim 1; input has only 1 dims"
        );
        infer_error!(
            ss([0; 5], &[1, 1]).input_tensor(1, ints(&[0, 0, 0])),
            "[5,5];[?];[?];[2]",
            "Expected begin, end, and strides to be 1D equal size tensors, but got shape [2] for strides."
        );
        infer_error!(
            ss_const([0; 5], &[0, 0, 0], &[1, 1], &[1, 1]),
            "[5,5];[?];[?];[2]",
            "but got shapes [3], [2], and [2] instead."
        );
    }

    #[test]
    fn partial_validation_matches_the_kernel_on_known_shapes() {
        let masks = StridedSliceMasks {
            begin: 1,
            end: 0,
            ellipsis: 0,
            new_axis: 0,
            shrink_axis: 2,
        };
        let (b, e, s) = (ints(&[0, 1]), ints(&[3, 2]), ints(&[2, 1]));
        let full = validate_strided_slice(&[5, 4], &b, &e, &s, &masks).unwrap();
        let partial =
            validate_strided_slice_partial(&[5, 4], Some(&b), Some(&e), &s, &masks).unwrap();
        assert_eq!(full, partial);
        assert_eq!(full.final_shape, vec![2]);
        let unknown = validate_strided_slice_partial(&[-1, 4], None, None, &s, &masks).unwrap();
        assert_eq!(unknown.processing_shape, vec![-1, 1]);
        assert_eq!(unknown.final_shape, vec![-1]);
    }
}
