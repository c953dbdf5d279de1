//! What an op file of the standard library starts from:
//! `use opforge_ops_base::prelude::*;`.

pub use crate::args::{fmt_shape, index_tensor, index_values, int_values, normalize_axis};
pub use crate::cpu::broadcast::{
    binary_map, binary_same, broadcast_shapes, unary_map, unary_same, BroadcastPlan,
};
pub use crate::cpu::par::{
    chunks_in_shards, elementwise_shards, for_each_index, for_ranges, par_chunks, par_map,
    par_map_inplace, par_zip, CHEAP_COST, PARALLEL_THRESHOLD,
};
pub use crate::types::{unsupported, NUMERIC_KERNEL_TYPES, REAL_KERNEL_TYPES};
pub use opforge_core::device::ThreadPool;
pub use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
pub use opforge_core::shape_inference::{DimensionHandle, InferenceContext, ShapeHandle};
pub use opforge_core::{
    dispatch, ensure, register_gradient, register_kernel, register_op, DataType, Element,
    OpDefBuilder, Result, Status, Tensor, TensorShape,
};
