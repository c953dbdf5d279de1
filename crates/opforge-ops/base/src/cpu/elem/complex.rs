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
            #[inline]
            fn tanh(self) -> Self { careful_tanh!(self, $f) }
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
/// Complex `tanh` computed without overflow (Kahan's formulation, as C99's
/// `ctanh` and numpy compute it): the textbook `(sinh 2x + i sin 2y) /
/// (cosh 2x + cos 2y)` gives inf/inf = NaN once `x` passes ~355 (f64) or ~44
/// (f32), where the answer is `±1 + 0i`.
macro_rules! careful_tanh {
    ($z:expr, $f:ty) => {{
        let (x, y): ($f, $f) = ($z.re, $z.im);
        // Past this |x|, tanh(x) rounds to ±1 and the imaginary part to a
        // tiny multiple of exp(-2|x|).
        let big: $f = if std::mem::size_of::<$f>() == 4 {
            9.0
        } else {
            22.0
        };
        if x.is_nan() {
            Complex::new(x, if y == 0.0 { y } else { x * y })
        } else if x.is_infinite() {
            let im = if y.is_infinite() {
                y
            } else {
                y.sin() * y.cos()
            };
            Complex::new((1.0 as $f).copysign(x), (0.0 as $f).copysign(im))
        } else if !y.is_finite() {
            Complex::new(y - y, y - y)
        } else if x.abs() >= big {
            let e = (-x.abs()).exp();
            Complex::new((1.0 as $f).copysign(x), 4.0 * y.sin() * y.cos() * e * e)
        } else {
            let t = y.tan();
            let beta = 1.0 + t * t;
            let s = x.sinh();
            let rho = (1.0 + s * s).sqrt();
            let denom = 1.0 + beta * s * s;
            Complex::new(beta * rho * s / denom, t / denom)
        }
    }};
}

complex_impls!(f32, f64);

#[cfg(test)]
mod careful_tanh_tests {
    use super::*;

    /// The limits: ±1 + 0i past the overflow point (what numpy's `np.tanh`
    /// gives for 1e30+1e30i), C99 `ctanh`'s special values, and the textbook
    /// formula where it does not overflow.
    #[test]
    fn large_and_special_arguments() {
        let t = |re: f64, im: f64| Float::tanh(Complex::new(re, im));
        assert_eq!(t(1e30, 1e30), Complex::new(1.0, 0.0));
        assert_eq!(t(-1e30, 1e30).re, -1.0);
        assert_eq!(t(400.0, 1.0), Complex::new(1.0, 0.0));
        let z = t(f64::INFINITY, 2.0);
        assert_eq!((z.re, z.im), (1.0, -0.0));
        assert!(t(1.0, f64::INFINITY).re.is_nan());
        assert!(t(f64::NAN, 1.0).re.is_nan());
        assert_eq!(t(f64::NAN, 0.0).im, 0.0);
        let z32 = Float::tanh(Complex::new(100.0f32, 3.0));
        assert_eq!(z32.re, 1.0);
        assert!(z32.im.abs() < 1e-30);
        // Ordinary arguments agree with the textbook formula.
        for (re, im) in [(0.5, 0.25), (-1.5, 2.0), (3.0, -0.7), (0.0, 1.0)] {
            let z = Complex::new(re, im);
            let want = (z.exp() - (-z).exp()) / (z.exp() + (-z).exp());
            let got = t(re, im);
            assert!((got - want).norm() < 1e-15, "{z}: {got} vs {want}");
        }
    }
}
