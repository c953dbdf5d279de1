//! Elementwise binary math ops with NumPy broadcasting (`Add`, `AddV2`,
//! `Sub`, `Mul`, `Div`, `RealDiv`, `FloorDiv`, `FloorMod`, `Maximum`,
//! `Minimum`, `Pow`, `SquaredDifference`), comparisons (`Equal`, `NotEqual`,
//! `Less`, `LessEqual`, `Greater`, `GreaterEqual`), `LogicalAnd`/`LogicalOr`,
//! `AddN`, and the selects `Select` and `SelectV2`, with TensorFlow 2.21's
//! OpDefs and CPU semantics.
//!
//! Integer `Div`/`RealDiv` truncate toward zero, `FloorDiv` floors and
//! `FloorMod` takes the sign of the divisor; a zero divisor anywhere in `y`
//! (when the output is not empty) is `InvalidArgument: Integer division by
//! zero`, and `MIN / -1` wraps to `MIN` as TensorFlow does. Integer `Pow`
//! with a negative exponent is `InvalidArgument: Integers to negative integer
//! powers are not allowed`. `Maximum`/`Minimum` propagate NaN.
//!
//! `Broadcast3` (three-way broadcasting, used by `SelectV2`) is
//! `pub(crate)` for other kernels of the crate.

use opforge_core::kernel::{KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext};
use opforge_core::shape_inference::common::{self as shape_common, broadcast_binary_op_shape};
use opforge_core::shape_inference::{InferenceContext, ShapeAndType};
use opforge_core::{
    dispatch, ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};
use opforge_ops_base::cpu::broadcast::{
    binary_map, binary_same, broadcast_shapes, broadcast_zip, BroadcastPlan,
};
use opforge_ops_base::cpu::elem::{
    Arith, FloatOps, IntOps, MinMax, RealFloat, COST_CHEAP, COST_DIV, COST_TRANSCENDENTAL,
};
use opforge_ops_base::cpu::par::{chunks_in_shards, elementwise_shards};
use opforge_ops_base::types::unsupported;
use opforge_ops_base::{
    float_complex_types, float_types, int_types, numeric_types, real_types, signed_int_types,
};

/// The ops this file registers (its tests check them).
#[cfg(test)]
const OPS: &[&str] = &[
    "Add",
    "AddV2",
    "Sub",
    "Mul",
    "Div",
    "RealDiv",
    "FloorDiv",
    "FloorMod",
    "Maximum",
    "Minimum",
    "Pow",
    "SquaredDifference",
    "AddN",
    "Equal",
    "NotEqual",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "LogicalAnd",
    "LogicalOr",
    "Select",
    "SelectV2",
];

// ---------------------------------------------------------------------------
// Elementwise functions
// ---------------------------------------------------------------------------

/// Integer floor division (`y != 0`): truncate, then step down when the
/// signs differ and there is a remainder.
#[inline(always)]
fn int_floor_div<T: IntOps>(x: T, y: T) -> T {
    let z = x.trunc_div(y);
    if z.mul(y) != x && (x.is_negative() != y.is_negative()) {
        z.sub(T::ONE)
    } else {
        z
    }
}

/// Integer floor modulo (`y != 0`): the result has the sign of `y`.
#[inline(always)]
fn int_floor_mod<T: IntOps>(x: T, y: T) -> T {
    let r = x.trunc_rem(y);
    if r != T::ZERO && (y.is_negative() != r.is_negative()) {
        r.add(y)
    } else {
        r
    }
}

/// Float floor modulo: `fmod`, moved to the sign of `y`.
#[inline(always)]
fn float_floor_mod<T: RealFloat>(x: T, y: T) -> T {
    let r = x.fmod(y);
    if r != T::ZERO && ((y < T::ZERO) != (r < T::ZERO)) {
        r.add(y)
    } else {
        r
    }
}

#[inline(always)]
fn float_floor_div<T: RealFloat>(x: T, y: T) -> T {
    x.div(y).floor()
}

/// `max(x, y)`, NaN if either is NaN (Eigen's `PropagateNaN`).
#[inline(always)]
fn max_nan<T: MinMax>(x: T, y: T) -> T {
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
fn min_nan<T: MinMax>(x: T, y: T) -> T {
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
fn squared_difference<T: Arith>(x: T, y: T) -> T {
    let d = x.sub(y);
    d.mul(d.conj())
}

/// Whether a binary op on inputs 0 and 1 has a non-empty output (false when
/// the shapes do not broadcast: the op reports that itself).
fn output_nonempty(ctx: &OpKernelContext<'_>) -> bool {
    broadcast_shapes(ctx.input(0).dims(), ctx.input(1).dims())
        .map(|s| s.iter().all(|&d| d != 0))
        .unwrap_or(false)
}

/// An integer division-like op: `Integer division by zero` if `y` holds a
/// zero that the output uses.
fn int_div_op<T: IntOps>(ctx: &mut OpKernelContext<'_>, f: fn(T, T) -> T) -> Result<()> {
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
fn int_pow_op<T: IntOps>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
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
fn string_concat(ctx: &mut OpKernelContext<'_>) -> Result<()> {
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
fn string_equality(ctx: &mut OpKernelContext<'_>, equal: bool) -> Result<()> {
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
// The binary kernel
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    FloorMod,
    Maximum,
    Minimum,
    Pow,
    SquaredDifference,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    LogicalAnd,
    LogicalOr,
}

/// The kernel of every broadcasting binary op.
struct BinaryKernel {
    op: BinOp,
    /// `Equal`/`NotEqual` only: when false, inputs whose shapes do not
    /// broadcast give a scalar `false` (`Equal`) or `true` (`NotEqual`).
    incompatible_shape_error: bool,
}

impl BinaryKernel {
    fn factory(
        op: BinOp,
    ) -> impl Fn(&OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> + Send + Sync + 'static
    {
        move |ctx| {
            let incompatible_shape_error = match op {
                BinOp::Equal | BinOp::NotEqual => ctx.get_attr("incompatible_shape_error")?,
                _ => true,
            };
            Ok(Box::new(BinaryKernel {
                op,
                incompatible_shape_error,
            }) as Box<dyn OpKernel>)
        }
    }

    fn equality(&self, ctx: &mut OpKernelContext<'_>, dt: DataType) -> Result<()> {
        let equal = self.op == BinOp::Equal;
        if !self.incompatible_shape_error
            && broadcast_shapes(ctx.input(0).dims(), ctx.input(1).dims()).is_err()
        {
            let out = ctx.allocate_output(0, TensorShape::scalar())?;
            out.flat_mut::<bool>()?[0] = !equal;
            return Ok(());
        }
        if dt == DataType::String {
            return string_equality(ctx, equal);
        }
        dispatch!(dt, T => if equal {
                binary_map::<T, bool>(ctx, COST_CHEAP, |x: T, y: T| x == y)
            } else {
                binary_map::<T, bool>(ctx, COST_CHEAP, |x: T, y: T| x != y)
            },
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32,
             UInt64, Complex64, Complex128, Bool],
            Err(unsupported(ctx, dt)))
    }
}

impl OpKernel for BinaryKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        use BinOp::*;
        let dt = ctx.input_dtype(0);
        let bad = |ctx: &OpKernelContext<'_>| Err(unsupported(ctx, dt));
        match self.op {
            Add if dt == DataType::String => string_concat(ctx),
            Add => numeric_types!(dt, T => binary_same::<T>(ctx, COST_CHEAP, T::add), bad(ctx)),
            Sub => numeric_types!(dt, T => binary_same::<T>(ctx, COST_CHEAP, T::sub), bad(ctx)),
            Mul => numeric_types!(dt, T => binary_same::<T>(ctx, COST_CHEAP, T::mul), bad(ctx)),
            Div => float_complex_types!(dt, T => binary_same::<T>(ctx, COST_DIV, T::div),
                int_types!(dt, T => int_div_op::<T>(ctx, T::trunc_div), bad(ctx))),
            FloorDiv => {
                float_types!(dt, T => binary_same::<T>(ctx, COST_DIV, float_floor_div::<T>),
                int_types!(dt, T => int_div_op::<T>(ctx, int_floor_div::<T>), bad(ctx)))
            }
            FloorMod => {
                float_types!(dt, T => binary_same::<T>(ctx, COST_DIV, float_floor_mod::<T>),
                int_types!(dt, T => int_div_op::<T>(ctx, int_floor_mod::<T>), bad(ctx)))
            }
            Maximum => {
                real_types!(dt, T => binary_same::<T>(ctx, COST_CHEAP, max_nan::<T>), bad(ctx))
            }
            Minimum => {
                real_types!(dt, T => binary_same::<T>(ctx, COST_CHEAP, min_nan::<T>), bad(ctx))
            }
            Pow => {
                float_complex_types!(dt, T => binary_same::<T>(ctx, COST_TRANSCENDENTAL, T::pow),
                signed_int_types!(dt, T => int_pow_op::<T>(ctx), bad(ctx)))
            }
            SquaredDifference => numeric_types!(dt,
                T => binary_same::<T>(ctx, 2, squared_difference::<T>), bad(ctx)),
            Equal | NotEqual => self.equality(ctx, dt),
            Less => {
                real_types!(dt, T => binary_map::<T, bool>(ctx, COST_CHEAP, |x: T, y: T| x < y), bad(ctx))
            }
            LessEqual => {
                real_types!(dt, T => binary_map::<T, bool>(ctx, COST_CHEAP, |x: T, y: T| x <= y), bad(ctx))
            }
            Greater => {
                real_types!(dt, T => binary_map::<T, bool>(ctx, COST_CHEAP, |x: T, y: T| x > y), bad(ctx))
            }
            GreaterEqual => {
                real_types!(dt, T => binary_map::<T, bool>(ctx, COST_CHEAP, |x: T, y: T| x >= y), bad(ctx))
            }
            LogicalAnd => binary_same::<bool>(ctx, COST_CHEAP, |x, y| x && y),
            LogicalOr => binary_same::<bool>(ctx, COST_CHEAP, |x, y| x || y),
        }
    }
}

/// Registers `x: T, y: T -> z: T` with TensorFlow's allowed types
/// `$types` (and op flags), and the kernel for the dtypes `[$k]`.
macro_rules! binary_op {
    ($name:literal, $op:ident, $types:literal, [$($k:ident),* $(,)?] $(, $flag:ident)* ; $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("x: T")
            .input("y: T")
            .output("z: T")
            .attr(concat!("T: {", $types, "}"))
            $(.$flag())*
            .set_shape_fn(broadcast_binary_op_shape)
            .doc($doc));
        register_kernel!(
            KernelDefBuilder::new($name).type_constraint_list("T", &[$(DataType::$k),*]),
            fn = BinaryKernel::factory(BinOp::$op)
        );
    };
}

binary_op!(
    "Add",
    Add,
    "bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, complex128, string",
    [BFloat16, Half, Float, Double, UInt8, Int8, Int16, Int32, Int64, Complex64, Complex128, String];
    "Returns x + y element-wise.\n\n*NOTE*: `Add` supports broadcasting. `AddN` does not. Strings are concatenated."
);
binary_op!(
    "AddV2",
    Add,
    "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, UInt8, UInt16, UInt32, UInt64, Int8, Int16, Int32, Int64, Complex64, Complex128],
    aggregate, commutative;
    "Returns x + y element-wise.\n\n*NOTE*: `Add` supports broadcasting. `AddN` does not."
);
binary_op!(
    "Sub",
    Sub,
    "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, complex64, complex128, uint32, uint64",
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, Int64, Complex64, Complex128, UInt32, UInt64];
    "Returns x - y element-wise.\n\n*NOTE*: `Sub` supports broadcasting."
);
binary_op!(
    "Mul",
    Mul,
    "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, UInt32, UInt64, Int64, Complex64, Complex128],
    commutative;
    "Returns x * y element-wise.\n\n*NOTE*: `Mul` supports broadcasting."
);
binary_op!(
    "Div",
    Div,
    "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, UInt32, UInt64, Int64, Complex64, Complex128];
    "Returns x / y element-wise.\n\n*NOTE*: `Div` supports broadcasting. Integer division truncates toward zero."
);
binary_op!(
    "RealDiv",
    Div,
    "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, UInt32, UInt64, Int64, Complex64, Complex128];
    "Returns x / y element-wise for real types.\n\nIf `x` and `y` are reals, this will return the floating-point division.\n\n*NOTE*: `Div` supports broadcasting."
);
binary_op!(
    "FloorDiv",
    FloorDiv,
    "bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, UInt32, UInt64, Int64];
    "Returns x // y element-wise.\n\n*NOTE*: `FloorDiv` supports broadcasting."
);
binary_op!(
    "FloorMod",
    FloorMod,
    "int8, int16, int32, int64, uint8, uint16, uint32, uint64, bfloat16, half, float, double",
    [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, BFloat16, Half, Float, Double];
    "Returns element-wise remainder of division.\n\nThis follows Python semantics in that the result here is consistent with a\nflooring divide. E.g. `floor(x / y) * y + floormod(x, y) = x`, regardless\nof the signs of x and y.\n\n*NOTE*: `FloorMod` supports broadcasting."
);
binary_op!(
    "Maximum",
    Maximum,
    "bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64",
    [BFloat16, Half, Float, Double, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64];
    "Returns the max of x and y (i.e. x > y ? x : y) element-wise.\n\n*NOTE*: `Maximum` supports broadcasting. NaN propagates."
);
binary_op!(
    "Minimum",
    Minimum,
    "bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64",
    [BFloat16, Half, Float, Double, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64];
    "Returns the min of x and y (i.e. x < y ? x : y) element-wise.\n\n*NOTE*: `Minimum` supports broadcasting. NaN propagates."
);
binary_op!(
    "Pow",
    Pow,
    "bfloat16, float, half, double, int8, int16, int32, int64, complex64, complex128",
    [BFloat16, Float, Half, Double, Int8, Int16, Int32, Int64, Complex64, Complex128];
    "Computes the power of one value to another.\n\nGiven a tensor `x` and a tensor `y`, this operation computes \\(x^y\\) for\ncorresponding elements in `x` and `y`."
);
binary_op!(
    "SquaredDifference",
    SquaredDifference,
    "bfloat16, half, float, double, int32, int64, complex64, complex128",
    [BFloat16, Half, Float, Double, Int32, Int64, Complex64, Complex128],
    commutative;
    "Returns conj(x - y)(x - y) element-wise.\n\n*NOTE*: `SquaredDifference` supports broadcasting."
);

/// Registers a comparison `x: T, y: T -> z: bool` of the real number types.
macro_rules! comparison_op {
    ($name:literal, $op:ident, $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("x: T")
            .input("y: T")
            .output("z: bool")
            .attr("T: realnumbertype")
            .set_shape_fn(broadcast_binary_op_shape)
            .doc($doc));
        register_kernel!(
            KernelDefBuilder::new($name).type_constraint_list("T", opforge_core::dtype::REAL_NUMBER_TYPES),
            fn = BinaryKernel::factory(BinOp::$op)
        );
    };
}

comparison_op!(
    "Less",
    Less,
    "Returns the truth value of (x < y) element-wise.\n\n*NOTE*: `Less` supports broadcasting."
);
comparison_op!(
    "LessEqual",
    LessEqual,
    "Returns the truth value of (x <= y) element-wise.\n\n*NOTE*: `LessEqual` supports broadcasting."
);
comparison_op!(
    "Greater",
    Greater,
    "Returns the truth value of (x > y) element-wise.\n\n*NOTE*: `Greater` supports broadcasting."
);
comparison_op!(
    "GreaterEqual",
    GreaterEqual,
    "Returns the truth value of (x >= y) element-wise.\n\n*NOTE*: `GreaterEqual` supports broadcasting."
);

/// The dtypes `Equal`/`NotEqual` have CPU kernels for.
const EQUALITY_TYPES: &[DataType] = &[
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
    DataType::Int8,
    DataType::Int16,
    DataType::Int32,
    DataType::Int64,
    DataType::UInt8,
    DataType::UInt16,
    DataType::UInt32,
    DataType::UInt64,
    DataType::Complex64,
    DataType::Complex128,
    DataType::Bool,
    DataType::String,
];

macro_rules! equality_op {
    ($name:literal, $op:ident, $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("x: T")
            .input("y: T")
            .output("z: bool")
            .attr("T: type")
            .attr("incompatible_shape_error: bool = true")
            .commutative()
            .set_shape_fn(equality_shape)
            .doc($doc));
        register_kernel!(
            KernelDefBuilder::new($name).type_constraint_list("T", EQUALITY_TYPES),
            fn = BinaryKernel::factory(BinOp::$op)
        );
    };
}

equality_op!(
    "Equal",
    Equal,
    "Returns the truth value of (x == y) element-wise.\n\n*NOTE*: `Equal` supports broadcasting. With `incompatible_shape_error=false`,\ninputs whose shapes do not broadcast give a scalar `false`."
);
equality_op!(
    "NotEqual",
    NotEqual,
    "Returns the truth value of (x != y) element-wise.\n\n*NOTE*: `NotEqual` supports broadcasting. With `incompatible_shape_error=false`,\ninputs whose shapes do not broadcast give a scalar `true`."
);

macro_rules! logical_op {
    ($name:literal, $op:ident, $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("x: bool")
            .input("y: bool")
            .output("z: bool")
            .commutative()
            .set_shape_fn(broadcast_binary_op_shape)
            .doc($doc));
        register_kernel!(
            KernelDefBuilder::new($name),
            fn = BinaryKernel::factory(BinOp::$op)
        );
    };
}

logical_op!(
    "LogicalAnd",
    LogicalAnd,
    "Returns the truth value of x AND y element-wise.\n\n*NOTE*: `LogicalAnd` supports broadcasting."
);
logical_op!(
    "LogicalOr",
    LogicalOr,
    "Returns the truth value of x OR y element-wise.\n\n*NOTE*: `LogicalOr` supports broadcasting."
);

// ---------------------------------------------------------------------------
// AddN
// ---------------------------------------------------------------------------

/// `AddN`: the sum of `N` tensors of one shape (no broadcasting), computed
/// in place in an input's buffer when one may be reused.
struct AddNKernel;

fn add_n<T: Arith>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let n = ctx.num_inputs();
    let shape = ctx.input(0).shape().clone();
    for i in 1..n {
        let s = ctx.input(i).shape();
        ensure!(
            *s == shape,
            InvalidArgument,
            "Inputs to operation {} of type {} must have the same size and shape.  Input 0: {} != input {}: {}",
            ctx.node_name(),
            ctx.op_def().name,
            shape,
            i,
            s
        );
    }
    if n == 1 {
        let t = ctx.take_input(0);
        return ctx.set_output(0, t);
    }
    let candidates: Vec<usize> = (0..n).collect();
    let forwarded = ctx.forward_input_or_allocate_output(&candidates, 0, &shape)?;
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    let srcs = ins
        .iter()
        .enumerate()
        .filter(|&(i, _)| Some(i) != forwarded)
        .map(|(_, t)| t.flat::<T>())
        .collect::<Result<Vec<&[T]>>>()?;
    let out = out.flat_mut::<T>()?;
    // The output starts as the forwarded input, or as a copy of the first one.
    let (first, rest) = match (forwarded, srcs.split_first()) {
        (None, Some((first, rest))) => (Some(*first), rest),
        _ => (None, &srcs[..]),
    };
    let run = |start: usize, o: &mut [T]| {
        let range = start..start + o.len();
        if let Some(f) = first {
            o.copy_from_slice(&f[range.clone()]);
        }
        for r in rest {
            for (o, &x) in o.iter_mut().zip(&r[range.clone()]) {
                *o = (*o).add(x);
            }
        }
    };
    let shards = elementwise_shards(pool, out.len(), n);
    chunks_in_shards(pool, out, 1, shards, &run);
    Ok(())
}

impl OpKernel for AddNKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input_dtype(0);
        numeric_types!(dt, T => add_n::<T>(ctx), Err(unsupported(ctx, dt)))
    }
}

register_op!(OpDefBuilder::new("AddN")
    .input("inputs: N * T")
    .output("sum: T")
    .attr("N: int >= 1")
    .attr("T: {numbertype, variant}")
    .commutative()
    .aggregate()
    .set_shape_fn(add_n_shape)
    .doc("Add all input tensors element wise.\n\nInputs must be of same size and shape."));
register_kernel!(
    KernelDefBuilder::new("AddN").type_constraint_list(
        "T",
        &[
            DataType::Float,
            DataType::Double,
            DataType::Half,
            DataType::BFloat16,
            DataType::Int8,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::UInt8,
            DataType::UInt16,
            DataType::UInt32,
            DataType::UInt64,
            DataType::Complex64,
            DataType::Complex128,
        ]
    ),
    fn = |_| Ok(Box::new(AddNKernel) as Box<dyn OpKernel>)
);

// ---------------------------------------------------------------------------
// Three-way broadcasting and the selects
// ---------------------------------------------------------------------------

/// A broadcasting plan for three inputs (NumPy rules): the output shape,
/// and the output dims collapsed so that each dim is either broadcast or not
/// for each input, with each input's stride per collapsed dim (0 where broadcast).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Broadcast3 {
    /// The (uncollapsed) output shape.
    pub(crate) out_shape: Vec<i64>,
    dims: Vec<usize>,
    strides: [Vec<usize>; 3],
}

impl Broadcast3 {
    /// The plan for inputs of shapes `shapes`, or `None` if they do not broadcast.
    pub(crate) fn new(shapes: [&[i64]; 3]) -> Option<Broadcast3> {
        let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
        let padded: Vec<Vec<i64>> = shapes
            .iter()
            .map(|s| {
                let mut v = vec![1; rank - s.len()];
                v.extend_from_slice(s);
                v
            })
            .collect();
        let mut out_shape = vec![1i64; rank];
        for (i, o) in out_shape.iter_mut().enumerate() {
            for p in &padded {
                if p[i] != 1 {
                    if *o != 1 && *o != p[i] {
                        return None;
                    }
                    *o = p[i];
                }
            }
        }
        // Collapse adjacent dims with the same broadcast pattern; drop size-1 output dims.
        let mut dims: Vec<usize> = Vec::new();
        let mut patterns: Vec<[bool; 3]> = Vec::new();
        for (i, &d) in out_shape.iter().enumerate() {
            if d == 1 {
                continue;
            }
            let p = [padded[0][i] == 1, padded[1][i] == 1, padded[2][i] == 1];
            match (patterns.last(), dims.last_mut()) {
                (Some(q), Some(last)) if *q == p => *last *= d as usize,
                _ => {
                    dims.push(d as usize);
                    patterns.push(p);
                }
            }
        }
        let strides = std::array::from_fn(|k| {
            let mut s = vec![0; dims.len()];
            let mut acc = 1;
            for i in (0..dims.len()).rev() {
                if !patterns[i][k] {
                    s[i] = acc;
                    acc *= dims[i];
                }
            }
            s
        });
        Some(Broadcast3 {
            out_shape,
            dims,
            strides,
        })
    }

    /// The length of an innermost row and each input's step along it.
    fn inner(&self) -> (usize, [usize; 3]) {
        match self.dims.last() {
            Some(&d) => (
                d,
                std::array::from_fn(|k| self.strides[k][self.dims.len() - 1]),
            ),
            None => (1, [0; 3]),
        }
    }

    /// The number of innermost rows.
    fn rows(&self) -> usize {
        match self.dims.split_last() {
            Some((_, outer)) => outer.iter().product(),
            None => 1,
        }
    }

    /// Each input's offset at the start of row `r`.
    fn row_offsets(&self, r: usize) -> [usize; 3] {
        let mut rem = r;
        let mut off = [0; 3];
        for d in (0..self.dims.len().saturating_sub(1)).rev() {
            let i = rem % self.dims[d];
            rem /= self.dims[d];
            for (k, o) in off.iter_mut().enumerate() {
                *o += i * self.strides[k][d];
            }
        }
        off
    }
}

/// The element types `Select`/`SelectV2` pick from: dense elements and strings.
trait SelectElem: Clone + Send + Sync + 'static {
    fn view(t: &Tensor) -> Result<&[Self]>;
    fn view_mut(t: &mut Tensor) -> Result<&mut [Self]>;
}

macro_rules! select_elems {
    ($($t:ty),*) => {$(
        impl SelectElem for $t {
            fn view(t: &Tensor) -> Result<&[Self]> { t.flat::<$t>() }
            fn view_mut(t: &mut Tensor) -> Result<&mut [Self]> { t.flat_mut::<$t>() }
        }
    )*};
}
select_elems!(
    f32,
    f64,
    half::f16,
    half::bf16,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    bool,
    num_complex::Complex<f32>,
    num_complex::Complex<f64>
);

impl SelectElem for Vec<u8> {
    fn view(t: &Tensor) -> Result<&[Self]> {
        t.strings()
    }
    fn view_mut(t: &mut Tensor) -> Result<&mut [Self]> {
        Ok(t.strings_mut()?.as_mut_slice())
    }
}

/// `output[i] = condition[i] ? t[i] : e[i]` under `plan` (inputs 0, 1, 2),
/// computed in place in `t`'s or `e`'s buffer when one has the output's
/// shape and may be reused.
fn select_with_plan<T: SelectElem>(
    ctx: &mut OpKernelContext<'_>,
    plan: &Broadcast3,
    out_shape: &TensorShape,
) -> Result<()> {
    let forwarded = ctx.forward_input_or_allocate_output(&[1, 2], 0, out_shape)?;
    if out_shape.num_elements() == 0 {
        return Ok(());
    }
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    let cond = ins[0].flat::<bool>()?;
    // `None`: that input is the output's own buffer.
    let then = match forwarded {
        Some(1) => None,
        _ => Some(T::view(&ins[1])?),
    };
    let els = match forwarded {
        Some(2) => None,
        _ => Some(T::view(&ins[2])?),
    };
    let out = T::view_mut(out)?;
    let (inner, step) = plan.inner();
    let rows = plan.rows();
    let run = |r0: usize, r1: usize, o: &mut [T]| {
        for (r, orow) in (r0..r1).zip(o.chunks_mut(inner)) {
            let off = plan.row_offsets(r);
            for (j, slot) in orow.iter_mut().enumerate() {
                if cond[off[0] + j * step[0]] {
                    if let Some(t) = then {
                        *slot = t[off[1] + j * step[1]].clone();
                    }
                } else if let Some(e) = els {
                    *slot = e[off[2] + j * step[2]].clone();
                }
            }
        }
    };
    let shards = elementwise_shards(pool, out.len(), COST_CHEAP).min(rows);
    chunks_in_shards(pool, out, inner, shards, &|off, o| {
        let r0 = off / inner;
        run(r0, r0 + o.len() / inner, o)
    });
    Ok(())
}

/// TensorFlow's original `Select`: `condition` is a scalar (picks `t` or
/// `e` whole), a vector matching the first dimension of `t` (picks rows),
/// or has the shape of `t`; `t` and `e` have the same shape.
fn select_v1<T: SelectElem>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let cond = ctx.input(0).shape().clone();
    let then = ctx.input(1).shape().clone();
    let els = ctx.input(2).shape().clone();
    let same_size = |then: &TensorShape, els: &TensorShape| -> Result<()> {
        ensure!(
            then == els,
            InvalidArgument,
            "'then' and 'else' must have the same size.  but received: {then} vs. {els}"
        );
        Ok(())
    };
    if cond.rank() == 0 {
        same_size(&then, &els)?;
        let pick = ctx.input(0).scalar_value::<bool>()?;
        let out = ctx.take_input(if pick { 1 } else { 2 });
        return ctx.set_output(0, out);
    }
    let cond_dims: Vec<i64> = if cond.rank() == 1 && then.rank() != 1 {
        ensure!(
            then.rank() >= 1,
            InvalidArgument,
            "'then' must be at least a vector, but saw shape: {then}"
        );
        ensure!(
            then.dim(0) == cond.dim(0),
            InvalidArgument,
            "Number of batches of 'then' must match size of 'cond', but saw: {} vs. {}",
            then.dim(0),
            cond.dim(0)
        );
        same_size(&then, &els)?;
        let mut d = vec![1; then.rank()];
        d[0] = cond.dim(0);
        d
    } else {
        for (i, s) in [(1, &then), (2, &els)] {
            ensure!(
                *s == cond,
                InvalidArgument,
                "Inputs to operation {} of type {} must have the same size and shape.  Input 0: {} != input {}: {}",
                ctx.node_name(),
                ctx.op_def().name,
                cond,
                i,
                s
            );
        }
        cond.dims().to_vec()
    };
    let plan = Broadcast3::new([&cond_dims, then.dims(), els.dims()])
        .ok_or_else(|| Status::internal("Select: shapes checked to broadcast do not"))?;
    select_with_plan::<T>(ctx, &plan, &then)
}

/// `SelectV2`: `condition`, `t` and `e` broadcast against each other.
fn select_v2<T: SelectElem>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let (c, t, e) = (
        ctx.input(0).shape(),
        ctx.input(1).shape(),
        ctx.input(2).shape(),
    );
    let plan = Broadcast3::new([c.dims(), t.dims(), e.dims()]).ok_or_else(|| {
        Status::invalid_argument(format!(
            "condition {c}, then {t}, and else {e} must be broadcastable"
        ))
    })?;
    let out_shape = TensorShape::new(&plan.out_shape)?;
    select_with_plan::<T>(ctx, &plan, &out_shape)
}

/// `Select` (`v2 == false`) and `SelectV2`.
struct SelectKernel {
    v2: bool,
}

impl OpKernel for SelectKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input_dtype(1);
        let v2 = self.v2;
        let run = |ctx: &mut OpKernelContext<'_>| -> Result<()> {
            dispatch!(dt, T => if v2 { select_v2::<T>(ctx) } else { select_v1::<T>(ctx) },
                [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32,
                 UInt64, Complex64, Complex128, Bool],
                Err(unsupported(ctx, dt)))
        };
        if dt == DataType::String {
            if v2 {
                select_v2::<Vec<u8>>(ctx)
            } else {
                select_v1::<Vec<u8>>(ctx)
            }
        } else {
            run(ctx)
        }
    }
}

/// The dtypes `Select`/`SelectV2` have CPU kernels for.
const SELECT_TYPES: &[DataType] = &[
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
    DataType::Int8,
    DataType::Int16,
    DataType::Int32,
    DataType::Int64,
    DataType::UInt8,
    DataType::UInt16,
    DataType::UInt32,
    DataType::UInt64,
    DataType::Complex64,
    DataType::Complex128,
    DataType::Bool,
    DataType::String,
];

register_op!(OpDefBuilder::new("Select")
    .input("condition: bool")
    .input("t: T")
    .input("e: T")
    .output("output: T")
    .attr("T: type")
    .set_shape_fn(select_shape)
    .doc(
        "Selects elements from `t` or `e`, depending on `condition`.\n\n\
         The `t`, and `e` tensors must all have the same shape, and the output will\n\
         also have that shape. The `condition` tensor must be a scalar if `t` and\n\
         `e` are scalars. If `t` and `e` are vectors or higher rank, then `condition`\n\
         must be either a scalar, a vector with size matching the first dimension of\n\
         `t`, or must have the same shape as `t`."
    ));
register_kernel!(
    KernelDefBuilder::new("Select").type_constraint_list("T", SELECT_TYPES),
    fn = |_| Ok(Box::new(SelectKernel { v2: false }) as Box<dyn OpKernel>)
);
register_op!(OpDefBuilder::new("SelectV2")
    .input("condition: bool")
    .input("t: T")
    .input("e: T")
    .output("output: T")
    .attr("T: type")
    .set_shape_fn(select_v2_shape)
    .doc(
        "Selects elements from `t` or `e`, depending on `condition`.\n\n\
         `condition`, `t` and `e` are broadcast against each other (NumPy rules)."
    ));
register_kernel!(
    KernelDefBuilder::new("SelectV2").type_constraint_list("T", SELECT_TYPES),
    fn = |_| Ok(Box::new(SelectKernel { v2: true }) as Box<dyn OpKernel>)
);

// ---------------------------------------------------------------------------
// Shape functions (TensorFlow's math_ops.cc)
// ---------------------------------------------------------------------------

/// `Equal`/`NotEqual`: the broadcast of `x` and `y`; with
/// `incompatible_shape_error = false`, shapes that do not broadcast give an
/// unknown shape (or a scalar when both dims are known), as the kernel's
/// scalar result.
fn equality_shape(c: &mut InferenceContext) -> Result<()> {
    let (x, y) = (c.input(0), c.input(1));
    let incompatible_shape_error: bool = c.get_attr("incompatible_shape_error")?;
    let out = shape_common::broadcast_shapes(c, x, y, incompatible_shape_error)?;
    c.set_output(0, out);
    Ok(())
}

/// `AddN`: every input shape merged, from the last to the first; for
/// `variant` inputs, the shapes and dtypes their handles hold merged too.
fn add_n_shape(c: &mut InferenceContext) -> Result<()> {
    let n = c.num_inputs();
    ensure!(n >= 1, InvalidArgument, "AddN needs at least one input");
    let mut cur = c.input(n - 1);
    for i in (0..n - 1).rev() {
        let s = c.input(i);
        cur = c
            .merge(s, cur)
            .map_err(|e| e.append(format!("\n\tFrom merging shape {i} with other shapes.")))?;
    }
    c.set_output(0, cur);
    let dtype: DataType = c.get_attr("T")?;
    if dtype != DataType::Variant {
        return Ok(());
    }
    // As TensorFlow: the handle data of the first input (from the end) that
    // has some, merged with that of the inputs before it. Only the last
    // input's data seeds the merged result.
    let mut first: Option<Vec<ShapeAndType>> =
        c.input_handle_shapes_and_types(n - 1).map(<[_]>::to_vec);
    let mut cur: Vec<ShapeAndType> = first.clone().unwrap_or_default();
    for i in (0..n - 1).rev() {
        let Some(data_i) = c.input_handle_shapes_and_types(i).map(<[_]>::to_vec) else {
            continue;
        };
        let Some(data) = first.clone() else {
            first = Some(data_i);
            continue;
        };
        ensure!(
            data_i.len() == data.len(),
            InvalidArgument,
            "shapes_and_types[{i}].size() == {} != shapes_and_types[0].size() == {}",
            data_i.len(),
            data.len()
        );
        for (j, (a, b)) in data_i.iter().zip(&data).enumerate() {
            ensure!(
                a.dtype == b.dtype,
                InvalidArgument,
                "shapes_and_types[{i}][{j}].dtype() == {} != shapes_and_types[0][{j}].dtype == {}",
                a.dtype,
                b.dtype
            );
            // TensorFlow indexes its (possibly empty) merged list here, which
            // aborts when the last input had no handle data: an error instead.
            let Some(slot) = cur.get_mut(j) else {
                return Err(Status::invalid_argument(format!(
                    "AddN: input {} has no handle shapes and types to merge shapes_and_types[{i}][{j}] into",
                    n - 1
                )));
            };
            let merged = c.merge(a.shape, slot.shape).map_err(|e| {
                e.append(format!(
                    "\n\tFrom merging shapes_and_types[{i}][{j}].shape with shapes_and_types[0][{j}].shape"
                ))
            })?;
            if let Some(slot) = cur.get_mut(j) {
                slot.shape = merged;
            }
        }
    }
    if first.is_some() {
        c.set_output_handle_shapes_and_types(0, cur);
    }
    Ok(())
}

/// The selects: when both `t` and `e` carry handle data (resources,
/// variants), output 0 carries their merge.
fn merge_select_handle_data(c: &mut InferenceContext) -> Result<()> {
    let (Some(h1), Some(h2)) = (
        c.input_handle_shapes_and_types(1).map(<[_]>::to_vec),
        c.input_handle_shapes_and_types(2).map(<[_]>::to_vec),
    ) else {
        return Ok(());
    };
    ensure!(
        h1.len() == h2.len(),
        InvalidArgument,
        "Trying to merge handles pointing to different numbers of tensors."
    );
    let mut merged = Vec::with_capacity(h1.len());
    for (a, b) in h1.iter().zip(&h2) {
        ensure!(
            a.dtype == b.dtype,
            InvalidArgument,
            "Trying to merge handles pointing to different dtypes."
        );
        let shape = c.merge(a.shape, b.shape)?;
        merged.push(ShapeAndType {
            shape,
            dtype: a.dtype,
        });
    }
    c.set_output_handle_shapes_and_types(0, merged);
    Ok(())
}

/// `Select`: `t` and `e` merged; `condition` is a scalar, a vector of
/// `t`'s first dim (when `t` is at least a vector), or `t`'s shape.
fn select_shape(c: &mut InferenceContext) -> Result<()> {
    merge_select_handle_data(c)?;
    let (t, e) = (c.input(1), c.input(2));
    let mut data = c.merge(t, e)?;
    let cond = c.input(0);
    let (Some(cond_rank), Some(data_rank)) = (c.rank(cond), c.rank(data)) else {
        c.set_output(0, data);
        return Ok(());
    };
    if cond_rank == 0 {
        // A scalar condition picks all of `t` or all of `e`.
    } else if cond_rank != 1 || data_rank == 0 {
        // Not a vector (or `t` is a scalar): the condition has `t`'s shape.
        data = c.merge(data, cond)?;
    } else {
        // A vector condition picks rows of `t` / `e`.
        let rows = c.dim(data, 0);
        let v = c.vector(rows);
        c.merge(cond, v)?;
    }
    c.set_output(0, data);
    Ok(())
}

/// `SelectV2`: the broadcast of `condition` with the broadcast of `t` and `e`.
fn select_v2_shape(c: &mut InferenceContext) -> Result<()> {
    merge_select_handle_data(c)?;
    let (cond, t, e) = (c.input(0), c.input(1), c.input(2));
    let other = shape_common::broadcast_shapes(c, t, e, true)?;
    let out = shape_common::broadcast_shapes(c, cond, other, true)?;
    c.set_output(0, out);
    Ok(())
}

// ---- Gradients ----

/// The gradients of the binary ops, `AddN` and the selects, as TensorFlow's
/// `math_grad.py` defines them; broadcasting ops reduce their gradients to
/// their inputs' shapes with [`opforge_ops_base::grad::unbroadcast_grads`]. TensorFlow
/// conjugates `x` and `y` first for complex types; without a `Conj` op these
/// are written for real types.
mod gradients {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym, SymArg};
    use opforge_core::{register_gradient, register_not_differentiable, Result};
    use opforge_ops_base::grad::unbroadcast_grads;

    type Grads = Result<Vec<Option<Sym>>>;

    fn reduced(o: &mut dyn Ops, op: &GradOp<'_>, gx: Sym, gy: Sym) -> Grads {
        let (gx, gy) = unbroadcast_grads(o, op.inputs[0], op.inputs[1], Some(gx), Some(gy))?;
        Ok(vec![gx, gy])
    }

    fn add_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        reduced(o, op, g, g)
    }

    fn sub_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let minus_g = o.neg(g)?;
        reduced(o, op, g, minus_g)
    }

    fn mul_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, y) = (op.inputs[0], op.inputs[1]);
        let gx = o.mul(g, y)?;
        let gy = o.mul(x, g)?;
        reduced(o, op, gx, gy)
    }

    /// `Div` and `RealDiv` (on floating types TensorFlow's `divide` is `RealDiv`):
    /// `(grad / y, grad * (-x / y / y))`.
    fn div_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, y) = (op.inputs[0], op.inputs[1]);
        let gx = o.div(g, y)?;
        let minus_x = o.neg(x)?;
        let t = o.div(minus_x, y)?;
        let t = o.div(t, y)?;
        let gy = o.mul(g, t)?;
        reduced(o, op, gx, gy)
    }

    /// `FloorDiv`: piecewise constant; TensorFlow returns None for both.
    fn floor_div_grad(_: &mut dyn Ops, _: &GradOp<'_>, _: &[Option<Sym>]) -> Grads {
        Ok(vec![None, None])
    }

    /// `FloorMod`: `(grad, grad * -floor_div(x, y))`.
    fn floor_mod_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, y) = (op.inputs[0], op.inputs[1]);
        let q = o.op1("FloorDiv", &[x, y], &[])?;
        let minus_q = o.neg(q)?;
        let gy = o.mul(g, minus_q)?;
        reduced(o, op, g, gy)
    }

    /// `Maximum`/`Minimum`: the gradient goes to `x` where `selector(x, y)`
    /// (ties included), to `y` elsewhere.
    fn max_min_grad(
        o: &mut dyn Ops,
        op: &GradOp<'_>,
        grads: &[Option<Sym>],
        selector: &str,
    ) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, y) = (op.inputs[0], op.inputs[1]);
        let zeros = o.zeros_like(g)?;
        let xmask = o.op1(selector, &[x, y], &[])?;
        let gx = o.op1("SelectV2", &[xmask, g, zeros], &[])?;
        let gy = o.op1("SelectV2", &[xmask, zeros, g], &[])?;
        reduced(o, op, gx, gy)
    }

    fn maximum_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        max_min_grad(o, op, grads, "GreaterEqual")
    }

    fn minimum_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        max_min_grad(o, op, grads, "LessEqual")
    }

    /// `Pow`: `(grad * y * x^(y - 1), grad * z * log(x))`, with `log(x)`
    /// taken as 0 where `x <= 0` (no false singularity at 0).
    fn pow_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, y, z) = (op.inputs[0], op.inputs[1], op.outputs[0]);
        let dt = o.dtype(x);
        let one = o.scalar(dt, 1.0)?;
        let y_minus_one = o.sub(y, one)?;
        let p = o.op1("Pow", &[x, y_minus_one], &[])?;
        let t = o.mul(g, y)?;
        let gx = o.mul(t, p)?;
        let zero = o.scalar(dt, 0.0)?;
        let mask = if dt.is_complex() {
            o.op1("NotEqual", &[x, zero], &[])?
        } else {
            o.op1("Greater", &[x, zero], &[])?
        };
        let ones = o.ones_like(x)?;
        let safe_x = o.op1("Select", &[mask, x, ones], &[])?;
        let log = o.op1("Log", &[safe_x], &[])?;
        let zeros = o.zeros_like(x)?;
        let log_x = o.op1("Select", &[mask, log, zeros], &[])?;
        let t = o.mul(g, z)?;
        let gy = o.mul(t, log_x)?;
        reduced(o, op, gx, gy)
    }

    /// `SquaredDifference`: with `d = 2 * grad * (x - y)`, `(d, -d)`, each
    /// reduced to its input's shape (`y`'s negated after the reduction).
    fn squared_difference_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None]);
        };
        let (x, y) = (op.inputs[0], op.inputs[1]);
        let two = o.scalar(o.dtype(g), 2.0)?;
        let two_g = o.mul(two, g)?;
        let diff = o.sub(x, y)?;
        let d = o.mul(two_g, diff)?;
        let (gx, gy) = unbroadcast_grads(o, x, y, Some(d), Some(d))?;
        let gy = match gy {
            Some(gy) => Some(o.neg(gy)?),
            None => None,
        };
        Ok(vec![gx, gy])
    }

    /// `AddN`: the gradient, to every input.
    fn add_n_grad(_: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        Ok(vec![grads[0]; op.inputs.len()])
    }

    /// `Select`: the gradient where the condition picks `t`, zeros elsewhere
    /// (and the reverse for `e`); none for the condition.
    fn select_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None, None]);
        };
        let (c, x) = (op.inputs[0], op.inputs[1]);
        let zeros = o.zeros_like(x)?;
        let gx = o.op1("Select", &[c, g, zeros], &[])?;
        let gy = o.op1("Select", &[c, zeros, g], &[])?;
        Ok(vec![None, Some(gx), Some(gy)])
    }

    /// `SelectV2`: as `Select`, each summed over the dims its input was
    /// broadcast along (kept as size 1) and reshaped to the input's shape.
    fn select_v2_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
        let Some(g) = grads[0] else {
            return Ok(vec![None, None, None]);
        };
        let c = op.inputs[0];
        let zero = o.scalar(o.dtype(g), 0.0)?;
        let out_shape = o.shape_of(op.outputs[0])?;
        let mut result = vec![None];
        for (i, picked) in [(1, true), (2, false)] {
            let input = op.inputs[i];
            let masked = if picked {
                o.op1("SelectV2", &[c, g, zero], &[])?
            } else {
                o.op1("SelectV2", &[c, zero, g], &[])?
            };
            let shape = o.shape_of(input)?;
            let r = o.call(
                "BroadcastGradientArgs",
                &[SymArg::One(shape), SymArg::One(out_shape)],
                &Default::default(),
            )?;
            let summed = o.op1(
                "Sum",
                &[masked, r[0]],
                &[("keep_dims", true.into_attr_value())],
            )?;
            result.push(Some(o.reshape(summed, shape)?));
        }
        Ok(result)
    }

    register_gradient!("Add", add_grad);
    register_gradient!("AddV2", add_grad);
    register_gradient!("Sub", sub_grad);
    register_gradient!("Mul", mul_grad);
    register_gradient!("Div", div_grad);
    register_gradient!("RealDiv", div_grad);
    register_gradient!("FloorDiv", floor_div_grad);
    register_gradient!("FloorMod", floor_mod_grad);
    register_gradient!("Maximum", maximum_grad);
    register_gradient!("Minimum", minimum_grad);
    register_gradient!("Pow", pow_grad);
    register_gradient!("SquaredDifference", squared_difference_grad);
    register_gradient!("AddN", add_n_grad);
    register_gradient!("Select", select_grad);
    register_gradient!("SelectV2", select_v2_grad);
    register_not_differentiable!(
        "Less",
        "LessEqual",
        "Greater",
        "GreaterEqual",
        "Equal",
        "NotEqual",
        "LogicalAnd",
        "LogicalOr",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};
    use num_complex::Complex;
    use opforge_core::Code;
    use opforge_ops_base::testutil::{assert_close, ctx, t};

    fn bin(op: &str, x: Tensor, y: Tensor) -> Result<Tensor> {
        ctx().op(op).input(x).input(y).run1()
    }

    fn strs(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
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
    fn broadcasting_shapes() {
        // [2,3] + [3]
        let got = bin(
            "AddV2",
            t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]),
            t(&[3], vec![10.0f32, 20.0, 30.0]),
        )
        .unwrap();
        assert_close(&got, &[2, 3], &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0], 0.0);
        // [2,1] * [1,3]
        let got = bin(
            "Mul",
            t(&[2, 1], vec![2i32, 3]),
            t(&[1, 3], vec![1i32, 10, 100]),
        )
        .unwrap();
        assert_eq!(got.dims(), &[2, 3]);
        assert_eq!(got.flat::<i32>().unwrap(), &[2, 20, 200, 3, 30, 300]);
        // scalar - tensor, tensor - scalar
        let got = bin("Sub", Tensor::scalar(10i64), t(&[3], vec![1i64, 2, 3])).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[9, 8, 7]);
        let got = bin(
            "Sub",
            t(&[3], vec![1.0f64, 2.0, 3.0]),
            Tensor::scalar(0.5f64),
        )
        .unwrap();
        assert_close(&got, &[3], &[0.5, 1.5, 2.5], 0.0);
        // [3,1,2] + [4,1]
        let a: Vec<f64> = (0..6).map(f64::from).collect();
        let got = bin(
            "Add",
            t(&[3, 1, 2], a),
            t(&[4, 1], vec![0.0, 10.0, 20.0, 30.0]),
        )
        .unwrap();
        assert_eq!(got.dims(), &[3, 4, 2]);
        let v = got.flat::<f64>().unwrap();
        // out[i,j,k] = a[i,0,k] + b[j,0] = (2i + k) + 10j
        for i in 0..3 {
            for j in 0..4 {
                for k in 0..2 {
                    assert_eq!(v[i * 8 + j * 2 + k], (2 * i + k) as f64 + 10.0 * j as f64);
                }
            }
        }
        let err = bin("Add", t(&[2, 3], vec![0f32; 6]), t(&[4], vec![0f32; 4])).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("Incompatible shapes: [2,3] vs. [4]"),
            "{err}"
        );
    }

    #[test]
    fn empty_tensors() {
        let got = bin(
            "AddV2",
            t(&[0, 3], Vec::<f32>::new()),
            t(&[3], vec![1f32, 2.0, 3.0]),
        )
        .unwrap();
        assert_eq!(got.dims(), &[0, 3]);
        let got = bin("Mul", t(&[0], Vec::<i32>::new()), Tensor::scalar(2i32)).unwrap();
        assert_eq!(got.dims(), &[0]);
        // No element is computed, so a zero divisor is no error.
        let got = bin("Div", t(&[0], Vec::<i32>::new()), Tensor::scalar(0i32)).unwrap();
        assert_eq!(got.dims(), &[0]);
        let got = bin("Less", t(&[2, 0], Vec::<f64>::new()), t(&[1], vec![1.0f64])).unwrap();
        assert_eq!(got.dims(), &[2, 0]);
        assert_eq!(got.dtype(), DataType::Bool);
        let got = bin("Pow", t(&[0], Vec::<i64>::new()), Tensor::scalar(-1i64)).unwrap();
        assert_eq!(got.dims(), &[0]);
    }

    #[test]
    fn dtype_families_for_add_sub_mul() {
        let h = |v: &[f32]| {
            t(
                &[v.len() as i64],
                v.iter().map(|&x| f16::from_f32(x)).collect(),
            )
        };
        assert_close(
            &bin("AddV2", h(&[1.5, -2.0]), h(&[0.25, 4.0])).unwrap(),
            &[2],
            &[1.75, 2.0],
            0.0,
        );
        let b = |v: &[f32]| {
            t(
                &[v.len() as i64],
                v.iter().map(|&x| bf16::from_f32(x)).collect(),
            )
        };
        assert_close(
            &bin("Mul", b(&[3.0, -0.5]), b(&[2.0, 8.0])).unwrap(),
            &[2],
            &[6.0, -4.0],
            0.0,
        );
        // Unsigned and signed integers wrap.
        let got = bin("Sub", t(&[2], vec![1u8, 200]), t(&[2], vec![2u8, 100])).unwrap();
        assert_eq!(got.flat::<u8>().unwrap(), &[255, 100]);
        let got = bin("AddV2", t(&[1], vec![i32::MAX]), t(&[1], vec![1i32])).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN]);
        let got = bin("Mul", t(&[1], vec![u64::MAX]), t(&[1], vec![2u64])).unwrap();
        assert_eq!(got.flat::<u64>().unwrap(), &[u64::MAX - 1]);
        // Complex: (1+2i)(3-i) = 5+5i.
        let got = bin(
            "Mul",
            t(&[1], vec![Complex::new(1.0f64, 2.0)]),
            t(&[1], vec![Complex::new(3.0f64, -1.0)]),
        )
        .unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap(),
            &[Complex::new(5.0, 5.0)]
        );
        let got = bin(
            "Add",
            t(&[1], vec![Complex::new(1.0f32, 2.0)]),
            Tensor::scalar(Complex::new(0.5f32, -2.0)),
        )
        .unwrap();
        assert_eq!(
            got.flat::<Complex<f32>>().unwrap(),
            &[Complex::new(1.5, 0.0)]
        );
    }

    #[test]
    fn string_add_concatenates_with_broadcasting() {
        let a = Tensor::from_strings(&[2, 1], strs(&["a", "bc"])).unwrap();
        let b = Tensor::from_strings(&[3], strs(&["x", "", "yz"])).unwrap();
        let got = bin("Add", a, b).unwrap();
        assert_eq!(got.dims(), &[2, 3]);
        assert_eq!(
            got.strings().unwrap(),
            &strs(&["ax", "a", "ayz", "bcx", "bc", "bcyz"])[..]
        );
        let got = bin(
            "Add",
            Tensor::from_strings(&[], strs(&["pre-"])).unwrap(),
            Tensor::from_strings(&[0], vec![]).unwrap(),
        )
        .unwrap();
        assert_eq!(got.dims(), &[0]);
        // AddV2 has no string kernel (TensorFlow's OpDef excludes strings).
        let s = Tensor::from_strings(&[1], strs(&["a"])).unwrap();
        assert!(bin("AddV2", s.clone(), s).is_err());
    }

    #[test]
    fn division_semantics() {
        let x = t(&[4], vec![7i32, -7, 7, -7]);
        let y = t(&[4], vec![2i32, 2, -2, -2]);
        let got = bin("Div", x.clone(), y.clone()).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[3, -3, -3, 3]);
        let got = bin("RealDiv", x.clone(), y.clone()).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[3, -3, -3, 3]);
        let got = bin("FloorDiv", x.clone(), y.clone()).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[3, -4, -4, 3]);
        let got = bin("FloorDiv", t(&[2], vec![6i64, -6]), Tensor::scalar(3i64)).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[2, -2]);
        let got = bin("FloorDiv", t(&[1], vec![7u8]), t(&[1], vec![2u8])).unwrap();
        assert_eq!(got.flat::<u8>().unwrap(), &[3]);
        // MIN / -1 wraps to MIN (TensorFlow avoids the trap the same way).
        let got = bin("Div", t(&[1], vec![i32::MIN]), t(&[1], vec![-1i32])).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN]);
        let got = bin("FloorMod", t(&[1], vec![i64::MIN]), t(&[1], vec![-1i64])).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[0]);
        // Floats.
        let got = bin(
            "Div",
            t(&[3], vec![1.0f32, -3.0, 1.0]),
            t(&[3], vec![4.0f32, 2.0, 0.0]),
        )
        .unwrap();
        assert_eq!(got.flat::<f32>().unwrap(), &[0.25, -1.5, f32::INFINITY]);
        let got = bin("RealDiv", t(&[1], vec![1.0f64]), t(&[1], vec![3.0f64])).unwrap();
        assert_eq!(got.flat::<f64>().unwrap(), &[1.0 / 3.0]);
        let got = bin(
            "FloorDiv",
            t(&[2], vec![7.0f64, -7.0]),
            t(&[2], vec![2.0f64, 2.0]),
        )
        .unwrap();
        assert_eq!(got.flat::<f64>().unwrap(), &[3.0, -4.0]);
        // Complex: (1+i) / (1-i) = i.
        let got = bin(
            "Div",
            t(&[1], vec![Complex::new(1.0f64, 1.0)]),
            t(&[1], vec![Complex::new(1.0f64, -1.0)]),
        )
        .unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap(),
            &[Complex::new(0.0, 1.0)]
        );
    }

    #[test]
    fn integer_division_by_zero_is_an_error() {
        for op in ["Div", "RealDiv", "FloorDiv", "FloorMod"] {
            let err = bin(op, t(&[3], vec![1i32, 2, 3]), t(&[3], vec![1i32, 0, 1])).unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{op}");
            assert!(
                err.message().contains("Integer division by zero"),
                "{op}: {err}"
            );
        }
        let err = bin("Div", t(&[2], vec![1u16, 2]), Tensor::scalar(0u16)).unwrap_err();
        assert!(err.message().contains("Integer division by zero"), "{err}");
    }

    #[test]
    fn floor_mod_takes_the_sign_of_the_divisor() {
        let x = t(&[6], vec![7i32, -7, 7, -7, 6, -6]);
        let y = t(&[6], vec![3i32, 3, -3, -3, 3, -3]);
        let got = bin("FloorMod", x, y).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[1, 2, -2, -1, 0, 0]);
        let got = bin("FloorMod", t(&[1], vec![7u32]), t(&[1], vec![3u32])).unwrap();
        assert_eq!(got.flat::<u32>().unwrap(), &[1]);
        let x = t(&[5], vec![7.5f64, -7.5, 7.5, -7.5, 1.0]);
        let y = t(&[5], vec![2.0f64, 2.0, -2.0, -2.0, 0.0]);
        let got = bin("FloorMod", x, y).unwrap();
        let v = got.flat::<f64>().unwrap();
        assert_eq!(v[..4], [1.5, 0.5, -0.5, -1.5]);
        assert!(v[4].is_nan());
        let got = bin(
            "FloorMod",
            t(&[1], vec![f16::from_f32(-1.0)]),
            t(&[1], vec![f16::from_f32(3.0)]),
        )
        .unwrap();
        assert_close(&got, &[1], &[2.0], 0.0);
    }

    #[test]
    fn maximum_minimum_propagate_nan() {
        let nan = f32::NAN;
        let x = t(&[4], vec![1.0f32, nan, 3.0, -1.0]);
        let y = t(&[4], vec![2.0f32, 0.0, nan, -2.0]);
        let got = bin("Maximum", x.clone(), y.clone()).unwrap();
        let v = got.flat::<f32>().unwrap();
        assert_eq!((v[0], v[3]), (2.0, -1.0));
        assert!(v[1].is_nan() && v[2].is_nan());
        let got = bin("Minimum", x, y).unwrap();
        let v = got.flat::<f32>().unwrap();
        assert_eq!((v[0], v[3]), (1.0, -2.0));
        assert!(v[1].is_nan() && v[2].is_nan());
        let got = bin("Maximum", t(&[3], vec![1i64, -5, 9]), Tensor::scalar(0i64)).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[1, 0, 9]);
        let got = bin("Minimum", t(&[2], vec![1u8, 200]), t(&[2], vec![5u8, 100])).unwrap();
        assert_eq!(got.flat::<u8>().unwrap(), &[1, 100]);
    }

    #[test]
    fn pow_semantics() {
        let got = bin(
            "Pow",
            t(&[3], vec![2.0f64, 4.0, 0.0]),
            t(&[3], vec![10.0f64, 0.5, 0.0]),
        )
        .unwrap();
        assert_eq!(got.flat::<f64>().unwrap(), &[1024.0, 2.0, 1.0]);
        let got = bin(
            "Pow",
            t(&[4], vec![3i32, -2, 0, 5]),
            t(&[4], vec![4i32, 3, 0, 1]),
        )
        .unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[81, -8, 1, 5]);
        let got = bin("Pow", t(&[1], vec![2i64]), t(&[1], vec![62i64])).unwrap();
        assert_eq!(got.flat::<i64>().unwrap(), &[1 << 62]);
        let err = bin("Pow", t(&[2], vec![2i32, 2]), t(&[2], vec![1i32, -1])).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message()
                .contains("Integers to negative integer powers are not allowed"),
            "{err}"
        );
        // Complex: i^2 = -1.
        let got = bin(
            "Pow",
            t(&[1], vec![Complex::new(0.0f64, 1.0)]),
            t(&[1], vec![Complex::new(2.0f64, 0.0)]),
        )
        .unwrap();
        let v = got.flat::<Complex<f64>>().unwrap()[0];
        assert!((v.re + 1.0).abs() < 1e-15 && v.im.abs() < 1e-15, "{v}");
        let got = bin(
            "Pow",
            t(&[1], vec![f16::from_f32(3.0)]),
            Tensor::scalar(f16::from_f32(2.0)),
        )
        .unwrap();
        assert_close(&got, &[1], &[9.0], 0.0);
    }

    #[test]
    fn squared_difference() {
        let got = bin(
            "SquaredDifference",
            t(&[2], vec![3.0f32, -1.0]),
            Tensor::scalar(5.0f32),
        )
        .unwrap();
        assert_close(&got, &[2], &[4.0, 36.0], 0.0);
        let got = bin(
            "SquaredDifference",
            t(&[1], vec![2i32]),
            t(&[1], vec![7i32]),
        )
        .unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[25]);
        // Complex: |(1+2i) - 0|^2 = 5.
        let got = bin(
            "SquaredDifference",
            t(&[1], vec![Complex::new(1.0f32, 2.0)]),
            t(&[1], vec![Complex::new(0.0f32, 0.0)]),
        )
        .unwrap();
        assert_eq!(
            got.flat::<Complex<f32>>().unwrap(),
            &[Complex::new(5.0, 0.0)]
        );
    }

    #[test]
    fn comparisons() {
        let x = t(&[2, 2], vec![1.0f32, 2.0, 3.0, f32::NAN]);
        let y = t(&[2], vec![2.0f32, 2.0]);
        let b = |op: &str| {
            bin(op, x.clone(), y.clone())
                .unwrap()
                .flat::<bool>()
                .unwrap()
                .to_vec()
        };
        assert_eq!(b("Less"), [true, false, false, false]);
        assert_eq!(b("LessEqual"), [true, true, false, false]);
        assert_eq!(b("Greater"), [false, false, true, false]);
        assert_eq!(b("GreaterEqual"), [false, true, true, false]);
        assert_eq!(b("Equal"), [false, true, false, false]);
        assert_eq!(b("NotEqual"), [true, false, true, true]);
        let got = bin(
            "Less",
            t(&[3], vec![0u64, 5, u64::MAX]),
            Tensor::scalar(5u64),
        )
        .unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[true, false, false]);
        let got = bin("Equal", t(&[2], vec![true, false]), Tensor::scalar(true)).unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[true, false]);
        let got = bin(
            "Equal",
            t(
                &[2],
                vec![Complex::new(1.0f64, 2.0), Complex::new(1.0, 0.0)],
            ),
            Tensor::scalar(Complex::new(1.0f64, 2.0)),
        )
        .unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[true, false]);
        let s = |v: &[&str]| Tensor::from_strings(&[v.len() as i64], strs(v)).unwrap();
        let got = bin("NotEqual", s(&["a", "b", "c"]), s(&["a", "x", "c"])).unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[false, true, false]);
        let got = bin(
            "Equal",
            s(&["a", "b"]),
            Tensor::from_strings(&[], strs(&["b"])).unwrap(),
        )
        .unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[false, true]);
    }

    #[test]
    fn equal_with_incompatible_shapes() {
        let x = t(&[2], vec![1i32, 2]);
        let y = t(&[3], vec![1i32, 2, 3]);
        for (op, want) in [("Equal", false), ("NotEqual", true)] {
            let got = ctx()
                .op(op)
                .input(x.clone())
                .input(y.clone())
                .attr("incompatible_shape_error", false)
                .run1()
                .unwrap();
            assert_eq!(got.dims(), &[] as &[i64], "{op}");
            assert_eq!(got.scalar_value::<bool>().unwrap(), want, "{op}");
            let err = bin(op, x.clone(), y.clone()).unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument);
            assert!(
                err.message().contains("Incompatible shapes: [2] vs. [3]"),
                "{err}"
            );
        }
        // Compatible shapes still compare elementwise with the attr false.
        let got = ctx()
            .op("Equal")
            .input(x)
            .input(Tensor::scalar(2i32))
            .attr("incompatible_shape_error", false)
            .run1()
            .unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[false, true]);
    }

    #[test]
    fn logical_and_or() {
        let x = t(&[2, 1], vec![true, false]);
        let y = t(&[2], vec![true, false]);
        let got = bin("LogicalAnd", x.clone(), y.clone()).unwrap();
        assert_eq!(got.dims(), &[2, 2]);
        assert_eq!(got.flat::<bool>().unwrap(), &[true, false, false, false]);
        let got = bin("LogicalOr", x, y).unwrap();
        assert_eq!(got.flat::<bool>().unwrap(), &[true, true, true, false]);
    }

    #[test]
    fn addv2_forwards_a_uniquely_owned_input() {
        let a = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let ptr = a.bytes().unwrap().as_ptr();
        let got = bin("AddV2", a, t(&[3], vec![1.0f32, 1.0, 1.0])).unwrap();
        assert_eq!(
            got.bytes().unwrap().as_ptr(),
            ptr,
            "the output reuses x's buffer"
        );
        assert_close(&got, &[2, 3], &[2.0, 3.0, 4.0, 5.0, 6.0, 7.0], 0.0);
        // The second input may be forwarded too (order kept: x - y).
        let b = t(&[2], vec![1i32, 2]);
        let ptr = b.bytes().unwrap().as_ptr();
        let got = bin("Sub", Tensor::scalar(10i32), b).unwrap();
        assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
        assert_eq!(got.flat::<i32>().unwrap(), &[9, 8]);
        // A shared input is left alone.
        let a = t(&[2], vec![1.0f64, 2.0]);
        let got = bin("AddV2", a.clone(), a.clone()).unwrap();
        assert_eq!(a.flat::<f64>().unwrap(), &[1.0, 2.0]);
        assert_eq!(got.flat::<f64>().unwrap(), &[2.0, 4.0]);
    }

    #[test]
    fn large_broadcasts_are_sharded_correctly() {
        let (rows, cols) = (400usize, 301usize);
        let a: Vec<i64> = (0..(rows * cols) as i64).collect();
        let b: Vec<i64> = (0..rows as i64).map(|r| r * 1000).collect();
        let got = bin(
            "AddV2",
            t(&[rows as i64, cols as i64], a),
            t(&[rows as i64, 1], b),
        )
        .unwrap();
        let v = got.flat::<i64>().unwrap();
        for (r, c) in [(0, 0), (1, 300), (200, 7), (399, 300)] {
            assert_eq!(v[r * cols + c], (r * cols + c) as i64 + r as i64 * 1000);
        }
        let cond: Vec<bool> = (0..rows).map(|r| r % 3 == 0).collect();
        let then: Vec<i32> = (0..(rows * cols) as i32).collect();
        let got = ctx()
            .op("SelectV2")
            .input(t(&[rows as i64, 1], cond))
            .input(t(&[rows as i64, cols as i64], then))
            .input(Tensor::scalar(-1i32))
            .run1()
            .unwrap();
        let v = got.flat::<i32>().unwrap();
        for (r, c) in [(0, 0), (1, 5), (3, 300), (398, 2), (399, 299)] {
            let want = if r % 3 == 0 {
                (r * cols + c) as i32
            } else {
                -1
            };
            assert_eq!(v[r * cols + c], want, "({r}, {c})");
        }
    }

    fn add_n(inputs: Vec<Tensor>) -> Result<Tensor> {
        ctx().op("AddN").input_list(inputs).run1()
    }

    #[test]
    fn add_n_sums_same_shape_inputs() {
        let a = t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
        let b = t(&[2, 2], vec![10.0f32, 20.0, 30.0, 40.0]);
        let c = t(&[2, 2], vec![100.0f32, 200.0, 300.0, 400.0]);
        let got = add_n(vec![a.clone(), b.clone(), c.clone()]).unwrap();
        assert_close(&got, &[2, 2], &[111.0, 222.0, 333.0, 444.0], 0.0);
        // The inputs are not changed when shared.
        assert_eq!(a.flat::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        // A uniquely owned input is summed into in place.
        let owned = t(&[2, 2], vec![1.0f32, 1.0, 1.0, 1.0]);
        let ptr = owned.bytes().unwrap().as_ptr();
        let got = add_n(vec![a.clone(), owned, b.clone()]).unwrap();
        assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
        assert_close(&got, &[2, 2], &[12.0, 23.0, 34.0, 45.0], 0.0);
        let got = add_n(vec![
            t(&[3], vec![i32::MAX, 1, -1]),
            t(&[3], vec![1i32, 2, -2]),
        ])
        .unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN, 3, -3]);
        let got = add_n(vec![
            t(&[1], vec![Complex::new(1.0f64, 1.0)]),
            t(&[1], vec![Complex::new(2.0f64, -3.0)]),
        ])
        .unwrap();
        assert_eq!(
            got.flat::<Complex<f64>>().unwrap(),
            &[Complex::new(3.0, -2.0)]
        );
        // One input passes through; empty inputs give an empty sum.
        let one = t(&[2], vec![5u8, 6]);
        let got = add_n(vec![one.clone()]).unwrap();
        assert!(got.shares_storage_with(&one));
        let got = add_n(vec![
            t(&[0, 2], Vec::<f64>::new()),
            t(&[0, 2], Vec::<f64>::new()),
        ])
        .unwrap();
        assert_eq!(got.dims(), &[0, 2]);
    }

    #[test]
    fn add_n_of_many_large_inputs() {
        let n = 50_000;
        let inputs: Vec<Tensor> = (0..5)
            .map(|k| t(&[n as i64], (0..n).map(|i| (i * k) as f64).collect()))
            .collect();
        let got = add_n(inputs).unwrap();
        let v = got.flat::<f64>().unwrap();
        for i in [0, 1, 25_000, n - 1] {
            assert_eq!(v[i], (i * 10) as f64);
        }
    }

    #[test]
    fn add_n_shape_mismatch_is_an_error() {
        let err = add_n(vec![
            t(&[2], vec![1.0f32, 2.0]),
            t(&[2], vec![1.0f32, 2.0]),
            t(&[3], vec![1.0f32, 2.0, 3.0]),
        ])
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains(
                "Inputs to operation AddN of type AddN must have the same size and shape.  Input 0: [2] != input 2: [3]"
            ),
            "{err}"
        );
        // [2,1] and [2] do not broadcast in AddN.
        let err = add_n(vec![t(&[2, 1], vec![1i64, 2]), t(&[2], vec![1i64, 2])]).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
    }

    fn select(op: &str, c: Tensor, x: Tensor, y: Tensor) -> Result<Tensor> {
        ctx().op(op).input(c).input(x).input(y).run1()
    }

    #[test]
    fn select_scalar_vector_and_elementwise_conditions() {
        let x = t(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]);
        let y = t(&[3, 2], vec![-1i32, -2, -3, -4, -5, -6]);
        // Vector condition picks rows.
        let got = select(
            "Select",
            t(&[3], vec![true, false, true]),
            x.clone(),
            y.clone(),
        )
        .unwrap();
        assert_eq!(got.dims(), &[3, 2]);
        assert_eq!(got.flat::<i32>().unwrap(), &[1, 2, -3, -4, 5, 6]);
        // Scalar condition picks a whole input.
        let got = select("Select", Tensor::scalar(false), x.clone(), y.clone()).unwrap();
        assert!(got.shares_storage_with(&y));
        // Same-shape condition picks elements.
        let c = t(&[3, 2], vec![true, false, false, true, true, false]);
        let got = select("Select", c, x.clone(), y.clone()).unwrap();
        assert_eq!(got.flat::<i32>().unwrap(), &[1, -2, -3, 4, 5, -6]);
        // Vector then/else with a vector condition: elementwise.
        let got = select(
            "Select",
            t(&[2], vec![false, true]),
            t(&[2], vec![1.0f64, 2.0]),
            t(&[2], vec![3.0f64, 4.0]),
        )
        .unwrap();
        assert_eq!(got.flat::<f64>().unwrap(), &[3.0, 2.0]);
        // Strings and a rank-3 then with a vector condition.
        let s = |v: &[&str]| Tensor::from_strings(&[2, 1, 1], strs(v)).unwrap();
        let got = select(
            "Select",
            t(&[2], vec![false, true]),
            s(&["a", "b"]),
            s(&["c", "d"]),
        )
        .unwrap();
        assert_eq!(got.strings().unwrap(), &strs(&["c", "b"])[..]);
        let got = select(
            "Select",
            t(&[0], Vec::<bool>::new()),
            t(&[0, 2], Vec::<f32>::new()),
            t(&[0, 2], Vec::<f32>::new()),
        )
        .unwrap();
        assert_eq!(got.dims(), &[0, 2]);
    }

    #[test]
    fn select_errors() {
        let x = t(&[3, 2], vec![0i32; 6]);
        let err = select("Select", t(&[2], vec![true, false]), x.clone(), x.clone()).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains(
                "Number of batches of 'then' must match size of 'cond', but saw: 3 vs. 2"
            ),
            "{err}"
        );
        let err = select(
            "Select",
            Tensor::scalar(true),
            x.clone(),
            t(&[2, 3], vec![0i32; 6]),
        )
        .unwrap_err();
        assert!(
            err.message().contains(
                "'then' and 'else' must have the same size.  but received: [3,2] vs. [2,3]"
            ),
            "{err}"
        );
        let err = select(
            "Select",
            t(&[3], vec![true; 3]),
            x.clone(),
            t(&[3, 1], vec![0i32; 3]),
        )
        .unwrap_err();
        assert!(
            err.message()
                .contains("'then' and 'else' must have the same size"),
            "{err}"
        );
        let err = select(
            "Select",
            t(&[2], vec![true; 2]),
            Tensor::scalar(1i32),
            Tensor::scalar(2i32),
        )
        .unwrap_err();
        assert!(
            err.message()
                .contains("'then' must be at least a vector, but saw shape: []"),
            "{err}"
        );
        let err = select("Select", t(&[3, 1], vec![true; 3]), x.clone(), x).unwrap_err();
        assert!(
            err.message().contains(
                "Inputs to operation Select of type Select must have the same size and shape.  Input 0: [3,1] != input 1: [3,2]"
            ),
            "{err}"
        );
    }

    #[test]
    fn select_v2_broadcasts_three_ways() {
        // condition [2,1,1], then [1,3,1], else [2] -> [2,3,2]
        let c = t(&[2, 1, 1], vec![true, false]);
        let x = t(&[1, 3, 1], vec![1.0f32, 2.0, 3.0]);
        let y = t(&[2], vec![-1.0f32, -2.0]);
        let got = select("SelectV2", c, x, y).unwrap();
        assert_eq!(got.dims(), &[2, 3, 2]);
        assert_close(
            &got,
            &[2, 3, 2],
            &[
                1.0, 1.0, 2.0, 2.0, 3.0, 3.0, -1.0, -2.0, -1.0, -2.0, -1.0, -2.0,
            ],
            0.0,
        );
        // Scalar condition with broadcasting then/else.
        let got = select(
            "SelectV2",
            Tensor::scalar(true),
            t(&[2, 1], vec![1i64, 2]),
            t(&[3], vec![7i64, 8, 9]),
        )
        .unwrap();
        assert_eq!(got.dims(), &[2, 3]);
        assert_eq!(got.flat::<i64>().unwrap(), &[1, 1, 1, 2, 2, 2]);
        // The condition alone has the output shape.
        let got = select(
            "SelectV2",
            t(&[2, 2], vec![true, false, false, true]),
            Tensor::scalar(1u8),
            Tensor::scalar(0u8),
        )
        .unwrap();
        assert_eq!(got.flat::<u8>().unwrap(), &[1, 0, 0, 1]);
        let s = Tensor::from_strings(&[2], strs(&["t0", "t1"])).unwrap();
        let e = Tensor::from_strings(&[], strs(&["e"])).unwrap();
        let got = select("SelectV2", t(&[2, 1], vec![false, true]), s, e).unwrap();
        assert_eq!(got.strings().unwrap(), &strs(&["e", "e", "t0", "t1"])[..]);
        let got = select(
            "SelectV2",
            t(&[0, 1], Vec::<bool>::new()),
            t(&[3], vec![1i32; 3]),
            Tensor::scalar(0i32),
        )
        .unwrap();
        assert_eq!(got.dims(), &[0, 3]);
        let err = select(
            "SelectV2",
            t(&[2], vec![true; 2]),
            t(&[3], vec![0i32; 3]),
            Tensor::scalar(0i32),
        )
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message()
                .contains("condition [2], then [3], and else [] must be broadcastable"),
            "{err}"
        );
    }

    #[test]
    fn select_v2_forwards_then_or_else() {
        let e = t(&[3], vec![10i32, 20, 30]);
        let ptr = e.bytes().unwrap().as_ptr();
        let got = select(
            "SelectV2",
            t(&[3], vec![true, false, true]),
            Tensor::scalar(0i32),
            e,
        )
        .unwrap();
        assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
        assert_eq!(got.flat::<i32>().unwrap(), &[0, 20, 0]);
        let x = t(&[3], vec![1.0f64, 2.0, 3.0]);
        let ptr = x.bytes().unwrap().as_ptr();
        let got = select(
            "SelectV2",
            t(&[3], vec![true, false, true]),
            x,
            t(&[1], vec![-1.0f64]),
        )
        .unwrap();
        assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
        assert_eq!(got.flat::<f64>().unwrap(), &[1.0, -1.0, 3.0]);
    }

    #[test]
    fn broadcast3_plan() {
        assert!(Broadcast3::new([&[2], &[3], &[]]).is_none());
        let p = Broadcast3::new([&[4, 1], &[1, 5], &[4, 5]]).unwrap();
        assert_eq!(p.out_shape, vec![4, 5]);
        assert_eq!(p.rows(), 4);
        assert_eq!(p.inner(), (5, [0, 1, 1]));
        assert_eq!(p.row_offsets(2), [2, 0, 10]);
        let p = Broadcast3::new([&[], &[], &[]]).unwrap();
        assert_eq!((p.rows(), p.inner()), (1, (1, [0; 3])));
        // Same-pattern dims collapse.
        let p = Broadcast3::new([&[2, 3, 4], &[2, 3, 4], &[1, 1, 1]]).unwrap();
        assert_eq!(p.inner(), (24, [1, 1, 0]));
    }

    /// Shape functions and gradients.
    mod shape_and_gradient_tests {
        use opforge_core::autodiff::{
            compute_gradient, compute_gradient_error, gradients, Gradient, GradientRegistry,
            GradientTape, Ops, OpsExt, Sym, SymArg,
        };
        use opforge_core::graph::{Graph, NodeSpec, Output, Session};
        use opforge_core::shape_inference::testutil::{check_outputs, parse_shapes, ShapeTestOp};
        use opforge_core::shape_inference::{InferenceContext, ShapeAndType};
        use opforge_core::{
            infer_error, infer_ok, DataType, OpRegistry, Result, Tensor, TensorShape,
        };
        use opforge_ops_base::testutil::{assert_close, ctx, t};

        const BROADCASTING: &[&str] = &[
            "Add",
            "AddV2",
            "Sub",
            "Mul",
            "Div",
            "RealDiv",
            "FloorDiv",
            "FloorMod",
            "Maximum",
            "Minimum",
            "Pow",
            "SquaredDifference",
            "Less",
            "LessEqual",
            "Greater",
            "GreaterEqual",
            "LogicalAnd",
            "LogicalOr",
        ];

        /// Runs `op`'s shape function with handle data for some inputs
        /// (`(input, [(shape, dtype)])`, shapes in the test grammar).
        fn infer_with_handles(
            op: &ShapeTestOp,
            ins: &str,
            handles: &[(usize, &[(&str, DataType)])],
        ) -> Result<InferenceContext> {
            let data = OpRegistry::global().lookup(&op.op)?;
            let shapes = parse_shapes(ins).unwrap();
            let mut c = InferenceContext::new(&data.op_def, "", &op.attrs, &shapes, 1);
            for (i, list) in handles {
                let mut v = Vec::new();
                for (shape, dtype) in list.iter() {
                    let dims = parse_shapes(shape).unwrap().pop().unwrap();
                    let shape = c.make_partial_shape(dims.as_deref());
                    v.push(ShapeAndType {
                        shape,
                        dtype: *dtype,
                    });
                }
                c.set_input_handle_shapes_and_types(*i, v);
            }
            (data.shape_fn.clone().unwrap())(&mut c)?;
            Ok(c)
        }

        fn handle_dims(c: &InferenceContext) -> Vec<(Option<Vec<i64>>, DataType)> {
            c.output_handle_shapes_and_types(0)
                .unwrap()
                .iter()
                .map(|st| (c.shape_values(st.shape), st.dtype))
                .collect()
        }

        #[test]
        fn broadcasting_shape_functions() {
            for op in BROADCASTING {
                let o = ShapeTestOp::new(op);
                infer_ok!(o, "[2,3];[2,3]", "[d0_0,d0_1]");
                infer_ok!(o, "[2,3];[3]", "[d0_0,d0_1]");
                infer_ok!(o, "[3];[2,3]", "[d1_0,d0_0]");
                infer_ok!(o, "[2,1];[1,3]", "[d0_0,d1_1]");
                infer_ok!(o, "[];[2,3]", "[d1_0,d1_1]");
                infer_ok!(o, "[2,3];[]", "[d0_0,d0_1]");
                infer_ok!(o, "[];[]", "[]");
                infer_ok!(o, "?;[3]", "?");
                infer_ok!(o, "[3];?", "?");
                infer_ok!(o, "[?,3];[2,?]", "[d1_0,d0_1]");
                infer_ok!(o, "[?];[?]", "[?]");
                infer_ok!(o, "[1];[?]", "[d1_0]");
                infer_ok!(o, "[?];[1]", "[d0_0]");
                infer_ok!(o, "[?,1];[4]", "[d0_0,d1_0]");
                infer_ok!(o, "[0,3];[1,3]", "[d0_0,d0_1]");
                infer_ok!(o, "[5,1,4];[3,1]", "[d0_0,d1_0,d0_2]");
                infer_error!(o, "[2,3];[4]", "Dimensions must be equal, but are 3 and 4");
                infer_error!(
                    o,
                    "[2,3];[3,3]",
                    "Dimensions must be equal, but are 2 and 3"
                );
            }
        }

        #[test]
        fn equality_shape_functions_honour_incompatible_shape_error() {
            for op in ["Equal", "NotEqual"] {
                let strict = ShapeTestOp::new(op)
                    .attr("T", DataType::Float)
                    .attr("incompatible_shape_error", true);
                infer_ok!(strict, "[2,3];[3]", "[d0_0,d0_1]");
                infer_ok!(strict, "[2,?];[3]", "[d0_0,d1_0]");
                infer_ok!(strict, "?;[3]", "?");
                infer_error!(
                    strict,
                    "[2,3];[4]",
                    "Dimensions must be equal, but are 3 and 4"
                );
                let lenient = ShapeTestOp::new(op)
                    .attr("T", DataType::Float)
                    .attr("incompatible_shape_error", false);
                infer_ok!(lenient, "[2,3];[3]", "[d0_0,d0_1]");
                infer_ok!(lenient, "[2,3];[1]", "[d0_0,d0_1]");
                // Known and different: a scalar (the kernel's scalar result).
                infer_ok!(lenient, "[2,3];[4]", "[]");
                // A known dim > 1 against an unknown one: maybe incompatible.
                infer_ok!(lenient, "[2,?];[3]", "?");
                infer_ok!(lenient, "[?];[?]", "[?]");
                infer_ok!(lenient, "?;[4]", "?");
                // TensorFlow reads the attr without a default: a bare node fails.
                infer_error!(
                    ShapeTestOp::new(op),
                    "[2];[2]",
                    "No attr named 'incompatible_shape_error' in NodeDef"
                );
            }
        }

        #[test]
        fn add_n_shape_function() {
            let op = |n: i64| {
                ShapeTestOp::new("AddN")
                    .attr("N", n)
                    .attr("T", DataType::Float)
            };
            infer_ok!(op(1), "[2,?]", "in0");
            infer_ok!(op(1), "?", "in0");
            infer_ok!(op(2), "[1,?];[?,2]", "[d0_0,d1_1]");
            infer_ok!(op(2), "?;[2]", "in1");
            infer_ok!(op(2), "[2];?", "in0");
            infer_ok!(op(2), "?;?", "in0"); // TF: Merge(s0, s1) keeps s0 when both ranks are unknown
            infer_ok!(op(3), "[2,?];?;[?,3]", "[d0_0,d2_1]");
            infer_ok!(op(3), "?;[?,3];[2,?]", "[d2_0,d1_1]");
            infer_ok!(op(2), "[2,3];[2,3]", "in0");
            infer_error!(
                op(2),
                "[1];[2]",
                "Dimension 0 in both shapes must be equal, but are 1 and 2"
            );
            infer_error!(
                op(3),
                "[1];[?];[1,2]",
                "From merging shape 1 with other shapes."
            );
            infer_error!(
                op(3),
                "[?,?];[1];?",
                "Shapes must be equal rank, but are 2 and 1"
            );
            infer_error!(
                op(2),
                "[?,?];[1]",
                "From merging shape 0 with other shapes."
            );
            // TensorFlow reads T: a bare node fails.
            infer_error!(
                ShapeTestOp::new("AddN"),
                "[1];[1]",
                "No attr named 'T' in NodeDef"
            );
        }

        #[test]
        fn add_n_merges_variant_handle_data() {
            let op = ShapeTestOp::new("AddN")
                .attr("N", 2i64)
                .attr("T", DataType::Variant);
            let c = infer_with_handles(
                &op,
                "[];[]",
                &[
                    (0, &[("[2,?]", DataType::Float)]),
                    (1, &[("[?,3]", DataType::Float)]),
                ],
            )
            .unwrap();
            assert_eq!(handle_dims(&c), vec![(Some(vec![2, 3]), DataType::Float)]);
            check_outputs(&c, "in0").unwrap();
            let e = infer_with_handles(
                &op,
                "[];[]",
                &[
                    (0, &[("[2]", DataType::Float)]),
                    (1, &[("[2]", DataType::Int32)]),
                ],
            )
            .unwrap_err();
            assert_eq!(
                e.message(),
                "shapes_and_types[0][0].dtype() == float != shapes_and_types[0][0].dtype == int32"
            );
            let e = infer_with_handles(
                &op,
                "[];[]",
                &[
                    (0, &[("[2]", DataType::Float), ("[]", DataType::Float)]),
                    (1, &[("[2]", DataType::Float)]),
                ],
            )
            .unwrap_err();
            assert_eq!(
                e.message(),
                "shapes_and_types[0].size() == 2 != shapes_and_types[0].size() == 1"
            );
            let e = infer_with_handles(
                &op,
                "[];[]",
                &[
                    (0, &[("[2]", DataType::Float)]),
                    (1, &[("[3]", DataType::Float)]),
                ],
            )
            .unwrap_err();
            assert!(
                e.message()
                    .contains("Dimension 0 in both shapes must be equal, but are 2 and 3"),
                "{e}"
            );
            assert!(
                e.message().contains(
                    "From merging shapes_and_types[0][0].shape with shapes_and_types[0][0].shape"
                ),
                "{e}"
            );
            // Only the last input's data seeds the result (TensorFlow's
            // order): earlier data alone gives an empty list.
            let c = infer_with_handles(&op, "[];[]", &[(0, &[("[2]", DataType::Float)])]).unwrap();
            assert_eq!(handle_dims(&c), vec![]);
            // Not variant: handle data is ignored.
            let op = ShapeTestOp::new("AddN")
                .attr("N", 2i64)
                .attr("T", DataType::Float);
            let c =
                infer_with_handles(&op, "[2];[2]", &[(1, &[("[2]", DataType::Float)])]).unwrap();
            assert!(c.output_handle_shapes_and_types(0).is_none());
        }

        #[test]
        fn select_shape_function() {
            let op = ShapeTestOp::new("Select").attr("T", DataType::Float);
            // Unknown condition rank: the merge of t and e.
            infer_ok!(op, "?;[2,3];[2,3]", "in1");
            infer_ok!(op, "?;[2,?];[?,3]", "[d1_0,d2_1]");
            infer_ok!(op, "?;?;[2,3]", "in2");
            infer_ok!(op, "[2];?;?", "in1"); // TF: Merge(t, e) keeps t when both ranks are unknown
                                             // Scalar condition: anything goes.
            infer_ok!(op, "[];[2,3];[2,3]", "in1");
            infer_ok!(op, "[];[];[]", "in1");
            // Vector condition: t's first dim.
            infer_ok!(op, "[2];[2,3];[2,3]", "in1");
            infer_ok!(op, "[?];[2,3];[2,3]", "in1");
            infer_ok!(op, "[2];[?,3];[?,3]", "in1");
            infer_error!(
                op,
                "[3];[2,3];[2,3]",
                "Dimension 0 in both shapes must be equal, but are 3 and 2"
            );
            // Same shape otherwise.
            infer_ok!(op, "[2,3];[2,3];[2,3]", "in1");
            infer_ok!(op, "[2,?];[?,3];[?,3]", "[d0_0,d1_1]");
            infer_ok!(op, "[2];[2];[2]", "in1");
            infer_ok!(op, "[2];[?];[?]", "in1");
            infer_ok!(op, "[3];[?];[3]", "in2");
            infer_error!(
                op,
                "[2,3];[2,4];[2,4]",
                "Dimension 1 in both shapes must be equal, but are 4 and 3"
            );
            infer_error!(
                op,
                "[2,3];[];[]",
                "Shapes must be equal rank, but are 0 and 2"
            );
            infer_error!(
                op,
                "[2];[];[]",
                "Shapes must be equal rank, but are 0 and 1"
            );
            infer_error!(
                op,
                "[2,3,4];[2,3];[2,3]",
                "Shapes must be equal rank, but are 2 and 3"
            );
            // t and e must agree.
            infer_error!(
                op,
                "[];[2];[3]",
                "Dimension 0 in both shapes must be equal, but are 2 and 3"
            );
            infer_error!(
                op,
                "?;[2];[2,1]",
                "Shapes must be equal rank, but are 1 and 2"
            );
        }

        #[test]
        fn select_v2_shape_function() {
            let op = ShapeTestOp::new("SelectV2").attr("T", DataType::Float);
            infer_ok!(op, "[2,1];[1,3];[]", "[d0_0,d1_1]");
            infer_ok!(op, "[];[2,3];[2,3]", "[d1_0,d1_1]");
            infer_ok!(op, "[2,3];[3];[1]", "[d0_0,d0_1]");
            infer_ok!(op, "[4,1,1];[2,1];[3]", "[d0_0,d1_0,d2_0]");
            infer_ok!(op, "?;[2];[2]", "?");
            infer_ok!(op, "[2];?;[2]", "?");
            infer_ok!(op, "[?];[?];[?]", "[?]");
            infer_error!(
                op,
                "[2];[3];[2]",
                "Dimensions must be equal, but are 3 and 2"
            );
            infer_error!(
                op,
                "[4];[3];[3]",
                "Dimensions must be equal, but are 4 and 3"
            );
        }

        #[test]
        fn selects_merge_handle_data() {
            for name in ["Select", "SelectV2"] {
                let op = ShapeTestOp::new(name).attr("T", DataType::Resource);
                let c = infer_with_handles(
                    &op,
                    "[];[];[]",
                    &[
                        (1, &[("[2,?]", DataType::Float)]),
                        (2, &[("[?,3]", DataType::Float)]),
                    ],
                )
                .unwrap();
                assert_eq!(handle_dims(&c), vec![(Some(vec![2, 3]), DataType::Float)]);
                // Only one side known: nothing is set.
                let c = infer_with_handles(&op, "[];[];[]", &[(1, &[("[2]", DataType::Float)])])
                    .unwrap();
                assert!(c.output_handle_shapes_and_types(0).is_none());
                let e = infer_with_handles(
                    &op,
                    "[];[];[]",
                    &[
                        (1, &[("[2]", DataType::Float)]),
                        (2, &[("[2]", DataType::Double)]),
                    ],
                )
                .unwrap_err();
                assert_eq!(
                    e.message(),
                    "Trying to merge handles pointing to different dtypes."
                );
                let e = infer_with_handles(
                    &op,
                    "[];[];[]",
                    &[(1, &[("[2]", DataType::Float)]), (2, &[])],
                )
                .unwrap_err();
                assert_eq!(
                    e.message(),
                    "Trying to merge handles pointing to different numbers of tensors."
                );
                let e = infer_with_handles(
                    &op,
                    "[];[];[]",
                    &[
                        (1, &[("[2]", DataType::Float)]),
                        (2, &[("[3]", DataType::Float)]),
                    ],
                )
                .unwrap_err();
                assert!(
                    e.message()
                        .contains("Dimension 0 in both shapes must be equal"),
                    "{e}"
                );
            }
        }

        // ---- gradients ----

        type Builder = dyn Fn(&mut dyn Ops, &[Sym]) -> Result<Sym>;

        fn errors(f: &Builder, xs: &[(Vec<i64>, Vec<f64>)]) -> (f64, f64) {
            let x64: Vec<Tensor> = xs.iter().map(|(d, v)| t(d, v.clone())).collect();
            let x32: Vec<Tensor> = xs
                .iter()
                .map(|(d, v)| t(d, v.iter().map(|&x| x as f32).collect()))
                .collect();
            let j64 = compute_gradient(ctx(), f, &x64).unwrap();
            // The gradient reaches every input (a None would leave zeros).
            for (i, j) in j64.iter().enumerate() {
                assert!(
                    j.theoretical.iter().any(|&v| v != 0.0),
                    "input {i} gets no gradient"
                );
            }
            let e64 = compute_gradient_error(&j64);
            let e32 = compute_gradient_error(&compute_gradient(ctx(), f, &x32).unwrap());
            (e64, e32)
        }

        fn assert_gradient_ok(name: &str, f: &Builder, xs: &[(Vec<i64>, Vec<f64>)]) {
            let (e64, e32) = errors(f, xs);
            assert!(e64 < 1e-6, "{name}: float64 gradient error {e64}");
            assert!(e32 < 1e-3, "{name}: float32 gradient error {e32}");
        }

        const X: [f64; 6] = [1.3, 2.7, -0.6, 4.1, -3.2, 0.45];
        const Y: [f64; 6] = [0.7, -1.1, 1.9, 0.8, 1.45, -2.3];

        /// `(x, y)` pairs of shapes (and values) that broadcast: equal shapes,
        /// a vector against rows, a column, and a scalar `x`. The values keep
        /// away from ties (Maximum), zeros (Div) and integer ratios (FloorMod).
        fn shape_pairs(positive_x: bool) -> Vec<[(Vec<i64>, Vec<f64>); 2]> {
            let x: Vec<f64> = if positive_x {
                X.iter().map(|v| v.abs() + 0.2).collect()
            } else {
                X.to_vec()
            };
            vec![
                [(vec![2, 3], x.clone()), (vec![2, 3], Y.to_vec())],
                [(vec![2, 3], x.clone()), (vec![3], Y[..3].to_vec())],
                [(vec![2, 3], x.clone()), (vec![2, 1], vec![Y[0], Y[2]])],
                [(vec![], vec![x[0]]), (vec![2, 3], Y.to_vec())],
                [
                    (vec![2, 1], vec![x[0], x[1]]),
                    (vec![1, 3], Y[..3].to_vec()),
                ],
            ]
        }

        #[test]
        fn binary_gradients_match_numerical_ones() {
            for op in [
                "Add",
                "AddV2",
                "Sub",
                "Mul",
                "Div",
                "RealDiv",
                "Maximum",
                "Minimum",
                "Pow",
                "SquaredDifference",
                "FloorMod",
            ] {
                let f = move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0], xs[1]], &[]);
                for (k, pair) in shape_pairs(op == "Pow").iter().enumerate() {
                    assert_gradient_ok(&format!("{op} case {k}"), &f, pair);
                }
            }
        }

        fn grads2(op: &str, x: Tensor, y: Tensor) -> Vec<Option<Tensor>> {
            let mut tape = GradientTape::new(ctx(), false);
            let (xs, ys) = (tape.watch(x), tape.watch(y));
            let z = tape.op1(op, &[xs, ys], &[]).unwrap();
            tape.gradient_tensors(z, &[xs, ys]).unwrap()
        }

        #[test]
        fn binary_gradients_against_hand_values() {
            // Mul broadcast over rows: gy sums x over the rows.
            let x = t(&[2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
            let y = t(&[3], vec![10.0f64, 20.0, 30.0]);
            let g = grads2("Mul", x.clone(), y.clone());
            assert_close(
                g[0].as_ref().unwrap(),
                &[2, 3],
                &[10.0, 20.0, 30.0, 10.0, 20.0, 30.0],
                0.0,
            );
            assert_close(g[1].as_ref().unwrap(), &[3], &[5.0, 7.0, 9.0], 0.0);
            let g = grads2("Sub", x.clone(), y.clone());
            assert_close(g[0].as_ref().unwrap(), &[2, 3], &[1.0; 6], 0.0);
            assert_close(g[1].as_ref().unwrap(), &[3], &[-2.0, -2.0, -2.0], 0.0);
            // RealDiv: 1/y and -x/y^2.
            let g = grads2(
                "RealDiv",
                t(&[2], vec![3.0f64, -1.0]),
                t(&[2], vec![2.0f64, 4.0]),
            );
            assert_close(g[0].as_ref().unwrap(), &[2], &[0.5, 0.25], 1e-15);
            assert_close(g[1].as_ref().unwrap(), &[2], &[-0.75, 0.0625], 1e-15);
            // Maximum: ties go to x; Minimum likewise.
            let (a, b) = (
                t(&[3], vec![1.0f64, 2.0, 5.0]),
                t(&[3], vec![1.0f64, 3.0, 4.0]),
            );
            let g = grads2("Maximum", a.clone(), b.clone());
            assert_close(g[0].as_ref().unwrap(), &[3], &[1.0, 0.0, 1.0], 0.0);
            assert_close(g[1].as_ref().unwrap(), &[3], &[0.0, 1.0, 0.0], 0.0);
            let g = grads2("Minimum", a, b);
            assert_close(g[0].as_ref().unwrap(), &[3], &[1.0, 1.0, 0.0], 0.0);
            assert_close(g[1].as_ref().unwrap(), &[3], &[0.0, 0.0, 1.0], 0.0);
            // Pow: no false singularity at x = 0, and 0 for log(x) where x < 0.
            let g = grads2(
                "Pow",
                t(&[3], vec![0.0f64, 2.0, -2.0]),
                t(&[3], vec![2.0f64, 3.0, 2.0]),
            );
            assert_close(g[0].as_ref().unwrap(), &[3], &[0.0, 12.0, -4.0], 1e-12);
            assert_close(
                g[1].as_ref().unwrap(),
                &[3],
                &[0.0, 8.0 * 2f64.ln(), 0.0],
                1e-12,
            );
            // SquaredDifference: 2 (x - y) and -2 (x - y), y's reduced.
            let g = grads2("SquaredDifference", x.clone(), t(&[], vec![2.0f64]));
            assert_close(
                g[0].as_ref().unwrap(),
                &[2, 3],
                &[-2.0, 0.0, 2.0, 4.0, 6.0, 8.0],
                0.0,
            );
            assert_close(g[1].as_ref().unwrap(), &[], &[-18.0], 0.0);
            // FloorMod: 1 and -floor(x / y).
            let g = grads2(
                "FloorMod",
                t(&[2], vec![7.5f64, -7.5]),
                t(&[2], vec![2.0f64, 2.0]),
            );
            assert_close(g[0].as_ref().unwrap(), &[2], &[1.0, 1.0], 0.0);
            assert_close(g[1].as_ref().unwrap(), &[2], &[-3.0, 4.0], 0.0);
            // FloorDiv: no gradient (TensorFlow's None, None).
            let g = grads2(
                "FloorDiv",
                t(&[2], vec![7.5f64, -7.5]),
                t(&[2], vec![2.0f64, 2.0]),
            );
            assert!(g[0].is_none() && g[1].is_none());
            // float32 through Add with broadcasting.
            let g = grads2(
                "AddV2",
                t(&[2, 2], vec![1.0f32; 4]),
                t(&[2, 1], vec![1.0f32; 2]),
            );
            assert_close(g[1].as_ref().unwrap(), &[2, 1], &[2.0, 2.0], 0.0);
        }

        #[test]
        fn add_n_gradients() {
            let f = |o: &mut dyn Ops, xs: &[Sym]| {
                let out = o.call(
                    "AddN",
                    &[SymArg::List(vec![xs[0], xs[1], xs[0]])],
                    &Default::default(),
                )?;
                o.mul(out[0], xs[1])
            };
            assert_gradient_ok(
                "AddN",
                &f,
                &[(vec![2, 3], X.to_vec()), (vec![2, 3], Y.to_vec())],
            );
            let mut tape = GradientTape::new(ctx(), false);
            let (a, b) = (
                tape.watch(t(&[2], vec![1.0f64, 2.0])),
                tape.watch(t(&[2], vec![3.0f64, 4.0])),
            );
            let s = tape.add_n(&[a, b, a]).unwrap();
            let g = tape.gradient_tensors(s, &[a, b]).unwrap();
            assert_close(g[0].as_ref().unwrap(), &[2], &[2.0, 2.0], 0.0);
            assert_close(g[1].as_ref().unwrap(), &[2], &[1.0, 1.0], 0.0);
        }

        #[test]
        fn select_gradients() {
            // Select with a condition of t's shape, and with a vector of rows.
            for (cond_dims, cond) in [
                (vec![2, 3], vec![true, false, true, false, false, true]),
                (vec![2], vec![false, true]),
                (vec![], vec![true]),
            ] {
                let c = t(&cond_dims, cond.clone());
                let f = move |o: &mut dyn Ops, xs: &[Sym]| {
                    let c = o.constant(c.clone())?;
                    o.op1("Select", &[c, xs[0], xs[1]], &[])
                };
                let pair = [(vec![2, 3], X.to_vec()), (vec![2, 3], Y.to_vec())];
                if cond.iter().all(|&b| b) {
                    // e gets no gradient at all: check t only.
                    let jac = compute_gradient(
                        ctx(),
                        &f,
                        &[t(&[2, 3], X.to_vec()), t(&[2, 3], Y.to_vec())],
                    )
                    .unwrap();
                    assert!(compute_gradient_error(&jac) < 1e-6);
                    assert!(jac[1].theoretical.iter().all(|&v| v == 0.0));
                } else {
                    assert_gradient_ok("Select", &f, &pair);
                }
            }
            // SelectV2 with broadcasting among all three.
            let c = t(&[2, 1], vec![true, false]);
            let f = move |o: &mut dyn Ops, xs: &[Sym]| {
                let c = o.constant(c.clone())?;
                o.op1("SelectV2", &[c, xs[0], xs[1]], &[])
            };
            assert_gradient_ok(
                "SelectV2 [2,1] [3] []",
                &f,
                &[(vec![3], X[..3].to_vec()), (vec![], vec![Y[0]])],
            );
            assert_gradient_ok(
                "SelectV2 [2,1] [2,3] [1,3]",
                &f,
                &[(vec![2, 3], X.to_vec()), (vec![1, 3], Y[..3].to_vec())],
            );
            // Hand values: t [3] gets the rows where the condition holds.
            let mut tape = GradientTape::new(ctx(), false);
            let cond = tape.constant(t(&[2, 1], vec![true, false])).unwrap();
            let (a, b) = (
                tape.watch(t(&[3], vec![1.0f64, 2.0, 3.0])),
                tape.watch(t(&[], vec![5.0f64])),
            );
            let z = tape.op1("SelectV2", &[cond, a, b], &[]).unwrap();
            let g = tape.gradient_tensors(z, &[cond, a, b]).unwrap();
            assert!(g[0].is_none());
            assert_close(g[1].as_ref().unwrap(), &[3], &[1.0, 1.0, 1.0], 0.0);
            assert_close(g[2].as_ref().unwrap(), &[], &[3.0], 0.0);
        }

        #[test]
        fn comparisons_and_logical_ops_are_not_differentiable() {
            let r = GradientRegistry::global();
            for op in [
                "Less",
                "LessEqual",
                "Greater",
                "GreaterEqual",
                "Equal",
                "NotEqual",
                "LogicalAnd",
                "LogicalOr",
                "LogicalNot",
            ] {
                assert!(
                    matches!(r.get(op), Some(Gradient::NotDifferentiable)),
                    "{op}"
                );
            }
            // Gradients flow around them: d/dx select(x > 0, x, -x) = sign(x).
            let f = |o: &mut dyn Ops, xs: &[Sym]| {
                let zero = o.scalar(o.dtype(xs[0]), 0.0)?;
                let c = o.op1("Greater", &[xs[0], zero], &[])?;
                let minus = o.neg(xs[0])?;
                o.op1("Select", &[c, xs[0], minus], &[])
            };
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[3], vec![-2.0f64, 0.5, 3.0]));
            let y = f(&mut tape, &[x]).unwrap();
            let g = tape.gradient_tensors(y, &[x]).unwrap();
            assert_close(g[0].as_ref().unwrap(), &[3], &[-1.0, 1.0, 1.0], 0.0);
        }

        #[test]
        fn second_derivatives_of_mul() {
            // As TensorFlow's array_grad.py (registered here when missing):
            // no gradient flows through the default seed `OnesLike(y)`.
            let r = GradientRegistry::global();
            if r.get("OnesLike").is_none() {
                r.register("OnesLike", Gradient::NotDifferentiable);
            }
            // f = x * x * y: df/dx = 2xy, d2f/dx2 = 2y, d2f/dxdy = 2x.
            let (xv, yv) = ([1.5f64, -2.0, 0.25], [3.0f64, 0.5, -4.0]);
            let mut tape = GradientTape::new(ctx(), true);
            let x = tape.watch(t(&[3], xv.to_vec()));
            let y = tape.watch(t(&[3], yv.to_vec()));
            let xx = tape.mul(x, x).unwrap();
            let f = tape.mul(xx, y).unwrap();
            let g = tape.gradient(f, &[x, y]).unwrap();
            let (gx, gy) = (g[0].unwrap(), g[1].unwrap());
            let v = |tape: &GradientTape<'_>, s: Sym| tape.value(s).flat::<f64>().unwrap().to_vec();
            for i in 0..3 {
                assert_eq!(v(&tape, gx)[i], 2.0 * xv[i] * yv[i]);
                assert_eq!(v(&tape, gy)[i], xv[i] * xv[i]);
            }
            let gg = tape.gradient(gx, &[x, y]).unwrap();
            let (gxx, gxy) = (v(&tape, gg[0].unwrap()), v(&tape, gg[1].unwrap()));
            let gg = tape.gradient(gy, &[x, y]).unwrap();
            let gyx = v(&tape, gg[0].unwrap());
            assert!(
                gg[1].is_none(),
                "d2f/dy2 = 0: y^1 has no second derivative path"
            );
            for i in 0..3 {
                assert_eq!(gxx[i], 2.0 * yv[i]);
                assert_eq!(gxy[i], 2.0 * xv[i]);
                assert_eq!(gyx[i], 2.0 * xv[i]);
            }
        }

        /// TensorFlow's tape tracks every value computed from a watched one,
        /// so intermediate results can be sources ("gradients with respect
        /// to intermediate results"). Before the fix in `tape.rs`, only
        /// explicitly watched values were, and this gave `None`.
        #[test]
        fn tape_gradients_with_respect_to_intermediate_values() {
            let mut tape = GradientTape::new(ctx(), true);
            let x = tape.watch(t(&[], vec![3.0f64]));
            let y = tape.mul(x, x).unwrap();
            let z = tape.mul(y, y).unwrap();
            let g = tape.gradient_tensors(z, &[y, x]).unwrap();
            assert_close(g[0].as_ref().unwrap(), &[], &[18.0], 0.0); // dz/dy = 2y
            assert_close(g[1].as_ref().unwrap(), &[], &[108.0], 0.0); // dz/dx = 4x^3
                                                                      // Values computed from unwatched ones only are not tracked.
            let c = tape.constant(t(&[], vec![2.0f64])).unwrap();
            let c2 = tape.mul(c, c).unwrap();
            let w = tape.mul(c2, z).unwrap();
            assert_eq!(tape.gradient(w, &[c2, c]).unwrap(), vec![None, None]);
            assert!(tape.gradient(w, &[z]).unwrap()[0].is_some());
        }

        fn placeholder(g: &mut Graph, name: &str, dims: Option<&[i64]>) -> Output {
            let mut spec = NodeSpec::new("Placeholder", name).attr("dtype", DataType::Double);
            if let Some(d) = dims {
                spec = spec.attr("shape", TensorShape::new(d).unwrap().to_proto());
            }
            Output::new(g.add(spec).unwrap(), 0)
        }

        fn node(g: &mut Graph, op: &str, name: &str, ins: &[Output]) -> Output {
            let mut spec = NodeSpec::new(op, name);
            for &i in ins {
                spec = spec.input(i);
            }
            Output::new(g.add(spec).unwrap(), 0)
        }

        /// The same computation, as graph ops and through [`Ops`] on a tape.
        fn computation(o: &mut dyn Ops, x: Sym, w: Sym, b: Sym) -> Result<Sym> {
            let xw = o.mul(x, w)?;
            let h = o.op1("Tanh", &[xw], &[])?;
            let hb = o.add(h, b)?;
            let k = o.op1("Sigmoid", &[hb], &[])?;
            let kh = o.mul(k, h)?;
            let sd = o.op1("SquaredDifference", &[x, b], &[])?;
            let mx = o.op1("Maximum", &[x, w], &[])?;
            let q = o.div(mx, w)?;
            let out = o.call(
                "AddN",
                &[SymArg::List(vec![kh, sd, q])],
                &Default::default(),
            )?;
            Ok(out[0])
        }

        #[test]
        fn graph_gradients_match_the_gradient_tape() {
            let xv = t(&[2, 3], X.to_vec());
            let wv = t(&[3], Y[..3].to_vec());
            let bv = t(&[2, 1], vec![0.3f64, -0.8]);
            // Graph: x and w with static shapes, b of unknown shape (the
            // reductions then go through BroadcastGradientArgs at run time).
            let mut g = Graph::new();
            let x = placeholder(&mut g, "x", Some(&[2, 3]));
            let w = placeholder(&mut g, "w", Some(&[3]));
            let b = placeholder(&mut g, "b", None);
            let xw = node(&mut g, "Mul", "xw", &[x, w]);
            let h = node(&mut g, "Tanh", "h", &[xw]);
            let hb = node(&mut g, "AddV2", "hb", &[h, b]);
            let k = node(&mut g, "Sigmoid", "k", &[hb]);
            let kh = node(&mut g, "Mul", "kh", &[k, h]);
            let sd = node(&mut g, "SquaredDifference", "sd", &[x, b]);
            let mx = node(&mut g, "Maximum", "mx", &[x, w]);
            let q = node(&mut g, "RealDiv", "q", &[mx, w]);
            let y = Output::new(
                g.add(NodeSpec::new("AddN", "y").input_list(vec![kh, sd, q]))
                    .unwrap(),
                0,
            );
            // b's unknown shape makes kh's unknown; AddN merges it with q's.
            assert_eq!(g.output_shape(kh), None);
            assert_eq!(g.output_shape(y), Some(&[2, 3][..]));
            assert_eq!(g.output_shape(q), Some(&[2, 3][..]));
            let grads = gradients(&mut g, &[y], &[x, w, b], None).unwrap();
            let fetch: Vec<Output> = grads.iter().map(|o| o.unwrap()).collect();
            let sess = Session::new(g).unwrap();
            let got = sess
                .run(
                    vec![(x, xv.clone()), (w, wv.clone()), (b, bv.clone())],
                    &fetch,
                    &[],
                )
                .unwrap();
            // Tape.
            let mut tape = GradientTape::new(ctx(), false);
            let (xs, ws, bs) = (tape.watch(xv), tape.watch(wv), tape.watch(bv));
            let ys = computation(&mut tape, xs, ws, bs).unwrap();
            let want = tape.gradient_tensors(ys, &[xs, ws, bs]).unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let w = w.as_ref().unwrap();
                assert_eq!(g.dims(), w.dims(), "gradient {i}");
                let wv: Vec<f64> = w.flat::<f64>().unwrap().to_vec();
                assert_close(g, w.dims(), &wv, 1e-12);
            }
        }
    }
}
