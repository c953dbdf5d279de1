//! [`Scalar`] for every element type: conversions through [`Wide`] with
//! C++ `static_cast`'s results.

use super::{Scalar, Wide};
use half::{bf16, f16};
use num_complex::Complex;

macro_rules! int_scalar {
    ($variant:ident, $wide:ty => $($t:ty),*) => {$(
        impl Scalar for $t {
            #[inline(always)]
            fn widen(self) -> Wide { Wide::$variant(self as $wide) }
            #[inline(always)]
            fn narrow(w: Wide) -> Self {
                // Integer to integer wraps (two's complement); float to
                // integer truncates toward zero and saturates (NaN -> 0).
                match w {
                    Wide::Bool(b) => b as $t,
                    Wide::Int(v) => v as $t,
                    Wide::UInt(v) => v as $t,
                    Wide::F32(v) => v as $t,
                    Wide::F64(v) => v as $t,
                    Wide::C64(c) => c.re as $t,
                    Wide::C128(c) => c.re as $t,
                }
            }
        }
    )*};
}
int_scalar!(Int, i64 => i8, i16, i32, i64);
int_scalar!(UInt, u64 => u8, u16, u32, u64);

impl Scalar for bool {
    #[inline(always)]
    fn widen(self) -> Wide {
        Wide::Bool(self)
    }
    #[inline(always)]
    fn narrow(w: Wide) -> Self {
        match w {
            Wide::Bool(b) => b,
            Wide::Int(v) => v != 0,
            Wide::UInt(v) => v != 0,
            Wide::F32(v) => v != 0.0,
            Wide::F64(v) => v != 0.0,
            Wide::C64(c) => c.re != 0.0,
            Wide::C128(c) => c.re != 0.0,
        }
    }
}

macro_rules! float_scalar {
    ($($t:ty => $variant:ident),*) => {$(
        impl Scalar for $t {
            #[inline(always)]
            fn widen(self) -> Wide { Wide::$variant(self) }
            #[inline(always)]
            fn narrow(w: Wide) -> Self {
                match w {
                    Wide::Bool(b) => u8::from(b) as $t,
                    Wide::Int(v) => v as $t,
                    Wide::UInt(v) => v as $t,
                    Wide::F32(v) => v as $t,
                    Wide::F64(v) => v as $t,
                    Wide::C64(c) => c.re as $t,
                    Wide::C128(c) => c.re as $t,
                }
            }
        }
    )*};
}
float_scalar!(f32 => F32, f64 => F64);

macro_rules! half_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            #[inline(always)]
            fn widen(self) -> Wide { Wide::F32(self.to_f32()) }
            #[inline(always)]
            fn narrow(w: Wide) -> Self {
                // Eigen converts every type to half/bfloat16 through float.
                <$t>::from_f32(f32::narrow(w))
            }
        }
    )*};
}
half_scalar!(f16, bf16);

macro_rules! complex_scalar {
    ($($f:ty => $variant:ident),*) => {$(
        impl Scalar for Complex<$f> {
            #[inline(always)]
            fn widen(self) -> Wide { Wide::$variant(self) }
            #[inline(always)]
            fn narrow(w: Wide) -> Self {
                match w {
                    Wide::C64(c) => Complex::new(c.re as $f, c.im as $f),
                    Wide::C128(c) => Complex::new(c.re as $f, c.im as $f),
                    real => Complex::new(<$f>::narrow(real), 0.0),
                }
            }
        }
    )*};
}
complex_scalar!(f32 => C64, f64 => C128);
