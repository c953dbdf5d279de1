//! Joining, splitting and slicing ops: `ConcatV2`, `Concat`, `ConcatOffset`,
//! `_ParallelConcatStart`, `Pack`, `Unpack`, `Split`, `Slice`, `Tile`, `Pad`,
//! `PadV2`, `MirrorPad` and `MirrorPadGrad` (`StridedSlice` is in
//! [`crate::array_strided`]), with TensorFlow 2.21's OpDefs, error messages
//! and CPU kernels for the dtypes TensorFlow registers (every dtype a dense
//! tensor can hold, and `string`, for most; numbers only for
//! `MirrorPadGrad`, which sums, and int32/int64 for `ConcatOffset`).
//!
//! These ops only move elements, so their kernels are bodies of the element
//! mover (`opforge_ops_base::cpu::mover`), which moves each element as a
//! plain value of the same size (a carrier), reached by a zero-copy
//! bitcast. That keeps one monomorphic copy loop per element size instead
//! of one per dtype. Contiguous runs are copied with
//! `clone_from_slice` (a `memcpy` for plain types), and large outputs are
//! split into shards of whole rows over the intra-op pool. Where the result
//! is a contiguous run of the input's outermost dimension (`Unpack` and
//! `Split` along axis 0, most `Slice`s of dimension 0) the output is a
//! zero-copy view of the input's buffer, as in TensorFlow.

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::common::concat_shape_helper;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext};
use opforge_core::{
    ensure, register_kernel, register_op, OpDefBuilder, Result, Status, Tensor, TensorShape,
};
use opforge_ops_base::args::scalar_input_value;
use opforge_ops_base::args::{fmt_shape, index_values};
use opforge_ops_base::cpu::mover::layout::*;
use opforge_ops_base::cpu::mover::*;

// ---------------------------------------------------------------------------
mod defs;

mod tile_pad;

mod concat;

mod split;

mod slice_tile;

// ---- Gradients ----

/// The gradients of the concat/split/slice/pad ops, as TensorFlow's
/// `array_grad.py` defines them. `ConcatV2`'s offsets (TensorFlow's
/// `ConcatOffset`) are computed at run time from the inputs' `Shape`s: input
/// `i`'s slice begins at `onehot(axis) * sum(sizes[..i])`; `Concat`'s uses
/// `ConcatOffset` itself, as TensorFlow does.
mod gradients;

#[cfg(test)]
mod gradient_tests;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod v1_mirror_tests;

#[cfg(test)]
mod shape_fn_tests;
