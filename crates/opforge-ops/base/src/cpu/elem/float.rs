//! The real floating-point types: `f32` and `f64` natively, `half` and
//! `bfloat16` computed in `f32` with each result rounded.

use super::{Float, Num, Ordered, RealFloat, Signed};
use half::{bf16, f16};

macro_rules! prim_float_impls {
    ($($t:ty, $lowest:expr, $highest:expr);*) => {$(
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            type Acc = $t;
            type MeanAcc = $t;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn to_acc(self) -> $t { self }
            #[inline(always)]
            fn from_acc(a: $t) -> Self { a }
            #[inline(always)]
            fn to_mean_acc(self) -> $t { self }
            #[inline(always)]
            fn from_mean_acc(a: $t) -> Self { a }
            #[inline(always)]
            fn div_count(self, n: usize) -> Self { self / n as $t }
        }
        impl Signed for $t {
            #[inline(always)]
            fn neg(self) -> Self { -self }
            #[inline(always)]
            fn sign(self) -> Self {
                if self > 0.0 { 1.0 } else if self < 0.0 { -1.0 } else if self.is_nan() { self } else { 0.0 }
            }
        }
        impl Ordered for $t {
            type Key = $t;
            const MAX_IDENTITY: $t = <$t>::NEG_INFINITY;
            const MIN_IDENTITY: $t = <$t>::INFINITY;
            const ARG_LOWEST: $t = $lowest;
            const ARG_HIGHEST: $t = $highest;
            #[inline(always)]
            fn key(self) -> $t { self }
            #[inline(always)]
            fn from_key(k: $t) -> Self { k }
            #[inline(always)]
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
        impl Float for $t {
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
    )*};
}
prim_float_impls!(f32, f32::MIN, f32::MAX; f64, f64::MIN, f64::MAX);

macro_rules! prim_real_float_impls {
    ($($t:ty => $vexp:expr),*) => {$(
        impl RealFloat for $t {
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
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
            #[inline(always)]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline(always)]
            fn vexp(self) -> Self { $vexp(self) }
        }
    )*};
}
prim_real_float_impls!(f32 => vexp_f32, f64 => f64::exp);

/// `f32`'s [`RealFloat::vexp`]: a Cephes-style polynomial.
#[inline(always)]
fn vexp_f32(x0: f32) -> f32 {
    const HI: f32 = 88.0;
    const LO: f32 = -87.336_55; // ln(f32::MIN_POSITIVE)
    let x = x0.clamp(LO, HI);
    // x = n ln2 + r, |r| <= ln2 / 2; ln2 split in two for accuracy.
    // n = round(x / ln2) by the 1.5 * 2^23 trick (`floor` is a libm
    // call on baseline x86-64 and would stop vectorization).
    const ROUND: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * z + r + 1.0;
    // 2^n by building the exponent bits (n is in [-126, 127]).
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    let v = y * scale;
    if x0.is_nan() {
        x0
    } else if x0 < LO {
        0.0
    } else {
        v
    }
}

/// `half` and `bfloat16`: every function computes in `f32` and rounds once.
macro_rules! half_impls {
    ($($t:ty, $lowest:expr, $highest:expr);*) => {$(
        impl Num for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            type Acc = f32;
            type MeanAcc = f32;
            #[inline(always)]
            fn add(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() + o.to_f32()) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() - o.to_f32()) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() * o.to_f32()) }
            #[inline(always)]
            fn to_acc(self) -> f32 { self.to_f32() }
            #[inline(always)]
            fn from_acc(a: f32) -> Self { <$t>::from_f32(a) }
            #[inline(always)]
            fn to_mean_acc(self) -> f32 { self.to_f32() }
            #[inline(always)]
            fn from_mean_acc(a: f32) -> Self { <$t>::from_f32(a) }
            #[inline(always)]
            fn div_count(self, n: usize) -> Self { <$t>::from_f32(self.to_f32() / n as f32) }
        }
        impl Signed for $t {
            #[inline(always)]
            fn neg(self) -> Self { -self }
            #[inline(always)]
            fn sign(self) -> Self { <$t>::from_f32(Signed::sign(self.to_f32())) }
        }
        impl Ordered for $t {
            type Key = f32;
            const MAX_IDENTITY: f32 = f32::NEG_INFINITY;
            const MIN_IDENTITY: f32 = f32::INFINITY;
            const ARG_LOWEST: f32 = $lowest;
            const ARG_HIGHEST: f32 = $highest;
            #[inline(always)]
            fn key(self) -> f32 { self.to_f32() }
            #[inline(always)]
            fn from_key(k: f32) -> Self { <$t>::from_f32(k) }
            #[inline(always)]
            fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
        impl Float for $t {
            #[inline(always)]
            fn from_f64(v: f64) -> Self { <$t>::from_f32(v as f32) }
            #[inline(always)]
            fn div(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() / o.to_f32()) }
            #[inline(always)]
            fn recip(self) -> Self { <$t>::from_f32(1.0 / self.to_f32()) }
            #[inline(always)]
            fn sqrt(self) -> Self { <$t>::from_f32(self.to_f32().sqrt()) }
            #[inline(always)]
            fn rsqrt(self) -> Self { <$t>::from_f32(Float::rsqrt(self.to_f32())) }
            #[inline(always)]
            fn exp(self) -> Self { <$t>::from_f32(self.to_f32().exp()) }
            #[inline(always)]
            fn ln(self) -> Self { <$t>::from_f32(self.to_f32().ln()) }
            #[inline(always)]
            fn ln_1p(self) -> Self { <$t>::from_f32(self.to_f32().ln_1p()) }
            #[inline(always)]
            fn tanh(self) -> Self { <$t>::from_f32(self.to_f32().tanh()) }
            #[inline(always)]
            fn sigmoid(self) -> Self { <$t>::from_f32(Float::sigmoid(self.to_f32())) }
            #[inline(always)]
            fn sin(self) -> Self { <$t>::from_f32(self.to_f32().sin()) }
            #[inline(always)]
            fn cos(self) -> Self { <$t>::from_f32(self.to_f32().cos()) }
            #[inline(always)]
            fn pow(self, o: Self) -> Self { <$t>::from_f32(self.to_f32().powf(o.to_f32())) }
        }
        impl RealFloat for $t {
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
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
            #[inline(always)]
            fn to_f64(self) -> f64 { <$t>::to_f64(self) }
        }
    )*};
}
half_impls!(f16, -65504.0, 65504.0; bf16, -3.389_531_4e38, 3.389_531_4e38);
