//! Elementwise math ops (TensorFlow's `math_ops`): unary and binary arithmetic with broadcasting, comparisons, selects, `AddN` and `Cast`.
//!
//! Part of opforge's standard op library: link it through the umbrella
//! crate `opforge-ops` (`opforge_ops::link()`). Every op here registers
//! itself with `register_op!`/`register_kernel!`/`register_gradient!`
//! next to its code.
#![warn(missing_docs)]

mod binary;
mod parsing;
mod unary;

// The unit tests run ops of the other families too (gradient checks
// build on `Sum`, `Reshape`, `Mul`, ...): link their registrations.
#[cfg(test)]
extern crate opforge_ops_array as _;
#[cfg(test)]
extern crate opforge_ops_linalg as _;
#[cfg(test)]
extern crate opforge_ops_nn as _;
#[cfg(test)]
extern crate opforge_ops_reduce as _;
#[cfg(test)]
extern crate opforge_ops_state as _;
