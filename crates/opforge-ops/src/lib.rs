//! The standard opforge op library.
//!
//! Every op here is registered with [`opforge_core::register_op!`], the same
//! public API an op written outside opforge uses; the registrations run into
//! [`opforge_core::OpRegistry::global`] when it is first used.
//!
//! A binary must link this crate for its registrations to be collected:
//! call [`link`] once (the `opforge` CLI does so at startup).
#![warn(missing_docs)]

pub mod array_basic;
pub mod array_extra;
pub mod array_index;
pub mod array_slice;
pub mod array_strided;
pub mod examples;
pub mod graph_ops;
pub mod math_binary;
pub mod math_unary;
pub mod matmul;
pub mod nn;
pub mod quantize_extra;
pub mod reduction;
pub mod state;
pub mod util;

#[cfg(test)]
pub(crate) mod testutil;

/// Makes sure this crate, and with it every op registration in it, is
/// linked into the binary. Call it once before using the global registry.
///
/// ```
/// opforge_ops::link();
/// let zero_out = opforge_core::OpRegistry::global().op_def("ZeroOut").unwrap();
/// assert_eq!(zero_out.input_arg[0].name, "to_zero");
/// ```
#[inline(never)]
pub fn link() {
    examples::link();
}
