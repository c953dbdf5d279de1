//! The element mover: how every kernel that only moves elements (`Fill`,
//! `BroadcastTo`, `Transpose`, `GatherV2`, `OneHot`, `Reverse`, the
//! joining, splitting, slicing, tiling and padding ops, `StridedSlice`,
//! `StridedSliceGrad`, `Select`) runs for every dtype a tensor can hold.
//!
//! A kernel body is a [`MoveElements`]: a `run` generic over a
//! [`Carrier`], the type its elements are moved as without being
//! interpreted: the unsigned integer of the element's size (`u8`, `u16`,
//! `u32`, `u64`, and `Complex<f64>` for 16 bytes), reached by a zero-copy
//! bitcast; `bool` (whose bytes cannot be reinterpreted freely); `Vec<u8>`
//! for strings; [`ResourceHandle`] for resources. So a body compiles once
//! per element *size*, not once per dtype. [`move_elements`] runs a body
//! into a new tensor, [`move_to_output`] into a kernel's output and
//! [`move_in_place`] into an existing tensor (an input forwarded to the
//! output); [`for_each_chunk`] shards a body's loop, and [`layout`] holds
//! the strided views and the joining loops several bodies share.

pub mod layout;

use opforge_core::device::{Device, ThreadPool};
use opforge_core::kernel::OpKernelContext;
use opforge_core::num_complex::Complex;
use opforge_core::resource::ResourceHandle;
use opforge_core::tensor::limit::filled_vec;
use opforge_core::{DataType, Result, Status, Tensor, TensorShape};

use super::par::{chunks_in_shards, PARALLEL_THRESHOLD};

/// A type that carries elements of some dtypes: its values are cloned,
/// never interpreted.
pub trait Carrier: Clone + Default + Send + Sync + 'static {
    /// The elements of a tensor of the carrier's dtype.
    fn view(t: &Tensor) -> Result<&[Self]>;
    /// The elements of a tensor of the carrier's dtype, mutably.
    fn view_mut(t: &mut Tensor) -> Result<&mut [Self]>;
}

macro_rules! dense_carrier {
    ($($t:ty),*) => {$(
        impl Carrier for $t {
            #[inline]
            fn view(t: &Tensor) -> Result<&[Self]> {
                t.flat::<$t>()
            }
            #[inline]
            fn view_mut(t: &mut Tensor) -> Result<&mut [Self]> {
                t.flat_mut::<$t>()
            }
        }
    )*};
}
dense_carrier!(u8, u16, u32, u64, bool, Complex<f64>);

impl Carrier for Vec<u8> {
    fn view(t: &Tensor) -> Result<&[Self]> {
        t.strings()
    }
    fn view_mut(t: &mut Tensor) -> Result<&mut [Self]> {
        Ok(t.strings_mut()?.as_mut_slice())
    }
}

/// Resource handles are moved into new tensors ([`move_elements`]), never
/// written in place.
impl Carrier for ResourceHandle {
    fn view(t: &Tensor) -> Result<&[Self]> {
        t.resource_handles()
    }
    fn view_mut(_: &mut Tensor) -> Result<&mut [Self]> {
        Err(Status::unimplemented(
            "resource tensors cannot be written in place",
        ))
    }
}

/// A data-movement kernel body: it reads elements of `srcs` and must write
/// every element of `dst`. It is never run for an empty `dst`.
pub trait MoveElements: Sync {
    /// Fills `dst` from `srcs`, sharding over `pool` when it is worth it.
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]);
}

/// The dtypes the data-movement kernels of tensors' elements take: every
/// dtype with a fixed element size (numbers, bool, quantized and small
/// float/int types) and `string`.
pub fn movable_types() -> Vec<DataType> {
    DataType::BASE_TYPES
        .iter()
        .copied()
        .filter(|&d| d == DataType::String || d.size() > 0)
        .collect()
}

/// The dtype a dtype's elements are moved as: itself for `string`,
/// `resource` and `bool`, else the unsigned integer (or `complex128`) of
/// the same size.
pub fn carrier_of(dtype: DataType) -> Result<DataType> {
    match dtype {
        DataType::String | DataType::Resource | DataType::Bool => Ok(dtype),
        _ => match dtype.size() {
            1 => Ok(DataType::UInt8),
            2 => Ok(DataType::UInt16),
            4 => Ok(DataType::UInt32),
            8 => Ok(DataType::UInt64),
            16 => Ok(DataType::Complex128),
            _ => Err(Status::unimplemented(format!(
                "Moving elements of dtype {dtype} is not supported"
            ))),
        },
    }
}

/// `t` viewed as the carrier dtype `carrier` (no copy).
fn to_carrier(t: &Tensor, carrier: DataType) -> Result<Tensor> {
    if t.dtype() == carrier {
        Ok(t.clone())
    } else {
        t.bitcast(carrier)
    }
}

/// Runs `$body` with `$T` bound to the [`Carrier`] of the carrier dtype
/// `$carrier`.
macro_rules! with_carrier {
    ($carrier:expr, $T:ident => $body:expr) => {
        match $carrier {
            DataType::UInt8 => {
                type $T = u8;
                $body
            }
            DataType::UInt16 => {
                type $T = u16;
                $body
            }
            DataType::UInt32 => {
                type $T = u32;
                $body
            }
            DataType::UInt64 => {
                type $T = u64;
                $body
            }
            DataType::Complex128 => {
                type $T = Complex<f64>;
                $body
            }
            DataType::Bool => {
                type $T = bool;
                $body
            }
            DataType::String => {
                type $T = Vec<u8>;
                $body
            }
            DataType::Resource => {
                type $T = ResourceHandle;
                $body
            }
            other => Err(Status::internal(format!("{other} is not a carrier dtype"))),
        }
    };
}

/// Runs `mover` from the carrier tensors `srcs` into `dst`; not at all when
/// `dst` is empty, so no mover sees an empty output, whose dims (and so the
/// mover's own sizes) may multiply past 2^64 after the zero
/// (`tests/hostile_kernel.rs`).
fn run_as<T: Carrier>(
    pool: &ThreadPool,
    mover: &impl MoveElements,
    srcs: &[Tensor],
    dst: &mut [T],
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let views = srcs.iter().map(T::view).collect::<Result<Vec<_>>>()?;
    mover.run(pool, &views, dst);
    Ok(())
}

/// Builds a tensor of `dtype` and `shape` whose elements `mover` computes
/// from the elements of `srcs` (all of `dtype`), on `device`. Works for
/// every dtype a tensor can hold; numeric dtypes are moved as unsigned
/// integers of their size (a bitcast, no conversion).
pub fn move_elements(
    device: &dyn Device,
    dtype: DataType,
    srcs: &[&Tensor],
    shape: TensorShape,
    mover: &impl MoveElements,
) -> Result<Tensor> {
    let pool = device.thread_pool().unwrap_or(ThreadPool::inline());
    let carrier = carrier_of(dtype)?;
    let srcs = srcs
        .iter()
        .map(|t| to_carrier(t, carrier))
        .collect::<Result<Vec<_>>>()?;
    match carrier {
        DataType::String => {
            let mut out = filled_vec(shape.num_elements(), Vec::new(), || {
                opforge_core::tensor::limit::describe_tensor(DataType::String, &shape)
            })?;
            run_as(pool, mover, &srcs, &mut out)?;
            Tensor::from_strings(shape.dims(), out)
        }
        DataType::Resource => {
            let mut out = filled_vec(shape.num_elements(), ResourceHandle::default(), || {
                opforge_core::tensor::limit::describe_tensor(DataType::Resource, &shape)
            })?;
            run_as(pool, mover, &srcs, &mut out)?;
            Tensor::from_resource_handles(shape.dims(), out)
        }
        _ => {
            // Allocated as `dtype` (so an allocation error names the real
            // dtype, not the carrier), then seen as the carrier; the
            // original is dropped so the view owns its storage alone.
            let typed = device.allocate(dtype, shape)?;
            let mut out = if carrier == dtype {
                typed
            } else {
                let view = typed.bitcast(carrier)?;
                drop(typed);
                view
            };
            with_carrier!(carrier, T => run_as(pool, mover, &srcs, T::view_mut(&mut out)?))?;
            if carrier == dtype {
                Ok(out)
            } else {
                out.bitcast(dtype)
            }
        }
    }
}

/// Sets output `i` of a kernel (of `shape`) to the tensor [`move_elements`]
/// builds from `srcs`.
pub fn move_to_output(
    ctx: &mut OpKernelContext<'_>,
    i: usize,
    srcs: &[&Tensor],
    shape: TensorShape,
    mover: &impl MoveElements,
) -> Result<()> {
    let out = move_elements(ctx.device(), ctx.output_type(i), srcs, shape, mover)?;
    ctx.set_output(i, out)
}

/// Runs `mover` from `srcs` into the elements of `dst` (a tensor of the
/// same dtype that no other tensor shares, such as an input forwarded to
/// a kernel's output), in place.
pub fn move_in_place(
    pool: &ThreadPool,
    dst: &mut Tensor,
    srcs: &[&Tensor],
    mover: &impl MoveElements,
) -> Result<()> {
    let dtype = dst.dtype();
    let carrier = carrier_of(dtype)?;
    let srcs = srcs
        .iter()
        .map(|t| to_carrier(t, carrier))
        .collect::<Result<Vec<_>>>()?;
    // The bitcast view replaces `dst` (dropping the original handle), so
    // its storage stays unshared and writable.
    if carrier != dtype {
        *dst = dst.bitcast(carrier)?;
    }
    let moved = with_carrier!(carrier, T => run_as(pool, mover, &srcs, T::view_mut(dst)?));
    if carrier != dtype {
        *dst = dst.bitcast(dtype)?;
    }
    moved
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

/// Runs `f(first_row, rows)` over shards of whole rows of `out` (rows of
/// `row_len` elements), in parallel when `out` is large: the sharding of
/// the copying bodies (a copy costs 8 per element).
pub fn for_each_rows<T: Send>(
    pool: &ThreadPool,
    out: &mut [T],
    row_len: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    // An empty output may still have a huge row length (a zero elsewhere
    // in the shape): nothing to do, and `8 * row_len` must not overflow.
    if row_len == 0 || out.is_empty() {
        return;
    }
    for_each_chunk(
        pool,
        out,
        row_len,
        row_len.saturating_mul(8),
        |start, chunk| f(start / row_len, chunk),
    );
}

/// The row-major strides of `dims`.
pub fn strides_of(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}
