//! The element traits of the numeric kernels: TensorFlow's CPU arithmetic
//! per element type, and per-element costs for sharding.

use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::Element;

/// Per-element cost of cheap arithmetic (add, mul, compare).
pub const COST_CHEAP: usize = 1;
/// Per-element cost of a division or a remainder.
pub const COST_DIV: usize = 4;
/// Per-element cost of a transcendental function (exp, log, tanh, pow, ...).
pub const COST_TRANSCENDENTAL: usize = 15;

// ---------------------------------------------------------------------------
// Element traits
// ---------------------------------------------------------------------------

/// Arithmetic of every numeric element type as TensorFlow's CPU kernels do
/// it: integers wrap, `half`/`bfloat16` compute in `f32` and round each
/// result, complex numbers follow the usual formulas.
pub trait Arith: Element {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self - o`.
    fn sub(self, o: Self) -> Self;
    /// `self * o`.
    fn mul(self, o: Self) -> Self;
    /// The complex conjugate (the value itself for real types).
    #[inline(always)]
    fn conj(self) -> Self {
        self
    }
}

/// Types with a negation (signed integers, floats, complex).
pub trait Signed: Arith {
    /// `-self` (wrapping for integers: `-MIN == MIN`).
    fn neg(self) -> Self;
    /// `-1`, `0` or `1` by sign (NaN stays NaN; `z / |z|` for complex).
    fn sign(self) -> Self;
}

/// Floating-point math of the float and complex types.
pub trait FloatOps: Arith {
    /// The value `v` converted to this type.
    fn from_f64(v: f64) -> Self;
    /// `self / o`.
    fn div(self, o: Self) -> Self;
    /// `1 / self`.
    fn recip(self) -> Self;
    /// The square root.
    fn sqrt(self) -> Self;
    /// `1 / sqrt(self)`.
    fn rsqrt(self) -> Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// The natural logarithm.
    fn ln(self) -> Self;
    /// `ln(1 + self)`, accurate near 0.
    fn ln_1p(self) -> Self;
    /// The hyperbolic tangent.
    fn tanh(self) -> Self;
    /// `1 / (1 + e^-self)`.
    fn sigmoid(self) -> Self;
    /// The sine.
    fn sin(self) -> Self;
    /// The cosine.
    fn cos(self) -> Self;
    /// `self^o`.
    fn pow(self, o: Self) -> Self;
}

/// Real floating-point types (`float`, `double`, `half`, `bfloat16`).
pub trait RealFloat: FloatOps + Signed + MinMax {
    /// Rounds toward -inf.
    fn floor(self) -> Self;
    /// Rounds toward +inf.
    fn ceil(self) -> Self;
    /// Rounds to the nearest integer, ties to even (banker's rounding).
    fn round_half_even(self) -> Self;
    /// The absolute value.
    fn abs(self) -> Self;
    /// The C `fmod`: the remainder with the sign of `self`.
    fn fmod(self, o: Self) -> Self;
}

/// Types that `Maximum`/`Minimum` and the ordered comparisons accept.
pub trait MinMax: Element + PartialOrd {
    /// Whether the value is NaN (never for integers).
    fn is_nan(self) -> bool;
}

/// Integer types.
pub trait IntOps: Arith + Ord + MinMax {
    /// Whether the type is signed.
    const SIGNED: bool;
    /// Truncating division (`MIN / -1 == MIN`); `0` for a zero divisor
    /// (callers report division by zero before computing).
    fn trunc_div(self, o: Self) -> Self;
    /// Truncating remainder (`MIN % -1 == 0`); `0` for a zero divisor.
    fn trunc_rem(self, o: Self) -> Self;
    /// `self^e` by squaring, wrapping; `0` for a negative exponent
    /// (callers report negative exponents before computing).
    fn int_pow(self, e: Self) -> Self;
    /// Whether the value is negative.
    #[inline(always)]
    fn is_negative(self) -> bool {
        Self::SIGNED && self < Self::ZERO
    }
    /// The absolute value (wrapping: `|MIN| == MIN`).
    fn abs_wrapping(self) -> Self;
}

macro_rules! int_impls {
    ($signed:expr => $($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
        impl MinMax for $t {
            #[inline(always)]
            fn is_nan(self) -> bool { false }
        }
        impl IntOps for $t {
            const SIGNED: bool = $signed;
            #[inline(always)]
            fn trunc_div(self, o: Self) -> Self {
                if o == 0 { 0 } else { self.wrapping_div(o) }
            }
            #[inline(always)]
            fn trunc_rem(self, o: Self) -> Self {
                if o == 0 { 0 } else { self.wrapping_rem(o) }
            }
            #[inline]
            fn int_pow(self, e: Self) -> Self {
                if e.is_negative() {
                    return 0;
                }
                // Exponentiation by squaring, as Eigen's integer pow.
                let (mut base, mut e, mut acc) = (self, e, 1 as $t);
                while e != 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    e >>= 1;
                    if e != 0 {
                        base = base.wrapping_mul(base);
                    }
                }
                acc
            }
            #[allow(unused_comparisons)]
            #[inline(always)]
            fn abs_wrapping(self) -> Self {
                if self < 0 { (0 as $t).wrapping_sub(self) } else { self }
            }
        }
    )*};
}
int_impls!(true => i8, i16, i32, i64);
int_impls!(false => u8, u16, u32, u64);

macro_rules! signed_int_impls {
    ($($t:ty),*) => {$(
        impl Signed for $t {
            #[inline(always)]
            fn neg(self) -> Self { self.wrapping_neg() }
            #[inline(always)]
            fn sign(self) -> Self { self.signum() }
        }
    )*};
}
signed_int_impls!(i8, i16, i32, i64);

macro_rules! prim_float_impls {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
        }
        impl Signed for $t {
            #[inline(always)]
            fn neg(self) -> Self { -self }
            #[inline(always)]
            fn sign(self) -> Self {
                if self > 0.0 { 1.0 } else if self < 0.0 { -1.0 } else if self.is_nan() { self } else { 0.0 }
            }
        }
        impl MinMax for $t {
            #[inline(always)]
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
        impl FloatOps for $t {
            #[inline(always)]
            fn from_f64(v: f64) -> Self { v as $t }
            #[inline(always)]
            fn div(self, o: Self) -> Self { self / o }
            #[inline(always)]
            fn recip(self) -> Self { 1.0 / self }
            #[inline(always)]
            fn sqrt(self) -> Self { <$t>::sqrt(self) }
            #[inline(always)]
            fn rsqrt(self) -> Self { 1.0 / <$t>::sqrt(self) }
            #[inline(always)]
            fn exp(self) -> Self { <$t>::exp(self) }
            #[inline(always)]
            fn ln(self) -> Self { <$t>::ln(self) }
            #[inline(always)]
            fn ln_1p(self) -> Self { <$t>::ln_1p(self) }
            #[inline(always)]
            fn tanh(self) -> Self { <$t>::tanh(self) }
            #[inline(always)]
            fn sigmoid(self) -> Self { 1.0 / (1.0 + <$t>::exp(-self)) }
            #[inline(always)]
            fn sin(self) -> Self { <$t>::sin(self) }
            #[inline(always)]
            fn cos(self) -> Self { <$t>::cos(self) }
            #[inline(always)]
            fn pow(self, o: Self) -> Self { <$t>::powf(self, o) }
        }
        impl RealFloat for $t {
            #[inline(always)]
            fn floor(self) -> Self { <$t>::floor(self) }
            #[inline(always)]
            fn ceil(self) -> Self { <$t>::ceil(self) }
            #[inline(always)]
            fn round_half_even(self) -> Self { <$t>::round_ties_even(self) }
            #[inline(always)]
            fn abs(self) -> Self { <$t>::abs(self) }
            #[inline(always)]
            fn fmod(self, o: Self) -> Self { self % o }
        }
    )*};
}
prim_float_impls!(f32, f64);

/// `half` and `bfloat16`: every function computes in `f32` and rounds once.
macro_rules! half_impls {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            #[inline(always)]
            fn add(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() + o.to_f32()) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() - o.to_f32()) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() * o.to_f32()) }
        }
        impl Signed for $t {
            #[inline(always)]
            fn neg(self) -> Self { -self }
            #[inline(always)]
            fn sign(self) -> Self { <$t>::from_f32(Signed::sign(self.to_f32())) }
        }
        impl MinMax for $t {
            #[inline(always)]
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
        impl FloatOps for $t {
            #[inline(always)]
            fn from_f64(v: f64) -> Self { <$t>::from_f32(v as f32) }
            #[inline(always)]
            fn div(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() / o.to_f32()) }
            #[inline(always)]
            fn recip(self) -> Self { <$t>::from_f32(1.0 / self.to_f32()) }
            #[inline(always)]
            fn sqrt(self) -> Self { <$t>::from_f32(self.to_f32().sqrt()) }
            #[inline(always)]
            fn rsqrt(self) -> Self { <$t>::from_f32(FloatOps::rsqrt(self.to_f32())) }
            #[inline(always)]
            fn exp(self) -> Self { <$t>::from_f32(self.to_f32().exp()) }
            #[inline(always)]
            fn ln(self) -> Self { <$t>::from_f32(self.to_f32().ln()) }
            #[inline(always)]
            fn ln_1p(self) -> Self { <$t>::from_f32(self.to_f32().ln_1p()) }
            #[inline(always)]
            fn tanh(self) -> Self { <$t>::from_f32(self.to_f32().tanh()) }
            #[inline(always)]
            fn sigmoid(self) -> Self { <$t>::from_f32(FloatOps::sigmoid(self.to_f32())) }
            #[inline(always)]
            fn sin(self) -> Self { <$t>::from_f32(self.to_f32().sin()) }
            #[inline(always)]
            fn cos(self) -> Self { <$t>::from_f32(self.to_f32().cos()) }
            #[inline(always)]
            fn pow(self, o: Self) -> Self { <$t>::from_f32(self.to_f32().powf(o.to_f32())) }
        }
        impl RealFloat for $t {
            #[inline(always)]
            fn floor(self) -> Self { <$t>::from_f32(self.to_f32().floor()) }
            #[inline(always)]
            fn ceil(self) -> Self { <$t>::from_f32(self.to_f32().ceil()) }
            #[inline(always)]
            fn round_half_even(self) -> Self { <$t>::from_f32(self.to_f32().round_ties_even()) }
            #[inline(always)]
            fn abs(self) -> Self { <$t>::from_bits(self.to_bits() & 0x7fff) }
            #[inline(always)]
            fn fmod(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() % o.to_f32()) }
        }
    )*};
}
half_impls!(f16, bf16);

macro_rules! complex_impls {
    ($($f:ty),*) => {$(
        impl Arith for Complex<$f> {
            const ZERO: Self = Complex { re: 0.0, im: 0.0 };
            const ONE: Self = Complex { re: 1.0, im: 0.0 };
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn conj(self) -> Self { Complex::conj(&self) }
        }
        impl Signed for Complex<$f> {
            #[inline(always)]
            fn neg(self) -> Self { -self }
            #[inline]
            fn sign(self) -> Self {
                let a = self.norm();
                if a == 0.0 { Self::ZERO } else { Complex::new(self.re / a, self.im / a) }
            }
        }
        impl FloatOps for Complex<$f> {
            #[inline(always)]
            fn from_f64(v: f64) -> Self { Complex::new(v as $f, 0.0) }
            #[inline(always)]
            fn div(self, o: Self) -> Self { self / o }
            #[inline(always)]
            fn recip(self) -> Self { Self::ONE / self }
            #[inline(always)]
            fn sqrt(self) -> Self { Complex::sqrt(self) }
            #[inline(always)]
            fn rsqrt(self) -> Self { Self::ONE / Complex::sqrt(self) }
            #[inline(always)]
            fn exp(self) -> Self { Complex::exp(self) }
            #[inline(always)]
            fn ln(self) -> Self { Complex::ln(self) }
            #[inline]
            fn ln_1p(self) -> Self {
                // log|1+z| = log1p(2 re + re^2 + im^2) / 2, accurate for small z.
                let (re, im) = (self.re, self.im);
                Complex::new(
                    0.5 * (re * (2.0 + re) + im * im).ln_1p(),
                    im.atan2(1.0 + re),
                )
            }
            #[inline(always)]
            fn tanh(self) -> Self { Complex::tanh(self) }
            #[inline(always)]
            fn sigmoid(self) -> Self { Self::ONE / (Self::ONE + Complex::exp(-self)) }
            #[inline(always)]
            fn sin(self) -> Self { Complex::sin(self) }
            #[inline(always)]
            fn cos(self) -> Self { Complex::cos(self) }
            #[inline]
            fn pow(self, o: Self) -> Self {
                // libstdc++'s std::pow(complex, complex): 0^y == 0.
                if self == Self::ZERO { Self::ZERO } else { Complex::exp(o * Complex::ln(self)) }
            }
        }
    )*};
}
complex_impls!(f32, f64);

// ---------------------------------------------------------------------------
