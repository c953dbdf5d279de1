//! The complex types: the usual formulas, with libstdc++'s results where
//! they are special (`0^y`, `ln(1 + z)` near 0).

use super::{Float, Num, Signed};
use num_complex::Complex;

macro_rules! complex_impls {
    ($($f:ty),*) => {$(
        impl Num for Complex<$f> {
            const ZERO: Self = Complex { re: 0.0, im: 0.0 };
            const ONE: Self = Complex { re: 1.0, im: 0.0 };
            type Acc = Self;
            type MeanAcc = Self;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn conj(self) -> Self { Complex::conj(&self) }
            #[inline(always)]
            fn to_acc(self) -> Self { self }
            #[inline(always)]
            fn from_acc(a: Self) -> Self { a }
            #[inline(always)]
            fn to_mean_acc(self) -> Self { self }
            #[inline(always)]
            fn from_mean_acc(a: Self) -> Self { a }
            #[inline(always)]
            fn div_count(self, n: usize) -> Self {
                if n == 0 { Self::ZERO } else { self / n as $f }
            }
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
        impl Float for Complex<$f> {
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
