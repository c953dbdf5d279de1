//! Array ops that move elements by index, with TensorFlow 2.21's OpDefs and
//! CPU kernels: `Transpose`, `GatherV2`, `Gather`, `GatherNd`, `ScatterNd`,
//! `OneHot`, `Reverse`, `ReverseV2`, `ReverseSequence` and `UnravelIndex`.
//!
//! Every kernel supports all the dtypes TensorFlow's CPU kernel does
//! (numbers, bool, string, ...): the element loops (all but `UnravelIndex`'s,
//! which computes int32/int64 coordinates, and `ScatterNd`'s, which adds
//! through the scatter-add engine of `opforge_ops_base::cpu::scatter`) run through
//! the element mover of `opforge_ops_base::cpu::mover`, compiled once per
//! element size.
//! `Transpose` is zero-copy when the permutation only moves dimensions of
//! size 1, tiles the two innermost axes of the (dimension-merged) transpose
//! for cache efficiency, and shards over the thread pool.

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::{DimensionHandle, InferenceContext};
use opforge_core::{
    ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};
use opforge_ops_base::args::int_values;
use opforge_ops_base::args::{fmt_shape, index_values};
use opforge_ops_base::cpu::mover::{
    for_each_chunk, move_elements, strides_of, Carrier, MoveElements,
};
use opforge_ops_base::types::{all_types, types, POD_STRING_TYPES, QUANTIZED};

const INDEX_TYPES: &[DataType] = &[DataType::Int32, DataType::Int64];

/// An empty output (no element to move) of `dtype` and `shape`.
fn empty(dtype: DataType, shape: TensorShape) -> Result<Tensor> {
    Tensor::zeros_with_shape(dtype, shape)
}

// ---------------------------------------------------------------------------
mod transpose;

mod gather;

mod scatter_nd;

mod one_hot;

mod reverse;

mod unravel_index;

// ---- Gradients ----

/// The gradients of the index ops, as TensorFlow's `array_grad.py` defines
/// them. `GatherV2`'s gradient is dense here (TensorFlow returns
/// `IndexedSlices`, which are summed with `UnsortedSegmentSum` when made
/// dense): the gradient, viewed as `[K, outer * inner]` (`K` indices), is
/// summed into `[N, outer * inner]` by `UnsortedSegmentSum(g, indices, N)`
/// (duplicate indices add up); `Gather`'s is the same along axis 0. `GatherNd` and `ScatterNd` are each other's
/// gradient (a dense `ScatterNd` where TensorFlow may build `IndexedSlices`).
mod gradients;

#[cfg(test)]
mod gradient_tests;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod nd_sequence_tests;

#[cfg(test)]
mod shape_fn_tests;

#[cfg(test)]
mod scatter_nd_tests;
