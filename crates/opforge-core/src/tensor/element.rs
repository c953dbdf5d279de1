//! [`Element`]: the Rust types that tensor elements can be viewed as, and
//! the one dispatch macro that turns a run-time [`DataType`] into a
//! compile-time type in a kernel's innermost loop.

use crate::dtype::DataType;
use half::{bf16, f16};
use num_complex::Complex;

/// A Rust type that is the element type of a dense tensor of dtype
/// [`Element::DTYPE`].
///
/// # Safety
/// Implementors promise that `Self` is plain old data of exactly
/// `DTYPE.size()` bytes, with no padding, and that every byte pattern a
/// tensor of `DTYPE` may hold is a valid `Self`. For `bool`, whose only valid
/// bytes are 0 and 1, every `Tensor` constructor upholds that invariant
/// (allocations are zeroed, protos and foreign buffers are checked).
pub unsafe trait Element:
    Copy + Send + Sync + Default + PartialEq + std::fmt::Debug + 'static
{
    /// The dtype whose tensors hold `Self` values.
    const DTYPE: DataType;
}

macro_rules! elements {
    ($($t:ty => $dt:ident),* $(,)?) => {
        $(
            // SAFETY: a primitive numeric type (or a `repr(C)` pair of them)
            // of the dtype's size, valid for every bit pattern; bool is
            // covered by the invariant documented on `Element`.
            unsafe impl Element for $t {
                const DTYPE: DataType = DataType::$dt;
            }
        )*
    };
}

elements! {
    f32 => Float,
    f64 => Double,
    i32 => Int32,
    u8 => UInt8,
    i16 => Int16,
    i8 => Int8,
    i64 => Int64,
    bool => Bool,
    u16 => UInt16,
    u32 => UInt32,
    u64 => UInt64,
    f16 => Half,
    bf16 => BFloat16,
    Complex<f32> => Complex64,
    Complex<f64> => Complex128,
}

/// The Rust element type of a dtype variant name (used by [`dispatch!`](crate::dispatch)).
#[doc(hidden)]
#[macro_export]
macro_rules! __element_type {
    (Float) => { f32 };
    (Double) => { f64 };
    (Int32) => { i32 };
    (UInt8) => { u8 };
    (Int16) => { i16 };
    (Int8) => { i8 };
    (Int64) => { i64 };
    (Bool) => { bool };
    (UInt16) => { u16 };
    (UInt32) => { u32 };
    (UInt64) => { u64 };
    (Half) => { $crate::half::f16 };
    (BFloat16) => { $crate::half::bf16 };
    (Complex64) => { $crate::num_complex::Complex<f32> };
    (Complex128) => { $crate::num_complex::Complex<f64> };
}

/// Runs `body` with the type alias `T` bound to the element type of a
/// run-time dtype, for each dtype in the list; any other dtype evaluates
/// `fallback`. This is the one place where kernels monomorphise.
///
/// ```
/// use opforge_core::{dispatch, DataType, Element};
/// fn size_of(dt: DataType) -> Option<usize> {
///     dispatch!(dt, T => Some(std::mem::size_of::<T>()), [Float, Double, Int32], None)
/// }
/// assert_eq!(size_of(DataType::Double), Some(8));
/// assert_eq!(size_of(DataType::Bool), None);
/// ```
#[macro_export]
macro_rules! dispatch {
    ($dtype:expr, $T:ident => $body:expr, [$($variant:ident),* $(,)?], $fallback:expr) => {
        match $dtype {
            $(
                $crate::DataType::$variant => {
                    #[allow(dead_code)]
                    type $T = $crate::__element_type!($variant);
                    $body
                }
            )*
            #[allow(unreachable_patterns)]
            _ => $fallback,
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Element>() {
        assert_eq!(std::mem::size_of::<T>(), T::DTYPE.size(), "{}", T::DTYPE);
        assert!(std::mem::align_of::<T>() <= 64);
    }

    #[test]
    fn sizes_match_dtypes() {
        check::<f32>();
        check::<f64>();
        check::<i8>();
        check::<i16>();
        check::<i32>();
        check::<i64>();
        check::<u8>();
        check::<u16>();
        check::<u32>();
        check::<u64>();
        check::<bool>();
        check::<f16>();
        check::<bf16>();
        check::<Complex<f32>>();
        check::<Complex<f64>>();
    }

    #[test]
    fn dispatch_binds_the_type() {
        for dt in [
            DataType::Float,
            DataType::Int64,
            DataType::Complex128,
            DataType::Half,
        ] {
            let dtype = crate::dispatch!(dt, T => T::DTYPE, [Float, Int64, Complex128, Half], DataType::Invalid);
            assert_eq!(dtype, dt);
        }
    }
}
