//! The reducers: `Sum`, `Prod`, `Mean`, `Max`, `Min`, `All`, `Any`.

use crate::cpu::elem::{Num, Ordered};
use opforge_core::Element;
use std::marker::PhantomData;

// ---------------------------------------------------------------------------
// Reducers
// ---------------------------------------------------------------------------

/// How a reduction combines elements: an accumulator type with an identity,
/// a load from the element type, an associative and commutative combine,
/// and a finish that turns the accumulated value of `count` elements into
/// an output element.
pub trait Reducer: Copy + Send + Sync + 'static {
    /// The element type (of the input and the output).
    type In: Element;
    /// The accumulator type.
    type Acc: Copy + Send + Sync + 'static;
    /// The accumulator of no element.
    fn identity(self) -> Self::Acc;
    /// The accumulator of one element.
    fn load(self, x: Self::In) -> Self::Acc;
    /// Two accumulators combined.
    fn combine(self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// The output element of an accumulator over `count` elements.
    fn finish(self, a: Self::Acc, count: usize) -> Self::In;
}

macro_rules! reducer_struct {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        pub struct $name<T>(PhantomData<T>);
        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<T> {}
        impl<T> Default for $name<T> {
            fn default() -> Self {
                $name(PhantomData)
            }
        }
        impl<T> $name<T> {
            /// The reducer.
            pub const fn new() -> Self {
                $name(PhantomData)
            }
        }
    };
}

reducer_struct!(
    /// `Sum` (wrapping for integers).
    SumR
);
reducer_struct!(
    /// `Prod` (wrapping for integers).
    ProdR
);
reducer_struct!(
    /// `Mean` (truncating for integers).
    MeanR
);
reducer_struct!(
    /// `Max`, propagating NaN.
    MaxR
);
reducer_struct!(
    /// `Min`, propagating NaN.
    MinR
);

impl<T: Num> Reducer for SumR<T> {
    type In = T;
    type Acc = T::Acc;
    #[inline(always)]
    fn identity(self) -> T::Acc {
        T::Acc::ZERO
    }
    #[inline(always)]
    fn load(self, x: T) -> T::Acc {
        x.to_acc()
    }
    #[inline(always)]
    fn combine(self, a: T::Acc, b: T::Acc) -> T::Acc {
        a.add(b)
    }
    #[inline(always)]
    fn finish(self, a: T::Acc, _: usize) -> T {
        T::from_acc(a)
    }
}

impl<T: Num> Reducer for ProdR<T> {
    type In = T;
    type Acc = T::Acc;
    #[inline(always)]
    fn identity(self) -> T::Acc {
        T::Acc::ONE
    }
    #[inline(always)]
    fn load(self, x: T) -> T::Acc {
        x.to_acc()
    }
    #[inline(always)]
    fn combine(self, a: T::Acc, b: T::Acc) -> T::Acc {
        a.mul(b)
    }
    #[inline(always)]
    fn finish(self, a: T::Acc, _: usize) -> T {
        T::from_acc(a)
    }
}

impl<T: Num> Reducer for MeanR<T> {
    type In = T;
    type Acc = T::MeanAcc;
    #[inline(always)]
    fn identity(self) -> T::MeanAcc {
        T::MeanAcc::ZERO
    }
    #[inline(always)]
    fn load(self, x: T) -> T::MeanAcc {
        x.to_mean_acc()
    }
    #[inline(always)]
    fn combine(self, a: T::MeanAcc, b: T::MeanAcc) -> T::MeanAcc {
        a.add(b)
    }
    #[inline(always)]
    fn finish(self, a: T::MeanAcc, count: usize) -> T {
        T::from_mean_acc(a.div_count(count))
    }
}

impl<T: Ordered> Reducer for MaxR<T> {
    type In = T;
    type Acc = T::Key;
    #[inline(always)]
    fn identity(self) -> T::Key {
        T::MAX_IDENTITY
    }
    #[inline(always)]
    fn load(self, x: T) -> T::Key {
        x.key()
    }
    #[inline(always)]
    fn combine(self, a: T::Key, b: T::Key) -> T::Key {
        if b > a || Ordered::is_nan(b) {
            b
        } else {
            a
        }
    }
    #[inline(always)]
    fn finish(self, a: T::Key, _: usize) -> T {
        T::from_key(a)
    }
}

impl<T: Ordered> Reducer for MinR<T> {
    type In = T;
    type Acc = T::Key;
    #[inline(always)]
    fn identity(self) -> T::Key {
        T::MIN_IDENTITY
    }
    #[inline(always)]
    fn load(self, x: T) -> T::Key {
        x.key()
    }
    #[inline(always)]
    fn combine(self, a: T::Key, b: T::Key) -> T::Key {
        if b < a || Ordered::is_nan(b) {
            b
        } else {
            a
        }
    }
    #[inline(always)]
    fn finish(self, a: T::Key, _: usize) -> T {
        T::from_key(a)
    }
}

/// `All`.
#[derive(Clone, Copy)]
pub struct AllR;
/// `Any`.
#[derive(Clone, Copy)]
pub struct AnyR;

impl Reducer for AllR {
    type In = bool;
    type Acc = bool;
    #[inline(always)]
    fn identity(self) -> bool {
        true
    }
    #[inline(always)]
    fn load(self, x: bool) -> bool {
        x
    }
    #[inline(always)]
    fn combine(self, a: bool, b: bool) -> bool {
        a & b
    }
    #[inline(always)]
    fn finish(self, a: bool, _: usize) -> bool {
        a
    }
}

impl Reducer for AnyR {
    type In = bool;
    type Acc = bool;
    #[inline(always)]
    fn identity(self) -> bool {
        false
    }
    #[inline(always)]
    fn load(self, x: bool) -> bool {
        x
    }
    #[inline(always)]
    fn combine(self, a: bool, b: bool) -> bool {
        a | b
    }
    #[inline(always)]
    fn finish(self, a: bool, _: usize) -> bool {
        a
    }
}
