//! The binary kernel and the registrations of the broadcasting binary ops and comparisons.

use super::functions::*;
use super::*;

// The binary kernel
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BinOp {
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
pub(super) struct BinaryKernel {
    op: BinOp,
    /// `Equal`/`NotEqual` only: when false, inputs whose shapes do not
    /// broadcast give a scalar `false` (`Equal`) or `true` (`NotEqual`).
    incompatible_shape_error: bool,
    /// The output requests it handles: `InPlace` for the ops whose output
    /// has the inputs' dtype (`binary_same` forwards an input it is
    /// offered), `Add` for numeric `Add`/`AddV2`/`Sub`/`Mul`.
    support: RequestSupport,
}

impl BinOp {
    /// Whether the output has the inputs' dtype (computed by `binary_same`).
    fn same_type(self) -> bool {
        use BinOp::*;
        !matches!(
            self,
            Equal | NotEqual | Less | LessEqual | Greater | GreaterEqual
        )
    }
}

/// The (input, output) pairs of an elementwise binary op that may share a
/// buffer (`FInplaceOption`): either input with the output.
pub(super) fn inplace_either(_: &opforge_core::attrs::AttrMap) -> Vec<(usize, usize)> {
    vec![(0, 0), (1, 0)]
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
            let dt = ctx.input_types().first().map(|d| d.base());
            let numeric = dt.is_some_and(|d| d != DataType::String);
            let mut support = RequestSupport::WRITE_ONLY;
            if op.same_type() && numeric {
                support = support | RequestSupport::INPLACE;
            }
            if matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul)
                && dt.is_some_and(|d| NUMERIC_KERNEL_TYPES.contains(&d))
            {
                support = support | RequestSupport::ADD;
            }
            Ok(Box::new(BinaryKernel {
                op,
                incompatible_shape_error,
                support,
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
        // `==` of integers compares bits: one kernel per integer size.
        opforge_ops_base::sign_agnostic!(numeric_bool_types, dt,
            T => equal_elements::<T>(ctx, equal), Err(unsupported(ctx, dt)))
    }
}

/// `x == y` (or `x != y`) element-wise, with broadcasting.
fn equal_elements<T: Element>(ctx: &mut OpKernelContext<'_>, equal: bool) -> Result<()> {
    if equal {
        binary_map::<T, bool>(ctx, COST_CHEAP, |x: T, y: T| x == y)
    } else {
        binary_map::<T, bool>(ctx, COST_CHEAP, |x: T, y: T| x != y)
    }
}

impl OpKernel for BinaryKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        use BinOp::*;
        let dt = ctx.input_dtype(0);
        let bad = |ctx: &OpKernelContext<'_>| Err(unsupported(ctx, dt));
        if ctx.output_request(0) == OutputRequest::Add {
            // Asked only when `support` has ADD: numeric Add/Sub/Mul.
            return match self.op {
                Add => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                    T => binary_same_add::<T>(ctx, COST_CHEAP, T::add), bad(ctx)),
                Sub => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                    T => binary_same_add::<T>(ctx, COST_CHEAP, T::sub), bad(ctx)),
                Mul => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                    T => binary_same_add::<T>(ctx, COST_CHEAP, T::mul), bad(ctx)),
                _ => bad(ctx),
            };
        }
        match self.op {
            Add if dt == DataType::String => string_concat(ctx),
            // Wrapping `+`, `-`, `*` give the same bits for either
            // signedness: one kernel per integer size.
            Add => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                T => binary_same::<T>(ctx, COST_CHEAP, T::add), bad(ctx)),
            Sub => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                T => binary_same::<T>(ctx, COST_CHEAP, T::sub), bad(ctx)),
            Mul => opforge_ops_base::sign_agnostic!(numeric_types, dt,
                T => binary_same::<T>(ctx, COST_CHEAP, T::mul), bad(ctx)),
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

    fn supported_requests(&self) -> RequestSupport {
        self.support
    }
}

/// Registers `x: T, y: T -> z: T` with TensorFlow's allowed types
/// `$types` (and op flags), and the kernel for the dtypes `[$k]`.
macro_rules! binary_op {
    ($name:literal, $op:ident, [$($k:ident),* $(,)?] $(no_kernel [$($x:ident),*])? $(, $flag:ident)* ; $doc:literal) => {
        register_op!(OpDefBuilder::new($name)
            .input("x: T")
            .input("y: T")
            .output("z: T")
            .attr(concat!("T: {", opforge_ops_base::tf_type_list!($($k,)* $($($x),*)?), "}"))
            $(.$flag())*
            .set_shape_fn(broadcast_binary_op_shape)
            .set_attr::<FInplaceOption>(std::sync::Arc::new(inplace_either))
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
    [BFloat16, Half, Float, Double, UInt8, Int8, Int16, Int32, Int64, Complex64, Complex128, String];
    "Returns x + y element-wise.\n\n*NOTE*: `Add` supports broadcasting. `AddN` does not. Strings are concatenated."
);
binary_op!(
    "AddV2",
    Add,
    [BFloat16, Half, Float, Double, UInt8, UInt16, UInt32, UInt64, Int8, Int16, Int32, Int64, Complex64, Complex128],
    aggregate, commutative;
    "Returns x + y element-wise.\n\n*NOTE*: `Add` supports broadcasting. `AddN` does not."
);
binary_op!(
    "Sub",
    Sub,
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, Int64, Complex64, Complex128, UInt32, UInt64];
    "Returns x - y element-wise.\n\n*NOTE*: `Sub` supports broadcasting."
);
binary_op!(
    "Mul",
    Mul,
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, UInt32, UInt64, Int64, Complex64, Complex128],
    commutative;
    "Returns x * y element-wise.\n\n*NOTE*: `Mul` supports broadcasting."
);
binary_op!(
    "Div",
    Div,
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, UInt32, UInt64, Int64, Complex64, Complex128];
    "Returns x / y element-wise.\n\n*NOTE*: `Div` supports broadcasting. Integer division truncates toward zero."
);
binary_op!(
    "RealDiv",
    Div,
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, UInt32, UInt64, Int64, Complex64, Complex128];
    "Returns x / y element-wise for real types.\n\nIf `x` and `y` are reals, this will return the floating-point division.\n\n*NOTE*: `Div` supports broadcasting."
);
binary_op!(
    "FloorDiv",
    FloorDiv,
    [BFloat16, Half, Float, Double, UInt8, Int8, UInt16, Int16, Int32, UInt32, UInt64, Int64] no_kernel [Complex64, Complex128];
    "Returns x // y element-wise.\n\n*NOTE*: `FloorDiv` supports broadcasting."
);
binary_op!(
    "FloorMod",
    FloorMod,
    [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, BFloat16, Half, Float, Double];
    "Returns element-wise remainder of division.\n\nThis follows Python semantics in that the result here is consistent with a\nflooring divide. E.g. `floor(x / y) * y + floormod(x, y) = x`, regardless\nof the signs of x and y.\n\n*NOTE*: `FloorMod` supports broadcasting."
);
binary_op!(
    "Maximum",
    Maximum,
    [BFloat16, Half, Float, Double, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64];
    "Returns the max of x and y (i.e. x > y ? x : y) element-wise.\n\n*NOTE*: `Maximum` supports broadcasting. NaN propagates."
);
binary_op!(
    "Minimum",
    Minimum,
    [BFloat16, Half, Float, Double, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64];
    "Returns the min of x and y (i.e. x < y ? x : y) element-wise.\n\n*NOTE*: `Minimum` supports broadcasting. NaN propagates."
);
binary_op!(
    "Pow",
    Pow,
    [BFloat16, Float, Half, Double, Int8, Int16, Int32, Int64, Complex64, Complex128];
    "Computes the power of one value to another.\n\nGiven a tensor `x` and a tensor `y`, this operation computes \\(x^y\\) for\ncorresponding elements in `x` and `y`."
);
binary_op!(
    "SquaredDifference",
    SquaredDifference,
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
            KernelDefBuilder::new($name).type_constraint_list("T", &value_types()),
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
