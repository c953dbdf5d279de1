//! The elementwise unary ops.

use super::*;

// Unary ops
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UnaryOp {
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
pub(super) struct UnaryKernel(UnaryOp);

pub(super) fn int_reciprocal<T: Int>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
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
            // A wrapping square gives the same bits for either signedness.
            Square => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                T => unary_same::<T>(ctx, COST_CHEAP, square::<T>), bad(ctx)),
            Sqrt => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::sqrt), bad(ctx)),
            Rsqrt => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::rsqrt), bad(ctx)),
            Exp => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::exp), bad(ctx)),
            Log => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::ln), bad(ctx)),
            Log1p => float_complex_types!(dt, T => unary_same::<T>(ctx, T15, T::ln_1p), bad(ctx)),
            Tanh => {
                float_complex_types!(dt, T => unary_same::<T>(ctx, T15, <T as Float>::tanh), bad(ctx))
            }
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

/// Registers the OpDef `x: T -> y: T` of a unary op and its kernel, from ONE
/// dtype list: the kernel's types, which the OpDef's spec list repeats (in
/// order), followed by the types `no_kernel` names (allowed by the OpDef, with
/// no CPU kernel, as in TensorFlow).
macro_rules! unary_op {
    ($name:literal, $op:ident, [$($k:ident),* $(,)?] $(no_kernel [$($x:ident),*])?, $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("x: T")
            .output("y: T")
            .attr(concat!("T: {", opforge_ops_base::tf_type_list!($($k,)* $($($x),*)?), "}"))
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
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, Complex64, Complex128],
    "Computes numerical negative value element-wise.\n\nI.e., \\(y = -x\\)."
);
unary_op!(
    "Abs",
    Abs,
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64],
    "Computes the absolute value of a tensor.\n\nGiven a tensor `x`, this operation returns a tensor containing the absolute\nvalue of each element in `x`. For example, if x is an input element and y is\nan output element, this operation computes \\(y = |x|\\)."
);
unary_op!(
    "Sign",
    Sign,
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, Complex64, Complex128],
    "Returns an element-wise indication of the sign of a number.\n\n`y = sign(x) = -1` if `x < 0`; 0 if `x == 0`; 1 if `x > 0`.\n\nFor complex numbers, `y = sign(x) = x / |x|` if `x != 0`, otherwise `y = 0`."
);
unary_op!(
    "Reciprocal",
    Reciprocal,
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, Complex64, Complex128],
    "Computes the reciprocal of x element-wise.\n\nI.e., \\(y = 1 / x\\)."
);
unary_op!(
    "Square",
    Square,
    [
        BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
        Complex64, Complex128
    ],
    "Computes square of x element-wise.\n\nI.e., \\(y = x * x = x^2\\)."
);
unary_op!(
    "Sqrt",
    Sqrt,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes square root of x element-wise.\n\nI.e., \\(y = \\sqrt{x} = x^{1/2}\\)."
);
unary_op!(
    "Rsqrt",
    Rsqrt,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes reciprocal of square root of x element-wise.\n\nI.e., \\(y = 1 / \\sqrt{x}\\)."
);
unary_op!(
    "Exp",
    Exp,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes exponential of x element-wise.  \\(y = e^x\\).\n\nFor complex numbers, `e^(x+iy) = e^x * (cos y + i sin y)`."
);
unary_op!(
    "Log",
    Log,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes natural logarithm of x element-wise.\n\nI.e., \\(y = \\log_e x\\)."
);
unary_op!(
    "Log1p",
    Log1p,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes natural logarithm of (1 + x) element-wise.\n\nI.e., \\(y = \\log_e (1 + x)\\)."
);
unary_op!(
    "Tanh",
    Tanh,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes hyperbolic tangent of `x` element-wise.\n\nGiven an input tensor, this function computes hyperbolic tangent of every\nelement in the tensor. Input range is `[-inf, inf]` and output range is `[-1,1]`."
);
unary_op!(
    "Sigmoid",
    Sigmoid,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes sigmoid of `x` element-wise.\n\nSpecifically, `y = 1 / (1 + exp(-x))`."
);
unary_op!(
    "Sin",
    Sin,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes sine of x element-wise.\n\nGiven an input tensor, this function computes sine of every element in the\ntensor. Input range is `(-inf, inf)` and output range is `[-1,1]`."
);
unary_op!(
    "Cos",
    Cos,
    [BFloat16, Half, Float, Double, Complex64, Complex128],
    "Computes cos of x element-wise.\n\nGiven an input tensor, this function computes cosine of every element in the\ntensor. Input range is `(-inf, inf)` and output range is `[-1,1]`."
);
unary_op!(
    "Floor",
    Floor,
    [BFloat16, Half, Float, Double],
    "Returns element-wise largest integer not greater than x."
);
unary_op!(
    "Ceil",
    Ceil,
    [BFloat16, Half, Float, Double],
    "Returns element-wise smallest integer not less than x."
);
unary_op!(
    "Round",
    Round,
    [BFloat16, Half, Float, Double, Int8, Int16, Int32, Int64] no_kernel [Complex64, Complex128],
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

/// `x * x`.
#[inline(always)]
fn square<T: Num>(x: T) -> T {
    x.mul(x)
}
