//! Elementwise unary math ops (`Neg`, `Abs`, `Sign`, `Reciprocal`, `Square`,
//! `Sqrt`, `Rsqrt`, `Exp`, `Log`, `Log1p`, `Tanh`, `Sigmoid`, `Sin`, `Cos`,
//! `Floor`, `Ceil`, `Round`, `LogicalNot`), `Cast`, and the gradient helpers
//! of the unary ops (`TanhGrad`, `SigmoidGrad`, `SqrtGrad`, `RsqrtGrad`,
//! `ReciprocalGrad`), with TensorFlow 2.21's OpDefs and CPU semantics.
//!
//! Numeric conventions, as TensorFlow's CPU kernels compute:
//! - integer arithmetic wraps on overflow (two's complement), where C++ would
//!   be undefined;
//! - `half` and `bfloat16` math is computed in `f32` and rounded to the
//!   element type once per op (arithmetic ops round after each operation);
//! - `Cast` follows C++ `static_cast` where it is defined; float-to-integer
//!   casts that C++ leaves undefined (NaN, out of range) saturate, NaN giving 0;
//! - `Reciprocal` also runs on integers (TensorFlow has no CPU kernel for
//!   them): truncating `1 / x`, with `InvalidArgument: Integer division by
//!   zero` for a zero; `Round` on complex has no CPU kernel, as in TensorFlow.
//!
//! This module also holds the element traits the math kernels share
//! (`Arith`, `Signed`, `FloatOps`, `RealFloat`, `IntOps`, `MinMax`),
//! the `*_types!` dispatch macros over dtype families, and
//! used by `math_binary` (all `pub(crate)`).

use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::common::unchanged_shape;
use opforge_core::{
    dispatch, ensure, register_kernel, register_op, DataType, Element, OpDefBuilder, Result, Status,
};
use opforge_ops_base::cpu::broadcast::{binary_same, unary_map, unary_same};
use opforge_ops_base::cpu::elem::*;
use opforge_ops_base::cpu::par::par_zip;
use opforge_ops_base::types::unsupported;
use opforge_ops_base::{float_complex_types, float_types, int_types, numeric_types, signed_types};

/// The ops this file registers (its tests check them).
#[cfg(test)]
const OPS: &[&str] = &[
    "Neg",
    "Abs",
    "Sign",
    "Reciprocal",
    "Square",
    "Sqrt",
    "Rsqrt",
    "Exp",
    "Log",
    "Log1p",
    "Tanh",
    "Sigmoid",
    "Sin",
    "Cos",
    "Floor",
    "Ceil",
    "Round",
    "Cast",
    "LogicalNot",
    "TanhGrad",
    "SigmoidGrad",
    "SqrtGrad",
    "RsqrtGrad",
    "ReciprocalGrad",
];

// Unary ops
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Reciprocal,
    Square,
    Sqrt,
    Rsqrt,
    Exp,
    Log,
    Log1p,
    Tanh,
    Sigmoid,
    Sin,
    Cos,
    Floor,
    Ceil,
    Round,
    LogicalNot,
}

/// The kernel of every elementwise unary op: `y = f(x)`, computed in place
/// when `x`'s buffer may be reused.
struct UnaryKernel(UnaryOp);

fn int_reciprocal<T: IntOps>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    ensure!(
        !ctx.input(0).flat::<T>()?.contains(&T::ZERO),
        InvalidArgument,
        "Integer division by zero"
    );
    unary_same::<T>(ctx, COST_DIV, |x| T::ONE.trunc_div(x))
}

impl OpKernel for UnaryKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        use UnaryOp::*;
        let dt = ctx.input_dtype(0);
        let bad = |ctx: &OpKernelContext<'_>| Err(unsupported(ctx, dt));
        const T15: usize = COST_TRANSCENDENTAL;
        match self.0 {
            Neg => signed_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, T::neg), bad(ctx)),
            Abs => float_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, <T as RealFloat>::abs),
                int_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, T::abs_wrapping), bad(ctx))),
            Sign => signed_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, T::sign), bad(ctx)),
            Reciprocal => float_complex_types!(dt, T => unary_same::<T>(ctx, COST_DIV, T::recip),
                int_types!(dt, T => int_reciprocal::<T>(ctx), bad(ctx))),
            Square => {
                numeric_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, |x: T| x.mul(x)), bad(ctx))
            }
            Sqrt => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::sqrt), bad(ctx)),
            Rsqrt => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::rsqrt), bad(ctx)),
            Exp => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::exp), bad(ctx)),
            Log => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::ln), bad(ctx)),
            Log1p => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::ln_1p), bad(ctx)),
            Tanh => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::tanh), bad(ctx)),
            Sigmoid => {
                float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::sigmoid), bad(ctx))
            }
            Sin => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::sin), bad(ctx)),
            Cos => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::cos), bad(ctx)),
            Floor => float_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, T::floor), bad(ctx)),
            Ceil => float_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, T::ceil), bad(ctx)),
            Round => float_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, T::round_half_even),
                // Integers are already round: the identity, as TensorFlow.
                int_types!(dt, T => unary_same::<T>(ctx, COST_CHEAP, |x: T| x), bad(ctx))),
            LogicalNot => unary_same::<bool>(ctx, COST_CHEAP, |x| !x),
        }
    }
}

/// Registers the OpDef `x: T -> y: T` of a unary op with the allowed types
/// `types` (TensorFlow's spec list) and its kernel for `kernel_types`.
macro_rules! unary_op {
    ($name:literal, $op:ident, $types:literal, [$($k:ident),* $(,)?], $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("x: T")
            .output("y: T")
            .attr(concat!("T: {", $types, "}"))
            .set_shape_fn(unchanged_shape)
            .doc($doc));
        register_kernel!(
            KernelDefBuilder::new($name).type_constraint_list("T", &[$(DataType::$k),*]),
            fn = |_| Ok(Box::new(UnaryKernel(UnaryOp::$op)) as Box<dyn OpKernel>)
        );
    };
}

unary_op!(
    "Neg",
    Neg,
    "bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, Complex64, Complex128],
    "Computes numerical negative value element-wise.\n\nI.e., \\(y = -x\\)."
);
unary_op!(
    "Abs",
    Abs,
    "bfloat16, half, float, double, int8, int16, int32, int64",
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64],
    "Computes the absolute value of a tensor.\n\nGiven a tensor `x`, this operation returns a tensor containing the absolute\nvalue of each element in `x`. For example, if x is an input element and y is\nan output element, this operation computes \\(y = |x|\\)."
);
unary_op!(
    "Sign",
    Sign,
    "bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, Complex64, Complex128],
    "Returns an element-wise indication of the sign of a number.\n\n`y = sign(x) = -1` if `x < 0`; 0 if `x == 0`; 1 if `x > 0`.\n\nFor complex numbers, `y = sign(x) = x / |x|` if `x != 0`, otherwise `y = 0`."
);
unary_op!(
    "Reciprocal",
    Reciprocal,
    "bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, Complex64, Complex128],
    "Computes the reciprocal of x element-wise.\n\nI.e., \\(y = 1 / x\\)."
);
unary_op!(
    "Square",
    Square,
    "bfloat16, half, float, double, int8, int16, int32, int64, uint8, uint16, uint32, uint64, complex64, complex128",
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Complex64, Complex128],
    "Computes square of x element-wise.\n\nI.e., \\(y = x * x = x^2\\)."
);
unary_op!(
    "Sqrt",
    Sqrt,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes square root of x element-wise.\n\nI.e., \\(y = \\sqrt{x} = x^{1/2}\\)."
);
unary_op!(
    "Rsqrt",
    Rsqrt,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes reciprocal of square root of x element-wise.\n\nI.e., \\(y = 1 / \\sqrt{x}\\)."
);
unary_op!(
    "Exp",
    Exp,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes exponential of x element-wise.  \\(y = e^x\\).\n\nFor complex numbers, `e^(x+iy) = e^x * (cos y + i sin y)`."
);
unary_op!(
    "Log",
    Log,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes natural logarithm of x element-wise.\n\nI.e., \\(y = \\log_e x\\)."
);
unary_op!(
    "Log1p",
    Log1p,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes natural logarithm of (1 + x) element-wise.\n\nI.e., \\(y = \\log_e (1 + x)\\)."
);
unary_op!(
    "Tanh",
    Tanh,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes hyperbolic tangent of `x` element-wise.\n\nGiven an input tensor, this function computes hyperbolic tangent of every\nelement in the tensor. Input range is `[-inf, inf]` and output range is `[-1,1]`."
);
unary_op!(
    "Sigmoid",
    Sigmoid,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes sigmoid of `x` element-wise.\n\nSpecifically, `y = 1 / (1 + exp(-x))`."
);
unary_op!(
    "Sin",
    Sin,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes sine of x element-wise.\n\nGiven an input tensor, this function computes sine of every element in the\ntensor. Input range is `(-inf, inf)` and output range is `[-1,1]`."
);
unary_op!(
    "Cos",
    Cos,
    "bfloat16, half, float, double, complex64, complex128",
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes cos of x element-wise.\n\nGiven an input tensor, this function computes cosine of every element in the\ntensor. Input range is `(-inf, inf)` and output range is `[-1,1]`."
);
unary_op!(
    "Floor",
    Floor,
    "bfloat16, half, float, double",
    [BFloat16, Half, Float, Double],
    "Returns element-wise largest integer not greater than x."
);
unary_op!(
    "Ceil",
    Ceil,
    "bfloat16, half, float, double",
    [BFloat16, Half, Float, Double],
    "Returns element-wise smallest integer not less than x."
);
unary_op!(
    "Round",
    Round,
    "bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64],
    "Rounds the values of a tensor to the nearest integer, element-wise.\n\nRounds half to even.  Also known as bankers rounding. If you want to round\naccording to the current system rounding mode use std::cint."
);

register_op!(OpDefBuilder::new("LogicalNot")
    .input("x: bool")
    .output("y: bool")
    .set_shape_fn(unchanged_shape)
    .doc("Returns the truth value of `NOT x` element-wise."));
register_kernel!(
    KernelDefBuilder::new("LogicalNot"),
    fn = |_| Ok(Box::new(UnaryKernel(UnaryOp::LogicalNot)) as Box<dyn OpKernel>)
);

// ---------------------------------------------------------------------------
// Gradient helpers: z = f(y, dy), no broadcasting
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GradOp {
    Tanh,
    Sigmoid,
    Sqrt,
    Rsqrt,
    Reciprocal,
}

/// The kernel of the `*Grad` helpers: `z = f(y, dy)` elementwise over two
/// inputs with the same number of elements (no broadcasting); `z` has `y`'s shape.
struct GradKernel(GradOp);

/// `out = f(in0, in1)` for inputs with the same number of elements, in
/// place in an input's buffer when it may be reused (TensorFlow's `SimpleBinaryOp`).
fn simple_binary<T: Element>(
    ctx: &mut OpKernelContext<'_>,
    cost: usize,
    f: impl Fn(T, T) -> T + Sync,
) -> Result<()> {
    let (n0, n1) = (ctx.input(0).num_elements(), ctx.input(1).num_elements());
    ensure!(
        n0 == n1,
        InvalidArgument,
        "The two arguments to a cwise op must have same number of elements, got {n0} and {n1}"
    );
    if ctx.input(0).shape() == ctx.input(1).shape() {
        return binary_same::<T>(ctx, cost, f);
    }
    let shape = ctx.input(0).shape().clone();
    ctx.allocate_output(0, shape)?;
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    par_zip(
        pool,
        ins[0].flat::<T>()?,
        ins[1].flat::<T>()?,
        out.flat_mut::<T>()?,
        cost,
        f,
    );
    Ok(())
}

#[inline(always)]
fn tanh_grad<T: FloatOps>(y: T, dy: T) -> T {
    dy.mul(T::ONE.sub(y.mul(y)))
}

#[inline(always)]
fn sigmoid_grad<T: FloatOps>(y: T, dy: T) -> T {
    dy.mul(y).mul(T::ONE.sub(y))
}

#[inline(always)]
fn sqrt_grad<T: FloatOps>(y: T, dy: T) -> T {
    // TensorFlow: 0 where dy == 0 (so y == 0 does not make NaN), else 0.5 * dy / conj(y).
    if dy == T::ZERO {
        T::ZERO
    } else {
        T::from_f64(0.5).mul(dy).div(y.conj())
    }
}

#[inline(always)]
fn rsqrt_grad<T: FloatOps>(y: T, dy: T) -> T {
    if dy == T::ZERO {
        T::ZERO
    } else {
        let c = y.conj();
        T::from_f64(-0.5).mul(dy.mul(c)).mul(c.mul(c))
    }
}

#[inline(always)]
fn reciprocal_grad<T: FloatOps + Signed>(y: T, dy: T) -> T {
    if dy == T::ZERO {
        T::ZERO
    } else {
        let c = y.conj();
        c.neg().mul(c).mul(dy)
    }
}

impl OpKernel for GradKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input_dtype(0);
        let bad = |ctx: &OpKernelContext<'_>| Err(unsupported(ctx, dt));
        match self.0 {
            GradOp::Tanh => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, 3, tanh_grad::<T>), bad(ctx))
            }
            GradOp::Sigmoid => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, 3, sigmoid_grad::<T>), bad(ctx))
            }
            GradOp::Sqrt => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, COST_DIV, sqrt_grad::<T>), bad(ctx))
            }
            GradOp::Rsqrt => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, 4, rsqrt_grad::<T>), bad(ctx))
            }
            GradOp::Reciprocal => {
                float_complex_types!(dt, T => simple_binary::<T>(ctx, 3, reciprocal_grad::<T>), bad(ctx))
            }
        }
    }
}

macro_rules! grad_op {
    ($name:literal, $op:ident, $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("y: T")
            .input("dy: T")
            .output("z: T")
            .attr("T: {bfloat16, half, float, double, complex64, complex128}")
            // TensorFlow's UNARY_GRADIENT_COMPLEX: UnchangedShape (input 0's
            // handle; `dy` is not merged in).
            .set_shape_fn(unchanged_shape)
            .doc($doc));
        register_kernel!(
            KernelDefBuilder::new($name).type_constraint_list(
                "T",
                &[
                    DataType::BFloat16,
                    DataType::Half,
                    DataType::Float,
                    DataType::Double,
                    DataType::Complex64,
                    DataType::Complex128
                ]
            ),
            fn = |_| Ok(Box::new(GradKernel(GradOp::$op)) as Box<dyn OpKernel>)
        );
    };
}

grad_op!(
    "TanhGrad",
    Tanh,
    "Computes the gradient for the tanh of `x` wrt its input.\n\nSpecifically, `grad = dy * (1 - y*y)`, where `y = tanh(x)`, and `dy`\nis the corresponding input gradient."
);
grad_op!(
    "SigmoidGrad",
    Sigmoid,
    "Computes the gradient of the sigmoid of `x` wrt its input.\n\nSpecifically, `grad = dy * y * (1 - y)`, where `y = sigmoid(x)`, and\n`dy` is the corresponding input gradient."
);
grad_op!(
    "SqrtGrad",
    Sqrt,
    "Computes the gradient for the sqrt of `x` wrt its input.\n\nSpecifically, `grad = dy * 0.5 / y`, where `y = sqrt(x)`, and `dy`\nis the corresponding input gradient."
);
grad_op!(
    "RsqrtGrad",
    Rsqrt,
    "Computes the gradient for the rsqrt of `x` wrt its input.\n\nSpecifically, `grad = dy * -0.5 * y^3`, where `y = rsqrt(x)`, and `dy`\nis the corresponding input gradient."
);
grad_op!(
    "ReciprocalGrad",
    Reciprocal,
    "Computes the gradient for the inverse of `x` wrt its input.\n\nSpecifically, `grad = -dy * y*y`, where `y = 1/x`, and `dy`\nis the corresponding input gradient."
);

// ---------------------------------------------------------------------------
// Cast
// ---------------------------------------------------------------------------

/// A value on its way from one element type to another: the widest type of
/// its family, from which every destination converts as C++ `static_cast`
/// would from the original type (`half`/`bfloat16` widen to `f32` exactly).
#[derive(Clone, Copy, Debug)]
enum Scalar {
    B(bool),
    I(i64),
    U(u64),
    F(f32),
    D(f64),
    CF(Complex<f32>),
    CD(Complex<f64>),
}

/// The element types `Cast` converts between.
trait CastElem: Element {
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
fn truncation_bits(src: DataType, dst: DataType) -> Option<u32> {
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
fn clear_low_bits(s: Scalar, bits: u32) -> Scalar {
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

fn cast_loop<S: CastElem, D: CastElem>(
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

fn castable(dt: DataType) -> bool {
    castable_types!(dt, T => true, false)
}

/// `Cast`: converts between any two of bool, the integer, float and complex
/// types; a cast to the same type passes the input through.
struct CastKernel {
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

// ---- Gradients ----

/// The gradients of the unary ops and of their gradient helpers (so that
/// second derivatives work), as TensorFlow's `math_grad.py` defines them.
/// TensorFlow conjugates `x`/`y` (and the helpers' inputs) first for complex
/// types; without a `Conj` op these are written for real types.
mod gradients {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym};
    use opforge_core::{register_gradient, DataType, Result};

    type Grads = Result<Vec<Option<Sym>>>;

    /// `grad * f(x)` for the ops whose derivative is a function of `x`.
    fn times(o: &mut dyn Ops, g: Sym, factor: Sym) -> Grads {
        Ok(vec![Some(o.mul(g, factor)?)])
    }

    fn neg_grad(o: &mut dyn Ops, _: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        Ok(vec![Some(o.neg(g)?)])
    }

    fn abs_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        let sign = o.op1("Sign", &[op.inputs[0]], &[])?;
        times(o, g, sign)
    }

    fn sign_grad(o: &mut dyn Ops, op: &GradOp<'_>, _: &[Option<Sym>]) -> Grads {
        Ok(vec![Some(o.zeros_like(op.inputs[0])?)])
    }

    /// The ops whose gradient is a helper op `Helper(y, grad)` of the output.
    fn helper_of_output(
        o: &mut dyn Ops,
        op: &GradOp<'_>,
        grads: &[Option<Sym>],
        helper: &str,
    ) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        Ok(vec![Some(o.op1(helper, &[op.outputs[0], g], &[])?)])
    }

    fn reciprocal_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        helper_of_output(o, op, grads, "ReciprocalGrad")
    }

    fn sqrt_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        helper_of_output(o, op, grads, "SqrtGrad")
    }

    fn rsqrt_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        helper_of_output(o, op, grads, "RsqrtGrad")
    }

    fn tanh_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        helper_of_output(o, op, grads, "TanhGrad")
    }

    fn sigmoid_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        helper_of_output(o, op, grads, "SigmoidGrad")
    }

    fn square_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        let x = op.inputs[0];
        let two = o.scalar(o.dtype(x), 2.0)?;
        let two_x = o.mul(x, two)?;
        times(o, g, two_x)
    }

    fn exp_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        times(o, g, op.outputs[0])
    }

    fn log_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        let inv = o.op1("Reciprocal", &[op.inputs[0]], &[])?;
        times(o, g, inv)
    }

    fn log1p_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        let x = op.inputs[0];
        let one = o.scalar(o.dtype(x), 1.0)?;
        let one_plus_x = o.add(one, x)?;
        let inv = o.op1("Reciprocal", &[one_plus_x], &[])?;
        times(o, g, inv)
    }

    fn sin_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        let cos = o.op1("Cos", &[op.inputs[0]], &[])?;
        times(o, g, cos)
    }

    fn cos_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        let minus_g = o.neg(g)?;
        let sin = o.op1("Sin", &[op.inputs[0]], &[])?;
        times(o, minus_g, sin)
    }

    /// `Floor`, `Ceil`, `Round`: piecewise constant; TensorFlow returns None.
    fn no_grad(_: &mut dyn Ops, _: &GradOp<'_>, _: &[Option<Sym>]) -> Grads {
        Ok(vec![None])
    }

    fn is_float_or_complex(dt: DataType) -> bool {
        matches!(
            dt,
            DataType::Half
                | DataType::Float
                | DataType::Double
                | DataType::BFloat16
                | DataType::Complex64
                | DataType::Complex128
        )
    }

    /// `Cast`: the gradient cast back to the source type when both types
    /// are floating or complex; None otherwise.
    fn cast_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None]);
        };
        let (src, dst) = (o.dtype(op.inputs[0]).base(), o.dtype(g).base());
        if !(is_float_or_complex(src) && is_float_or_complex(dst)) {
            return Ok(vec![None]);
        }
        Ok(vec![Some(o.op1(
            "Cast",
            &[g],
            &[("DstT", src.into_attr_value())],
        )?)])
    }

    /// `z = TanhGrad(a, b) = b * (1 - a^2)`: `(grad * -2 * b * a, TanhGrad(a, grad))`.
    fn tanh_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (a, b) = (op.inputs[0], op.inputs[1]);
        let minus_two = o.scalar(o.dtype(g), -2.0)?;
        let t = o.mul(g, minus_two)?;
        let t = o.mul(t, b)?;
        let ga = o.mul(t, a)?;
        let gb = o.op1("TanhGrad", &[a, g], &[])?;
        Ok(vec![Some(ga), Some(gb)])
    }

    /// `z = SigmoidGrad(a, b) = b * a * (1 - a)`:
    /// `(grad * b - 2 * grad * b * a, SigmoidGrad(a, grad))`.
    fn sigmoid_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (a, b) = (op.inputs[0], op.inputs[1]);
        let gb = o.mul(g, b)?;
        let two = o.scalar(o.dtype(g), 2.0)?;
        let t = o.mul(two, gb)?;
        let t = o.mul(t, a)?;
        let ga = o.sub(gb, t)?;
        let gb = o.op1("SigmoidGrad", &[a, g], &[])?;
        Ok(vec![Some(ga), Some(gb)])
    }

    /// `z = SqrtGrad(a, b) = 0.5 * b / a`: with `ga = grad / a`, `(-ga * z, 0.5 * ga)`.
    fn sqrt_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (a, z) = (op.inputs[0], op.outputs[0]);
        let ga = o.div(g, a)?;
        let minus_ga = o.neg(ga)?;
        let grad_a = o.mul(minus_ga, z)?;
        let half = o.scalar(o.dtype(g), 0.5)?;
        let grad_b = o.mul(half, ga)?;
        Ok(vec![Some(grad_a), Some(grad_b)])
    }

    /// `z = RsqrtGrad(a, b) = -0.5 * b * a^3`:
    /// `(-1.5 * grad * b * a^2, RsqrtGrad(a, grad))`.
    fn rsqrt_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (a, b) = (op.inputs[0], op.inputs[1]);
        let c = o.scalar(o.dtype(g), -1.5)?;
        let t = o.mul(c, g)?;
        let t = o.mul(t, b)?;
        let a2 = o.op1("Square", &[a], &[])?;
        let grad_a = o.mul(t, a2)?;
        let grad_b = o.op1("RsqrtGrad", &[a, g], &[])?;
        Ok(vec![Some(grad_a), Some(grad_b)])
    }

    /// `z = ReciprocalGrad(a, b) = -b * a^2`:
    /// `(grad * -2 * b * a, ReciprocalGrad(a, grad))`.
    fn reciprocal_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (a, b) = (op.inputs[0], op.inputs[1]);
        let minus_two = o.scalar(o.dtype(g), -2.0)?;
        let t = o.mul(g, minus_two)?;
        let t = o.mul(t, b)?;
        let grad_a = o.mul(t, a)?;
        let grad_b = o.op1("ReciprocalGrad", &[a, g], &[])?;
        Ok(vec![Some(grad_a), Some(grad_b)])
    }

    register_gradient!("Neg", neg_grad);
    register_gradient!("Abs", abs_grad);
    register_gradient!("Sign", sign_grad);
    register_gradient!("Reciprocal", reciprocal_grad);
    register_gradient!("Square", square_grad);
    register_gradient!("Sqrt", sqrt_grad);
    register_gradient!("Rsqrt", rsqrt_grad);
    register_gradient!("Exp", exp_grad);
    register_gradient!("Log", log_grad);
    register_gradient!("Log1p", log1p_grad);
    register_gradient!("Tanh", tanh_grad);
    register_gradient!("Sigmoid", sigmoid_grad);
    register_gradient!("Sin", sin_grad);
    register_gradient!("Cos", cos_grad);
    register_gradient!("Floor", no_grad);
    register_gradient!("Ceil", no_grad);
    register_gradient!("Round", no_grad);
    register_gradient!("Cast", cast_grad);
    register_gradient!("TanhGrad", tanh_grad_grad);
    register_gradient!("SigmoidGrad", sigmoid_grad_grad);
    register_gradient!("SqrtGrad", sqrt_grad_grad);
    register_gradient!("RsqrtGrad", rsqrt_grad_grad);
    register_gradient!("ReciprocalGrad", reciprocal_grad_grad);
    opforge_core::register_not_differentiable!("LogicalNot");
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::{Code, Tensor};
    use opforge_ops_base::testutil::{assert_close, ctx, t};

    fn run1(op: &str, x: Tensor) -> Result<Tensor> {
        ctx().op(op).input(x).run1()
    }

    fn f32s(t: &Tensor) -> Vec<f32> {
        t.flat::<f32>().unwrap().to_vec()
    }

    #[test]
    fn ops_are_registered_with_kernels() {
        let reg = opforge_core::OpRegistry::global();
        let kernels = opforge_core::kernel::KernelRegistry::global();
        for op in OPS {
            assert!(reg.lookup(op).is_ok(), "{op}");
            assert!(!kernels.kernels_for(op).is_empty(), "{op} has a kernel");
        }
    }

    #[test]
    fn neg_abs_sign_square() {
        let x = t(&[4], vec![-2.5f32, 0.0, 3.0, -0.0]);
        assert_eq!(
            f32s(&run1("Neg", x.clone()).unwrap()),
            [2.5, -0.0, -3.0, 0.0]
        );
        assert_eq!(f32s(&run1("Abs", x.clone()).unwrap()), [2.5, 0.0, 3.0, 0.0]);
        assert_eq!(
            f32s(&run1("Sign", x.clone()).unwrap()),
            [-1.0, 0.0, 1.0, 0.0]
        );
        assert_eq!(f32s(&run1("Square", x).unwrap()), [6.25, 0.0, 9.0, 0.0]);
        let s = run1("Sign", t(&[1], vec![f64::NAN])).unwrap();
        assert!(s.flat::<f64>().unwrap()[0].is_nan());

        // Integers wrap instead of overflowing.
        let i = t(&[4], vec![i32::MIN, -7, 0, 5]);
        let got = run1("Neg", i.clone()).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN, 7, 0, -5]);
        let got = run1("Abs", i.clone()).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN, 7, 0, 5]);
        let got = run1("Sign", i).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[-1, -1, 0, 1]);
        let got = run1("Square", t(&[3], vec![3i64, -4, 1 << 32])).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[9, 16, 0]);
        let got = run1("Square", t(&[2], vec![16u8, 3])).unwrap();
        assert_eq!(got.flat::<u8>().unwrap(), &[0, 9]);

        // Complex: sign(3+4i) = 0.6+0.8i, square(1+2i) = -3+4i.
        let c = t(
            &[2],
            vec![Complex::new(3.0f64, 4.0), Complex::new(0.0, 0.0)],
        );
        let got = run1("Sign", c).unwrap();
        let v = got.flat::<Complex<f64>>().unwrap();
        assert!((v[0].re - 0.6).abs() < 1e-12 && (v[0].im - 0.8).abs() < 1e-12);
        assert_eq!(v[1], Complex::new(0.0, 0.0));
        let got = run1("Square", t(&[1], vec![Complex::new(1.0f32, 2.0)])).unwrap();
        assert_eq!(
            got.flat::<Complex<f32>>().unwrap(),
            &[Complex::new(-3.0, 4.0)]
        );
        let got = run1("Neg", t(&[1], vec![Complex::new(1.0f32, -2.0)])).unwrap();
        assert_eq!(
            got.flat::<Complex<f32>>().unwrap(),
            &[Complex::new(-1.0, 2.0)]
        );
    }

    #[test]
    fn reciprocal_float_and_int() {
        let got = run1("Reciprocal", t(&[3], vec![2.0f64, -0.25, 0.0])).unwrap();
        assert_eq!(got.flat::<f64>().unwrap(), &[0.5, -4.0, f64::INFINITY]);
        let got = run1("Reciprocal", t(&[4], vec![1i32, -1, 2, -3])).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[1, -1, 0, 0]);
        let err = run1("Reciprocal", t(&[2], vec![1i64, 0])).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("Integer division by zero"), "{err}");
        let got = run1("Reciprocal", t(&[1], vec![Complex::new(0.0f64, 2.0)])).unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap(),
            &[Complex::new(0.0, -0.5)]
        );
    }

    #[test]
    fn transcendental_float_values() {
        let x = t(&[3], vec![0.0f64, 1.0, 4.0]);
        let e = std::f64::consts::E;
        assert_close(
            &run1("Sqrt", x.clone()).unwrap(),
            &[3],
            &[0.0, 1.0, 2.0],
            1e-15,
        );
        assert_close(
            &run1("Rsqrt", t(&[2], vec![4.0f64, 0.25])).unwrap(),
            &[2],
            &[0.5, 2.0],
            1e-15,
        );
        assert_close(
            &run1("Exp", x.clone()).unwrap(),
            &[3],
            &[1.0, e, 54.598150033144236],
            1e-14,
        );
        assert_close(
            &run1("Log", t(&[3], vec![1.0f64, e, 0.0])).unwrap(),
            &[3],
            &[0.0, 1.0, f64::NEG_INFINITY],
            1e-15,
        );
        // log1p(1e-10) = 1e-10 - 5e-21 (accurate near 0).
        let got = run1("Log1p", t(&[2], vec![1e-10f64, e - 1.0])).unwrap();
        assert!((got.flat::<f64>().unwrap()[0] - (1e-10 - 5e-21)).abs() < 1e-25);
        assert!((got.flat::<f64>().unwrap()[1] - 1.0).abs() < 1e-15);
        // tanh(0.5) = (e - 1) / (e + 1); sigmoid(0) = 0.5, sigmoid(-1000) = 0.
        assert_close(
            &run1("Tanh", t(&[3], vec![0.0f64, 0.5, -30.0])).unwrap(),
            &[3],
            &[0.0, (e - 1.0) / (e + 1.0), -1.0],
            1e-15,
        );
        assert_close(
            &run1("Sigmoid", t(&[3], vec![0.0f32, -1000.0, 2.0])).unwrap(),
            &[3],
            &[0.5, 0.0, 1.0 / (1.0 + (-2.0f64).exp())],
            1e-6,
        );
        let pi = std::f64::consts::PI;
        assert_close(
            &run1("Sin", t(&[3], vec![0.0f64, pi / 2.0, pi / 6.0])).unwrap(),
            &[3],
            &[0.0, 1.0, 0.5],
            1e-15,
        );
        assert_close(
            &run1("Cos", t(&[3], vec![0.0f64, pi, pi / 3.0])).unwrap(),
            &[3],
            &[1.0, -1.0, 0.5],
            1e-15,
        );
        let got = run1("Sqrt", t(&[1], vec![-1.0f32])).unwrap();
        assert!(got.flat::<f32>().unwrap()[0].is_nan());
    }

    #[test]
    fn half_and_bfloat16_compute_in_f32() {
        let x = t(
            &[3],
            vec![f16::from_f32(4.0), f16::from_f32(0.0), f16::from_f32(-2.0)],
        );
        let got = run1("Sqrt", x.clone()).unwrap();
        let v: Vec<f32> = got
            .flat::<f16>()
            .unwrap()
            .iter()
            .map(|h| h.to_f32())
            .collect();
        assert_eq!(v[..2], [2.0, 0.0]);
        assert!(v[2].is_nan());
        assert_close(
            &run1("Exp", x.clone()).unwrap(),
            &[3],
            &[54.598150033144236, 1.0, 0.1353352832366127],
            1e-3,
        );
        assert_close(&run1("Neg", x).unwrap(), &[3], &[-4.0, 0.0, 2.0], 0.0);
        let b = t(
            &[3],
            vec![
                bf16::from_f32(1.5),
                bf16::from_f32(-2.5),
                bf16::from_f32(0.0),
            ],
        );
        assert_close(
            &run1("Floor", b.clone()).unwrap(),
            &[3],
            &[1.0, -3.0, 0.0],
            0.0,
        );
        assert_close(
            &run1("Ceil", b.clone()).unwrap(),
            &[3],
            &[2.0, -2.0, 0.0],
            0.0,
        );
        assert_close(
            &run1("Round", b.clone()).unwrap(),
            &[3],
            &[2.0, -2.0, 0.0],
            0.0,
        );
        assert_close(
            &run1("Abs", b.clone()).unwrap(),
            &[3],
            &[1.5, 2.5, 0.0],
            0.0,
        );
        assert_close(
            &run1("Tanh", b).unwrap(),
            &[3],
            &[0.9051482536448664, -0.9866142981514303, 0.0],
            1e-2,
        );
    }

    #[test]
    fn complex_transcendental() {
        let pi = std::f64::consts::PI;
        // exp(i pi) = -1; log(-1) = i pi; sqrt(-4) = 2i; log1p(-2) = log(-1) = i pi.
        let got = run1("Exp", t(&[1], vec![Complex::new(0.0f64, pi)])).unwrap();
        let v = got.flat::<Complex<f64>>().unwrap()[0];
        assert!((v.re + 1.0).abs() < 1e-15 && v.im.abs() < 1e-15, "{v}");
        let got = run1("Log", t(&[1], vec![Complex::new(-1.0f64, 0.0)])).unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap()[0],
            Complex::new(0.0, pi)
        );
        let got = run1("Sqrt", t(&[1], vec![Complex::new(-4.0f32, 0.0)])).unwrap();
        assert_eq!(
            got.flat::<Complex<f32>>().unwrap()[0],
            Complex::new(0.0, 2.0)
        );
        let got = run1("Log1p", t(&[1], vec![Complex::new(-2.0f64, 0.0)])).unwrap();
        let v = got.flat::<Complex<f64>>().unwrap()[0];
        assert!(v.re.abs() < 1e-15 && (v.im - pi).abs() < 1e-15, "{v}");
        // sigmoid(0) = 0.5; tanh(i pi/4) = i tan(pi/4) = i.
        let got = run1("Sigmoid", t(&[1], vec![Complex::new(0.0f64, 0.0)])).unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap()[0],
            Complex::new(0.5, 0.0)
        );
        let got = run1("Tanh", t(&[1], vec![Complex::new(0.0f64, pi / 4.0)])).unwrap();
        let v = got.flat::<Complex<f64>>().unwrap()[0];
        assert!(v.re.abs() < 1e-15 && (v.im - 1.0).abs() < 1e-15, "{v}");
        // sin(i) = i sinh(1); cos(i) = cosh(1); rsqrt(-4) = 1/(2i) = -0.5i.
        let got = run1("Sin", t(&[1], vec![Complex::new(0.0f64, 1.0)])).unwrap();
        let v = got.flat::<Complex<f64>>().unwrap()[0];
        assert!(v.re.abs() < 1e-15 && (v.im - 1f64.sinh()).abs() < 1e-15);
        let got = run1("Cos", t(&[1], vec![Complex::new(0.0f64, 1.0)])).unwrap();
        let v = got.flat::<Complex<f64>>().unwrap()[0];
        assert!((v.re - 1f64.cosh()).abs() < 1e-15 && v.im.abs() < 1e-15);
        let got = run1("Rsqrt", t(&[1], vec![Complex::new(-4.0f64, 0.0)])).unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap()[0],
            Complex::new(0.0, -0.5)
        );
    }

    #[test]
    fn floor_ceil_round_half_to_even() {
        let x = t(
            &[10],
            vec![0.5f32, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6, 3.0],
        );
        let got = run1("Round", x.clone()).unwrap();
        assert_eq!(
            f32s(&got),
            [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 3.0, -3.0, 3.0]
        );
        let got = run1("Floor", x.clone()).unwrap();
        assert_eq!(
            f32s(&got),
            [0.0, 1.0, 2.0, -1.0, -2.0, -3.0, 2.0, 2.0, -3.0, 3.0]
        );
        let got = run1("Ceil", x).unwrap();
        assert_eq!(
            f32s(&got),
            [1.0, 2.0, 3.0, -0.0, -1.0, -2.0, 3.0, 3.0, -2.0, 3.0]
        );
        let got = run1("Round", t(&[2], vec![4.5f64, 5.5])).unwrap();
        assert_eq!(got.flat::<f64>().unwrap(), &[4.0, 6.0]);
        let got = run1("Round", t(&[2], vec![-3i64, 7])).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[-3, 7]);
    }

    #[test]
    fn logical_not_and_unsupported_dtypes() {
        let got = run1("LogicalNot", t(&[3], vec![true, false, true])).unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[false, true, false]);
        // No kernel for ints in Sqrt: the OpDef rejects them.
        let err = run1("Sqrt", t(&[1], vec![4i32])).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err}");
        // Round on complex is allowed by the OpDef but has no CPU kernel (as TensorFlow).
        let err = run1("Round", t(&[1], vec![Complex::new(1.5f32, 0.0)])).unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{err}");
    }

    #[test]
    fn empty_and_scalar_tensors() {
        for op in ["Neg", "Exp", "Floor", "Round", "Sigmoid", "Square"] {
            let got = run1(op, t(&[0, 3], Vec::<f32>::new())).unwrap();
            assert_eq!(got.dims(), &[0, 3], "{op}");
        }
        let got = run1("Reciprocal", t(&[0], Vec::<i32>::new())).unwrap();
        assert_eq!(got.dims(), &[0]);
        let got = run1("Neg", Tensor::scalar(2.0f64)).unwrap();
        assert_eq!(got.dims(), &[] as &[i64]);
        assert_eq!(got.scalar_value::<f64>().unwrap(), -2.0);
    }

    #[test]
    fn unary_forwards_a_uniquely_owned_input() {
        let x = t(&[3], vec![1.0f32, 2.0, 3.0]);
        let ptr = x.bytes().unwrap().as_ptr();
        let got = run1("Neg", x).unwrap();
        assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
        assert_eq!(f32s(&got), [-1.0, -2.0, -3.0]);
        // A shared input is not overwritten.
        let x = t(&[2], vec![1.0f32, 2.0]);
        let got = run1("Neg", x.clone()).unwrap();
        assert_eq!(f32s(&x), [1.0, 2.0]);
        assert_eq!(f32s(&got), [-1.0, -2.0]);
    }

    #[test]
    fn large_inputs_are_sharded_correctly() {
        let n = 100_003;
        let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.001).collect();
        let got = run1("Exp", t(&[n as i64], x.clone())).unwrap();
        let v = got.flat::<f64>().unwrap();
        for i in [0, 1, 50_000, n - 1] {
            assert_eq!(v[i], (i as f64 * 0.001).exp());
        }
    }

    fn grad(op: &str, y: Tensor, dy: Tensor) -> Result<Tensor> {
        ctx().op(op).input(y).input(dy).run1()
    }

    #[test]
    fn gradient_helpers() {
        let y = t(&[3], vec![0.5f64, -0.25, 2.0]);
        let dy = t(&[3], vec![2.0f64, 4.0, 0.0]);
        // dy * (1 - y^2)
        assert_close(
            &grad("TanhGrad", y.clone(), dy.clone()).unwrap(),
            &[3],
            &[1.5, 3.75, 0.0],
            1e-15,
        );
        // dy * y * (1 - y)
        assert_close(
            &grad("SigmoidGrad", y.clone(), dy.clone()).unwrap(),
            &[3],
            &[0.5, -1.25, 0.0],
            1e-15,
        );
        // dy * 0.5 / y
        assert_close(
            &grad("SqrtGrad", y.clone(), dy.clone()).unwrap(),
            &[3],
            &[2.0, -8.0, 0.0],
            1e-15,
        );
        // dy * -0.5 * y^3
        assert_close(
            &grad("RsqrtGrad", y.clone(), dy.clone()).unwrap(),
            &[3],
            &[-0.125, 0.03125, 0.0],
            1e-15,
        );
        // -dy * y^2
        assert_close(
            &grad("ReciprocalGrad", y, dy).unwrap(),
            &[3],
            &[-0.5, -0.25, 0.0],
            1e-15,
        );
        // TensorFlow's convention: dy == 0 gives 0 even where y == 0.
        let got = grad("SqrtGrad", t(&[1], vec![0.0f32]), t(&[1], vec![0.0f32])).unwrap();
        assert_eq!(f32s(&got), [0.0]);
        let got = grad("SqrtGrad", t(&[1], vec![0.0f32]), t(&[1], vec![1.0f32])).unwrap();
        assert_eq!(f32s(&got), [f32::INFINITY]);
    }

    #[test]
    fn gradient_helpers_complex_half_and_shapes() {
        // SqrtGrad on complex divides by conj(y): 0.5 * 1 / conj(i) = 0.5 / -i = 0.5i.
        let got = grad(
            "SqrtGrad",
            t(&[1], vec![Complex::new(0.0f64, 1.0)]),
            t(&[1], vec![Complex::new(1.0f64, 0.0)]),
        )
        .unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap(),
            &[Complex::new(0.0, 0.5)]
        );
        // ReciprocalGrad: -conj(y)^2 * dy = -(-i)^2 = 1.
        let got = grad(
            "ReciprocalGrad",
            t(&[1], vec![Complex::new(0.0f32, 1.0)]),
            t(&[1], vec![Complex::new(1.0f32, 0.0)]),
        )
        .unwrap();
        assert_eq!(
            got.flat::<Complex<f32>>().unwrap(),
            &[Complex::new(1.0, 0.0)]
        );
        let h = |v: &[f32]| {
            t(
                &[v.len() as i64],
                v.iter().map(|&x| f16::from_f32(x)).collect(),
            )
        };
        assert_close(
            &grad("TanhGrad", h(&[0.5]), h(&[2.0])).unwrap(),
            &[1],
            &[1.5],
            0.0,
        );
        // Same number of elements but another shape: computed flat, y's shape.
        let got = grad(
            "TanhGrad",
            t(&[2, 2], vec![0.0f32; 4]),
            t(&[4], vec![1.0f32, 2.0, 3.0, 4.0]),
        )
        .unwrap();
        assert_eq!(got.dims(), &[2, 2]);
        assert_eq!(f32s(&got), [1.0, 2.0, 3.0, 4.0]);
        let err = grad(
            "TanhGrad",
            t(&[2], vec![0.0f32; 2]),
            t(&[3], vec![0.0f32; 3]),
        )
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message()
                .contains("must have same number of elements, got 2 and 3"),
            "{err}"
        );
        let got = grad(
            "SigmoidGrad",
            t(&[0], Vec::<f64>::new()),
            t(&[0], Vec::<f64>::new()),
        )
        .unwrap();
        assert_eq!(got.dims(), &[0]);
    }

    fn cast(x: Tensor, dst: DataType) -> Result<Tensor> {
        ctx().op("Cast").input(x).attr("DstT", dst).run1()
    }

    #[test]
    fn cast_float_to_int_truncates_and_saturates() {
        let x = t(&[7], vec![1.9f32, -1.9, 0.5, -0.5, 3e9, -3e9, f32::NAN]);
        let got = cast(x.clone(), DataType::Int32).unwrap();
        assert_eq!(
            got.flat::<i32>().unwrap(),
            &[1, -1, 0, 0, i32::MAX, i32::MIN, 0]
        );
        let got = cast(x, DataType::UInt8).unwrap();
        assert_eq!(got.flat::<u8>().unwrap(), &[1, 0, 0, 0, 255, 0, 0]);
        let got = cast(t(&[2], vec![2.75f64, -7.5]), DataType::Int64).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[2, -7]);
    }

    #[test]
    fn cast_bool_int_and_wrapping() {
        let got = cast(t(&[4], vec![0i32, 5, -1, 0]), DataType::Bool).unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[false, true, true, false]);
        let got = cast(t(&[3], vec![0.0f32, -0.0, f32::NAN]), DataType::Bool).unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[false, false, true]);
        let got = cast(t(&[2], vec![true, false]), DataType::Float).unwrap();
        assert_eq!(f32s(&got), [1.0, 0.0]);
        let got = cast(t(&[2], vec![true, false]), DataType::Int64).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[1, 0]);
        // Integer narrowing wraps like static_cast.
        let got = cast(t(&[3], vec![300i32, -1, 128]), DataType::Int8).unwrap();
        assert_eq!(got.flat::<i8>().unwrap(), &[44, -1, -128]);
        let got = cast(t(&[2], vec![-1i64, 1 << 40]), DataType::UInt32).unwrap();
        assert_eq!(got.flat::<u32>().unwrap(), &[u32::MAX, 0]);
        let got = cast(t(&[1], vec![u64::MAX]), DataType::Int64).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[-1]);
        // Large ints to float round to nearest.
        let got = cast(t(&[1], vec![16_777_217i32]), DataType::Float).unwrap();
        assert_eq!(f32s(&got), [16_777_216.0]);
    }

    #[test]
    fn cast_half_bfloat16_and_complex() {
        let got = cast(t(&[3], vec![1.0f32, 65504.0, 1e6]), DataType::Half).unwrap();
        let v: Vec<f32> = got
            .flat::<f16>()
            .unwrap()
            .iter()
            .map(|h| h.to_f32())
            .collect();
        assert_eq!(v, [1.0, 65504.0, f32::INFINITY]);
        let got = cast(t(&[2], vec![3i32, -2]), DataType::BFloat16).unwrap();
        assert_close(&got, &[2], &[3.0, -2.0], 0.0);
        let got = cast(t(&[1], vec![bf16::from_f32(2.5)]), DataType::Int32).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[2]);
        // Complex to real keeps the real part; real to complex has a zero imaginary part.
        let got = cast(
            t(
                &[2],
                vec![Complex::new(1.5f64, 2.0), Complex::new(-3.0, 9.0)],
            ),
            DataType::Float,
        )
        .unwrap();
        assert_eq!(f32s(&got), [1.5, -3.0]);
        let got = cast(t(&[1], vec![Complex::new(-3.7f32, 9.0)]), DataType::Int32).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[-3]);
        let got = cast(t(&[1], vec![Complex::new(0.0f32, 9.0)]), DataType::Bool).unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[false]);
        let got = cast(t(&[2], vec![2i32, -1]), DataType::Complex128).unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap(),
            &[Complex::new(2.0, 0.0), Complex::new(-1.0, 0.0)]
        );
        let got = cast(
            t(&[1], vec![Complex::new(0.1f64, -0.2)]),
            DataType::Complex64,
        )
        .unwrap();
        assert_eq!(
            got.flat::<Complex<f32>>().unwrap(),
            &[Complex::new(0.1f32, -0.2f32)]
        );
    }

    #[test]
    fn cast_truncate_attr() {
        // 1 + 2^-8 + 2^-9 rounds up to 1 + 2^-7 in bfloat16, truncates to 1.
        let v = 1.0f32 + 2f32.powi(-8) + 2f32.powi(-9);
        let x = t(&[1], vec![v]);
        let got = cast(x.clone(), DataType::BFloat16).unwrap();
        assert_eq!(got.flat::<bf16>().unwrap()[0].to_f32(), 1.0 + 2f32.powi(-7));
        let got = ctx()
            .op("Cast")
            .input(x)
            .attr("DstT", DataType::BFloat16)
            .attr("Truncate", true)
            .run1()
            .unwrap();
        assert_eq!(got.flat::<bf16>().unwrap()[0].to_f32(), 1.0);
        // double -> float: 1 + 2^-24 + 2^-30 rounds up, truncates down.
        let d = 1.0f64 + 2f64.powi(-24) + 2f64.powi(-30);
        let got = ctx()
            .op("Cast")
            .input(t(&[1], vec![d]))
            .attr("DstT", DataType::Float)
            .attr("Truncate", true)
            .run1()
            .unwrap();
        assert_eq!(f32s(&got), [1.0]);
        assert_eq!(
            f32s(&cast(t(&[1], vec![d]), DataType::Float).unwrap()),
            [1.0 + 2f32.powi(-23)]
        );
    }

    #[test]
    fn cast_identity_strings_and_unsupported() {
        let x = t(&[2], vec![1.5f32, 2.5]);
        let ptr = x.bytes().unwrap().as_ptr();
        let got = cast(x, DataType::Float).unwrap();
        assert_eq!(
            got.bytes().unwrap().as_ptr(),
            ptr,
            "a same-type cast passes through"
        );
        let s = Tensor::from_strings(&[1], vec![b"a".to_vec()]).unwrap();
        assert_eq!(cast(s.clone(), DataType::String).unwrap(), s);
        let err = cast(s, DataType::Float).unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented);
        assert!(
            err.message()
                .contains("Cast string to float is not supported"),
            "{err}"
        );
        let got = cast(t(&[0, 2], Vec::<i32>::new()), DataType::Double).unwrap();
        assert_eq!(got.dims(), &[0, 2]);
        assert_eq!(got.dtype(), DataType::Double);
    }

    #[test]
    fn element_trait_edge_cases() {
        assert_eq!(2i32.int_pow(10), 1024);
        assert_eq!(3i8.int_pow(5), 3i8.wrapping_mul(81)); // 243 wraps to -13
        assert_eq!((-2i64).int_pow(0), 1);
        assert_eq!(5i32.int_pow(-1), 0);
        assert_eq!(i32::MIN.trunc_div(-1), i32::MIN);
        assert_eq!(i32::MIN.trunc_rem(-1), 0);
        assert_eq!(7u8.trunc_div(0), 0);
        assert_eq!(RealFloat::abs(f16::from_f32(-0.0)).to_bits(), 0);
        assert!(!Complex::<f64>::ZERO.pow(Complex::new(2.0, 0.0)).re.is_nan());
    }

    /// Shape functions and gradients.
    mod shape_and_gradient_tests {
        use opforge_core::attrs::IntoAttrValue;
        use opforge_core::autodiff::{
            compute_gradient, compute_gradient_error, Gradient, GradientRegistry, GradientTape,
            Ops, OpsExt, Sym,
        };
        use opforge_core::shape_inference::testutil::ShapeTestOp;
        use opforge_core::{infer_ok, DataType, Result, Tensor};
        use opforge_ops_base::testutil::{assert_close, ctx, t};

        type Builder = dyn Fn(&mut dyn Ops, &[Sym]) -> Result<Sym>;

        /// The differentiable unary ops.
        const DIFFERENTIABLE: &[&str] = &[
            "Neg",
            "Abs",
            "Sign",
            "Reciprocal",
            "Square",
            "Sqrt",
            "Rsqrt",
            "Exp",
            "Log",
            "Log1p",
            "Tanh",
            "Sigmoid",
            "Sin",
            "Cos",
        ];

        /// As TensorFlow's array_grad.py registers them (the array ops'
        /// module registers them too; registered here when missing, so that
        /// second derivatives through the default seed `OnesLike(y)` work).
        pub(crate) fn seed_ops_not_differentiable() {
            let r = GradientRegistry::global();
            for op in ["OnesLike", "ZerosLike"] {
                if r.get(op).is_none() {
                    r.register(op, Gradient::NotDifferentiable);
                }
            }
        }

        #[test]
        fn unary_shape_functions_keep_the_input_handle() {
            for op in super::super::OPS {
                let test_op = ShapeTestOp::new(op);
                if op.ends_with("Grad") {
                    // TensorFlow's UnchangedShape: input 0, `dy` not merged in.
                    infer_ok!(test_op, "[2,?];[2,3]", "in0");
                    infer_ok!(test_op, "?;[2,3]", "in0");
                    infer_ok!(test_op, "[2,3];?", "in0");
                    infer_ok!(test_op, "[2,3];[4]", "in0");
                } else {
                    infer_ok!(test_op, "?", "in0");
                    infer_ok!(test_op, "[]", "in0");
                    infer_ok!(test_op, "[1,?,3]", "in0");
                    infer_ok!(test_op, "[0]", "in0");
                }
            }
            let cast = ShapeTestOp::new("Cast")
                .attr("SrcT", DataType::Int32)
                .attr("DstT", DataType::Float);
            infer_ok!(cast, "[?,2]", "in0");
        }

        fn unary(op: &'static str) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
            move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0]], &[])
        }

        /// The gradient-checker errors of `f` at `xs` in float64 and float32.
        fn errors(f: &Builder, xs: &[(Vec<i64>, Vec<f64>)]) -> (f64, f64) {
            let x64: Vec<Tensor> = xs.iter().map(|(d, v)| t(d, v.clone())).collect();
            let x32: Vec<Tensor> = xs
                .iter()
                .map(|(d, v)| t(d, v.iter().map(|&x| x as f32).collect()))
                .collect();
            let e64 = compute_gradient_error(&compute_gradient(ctx(), f, &x64).unwrap());
            let e32 = compute_gradient_error(&compute_gradient(ctx(), f, &x32).unwrap());
            (e64, e32)
        }

        fn assert_gradient_ok(name: &str, f: &Builder, xs: &[(Vec<i64>, Vec<f64>)]) {
            let (e64, e32) = errors(f, xs);
            assert!(e64 < 1e-6, "{name}: float64 gradient error {e64}");
            assert!(e32 < 1e-3, "{name}: float32 gradient error {e32}");
        }

        #[test]
        fn unary_gradients_match_numerical_ones() {
            // Away from kinks (Abs, Sign at 0) and in the domains (Sqrt, Log, ...).
            let positive = vec![0.3, 0.7, 1.2, 2.5, 0.9, 1.7];
            let mixed = vec![-1.3, -0.4, 0.2, 0.6, 1.1, -2.0];
            for op in DIFFERENTIABLE {
                let xs = match *op {
                    "Sqrt" | "Rsqrt" | "Log" | "Reciprocal" => positive.clone(),
                    _ => mixed.clone(),
                };
                assert_gradient_ok(op, &unary(op), &[(vec![2, 3], xs)]);
            }
        }

        /// The helpers' own gradients (`TanhGrad`, ...), with respect to both inputs.
        #[test]
        fn gradient_helper_gradients_match_numerical_ones() {
            for op in [
                "TanhGrad",
                "SigmoidGrad",
                "SqrtGrad",
                "RsqrtGrad",
                "ReciprocalGrad",
            ] {
                let f = move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0], xs[1]], &[]);
                let y = vec![0.3, 0.7, 1.2, 0.5, 0.9, 1.7];
                let dy = vec![-1.3, -0.4, 0.2, 0.6, 1.1, -2.0];
                assert_gradient_ok(op, &f, &[(vec![2, 3], y), (vec![2, 3], dy)]);
            }
        }

        fn grad1(op: &str, x: Tensor) -> Option<Tensor> {
            let mut tape = GradientTape::new(ctx(), false);
            let xs = tape.watch(x);
            let y = tape.op1(op, &[xs], &[]).unwrap();
            tape.gradient_tensors(y, &[xs]).unwrap().pop().unwrap()
        }

        #[test]
        fn unary_gradients_against_hand_values() {
            let x = t(&[3], vec![1.0f64, -2.0, 0.5]);
            assert_close(
                &grad1("Square", x.clone()).unwrap(),
                &[3],
                &[2.0, -4.0, 1.0],
                1e-12,
            );
            assert_close(
                &grad1("Neg", x.clone()).unwrap(),
                &[3],
                &[-1.0, -1.0, -1.0],
                0.0,
            );
            assert_close(
                &grad1("Abs", x.clone()).unwrap(),
                &[3],
                &[1.0, -1.0, 1.0],
                0.0,
            );
            assert_close(
                &grad1("Sign", x.clone()).unwrap(),
                &[3],
                &[0.0, 0.0, 0.0],
                0.0,
            );
            assert_close(
                &grad1("Reciprocal", x.clone()).unwrap(),
                &[3],
                &[-1.0, -0.25, -4.0],
                1e-12,
            );
            assert_close(
                &grad1("Exp", x.clone()).unwrap(),
                &[3],
                &[1f64.exp(), (-2f64).exp(), 0.5f64.exp()],
                1e-12,
            );
            assert_close(
                &grad1("Sin", x.clone()).unwrap(),
                &[3],
                &[1f64.cos(), (-2f64).cos(), 0.5f64.cos()],
                1e-12,
            );
            assert_close(
                &grad1("Cos", x.clone()).unwrap(),
                &[3],
                &[-(1f64.sin()), 2f64.sin(), -(0.5f64.sin())],
                1e-12,
            );
            let p = t(&[3], vec![4.0f64, 0.25, 1.0]);
            assert_close(
                &grad1("Sqrt", p.clone()).unwrap(),
                &[3],
                &[0.25, 1.0, 0.5],
                1e-12,
            );
            // d/dx x^-1/2 = -1/2 x^-3/2
            assert_close(
                &grad1("Rsqrt", p.clone()).unwrap(),
                &[3],
                &[-0.0625, -4.0, -0.5],
                1e-12,
            );
            assert_close(
                &grad1("Log", p.clone()).unwrap(),
                &[3],
                &[0.25, 4.0, 1.0],
                1e-12,
            );
            assert_close(&grad1("Log1p", p).unwrap(), &[3], &[0.2, 0.8, 0.5], 1e-12);
            let z = t(&[2], vec![0.0f64, 1.0]);
            let th = 1f64.tanh();
            assert_close(
                &grad1("Tanh", z.clone()).unwrap(),
                &[2],
                &[1.0, 1.0 - th * th],
                1e-12,
            );
            let sg = 1.0 / (1.0 + (-1f64).exp());
            assert_close(
                &grad1("Sigmoid", z).unwrap(),
                &[2],
                &[0.25, sg * (1.0 - sg)],
                1e-12,
            );
            // float32 too.
            let x32 = t(&[2], vec![3.0f32, -1.5]);
            assert_close(&grad1("Square", x32).unwrap(), &[2], &[6.0, -3.0], 1e-6);
        }

        #[test]
        fn floor_ceil_round_have_no_gradient() {
            for op in ["Floor", "Ceil", "Round"] {
                assert!(grad1(op, t(&[2], vec![0.3f64, 1.6])).is_none(), "{op}");
            }
            // Nor do ops that feed only through them.
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[2], vec![0.3f32, 1.6]));
            let y = tape.op1("Floor", &[x], &[]).unwrap();
            let z = tape.mul(y, x).unwrap();
            let g = tape
                .gradient_tensors(z, &[x])
                .unwrap()
                .pop()
                .unwrap()
                .unwrap();
            // d(floor(x) * x)/dx = floor(x) (+ 0 through floor).
            assert_close(&g, &[2], &[0.0, 1.0], 0.0);
        }

        #[test]
        fn cast_gradients() {
            // float32 -> float64: the gradient is cast back to float32.
            let f = |o: &mut dyn Ops, xs: &[Sym]| {
                let y = o.op1(
                    "Cast",
                    &[xs[0]],
                    &[("DstT", DataType::Double.into_attr_value())],
                )?;
                o.op1("Sin", &[y], &[])
            };
            let x = t(&[3], vec![0.5f32, -1.0, 2.0]);
            let e = compute_gradient_error(
                &compute_gradient(ctx(), &f, std::slice::from_ref(&x)).unwrap(),
            );
            assert!(e < 1e-3, "{e}");
            let mut tape = GradientTape::new(ctx(), false);
            let xs = tape.watch(x);
            let y = f(&mut tape, &[xs]).unwrap();
            let g = tape
                .gradient_tensors(y, &[xs])
                .unwrap()
                .pop()
                .unwrap()
                .unwrap();
            assert_eq!(g.dtype(), DataType::Float);
            assert_close(&g, &[3], &[0.5f64.cos(), 1f64.cos(), 2f64.cos()], 1e-6);
            // float64 -> float16 -> float64 round trip: gradient 1.
            let f = |o: &mut dyn Ops, xs: &[Sym]| {
                let y = o.op1(
                    "Cast",
                    &[xs[0]],
                    &[("DstT", DataType::Half.into_attr_value())],
                )?;
                o.op1(
                    "Cast",
                    &[y],
                    &[("DstT", DataType::Double.into_attr_value())],
                )
            };
            let mut tape = GradientTape::new(ctx(), false);
            let xs = tape.watch(t(&[2], vec![0.5f64, 3.0]));
            let y = f(&mut tape, &[xs]).unwrap();
            let g = tape
                .gradient_tensors(y, &[xs])
                .unwrap()
                .pop()
                .unwrap()
                .unwrap();
            assert_close(&g, &[2], &[1.0, 1.0], 0.0);
            // To or from a non-float type: no gradient (TensorFlow's None).
            let Some(Gradient::Fn(cast_grad)) = GradientRegistry::global().get("Cast") else {
                panic!("Cast has a gradient function");
            };
            let mut tape = GradientTape::new(ctx(), false);
            let xi = tape.watch(t(&[2], vec![1i32, 2]));
            let yf = tape
                .op1(
                    "Cast",
                    &[xi],
                    &[("DstT", DataType::Float.into_attr_value())],
                )
                .unwrap();
            let g = tape.ones_like(yf).unwrap();
            let attrs = Default::default();
            let op = opforge_core::autodiff::GradOp {
                op: "Cast",
                attrs: &attrs,
                inputs: &[xi],
                outputs: &[yf],
            };
            assert_eq!(cast_grad(&mut tape, &op, &[Some(g)]).unwrap(), vec![None]);
            // ... and the tape gives None for the integer source.
            let mut tape = GradientTape::new(ctx(), false);
            let xi = tape.watch(t(&[2], vec![1i32, 2]));
            let yf = tape
                .op1(
                    "Cast",
                    &[xi],
                    &[("DstT", DataType::Float.into_attr_value())],
                )
                .unwrap();
            assert_eq!(tape.gradient(yf, &[xi]).unwrap(), vec![None]);
        }

        /// `g(x) = d/dx f(x)` elementwise, then `d/dx g(x)` with a persistent tape.
        fn second_derivative(op: &str, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
            seed_ops_not_differentiable();
            let mut tape = GradientTape::new(ctx(), true);
            let xs = tape.watch(t(&[x.len() as i64], x.to_vec()));
            let y = tape.op1(op, &[xs], &[]).unwrap();
            let g = tape.gradient(y, &[xs]).unwrap()[0].unwrap();
            let gg = tape.gradient(g, &[xs]).unwrap()[0].unwrap();
            let v = |s: Sym| tape.value(s).flat::<f64>().unwrap().to_vec();
            (v(g), v(gg))
        }

        #[test]
        fn second_derivatives_of_tanh_and_sigmoid() {
            let x = [-1.5, -0.2, 0.0, 0.7, 2.0];
            let (g, gg) = second_derivative("Tanh", &x);
            for (i, &v) in x.iter().enumerate() {
                let th = v.tanh();
                assert!((g[i] - (1.0 - th * th)).abs() < 1e-12);
                // d2/dx2 tanh = -2 tanh (1 - tanh^2)
                assert!((gg[i] - (-2.0 * th * (1.0 - th * th))).abs() < 1e-12, "{i}");
            }
            let (g, gg) = second_derivative("Sigmoid", &x);
            for (i, &v) in x.iter().enumerate() {
                let s = 1.0 / (1.0 + (-v).exp());
                assert!((g[i] - s * (1.0 - s)).abs() < 1e-12);
                // d2/dx2 sigmoid = s (1 - s) (1 - 2 s)
                assert!(
                    (gg[i] - s * (1.0 - s) * (1.0 - 2.0 * s)).abs() < 1e-12,
                    "{i}"
                );
            }
            // And of the others whose gradient is a helper op.
            let p = [0.5, 1.0, 2.5];
            let (_, gg) = second_derivative("Sqrt", &p);
            for (i, &v) in p.iter().enumerate() {
                // d2/dx2 sqrt(x) = -1/4 x^-3/2
                assert!((gg[i] + 0.25 * v.powf(-1.5)).abs() < 1e-12, "{i}");
            }
            let (_, gg) = second_derivative("Rsqrt", &p);
            for (i, &v) in p.iter().enumerate() {
                // d2/dx2 x^-1/2 = 3/4 x^-5/2
                assert!((gg[i] - 0.75 * v.powf(-2.5)).abs() < 1e-12, "{i}");
            }
            let (_, gg) = second_derivative("Reciprocal", &p);
            for (i, &v) in p.iter().enumerate() {
                // d2/dx2 1/x = 2 / x^3
                assert!((gg[i] - 2.0 / (v * v * v)).abs() < 1e-12, "{i}");
            }
        }
    }
}
