//! Dtype lists for kernel registrations and the dispatch macros over dtype
//! families.

use opforge_core::kernel::OpKernelContext;
use opforge_core::{DataType, Status};

/// Every numeric dtype with an element type: the floats (incl. half and
/// bfloat16), all signed and unsigned ints, and both complex types. Kernels
/// registered for "all number types" use this list.
pub const NUMERIC_KERNEL_TYPES: &[DataType] = &[
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
    DataType::Int8,
    DataType::Int16,
    DataType::Int32,
    DataType::Int64,
    DataType::UInt8,
    DataType::UInt16,
    DataType::UInt32,
    DataType::UInt64,
    DataType::Complex64,
    DataType::Complex128,
];

/// The real types of [`NUMERIC_KERNEL_TYPES`]: every numeric dtype but the
/// complex ones.
pub const REAL_KERNEL_TYPES: &[DataType] = NUMERIC_KERNEL_TYPES.split_at(12).0;

/// TensorFlow's `TF_CALL_POD_TYPES`: every number type (real and complex) and bool.
pub const POD_TYPES: &[DataType] = &[
    DataType::Float,
    DataType::Double,
    DataType::Int32,
    DataType::UInt8,
    DataType::Int16,
    DataType::Int8,
    DataType::Complex64,
    DataType::Int64,
    DataType::Bool,
    DataType::BFloat16,
    DataType::UInt16,
    DataType::Complex128,
    DataType::Half,
    DataType::UInt32,
    DataType::UInt64,
];

/// The types of several lists, in order (for registrations).
pub fn types(lists: &[&[DataType]]) -> Vec<DataType> {
    lists.iter().flat_map(|l| l.iter().copied()).collect()
}

/// TensorFlow's `TF_CALL_ALL_TYPES` as far as tensors can hold them: the POD
/// types, string and resource (variant tensors do not exist yet).
pub fn all_types() -> Vec<DataType> {
    types(&[POD_TYPES, &[DataType::String, DataType::Resource]])
}

/// The quantized types (`TF_CALL_QUANTIZED_TYPES` plus qint16/quint16).
pub const QUANTIZED: &[DataType] = opforge_core::dtype::QUANTIZED_TYPES;

/// The index dtypes: int32 and int64.
pub const INDEX_TYPES: &[DataType] = &[DataType::Int32, DataType::Int64];

/// Dispatches over the real floating types (`float`, `double`, `half`, `bfloat16`).
#[macro_export]
macro_rules! float_types {
    ($dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        opforge_core::dispatch!($dt, $T => $body, [Float, Double, Half, BFloat16], $fallback)
    };
}
/// Dispatches over the real floating and complex types.
#[macro_export]
macro_rules! float_complex_types {
    ($dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        opforge_core::dispatch!($dt, $T => $body,
            [Float, Double, Half, BFloat16, Complex64, Complex128], $fallback)
    };
}
/// Dispatches over the integer types.
#[macro_export]
macro_rules! int_types {
    ($dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        opforge_core::dispatch!($dt, $T => $body,
            [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64], $fallback)
    };
}
/// Dispatches over the signed integer types.
#[macro_export]
macro_rules! signed_int_types {
    ($dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        opforge_core::dispatch!($dt, $T => $body, [Int8, Int16, Int32, Int64], $fallback)
    };
}
/// Dispatches over the signed types (signed integers, floats, complex).
#[macro_export]
macro_rules! signed_types {
    ($dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        opforge_core::dispatch!($dt, $T => $body,
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, Complex64, Complex128],
            $fallback)
    };
}
/// Dispatches over the real (ordered) numeric types: integers and floats.
#[macro_export]
macro_rules! real_types {
    ($dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        opforge_core::dispatch!($dt, $T => $body,
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
            $fallback)
    };
}
/// Dispatches over every numeric type (integers, floats, complex).
#[macro_export]
macro_rules! numeric_types {
    ($dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        opforge_core::dispatch!($dt, $T => $body,
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32,
             UInt64, Complex64, Complex128],
            $fallback)
    };
}

/// The error for a dtype a kernel was registered for but cannot run
/// (a registration bug, so `Internal`).
pub fn unsupported(ctx: &OpKernelContext<'_>, dt: DataType) -> Status {
    Status::internal(format!(
        "{} has no CPU implementation for dtype {dt}",
        ctx.op_def().name
    ))
}

//
