//! The elementwise functions of the binary ops, per element type.

use super::*;

// Elementwise functions
// ---------------------------------------------------------------------------

/// Integer floor division (`y != 0`): truncate, then step down when the
/// signs differ and there is a remainder.
#[inline(always)]
pub(super) fn int_floor_div<T: Int>(x: T, y: T) -> T {
    let z = x.trunc_div(y);
    if z.mul(y) != x && (x.is_negative() != y.is_negative()) {
        z.sub(T::ONE)
    } else {
        z
    }
}

/// Integer floor modulo (`y != 0`): the result has the sign of `y`.
#[inline(always)]
pub(super) fn int_floor_mod<T: Int>(x: T, y: T) -> T {
    let r = x.trunc_rem(y);
    if r != T::ZERO && (y.is_negative() != r.is_negative()) {
        r.add(y)
    } else {
        r
    }
}

/// Float floor modulo: `fmod`, moved to the sign of `y`.
#[inline(always)]
pub(super) fn float_floor_mod<T: RealFloat>(x: T, y: T) -> T {
    let r = x.fmod(y);
    if r != T::ZERO && ((y < T::ZERO) != (r < T::ZERO)) {
        r.add(y)
    } else {
        r
    }
}

#[inline(always)]
pub(super) fn float_floor_div<T: RealFloat>(x: T, y: T) -> T {
    x.div(y).floor()
}

/// `max(x, y)`, NaN if either is NaN (Eigen's `PropagateNaN`).
#[inline(always)]
pub(super) fn max_nan<T: Ordered>(x: T, y: T) -> T {
    if x.is_nan() {
        x
    } else if y.is_nan() || x < y {
        y
    } else {
        x
    }
}

/// `min(x, y)`, NaN if either is NaN.
#[inline(always)]
pub(super) fn min_nan<T: Ordered>(x: T, y: T) -> T {
    if x.is_nan() {
        x
    } else if y.is_nan() || y < x {
        y
    } else {
        x
    }
}

/// `(x - y) * conj(x - y)`.
#[inline(always)]
pub(super) fn squared_difference<T: Num>(x: T, y: T) -> T {
    let d = x.sub(y);
    d.mul(d.conj())
}

/// Whether a binary op on inputs 0 and 1 has a non-empty output (false when
/// the shapes do not broadcast: the op reports that itself).
pub(super) fn output_nonempty(ctx: &OpKernelContext<'_>) -> bool {
    broadcast_shapes(ctx.input(0).dims(), ctx.input(1).dims())
        .map(|s| s.iter().all(|&d| d != 0))
        .unwrap_or(false)
}

/// An integer division-like op: `Integer division by zero` if `y` holds a
/// zero that the output uses.
pub(super) fn int_div_op<T: Int>(ctx: &mut OpKernelContext<'_>, f: fn(T, T) -> T) -> Result<()> {
    if output_nonempty(ctx) {
        ensure!(
            !ctx.input(1).flat::<T>()?.contains(&T::ZERO),
            InvalidArgument,
            "Integer division by zero"
        );
    }
    binary_same::<T>(ctx, COST_DIV, f)
}

/// Integer `Pow`: an error for a negative exponent.
pub(super) fn int_pow_op<T: Int>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    if output_nonempty(ctx) {
        ensure!(
            !ctx.input(1).flat::<T>()?.iter().any(|y| y.is_negative()),
            InvalidArgument,
            "Integers to negative integer powers are not allowed"
        );
    }
    binary_same::<T>(ctx, 5, T::int_pow)
}

/// `Add` on strings: concatenation, with broadcasting.
pub(super) fn string_concat(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let plan = BroadcastPlan::new(ctx.input(0).dims(), ctx.input(1).dims())?;
    ctx.allocate_output(0, TensorShape::new(&plan.out_shape)?)?;
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    let a: Vec<&Vec<u8>> = ins[0].strings()?.iter().collect();
    let b: Vec<&Vec<u8>> = ins[1].strings()?.iter().collect();
    broadcast_zip(pool, &plan, &a, &b, out.strings_mut()?, 8, |x, y| {
        let mut s = Vec::with_capacity(x.len() + y.len());
        s.extend_from_slice(x);
        s.extend_from_slice(y);
        s
    });
    Ok(())
}

/// `Equal`/`NotEqual` on strings, with broadcasting.
pub(super) fn string_equality(ctx: &mut OpKernelContext<'_>, equal: bool) -> Result<()> {
    let plan = BroadcastPlan::new(ctx.input(0).dims(), ctx.input(1).dims())?;
    ctx.allocate_output(0, TensorShape::new(&plan.out_shape)?)?;
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    let a: Vec<&Vec<u8>> = ins[0].strings()?.iter().collect();
    let b: Vec<&Vec<u8>> = ins[1].strings()?.iter().collect();
    broadcast_zip(pool, &plan, &a, &b, out.flat_mut::<bool>()?, 4, |x, y| {
        (x == y) == equal
    });
    Ok(())
}

// ---------------------------------------------------------------------------
