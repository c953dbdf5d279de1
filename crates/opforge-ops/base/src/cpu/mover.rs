//! The element mover of the data-movement kernels (`Fill`,
//! `BroadcastTo`, `Transpose`, `GatherV2`, ...): a kernel body is
//! monomorphised once per element *size* (1, 2, 4, 8 or 16 bytes, plus
//! bool, string and resource), not once per dtype.

use super::par::chunks_in_shards;
use crate::cpu::par::PARALLEL_THRESHOLD;
use opforge_core::device::{Device, ThreadPool};
use opforge_core::{dispatch, DataType, Result, Status, Tensor, TensorShape};

/// A data-movement kernel body, generic over the element type: it reads
/// elements of `srcs` and must write every element of `dst`. `T` is only
/// ever a carrier of the right size (`u8`, `u16`, `u32`, `u64`,
/// `Complex<f64>`, `bool`), a byte string or a resource handle.
pub trait MoveElements: Sync {
    /// Fills `dst` from `srcs`, sharding over `pool` when it is worth it.
    fn run<T: Clone + Send + Sync>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]);
}

/// The element type a dtype's data is moved as: one per element size, and
/// bool (whose bytes cannot be reinterpreted freely).
pub fn carrier_of(dtype: DataType) -> Result<DataType> {
    if dtype == DataType::Bool {
        return Ok(DataType::Bool);
    }
    match dtype.size() {
        1 => Ok(DataType::UInt8),
        2 => Ok(DataType::UInt16),
        4 => Ok(DataType::UInt32),
        8 => Ok(DataType::UInt64),
        16 => Ok(DataType::Complex128),
        _ => Err(Status::unimplemented(format!(
            "Moving elements of dtype {dtype} is not supported"
        ))),
    }
}

/// Builds a tensor of `dtype` and `shape` whose elements `mover` computes
/// from the elements of `srcs` (all of `dtype`). Works for every dtype a
/// tensor can hold; numeric dtypes are moved as unsigned integers of their
/// size (a bitcast, no conversion), so each kernel body is compiled only
/// once per element size.
pub fn move_elements(
    device: &dyn Device,
    dtype: DataType,
    srcs: &[&Tensor],
    shape: TensorShape,
    mover: &impl MoveElements,
) -> Result<Tensor> {
    let pool = device.thread_pool().unwrap_or(ThreadPool::inline());
    match dtype {
        DataType::String => {
            let views = srcs
                .iter()
                .map(|t| t.strings())
                .collect::<Result<Vec<_>>>()?;
            let mut out = vec![Vec::new(); shape.num_elements()];
            mover.run(pool, &views, &mut out);
            Tensor::from_strings(shape.dims(), out)
        }
        DataType::Resource => {
            let views = srcs
                .iter()
                .map(|t| t.resource_handles())
                .collect::<Result<Vec<_>>>()?;
            let mut out = vec![Default::default(); shape.num_elements()];
            mover.run(pool, &views, &mut out);
            Tensor::from_resource_handles(shape.dims(), out)
        }
        _ => {
            let carrier = carrier_of(dtype)?;
            let cast = srcs
                .iter()
                .map(|t| {
                    if t.dtype() == carrier {
                        Ok((*t).clone())
                    } else {
                        t.bitcast(carrier)
                    }
                })
                .collect::<Result<Vec<Tensor>>>()?;
            let mut out = device.allocate(carrier, shape)?;
            dispatch!(
                carrier,
                T => {
                    let views = cast.iter().map(|t| t.flat::<T>()).collect::<Result<Vec<_>>>()?;
                    mover.run(pool, &views, out.flat_mut::<T>()?);
                },
                [UInt8, UInt16, UInt32, UInt64, Complex128, Bool],
                return Err(Status::internal(format!("no carrier for {dtype}")))
            );
            if carrier == dtype {
                Ok(out)
            } else {
                out.bitcast(dtype)
            }
        }
    }
}

/// Runs `f(first_element, chunk)` over `dst` split into chunks of whole
/// `unit`s (a row, a slice), in parallel on `pool` when the work
/// (`cost_per_unit` per unit) is worth it. `dst.len()` must be a multiple of
/// `unit`.
pub fn for_each_chunk<T: Send>(
    pool: &ThreadPool,
    dst: &mut [T],
    unit: usize,
    cost_per_unit: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if dst.is_empty() {
        return;
    }
    let unit = unit.max(1);
    let units = dst.len().div_ceil(unit);
    let shards = if dst.len() < PARALLEL_THRESHOLD {
        1
    } else {
        pool.num_shards(units, cost_per_unit.max(1))
    };
    chunks_in_shards(pool, dst, unit, shards, &f);
}

/// The row-major strides of `dims`.
pub fn strides_of(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}
