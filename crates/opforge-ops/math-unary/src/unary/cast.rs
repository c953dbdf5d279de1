//! `Cast`.

use super::*;

// Cast
// ---------------------------------------------------------------------------

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
pub(super) fn clear_low_bits(s: Wide, bits: u32) -> Wide {
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
        Wide::F32(v) => Wide::F32(f32c(v)),
        Wide::F64(v) => Wide::F64(f64c(v)),
        Wide::C64(c) => Wide::C64(Complex::new(f32c(c.re), f32c(c.im))),
        Wide::C128(c) => Wide::C128(Complex::new(f64c(c.re), f64c(c.im))),
        other => other,
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

/// `y = D(x)` element-wise.
fn cast_plain<S: Scalar, D: Scalar>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    unary_map::<S, D>(ctx, COST_CHEAP, |v| D::narrow(v.widen()))
}

/// `y = D(x)` with `bits` low mantissa bits of `x` cleared first.
fn cast_truncated<S: Scalar, D: Scalar>(ctx: &mut OpKernelContext<'_>, bits: u32) -> Result<()> {
    unary_map::<S, D>(ctx, COST_CHEAP, move |v| {
        D::narrow(clear_low_bits(v.widen(), bits))
    })
}

/// Runs `cast_plain` for the dtypes `(src, dst)`, compiled for fewer pairs
/// than all of them: from bool or an integer, a cast to an integer gives
/// the same bits for either signedness of the destination (the low bits of
/// the sign- or zero-extended source), so those casts compile once per
/// destination size (`sign_agnostic!`; `unary_map` writes through
/// `flat_bits`).
fn cast_any(ctx: &mut OpKernelContext<'_>, src: DataType, dst: DataType) -> Result<()> {
    let bad = || {
        Err(Status::unimplemented(format!(
            "Cast {src} to {dst} is not supported"
        )))
    };
    dispatch!(src, S => opforge_ops_base::sign_agnostic!(castable_types, dst,
            D => cast_plain::<S, D>(ctx), bad()),
        [Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
        dispatch!(src, S => castable_types!(dst, D => cast_plain::<S, D>(ctx), bad()),
            [Half, BFloat16, Float, Double, Complex64, Complex128], bad()))
}

/// Runs `cast_truncated` for the pairs [`truncation_bits`] gives bits for
/// (compiled for those pairs only).
fn cast_with_truncation(
    ctx: &mut OpKernelContext<'_>,
    src: DataType,
    dst: DataType,
    bits: u32,
) -> Result<()> {
    use half::{bf16, f16};
    use num_complex::Complex as C;
    use DataType::*;
    match (src, dst) {
        (Double, Float) => cast_truncated::<f64, f32>(ctx, bits),
        (Double, Complex64) => cast_truncated::<f64, C<f32>>(ctx, bits),
        (Complex128, Float) => cast_truncated::<C<f64>, f32>(ctx, bits),
        (Complex128, Complex64) => cast_truncated::<C<f64>, C<f32>>(ctx, bits),
        (Double, Half) => cast_truncated::<f64, f16>(ctx, bits),
        (Complex128, Half) => cast_truncated::<C<f64>, f16>(ctx, bits),
        (Float, Half) => cast_truncated::<f32, f16>(ctx, bits),
        (Complex64, Half) => cast_truncated::<C<f32>, f16>(ctx, bits),
        (Float, BFloat16) => cast_truncated::<f32, bf16>(ctx, bits),
        _ => cast_any(ctx, src, dst),
    }
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
        match self.truncate {
            Some(bits) => cast_with_truncation(ctx, self.src, self.dst, bits),
            None => cast_any(ctx, self.src, self.dst),
        }
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
