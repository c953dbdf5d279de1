//! Basic array ops, with TensorFlow 2.21's OpDefs and CPU kernels: `Const`,
//! `Identity`, `IdentityN`, `StopGradient`, `Shape`, `ShapeN`, `Size`,
//! `Rank`, `Reshape`, `ExpandDims`, `Squeeze`, `Bitcast`, `Fill`, `ZerosLike`,
//! `OnesLike`, `BroadcastTo`, `BroadcastArgs`, `BroadcastGradientArgs`,
//! `Range`, `InvertPermutation`, `GuaranteeConst` and `CheckNumerics`.
//!
//! Ops that only change a tensor's shape (`Identity`, `Reshape`,
//! `ExpandDims`, `Squeeze`, ...) never copy: their output shares the input's
//! storage. Ops that move elements (`Fill`, `BroadcastTo`, and `Transpose`,
//! `GatherV2`, ... in `index`) are bodies of the element mover of
//! `opforge_ops_base::cpu::mover`, which monomorphises a body once per
//! element *size* (1, 2, 4, 8 or 16 bytes, plus bool, string and
//! resource), so they support every dtype a tensor can hold without
//! compiling a copy per dtype.

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
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
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
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
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

mod constant;

mod shape;

mod reshape;
// `QuantizedReshape`'s kernel runs `Reshape`'s for its data.
pub(crate) use reshape::ReshapeOp;

mod fill;

mod broadcast;

mod range;

// ---- Gradients ----

/// The gradients of the basic array ops, as TensorFlow's `array_grad.py`
/// (and `math_grad.py` for `Range`, `ZerosLike`, `OnesLike`) defines them.
mod gradients;

#[cfg(test)]
mod gradient_tests;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod shape_fn_tests;

#[cfg(test)]
mod check_tests;

#[cfg(test)]
mod byte_view_tests;
