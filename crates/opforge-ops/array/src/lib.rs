//! Array ops (TensorFlow's `array_ops`): shapes and reshaping, filling and broadcasting, indexing and gathering, joining, splitting, slicing and padding, placeholders, the diagonal ops, `Unique`/`UniqueWithCounts`, `CheckNumerics`/`GuaranteeConst`, and the quantization ops of `array_ops` (`Dequantize`, the FakeQuant family, `QuantizeAndDequantize`/`V2`, `QuantizedConcat`, `QuantizedReshape`, with CPU kernels).
//!
//! Part of opforge's standard op library: link it through the umbrella
//! crate `opforge-ops` (`opforge_ops::link()`). Every op here registers
//! itself with `register_op!`/`register_kernel!`/`register_gradient!`
//! next to its code.
#![warn(missing_docs)]

mod basic;
mod diag;
mod graph;
mod index;
mod quantize;
#[cfg(test)]
mod shape_only_tests;
mod slice;
mod space_batch;
mod strided;
mod unique;

// The unit tests run ops of the other families too (gradient checks
// build on `Sum`, `Reshape`, `Mul`, ...): link their registrations.
#[cfg(test)]
extern crate opforge_ops_linalg as _;
#[cfg(test)]
extern crate opforge_ops_math as _;
#[cfg(test)]
extern crate opforge_ops_math_unary as _;
#[cfg(test)]
extern crate opforge_ops_nn as _;
#[cfg(test)]
extern crate opforge_ops_reduce as _;
#[cfg(test)]
extern crate opforge_ops_state as _;
