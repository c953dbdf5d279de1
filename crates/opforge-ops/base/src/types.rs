//! Dtype lists for kernel registrations and the dispatch macros over dtype
//! families.

use opforge_core::kernel::OpKernelContext;
use opforge_core::{DataType, Element, Status};

/// TensorFlow's `TF_CALL_POD_TYPES` (every number type, real and complex,
/// and bool), then string: the types of kernels that only move elements.
pub const POD_STRING_TYPES: &[DataType] = &[
    DataType::Float,
    DataType::Double,
    DataType::Int32,
    DataType::UInt8,
    DataType::Int16,
    DataType::Int8,
    DataType::Complex64,
    DataType::Int64,
    DataType::Bool,
    DataType::BFloat16,
    DataType::UInt16,
    DataType::Complex128,
    DataType::Half,
    DataType::UInt32,
    DataType::UInt64,
    DataType::String,
];

/// TensorFlow's `TF_CALL_POD_TYPES`: every number type (real and complex) and bool.
pub const POD_TYPES: &[DataType] = POD_STRING_TYPES.split_at(POD_STRING_TYPES.len() - 1).0;

/// The types of several lists, in order (for registrations).
pub fn types(lists: &[&[DataType]]) -> Vec<DataType> {
    lists.iter().flat_map(|l| l.iter().copied()).collect()
}

/// TensorFlow's `TF_CALL_ALL_TYPES` as far as tensors can hold them: the POD
/// types, string and resource (variant tensors do not exist yet).
pub fn all_types() -> Vec<DataType> {
    types(&[POD_TYPES, &[DataType::String, DataType::Resource]])
}

/// The quantized types (`TF_CALL_QUANTIZED_TYPES` plus qint16/quint16).
pub const QUANTIZED: &[DataType] = opforge_core::dtype::QUANTIZED_TYPES;

/// The index dtypes: int32 and int64.
pub const INDEX_TYPES: &[DataType] = &[DataType::Int32, DataType::Int64];

/// The error for a dtype a kernel was registered for but cannot run
/// (a registration bug, so `Internal`).
pub fn unsupported(ctx: &OpKernelContext<'_>, dt: DataType) -> Status {
    Status::internal(format!(
        "{} has no CPU implementation for dtype {dt}",
        ctx.op_def().name
    ))
}

//

// ---------------------------------------------------------------------------
// Dtype tables: one list of `DataType` variants gives the spec type list,
// the kernel constraint list and the dispatch arms, so they cannot disagree.
// ---------------------------------------------------------------------------

/// The TensorFlow spec name of a `DataType` variant (`BFloat16` ->
/// `"bfloat16"`), as a literal for `concat!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __tf_type_name {
    (Float) => {
        "float"
    };
    (Double) => {
        "double"
    };
    (Half) => {
        "half"
    };
    (BFloat16) => {
        "bfloat16"
    };
    (Int8) => {
        "int8"
    };
    (Int16) => {
        "int16"
    };
    (Int32) => {
        "int32"
    };
    (Int64) => {
        "int64"
    };
    (UInt8) => {
        "uint8"
    };
    (UInt16) => {
        "uint16"
    };
    (UInt32) => {
        "uint32"
    };
    (UInt64) => {
        "uint64"
    };
    (Complex64) => {
        "complex64"
    };
    (Complex128) => {
        "complex128"
    };
    (Bool) => {
        "bool"
    };
    (String) => {
        "string"
    };
    (QInt8) => {
        "qint8"
    };
    (QUInt8) => {
        "quint8"
    };
    (QInt16) => {
        "qint16"
    };
    (QUInt16) => {
        "quint16"
    };
    (QInt32) => {
        "qint32"
    };
    (Resource) => {
        "resource"
    };
    (Variant) => {
        "variant"
    };
}

/// The spec type list of `DataType` variants, in their order, as a string
/// literal: `tf_type_list!(Half, Float)` is `"half, float"`, for
/// `concat!("T: {", tf_type_list!(...), "}")`.
///
/// ```
/// assert_eq!(opforge_ops_base::tf_type_list!(BFloat16, Int64, Complex64), "bfloat16, int64, complex64");
/// ```
#[macro_export]
macro_rules! tf_type_list {
    ($first:ident $(, $rest:ident)* $(,)?) => {
        concat!($crate::__tf_type_name!($first) $(, ", ", $crate::__tf_type_name!($rest))*)
    };
}

/// A dtype table: from ONE list of `DataType` variants, a `&[DataType]`
/// constant (kernel type constraints), a spec-string constant (the OpDef
/// attr's allowed types, in the same order) and, when named, a dispatch
/// macro over exactly these types, so the three cannot disagree.
///
/// ```
/// opforge_ops_base::dtype_table! {
///     /// The float types of an example.
///     EXAMPLE_FLOATS, EXAMPLE_FLOATS_SPEC, example_floats => [Half, Float, Double]
/// }
/// assert_eq!(EXAMPLE_FLOATS_SPEC, "half, float, double");
/// assert_eq!(EXAMPLE_FLOATS.len(), 3);
/// let size = example_floats!(opforge_core::DataType::Double, T => std::mem::size_of::<T>(), 0);
/// assert_eq!(size, 8);
/// ```
///
/// TensorFlow lists the same set of types in different orders for
/// different ops (`Softmax`: `half, bfloat16, float, double`; `Diag`:
/// `bfloat16, half, float, double`), and an OpDef must keep its op's
/// order. So a table also gives the spec of an op in TensorFlow's order:
/// `SPEC = TABLE in [...]` checks at compile time that the list is exactly
/// the table's types, and `SPEC = TABLE, no_kernel [...] in [...]` that it
/// is the table's types and the listed ones, which the op allows but has no
/// kernel for (the kernel registers `TABLE`):
///
/// ```
/// use opforge_ops_base::types::FLOAT_TYPES;
/// opforge_ops_base::dtype_table! {
///     /// `Softmax`'s `T`.
///     SOFTMAX_SPEC = FLOAT_TYPES in [Half, BFloat16, Float, Double]
/// }
/// assert_eq!(SOFTMAX_SPEC, "half, bfloat16, float, double");
/// opforge_ops_base::dtype_table! {
///     /// An op that allows `bool` without a kernel for it.
///     WITH_BOOL_SPEC = FLOAT_TYPES, no_kernel [Bool] in [Bool, Half, BFloat16, Float, Double]
/// }
/// assert_eq!(WITH_BOOL_SPEC, "bool, half, bfloat16, float, double");
/// ```
///
/// ```compile_fail
/// use opforge_ops_base::types::FLOAT_TYPES;
/// opforge_ops_base::dtype_table! {
///     /// Not the table's types: `double` is missing.
///     BAD_SPEC = FLOAT_TYPES in [Half, BFloat16, Float]
/// }
/// ```
#[macro_export]
macro_rules! dtype_table {
    ($(#[$doc:meta])* $list:ident, $spec:ident, $mac:ident => [$($dt:ident),+ $(,)?]) => {
        $crate::dtype_table!(@table [] $(#[$doc])* $list, $spec, $mac => [$($dt),+]);
    };
    ($(#[$doc:meta])* export $list:ident, $spec:ident, $mac:ident => [$($dt:ident),+ $(,)?]) => {
        $crate::dtype_table!(@table [#[macro_export]] $(#[$doc])* $list, $spec, $mac => [$($dt),+]);
    };
    ($(#[$doc:meta])* $list:ident, $spec:ident => [$($dt:ident),+ $(,)?]) => {
        $(#[$doc])*
        pub const $list: &[opforge_core::DataType] = &[$(opforge_core::DataType::$dt),+];
        $(#[$doc])*
        ///
        /// (The spec type list: the same types, as an OpDef attr lists them.)
        pub const $spec: &str = $crate::tf_type_list!($($dt),+);
    };
    ($(#[$doc:meta])* $spec:ident = $table:ident $(, no_kernel [$($x:ident),+ $(,)?])? in [$($dt:ident),+ $(,)?]) => {
        $(#[$doc])*
        pub const $spec: &str = $crate::tf_type_list!($($dt),+);
        const _: () = assert!(
            $crate::types::same_types(
                &[$(opforge_core::DataType::$dt),+],
                $table,
                &[$($(opforge_core::DataType::$x),+)?],
            ),
            concat!(
                stringify!($spec),
                ": the types must be exactly those of ",
                stringify!($table),
                " and of its no_kernel list, each once"
            )
        );
    };
    (@table [$($export:tt)*] $(#[$doc:meta])* $list:ident, $spec:ident, $mac:ident => [$($dt:ident),+]) => {
        $crate::dtype_table!($(#[$doc])* $list, $spec => [$($dt),+]);
        $(#[$doc])*
        ///
        /// (Dispatch: `$mac!(dtype, T => body, fallback)` runs `body` with
        /// `T` bound to the element type of `dtype`.)
        $($export)*
        #[allow(unused_macros)]
        macro_rules! $mac {
            ($d:expr, $T:ident => $body:expr, $fallback:expr) => {
                opforge_core::dispatch!($d, $T => $body, [$($dt),+], $fallback)
            };
        }
    };
}

/// Dispatches like a dtype table's macro `$mac` (in scope where this is
/// used), but binds each unsigned
/// integer dtype to the signed integer of its size ([`SignAgnostic`]): for
/// kernels whose arithmetic gives the same bits for either signedness
/// (wrapping `+`, `-`, `*`, `==`) and that read their tensors with
/// `Tensor::flat_bits`, so that they compile once per integer size instead
/// of once per dtype. The body should be a call of a generic function (a
/// closure written in the body is a new type in every arm).
///
/// ```
/// use opforge_core::{DataType, Element};
/// fn dtype_of<T: Element>() -> Option<DataType> {
///     Some(T::DTYPE)
/// }
/// use opforge_ops_base::numeric_types;
/// let bound = |dt: DataType| {
///     opforge_ops_base::sign_agnostic!(numeric_types, dt, T => dtype_of::<T>(), None)
/// };
/// assert_eq!(bound(DataType::UInt32), Some(DataType::Int32));
/// assert_eq!(bound(DataType::Float), Some(DataType::Float));
/// assert_eq!(bound(DataType::Bool), None);
/// ```
#[macro_export]
macro_rules! sign_agnostic {
    ($mac:ident, $dt:expr, $T:ident => $body:expr, $fallback:expr) => {
        $mac!($dt, __Element => {
            #[allow(dead_code)]
            type $T = <__Element as $crate::types::SignAgnostic>::Bits;
            $body
        }, $fallback)
    };
}

/// The element type a sign-agnostic kernel computes with
/// ([`sign_agnostic!`]): the signed integer of an unsigned integer's size,
/// every other element type itself.
pub trait SignAgnostic: Element {
    /// The type whose bits are computed with.
    type Bits: Element;
}

macro_rules! sign_agnostic_impls {
    ($($t:ty => $bits:ty),* $(,)?) => {
        $(impl SignAgnostic for $t {
            type Bits = $bits;
        })*
    };
}

sign_agnostic_impls! {
    u8 => i8, u16 => i16, u32 => i32, u64 => i64,
    i8 => i8, i16 => i16, i32 => i32, i64 => i64,
    f32 => f32, f64 => f64, half::f16 => half::f16, half::bf16 => half::bf16,
    num_complex::Complex<f32> => num_complex::Complex<f32>,
    num_complex::Complex<f64> => num_complex::Complex<f64>,
    bool => bool,
}

const fn contains(types: &[DataType], t: DataType) -> bool {
    let mut i = 0;
    while i < types.len() {
        if types[i] as i32 == t as i32 {
            return true;
        }
        i += 1;
    }
    false
}

const fn distinct(types: &[DataType]) -> bool {
    let mut i = 0;
    while i < types.len() {
        let (_, rest) = types.split_at(i + 1);
        if contains(rest, types[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `order` lists each type of `table` and of `extra` exactly once
/// and nothing else (`table` and `extra` sharing no type): the check of
/// [`dtype_table!`]'s `SPEC = TABLE, no_kernel [...] in [...]` form.
pub const fn same_types(order: &[DataType], table: &[DataType], extra: &[DataType]) -> bool {
    if order.len() != table.len() + extra.len()
        || !distinct(order)
        || !distinct(table)
        || !distinct(extra)
    {
        return false;
    }
    let mut i = 0;
    while i < extra.len() {
        if contains(table, extra[i]) {
            return false;
        }
        i += 1;
    }
    let mut i = 0;
    while i < order.len() {
        if !contains(table, order[i]) && !contains(extra, order[i]) {
            return false;
        }
        i += 1;
    }
    true
}

dtype_table! {
    /// Every numeric dtype with an element type: the floats (incl. half and
    /// bfloat16), all signed and unsigned ints, and both complex types.
    /// Kernels registered for "all number types" use this table.
    export NUMERIC_KERNEL_TYPES, NUMERIC_SPEC, numeric_types => [
        Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
        Complex64, Complex128
    ]
}

dtype_table! {
    /// Every numeric dtype and bool: the types whose elements compare with
    /// `==` (`Equal`, `NotEqual`) and that `Select` picks between, which add
    /// string (compared and moved without an element type).
    export NUMERIC_BOOL_TYPES, NUMERIC_BOOL_SPEC, numeric_bool_types => [
        Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
        Complex64, Complex128, Bool
    ]
}

dtype_table! {
    /// The real (ordered) numeric dtypes: every numeric dtype but the complex
    /// ones.
    export REAL_KERNEL_TYPES, REAL_SPEC, real_types => [
        Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
    ]
}

dtype_table! {
    /// The real floating types (`float`, `double`, `half`, `bfloat16`).
    export FLOAT_TYPES, FLOAT_SPEC, float_types => [Float, Double, Half, BFloat16]
}

dtype_table! {
    /// The real floating and complex types.
    export FLOAT_COMPLEX_TYPES, FLOAT_COMPLEX_SPEC, float_complex_types => [Float, Double, Half, BFloat16, Complex64, Complex128]
}

dtype_table! {
    /// The integer types.
    export INT_TYPES, INT_SPEC, int_types => [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64]
}

dtype_table! {
    /// The signed integer types.
    export SIGNED_INT_TYPES, SIGNED_INT_SPEC, signed_int_types => [Int8, Int16, Int32, Int64]
}

dtype_table! {
    /// The signed types (signed integers, floats, complex).
    export SIGNED_TYPES, SIGNED_SPEC, signed_types => [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, Complex64, Complex128]
}

dtype_table! {
    /// The index dtypes in TensorFlow's order, `"int32, int64"` (the `T` of
    /// `InvertPermutation`, `BroadcastArgs`, ...).
    INDEX_SPEC = INDEX_TYPES in [Int32, Int64]
}

dtype_table! {
    /// `float` and `double` (kernels that run only in single and double
    /// precision, such as `_ResourceApplyGradientDescentMatMul`'s).
    export FLOAT_DOUBLE_TYPES, FLOAT_DOUBLE_SPEC, float_double_types => [Float, Double]
}

// The tables of whole type classes are the classes of TensorFlow's spec
// language (core's `opforge_core::dtype`), so a `"T: realnumbertype"` OpDef
// and a `REAL_KERNEL_TYPES` kernel cover the same types.
const _: () = assert!(same_types(
    REAL_KERNEL_TYPES,
    opforge_core::dtype::REAL_NUMBER_TYPES,
    &[]
));
const _: () = assert!(same_types(
    opforge_core::dtype::NUMBER_TYPES,
    NUMERIC_KERNEL_TYPES,
    opforge_core::dtype::QUANTIZED_TYPES
));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_types_checks_sets_and_extras() {
        use DataType::*;
        assert!(same_types(&[Half, Float], &[Float, Half], &[]));
        assert!(same_types(&[Bool, Float], &[Float], &[Bool]));
        assert!(!same_types(&[Float], &[Float, Half], &[]), "missing");
        assert!(!same_types(&[Float, Half], &[Float], &[]), "extra");
        assert!(!same_types(&[Float, Float], &[Float, Half], &[]), "twice");
        assert!(
            !same_types(&[Float, Half], &[Float, Half], &[Half]),
            "overlap"
        );
        assert_eq!(POD_TYPES.len(), 15);
        assert!(!POD_TYPES.contains(&String));
        assert_eq!(INDEX_SPEC, "int32, int64");
    }
}
