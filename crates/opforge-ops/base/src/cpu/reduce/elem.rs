//! The element arithmetic of reductions: accumulators and ordered keys.

use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::Element;

// ---------------------------------------------------------------------------
// Element arithmetic
// ---------------------------------------------------------------------------

/// The arithmetic of a sum, product or mean accumulator.
pub trait AccNum: Copy + Send + Sync + 'static {
    /// Zero, the identity of sums.
    fn zero() -> Self;
    /// One, the identity of products.
    fn one() -> Self;
    /// `self + o` (wrapping for integers).
    fn add(self, o: Self) -> Self;
    /// `self * o` (wrapping for integers).
    fn mul(self, o: Self) -> Self;
    /// `self / n`, a mean's last step: NaN for a float `0 / 0`, 0 for an
    /// integer or complex empty mean (TensorFlow's identities).
    fn div_count(self, n: usize) -> Self;
}

macro_rules! acc_float {
    ($($t:ty),*) => {$(
        impl AccNum for $t {
            #[inline(always)] fn zero() -> Self { 0.0 }
            #[inline(always)] fn one() -> Self { 1.0 }
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn div_count(self, n: usize) -> Self { self / n as $t }
        }
        impl AccNum for Complex<$t> {
            #[inline(always)] fn zero() -> Self { Complex::new(0.0, 0.0) }
            #[inline(always)] fn one() -> Self { Complex::new(1.0, 0.0) }
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn div_count(self, n: usize) -> Self {
                if n == 0 { Self::zero() } else { self / n as $t }
            }
        }
    )*};
}
acc_float!(f32, f64);

macro_rules! acc_int {
    ($($t:ty),*) => {$(
        impl AccNum for $t {
            #[inline(always)] fn zero() -> Self { 0 }
            #[inline(always)] fn one() -> Self { 1 }
            #[inline(always)] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn div_count(self, n: usize) -> Self {
                if n == 0 { 0 } else { (self as i128 / n as i128) as $t }
            }
        }
    )*};
}
acc_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// A numeric element type of `Sum`, `Prod` and `Mean`: its accumulator
/// types and conversions.
pub trait NumElem: Element {
    /// The accumulator of sums and products (`f32` for `half`/`bfloat16`).
    type Acc: AccNum;
    /// The accumulator of means (64-bit for integers, as TensorFlow does).
    type MeanAcc: AccNum;
    /// The value as a sum/product accumulator.
    fn to_acc(self) -> Self::Acc;
    /// A sum/product accumulator rounded back to the element type.
    fn from_acc(a: Self::Acc) -> Self;
    /// The value as a mean accumulator.
    fn to_mean(self) -> Self::MeanAcc;
    /// A mean accumulator converted back to the element type.
    fn from_mean(a: Self::MeanAcc) -> Self;
}

macro_rules! num_elem {
    ($t:ty, $acc:ty, $mean:ty, |$x:ident| $to:expr, |$a:ident| $from:expr, |$y:ident| $to_m:expr, |$b:ident| $from_m:expr) => {
        impl NumElem for $t {
            type Acc = $acc;
            type MeanAcc = $mean;
            #[inline(always)]
            fn to_acc(self) -> $acc {
                let $x = self;
                $to
            }
            #[inline(always)]
            fn from_acc($a: $acc) -> Self {
                $from
            }
            #[inline(always)]
            fn to_mean(self) -> $mean {
                let $y = self;
                $to_m
            }
            #[inline(always)]
            fn from_mean($b: $mean) -> Self {
                $from_m
            }
        }
    };
}

num_elem!(f32, f32, f32, |x| x, |a| a, |x| x, |a| a);
num_elem!(f64, f64, f64, |x| x, |a| a, |x| x, |a| a);
num_elem!(
    f16,
    f32,
    f32,
    |x| x.to_f32(),
    |a| f16::from_f32(a),
    |x| x.to_f32(),
    |a| f16::from_f32(a)
);
num_elem!(
    bf16,
    f32,
    f32,
    |x| x.to_f32(),
    |a| bf16::from_f32(a),
    |x| x.to_f32(),
    |a| bf16::from_f32(a)
);
num_elem!(
    Complex<f32>,
    Complex<f32>,
    Complex<f32>,
    |x| x,
    |a| a,
    |x| x,
    |a| a
);
num_elem!(
    Complex<f64>,
    Complex<f64>,
    Complex<f64>,
    |x| x,
    |a| a,
    |x| x,
    |a| a
);
num_elem!(i8, i8, i64, |x| x, |a| a, |x| x as i64, |a| a as i8);
num_elem!(i16, i16, i64, |x| x, |a| a, |x| x as i64, |a| a as i16);
num_elem!(i32, i32, i64, |x| x, |a| a, |x| x as i64, |a| a as i32);
num_elem!(i64, i64, i64, |x| x, |a| a, |x| x, |a| a);
num_elem!(u8, u8, u64, |x| x, |a| a, |x| x as u64, |a| a as u8);
num_elem!(u16, u16, u64, |x| x, |a| a, |x| x as u64, |a| a as u16);
num_elem!(u32, u32, u64, |x| x, |a| a, |x| x as u64, |a| a as u32);
num_elem!(u64, u64, u64, |x| x, |a| a, |x| x, |a| a);

/// An ordered element type of `Max`, `Min`, `ArgMax` and `ArgMin`, compared
/// through a key (`f32` for `half`/`bfloat16`, 0/1 for `bool`).
pub trait OrdElem: Element {
    /// The comparison key.
    type Key: Copy + PartialOrd + Send + Sync + 'static;
    /// The identity of `Max`: -inf for floats, the lowest value otherwise.
    const MAX_IDENTITY: Self::Key;
    /// The identity of `Min`: +inf for floats, the highest value otherwise.
    const MIN_IDENTITY: Self::Key;
    /// Where `ArgMax` starts (Eigen's `NumTraits::lowest`).
    const ARG_LOWEST: Self::Key;
    /// Where `ArgMin` starts (Eigen's `NumTraits::highest`).
    const ARG_HIGHEST: Self::Key;
    /// The value's key.
    fn key(self) -> Self::Key;
    /// The element of a key (rounded back for `half`/`bfloat16`).
    fn from_key(k: Self::Key) -> Self;
    /// Whether a key is NaN (never for integers and bool).
    fn is_nan(k: Self::Key) -> bool;
}

macro_rules! ord_float {
    ($t:ty, $k:ty, $lowest:expr, $highest:expr, |$x:ident| $key:expr, |$a:ident| $from:expr) => {
        impl OrdElem for $t {
            type Key = $k;
            const MAX_IDENTITY: $k = <$k>::NEG_INFINITY;
            const MIN_IDENTITY: $k = <$k>::INFINITY;
            const ARG_LOWEST: $k = $lowest;
            const ARG_HIGHEST: $k = $highest;
            #[inline(always)]
            fn key(self) -> $k {
                let $x = self;
                $key
            }
            #[inline(always)]
            fn from_key($a: $k) -> Self {
                $from
            }
            #[inline(always)]
            fn is_nan(k: $k) -> bool {
                k.is_nan()
            }
        }
    };
}
ord_float!(f32, f32, f32::MIN, f32::MAX, |x| x, |a| a);
ord_float!(f64, f64, f64::MIN, f64::MAX, |x| x, |a| a);
ord_float!(f16, f32, -65504.0, 65504.0, |x| x.to_f32(), |a| {
    f16::from_f32(a)
});
ord_float!(
    bf16,
    f32,
    -3.389_531_4e38,
    3.389_531_4e38,
    |x| x.to_f32(),
    |a| bf16::from_f32(a)
);

macro_rules! ord_int {
    ($($t:ty),*) => {$(
        impl OrdElem for $t {
            type Key = $t;
            const MAX_IDENTITY: $t = <$t>::MIN;
            const MIN_IDENTITY: $t = <$t>::MAX;
            const ARG_LOWEST: $t = <$t>::MIN;
            const ARG_HIGHEST: $t = <$t>::MAX;
            #[inline(always)] fn key(self) -> $t { self }
            #[inline(always)] fn from_key(a: $t) -> Self { a }
            #[inline(always)] fn is_nan(_: $t) -> bool { false }
        }
    )*};
}
ord_int!(i8, i16, i32, i64, u8, u16, u32, u64);

impl OrdElem for bool {
    type Key = u8;
    const MAX_IDENTITY: u8 = 0;
    const MIN_IDENTITY: u8 = 1;
    const ARG_LOWEST: u8 = 0;
    const ARG_HIGHEST: u8 = 1;
    #[inline(always)]
    fn key(self) -> u8 {
        self as u8
    }
    #[inline(always)]
    fn from_key(a: u8) -> Self {
        a != 0
    }
    #[inline(always)]
    fn is_nan(_: u8) -> bool {
        false
    }
}
