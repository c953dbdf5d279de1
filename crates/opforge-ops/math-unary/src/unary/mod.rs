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
//! The kernels compute with the element traits of
//! `opforge_ops_base::cpu::elem` (`Num`, `Signed`, `Float`, `RealFloat`,
//! `Int`; `Cast` converts through `Scalar::widen`/`Scalar::narrow`).

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

mod ops;

mod grad_ops;

mod cast;

// ---- Gradients ----

/// The gradients of the unary ops and of their gradient helpers (so that
/// second derivatives work), as TensorFlow's `math_grad.py` defines them.
/// TensorFlow conjugates `x`/`y` (and the helpers' inputs) first for complex
/// types; without a `Conj` op these are written for real types.
mod gradients;

#[cfg(test)]
mod cast_tests;
#[cfg(test)]
mod tests;
