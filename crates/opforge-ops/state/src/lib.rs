//! Resource variables (TensorFlow's `resource_variable_ops`).
//!
//! Part of opforge's standard op library: link it through the umbrella
//! crate `opforge-ops` (`opforge_ops::link()`). Every op here registers
//! itself with `register_op!`/`register_kernel!`/`register_gradient!`
//! next to its code.
#![warn(missing_docs)]

mod state;

pub use opforge_ops_base::var::{var_type_name, Var, DEFAULT_CONTAINER};
pub use state::{var_handle, ANONYMOUS_NAME};

// The unit tests run ops of the other families too (gradient checks
// build on `Sum`, `Reshape`, `Mul`, ...): link their registrations.
#[cfg(test)]
extern crate opforge_ops_array as _;
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
