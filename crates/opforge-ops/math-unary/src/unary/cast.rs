//! `Cast`.

use super::*;

// Cast
// ---------------------------------------------------------------------------

/// A value on its way from one element type to another: the widest type of
/// its family, from which every destination converts as C++ `static_cast`
/// would from the original type (`half`/`bfloat16` widen to `f32` exactly).
#[derive(Clone, Copy, Debug)]
pub(super) enum Scalar {
    B(bool),
    I(i64),
    U(u64),
    F(f32),
    D(f64),
    CF(Complex<f32>),
    CD(Complex<f64>),
}

/// The element types `Cast` converts between.
pub(super) trait CastElem: Element {
    fn to_scalar(self) -> Scalar;
    fn from_scalar(s: Scalar) -> Self;
}

macro_rules! cast_int {
    ($variant:ident, $wide:ty => $($t:ty),*) => {$(
        impl CastElem for $t {
            #[inline(always)]
            fn to_scalar(self) -> Scalar { Scalar::$variant(self as $wide) }
            #[inline(always)]
            fn from_scalar(s: Scalar) -> Self {
                // Integer to integer wraps (two's complement); float to
                // integer truncates toward zero and saturates (NaN -> 0).
                match s {
                    Scalar::B(b) => b as $t,
                    Scalar::I(v) => v as $t,
                    Scalar::U(v) => v as $t,
                    Scalar::F(v) => v as $t,
                    Scalar::D(v) => v as $t,
                    Scalar::CF(c) => c.re as $t,
                    Scalar::CD(c) => c.re as $t,
                }
            }
        }
    )*};
}
cast_int!(I, i64 => i8, i16, i32, i64);
cast_int!(U, u64 => u8, u16, u32, u64);

impl CastElem for bool {
    #[inline(always)]
    fn to_scalar(self) -> Scalar {
        Scalar::B(self)
    }
    #[inline(always)]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::B(b) => b,
            Scalar::I(v) => v != 0,
            Scalar::U(v) => v != 0,
            Scalar::F(v) => v != 0.0,
            Scalar::D(v) => v != 0.0,
            Scalar::CF(c) => c.re != 0.0,
            Scalar::CD(c) => c.re != 0.0,
        }
    }
}

macro_rules! cast_prim_float {
    ($($t:ty => $variant:ident),*) => {$(
        impl CastElem for $t {
            #[inline(always)]
            fn to_scalar(self) -> Scalar { Scalar::$variant(self) }
            #[inline(always)]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::B(b) => u8::from(b) as $t,
                    Scalar::I(v) => v as $t,
                    Scalar::U(v) => v as $t,
                    Scalar::F(v) => v as $t,
                    Scalar::D(v) => v as $t,
                    Scalar::CF(c) => c.re as $t,
                    Scalar::CD(c) => c.re as $t,
                }
            }
        }
    )*};
}
cast_prim_float!(f32 => F, f64 => D);

macro_rules! cast_half {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            #[inline(always)]
            fn to_scalar(self) -> Scalar { Scalar::F(self.to_f32()) }
            #[inline(always)]
            fn from_scalar(s: Scalar) -> Self {
                // Eigen converts every type to half/bfloat16 through float.
                <$t>::from_f32(<f32 as CastElem>::from_scalar(s))
            }
        }
    )*};
}
cast_half!(f16, bf16);

macro_rules! cast_complex {
    ($($f:ty => $variant:ident),*) => {$(
        impl CastElem for Complex<$f> {
            #[inline(always)]
            fn to_scalar(self) -> Scalar { Scalar::$variant(self) }
            #[inline(always)]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::CF(c) => Complex::new(c.re as $f, c.im as $f),
                    Scalar::CD(c) => Complex::new(c.re as $f, c.im as $f),
                    real => Complex::new(<$f as CastElem>::from_scalar(real), 0.0),
                }
            }
        }
    )*};
}
cast_complex!(f32 => CF, f64 => CD);

/// How many low mantissa bits `Cast` with `Truncate=true` clears before
/// converting (TensorFlow's `LSBZeroSetter`, which it applies to these
/// narrowing float casts only): rounding then truncates.
pub(super) fn truncation_bits(src: DataType, dst: DataType) -> Option<u32> {
    use DataType::*;
    match (src, dst) {
        (Double | Complex128, Float | Complex64) => Some(53 - 24),
        (Double | Complex128, Half) => Some(53 - 11),
        (Float | Complex64, Half) => Some(24 - 11),
        (Float, BFloat16) => Some(24 - 8),
        _ => None,
    }
}

#[inline(always)]
pub(super) fn clear_low_bits(s: Scalar, bits: u32) -> Scalar {
    let f32c = |v: f32| {
        if v.is_nan() {
            v
        } else {
            f32::from_bits(v.to_bits() & (u32::MAX << bits))
        }
    };
    let f64c = |v: f64| {
        if v.is_nan() {
            v
        } else {
            f64::from_bits(v.to_bits() & (u64::MAX << bits))
        }
    };
    match s {
        Scalar::F(v) => Scalar::F(f32c(v)),
        Scalar::D(v) => Scalar::D(f64c(v)),
        Scalar::CF(c) => Scalar::CF(Complex::new(f32c(c.re), f32c(c.im))),
        Scalar::CD(c) => Scalar::CD(Complex::new(f64c(c.re), f64c(c.im))),
        other => other,
    }
}

pub(super) fn cast_loop<S: CastElem, D: CastElem>(
    ctx: &mut OpKernelContext<'_>,
    truncate: Option<u32>,
) -> Result<()> {
    match truncate {
        None => unary_map::<S, D>(ctx, COST_CHEAP, |v| D::from_scalar(v.to_scalar())),
        Some(bits) => unary_map::<S, D>(ctx, COST_CHEAP, move |v| {
            D::from_scalar(clear_low_bits(v.to_scalar(), bits))
        }),
    }
}

/// Runs `$body` with `$S` bound to the element type of every castable dtype.
macro_rules! castable_types {
    ($dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        dispatch!($dt, $T => $body,
            [Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Half, BFloat16,
             Float, Double, Complex64, Complex128],
            $fallback)
    };
}

pub(super) fn castable(dt: DataType) -> bool {
    castable_types!(dt, T => true, false)
}

/// `Cast`: converts between any two of bool, the integer, float and complex
/// types; a cast to the same type passes the input through.
pub(super) struct CastKernel {
    src: DataType,
    dst: DataType,
    truncate: Option<u32>,
}

impl CreateKernel for CastKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let src: DataType = ctx.get_attr("SrcT")?;
        let dst: DataType = ctx.get_attr("DstT")?;
        let truncate: bool = ctx.get_attr("Truncate")?;
        if src != dst && !(castable(src) && castable(dst)) {
            return Err(Status::unimplemented(format!(
                "Cast {src} to {dst} is not supported"
            )));
        }
        Ok(CastKernel {
            src,
            dst,
            truncate: if truncate {
                truncation_bits(src, dst)
            } else {
                None
            },
        })
    }
}

impl OpKernel for CastKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        if self.src == self.dst {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        let (src, dst, truncate) = (self.src, self.dst, self.truncate);
        let bad = || {
            Err(Status::unimplemented(format!(
                "Cast {src} to {dst} is not supported"
            )))
        };
        castable_types!(src, S => castable_types!(dst, D => cast_loop::<S, D>(ctx, truncate), bad()), bad())
    }
}

register_op!(OpDefBuilder::new("Cast")
    .input("x: SrcT")
    .output("y: DstT")
    .attr("SrcT: type")
    .attr("DstT: type")
    .attr("Truncate: bool = false")
    .set_shape_fn(unchanged_shape)
    .doc(
        "Cast x of type SrcT to y of DstT.\n\n\
         Between bool, integer, floating and complex types. Float to integer\n\
         truncates toward zero; complex to real keeps the real part."
    ));
register_kernel!(KernelDefBuilder::new("Cast"), CastKernel);
