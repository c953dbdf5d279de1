//! Matrix products (`MatMul`, `BatchMatMulV2`), the only family that needs `faer`,
//! and the SGD update whose gradient is a matrix product
//! (`_ResourceApplyGradientDescentMatMul`, made by graph rewrites).
//!
//! Part of opforge's standard op library: link it through the umbrella
//! crate `opforge-ops` (`opforge_ops::link()`). Every op here registers
//! itself with `register_op!`/`register_kernel!`/`register_gradient!`
//! next to its code.
#![warn(missing_docs)]

mod matmul;
mod sgd;

// The unit tests run ops of the other families too (gradient checks
// build on `Sum`, `Reshape`, `Mul`, ...): link their registrations.
#[cfg(test)]
extern crate opforge_ops_array as _;
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
