//! The element traits: ONE family of traits that every CPU kernel computes
//! with, implementing TensorFlow's CPU arithmetic per element type, and
//! the per-element costs used for sharding.
//!
//! ```text
//!                 Scalar            every element type of a computing kernel
//!                /      \           (bool, integers, floats, complex):
//!              Num     Ordered      conversions through `Wide` (Cast)
//!            /  |  \       |   \
//!      Signed Float  \     |    `-- bool
//!          \    |     `----+--- Int        (i8 ... u64)
//!           `---+----------+--- RealFloat  (f32, f64, f16, bf16)
//! ```
//!
//! - [`Scalar`]: the root. [`Scalar::widen`] and [`Scalar::narrow`] convert
//!   through [`Wide`], the widest value of each kind, with C++
//!   `static_cast`'s results (`Cast`, index outputs, constants such as the
//!   6 of `Relu6`).
//! - [`Num`]: the numeric types (integers, floats, complex) with the
//!   arithmetic TensorFlow's CPU kernels do: integers wrap, `half` and
//!   `bfloat16` compute each operation in `f32` and round its result,
//!   complex numbers follow the usual formulas. It also names the
//!   accumulators of reductions: [`Num::Acc`] (sums and products: `f32`
//!   for `half`/`bfloat16`, so a reduction rounds once at the end rather
//!   than per operation) and [`Num::MeanAcc`] (means: 64 bits for
//!   integers), which are themselves `Num` types.
//! - [`Signed`]: negation and sign (signed integers, floats, complex).
//! - [`Ordered`]: the ordered types (integers, real floats, `bool`):
//!   NaN tests and the comparison key of `Max`/`Min`/`ArgMax`/`ArgMin`
//!   ([`Ordered::Key`]: `f32` for `half`/`bfloat16`, `u8` for `bool`).
//! - [`Float`]: floating-point math (real floats and complex).
//! - [`RealFloat`]: rounding, `abs`, `fmod`, infinities, a vectorizing
//!   `exp` for the softmax family, `to_f64`.
//! - [`Int`]: truncating division, remainder, integer powers.
//!
//! A kernel states what it needs as bounds (`T: Num`, `T: Int`,
//! `T: RealFloat` with `T::Acc: RealFloat` for a kernel that computes in
//! the accumulator type); the dispatch macros of [`crate::types`] pick the
//! dtypes. Every method is `#[inline(always)]` (or `#[inline]` for the
//! longer ones) so a kernel's innermost loop compiles to the arithmetic.

use num_complex::Complex;
use opforge_core::Element;

mod complex;
mod float;
mod int;
mod wide;

#[cfg(test)]
mod tests;

/// Per-element cost of cheap arithmetic (add, mul, compare).
pub const COST_CHEAP: usize = 1;
/// Per-element cost of a division or a remainder.
pub const COST_DIV: usize = 4;
/// Per-element cost of a transcendental function (exp, log, tanh, pow, ...).
pub const COST_TRANSCENDENTAL: usize = 15;

/// A value on its way from one element type to another: the widest type of
/// its kind (`half`/`bfloat16` widen to `f32` exactly), from which every
/// element type converts as C++ `static_cast` would from the original
/// type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wide {
    /// A `bool`.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A `float`, `half` or `bfloat16`.
    F32(f32),
    /// A `double`.
    F64(f64),
    /// A `complex64`.
    C64(Complex<f32>),
    /// A `complex128`.
    C128(Complex<f64>),
}

/// The root of the element traits: every element type a computing kernel
/// takes (`bool`, the integers, the floats, complex), convertible to and
/// from [`Wide`].
pub trait Scalar: Element {
    /// The value, exactly, as the widest type of its kind.
    fn widen(self) -> Wide;
    /// The value of `w` in this type, as C++ `static_cast` converts:
    /// integer to integer wraps (two's complement); float to integer
    /// truncates toward zero and saturates, NaN giving 0 (where C++ is
    /// undefined); complex to real keeps the real part; anything to
    /// `half`/`bfloat16` goes through `f32`; to `bool` is `!= 0`.
    fn narrow(w: Wide) -> Self;
}

/// Numeric element types (integers, floats, complex) with TensorFlow's CPU
/// arithmetic, and the accumulators of their reductions.
pub trait Num: Scalar {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// What sums and products of this type accumulate in: `f32` for
    /// `half`/`bfloat16`, the type itself otherwise.
    type Acc: Num;
    /// What means of this type accumulate in: 64 bits for integers (as
    /// TensorFlow does), [`Num::Acc`] otherwise.
    type MeanAcc: Num;
    /// `self + o` (wrapping for integers; rounded for `half`/`bfloat16`).
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
    /// The value as a sum/product accumulator (exact).
    fn to_acc(self) -> Self::Acc;
    /// A sum/product accumulator rounded back to this type.
    fn from_acc(a: Self::Acc) -> Self;
    /// The value as a mean accumulator (exact).
    fn to_mean_acc(self) -> Self::MeanAcc;
    /// A mean accumulator converted back to this type.
    fn from_mean_acc(a: Self::MeanAcc) -> Self;
    /// `self / n`, a mean's last step: NaN for a float `0 / 0`, 0 for an
    /// integer or complex empty mean (TensorFlow's results); integers
    /// truncate.
    fn div_count(self, n: usize) -> Self;
}

/// Numeric types with a negation (signed integers, floats, complex).
pub trait Signed: Num {
    /// `-self` (wrapping for integers: `-MIN == MIN`).
    fn neg(self) -> Self;
    /// `-1`, `0` or `1` by sign (NaN stays NaN; `z / |z|` for complex).
    fn sign(self) -> Self;
}

/// Ordered element types (integers, real floats, `bool`): what `Maximum`,
/// `Minimum`, the ordered comparisons and the `Max`/`Min`/`ArgMax`/`ArgMin`
/// reductions take.
pub trait Ordered: Scalar + PartialOrd {
    /// What reductions compare: `f32` for `half`/`bfloat16`, `u8` for
    /// `bool`, the type itself otherwise.
    type Key: Ordered;
    /// The identity of `Max`: -inf for floats, the lowest value otherwise.
    const MAX_IDENTITY: Self::Key;
    /// The identity of `Min`: +inf for floats, the highest value otherwise.
    const MIN_IDENTITY: Self::Key;
    /// Where `ArgMax` starts (Eigen's `NumTraits::lowest`).
    const ARG_LOWEST: Self::Key;
    /// Where `ArgMin` starts (Eigen's `NumTraits::highest`).
    const ARG_HIGHEST: Self::Key;
    /// The value's key (exact).
    fn key(self) -> Self::Key;
    /// The value of a key (rounded for `half`/`bfloat16`).
    fn from_key(k: Self::Key) -> Self;
    /// Whether the value is NaN (never for integers and `bool`).
    fn is_nan(self) -> bool;
}

/// Floating-point math of the real float and complex types (`half` and
/// `bfloat16` compute in `f32` and round each result).
pub trait Float: Num {
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
pub trait RealFloat: Float + Signed + Ordered {
    /// -infinity.
    const NEG_INFINITY: Self;
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
    /// The value as an `f64` (exact).
    fn to_f64(self) -> f64;
    /// `e^self` for `self <= 88`, as the softmax family computes it on
    /// shifted logits (which are <= 0): for `f32` a Cephes-style polynomial
    /// (within a couple of ulps of the correctly rounded value, 0 below the
    /// normal range, NaN for NaN) that LLVM vectorizes, as Eigen's `pexp`
    /// is; [`Float::exp`] for the other types.
    #[inline(always)]
    fn vexp(self) -> Self {
        self.exp()
    }
}

/// Integer types.
pub trait Int: Num + Ordered + Ord {
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
    /// The value as an `i128` (exact).
    fn to_i128(self) -> i128;
}
