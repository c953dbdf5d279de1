//! The integer types: wrapping arithmetic, means in 64 bits.

use super::{Int, Num, Ordered, Signed};

macro_rules! int_impls {
    ($signed:expr, $mean:ty => $($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            type Acc = $t;
            type MeanAcc = $mean;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)]
            fn to_acc(self) -> $t { self }
            #[inline(always)]
            fn from_acc(a: $t) -> Self { a }
            #[inline(always)]
            fn to_mean_acc(self) -> $mean { self as $mean }
            #[inline(always)]
            fn from_mean_acc(a: $mean) -> Self { a as $t }
            #[inline(always)]
            fn div_count(self, n: usize) -> Self {
                if n == 0 { 0 } else { (self as i128 / n as i128) as $t }
            }
        }
        impl Ordered for $t {
            type Key = $t;
            const MAX_IDENTITY: $t = <$t>::MIN;
            const MIN_IDENTITY: $t = <$t>::MAX;
            const ARG_LOWEST: $t = <$t>::MIN;
            const ARG_HIGHEST: $t = <$t>::MAX;
            #[inline(always)]
            fn key(self) -> $t { self }
            #[inline(always)]
            fn from_key(k: $t) -> Self { k }
            #[inline(always)]
            fn is_nan(self) -> bool { false }
        }
        impl Int for $t {
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
            #[inline(always)]
            fn to_i128(self) -> i128 { self as i128 }
        }
    )*};
}
int_impls!(true, i64 => i8, i16, i32, i64);
int_impls!(false, u64 => u8, u16, u32, u64);

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

/// `bool` is ordered (`false < true`) for `ArgMax`/`ArgMin`, compared as
/// `u8`.
impl Ordered for bool {
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
    fn from_key(k: u8) -> Self {
        k != 0
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        false
    }
}
