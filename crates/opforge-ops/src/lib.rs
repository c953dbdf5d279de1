//! The standard opforge op library.
//!
//! Every op here is registered with [`opforge_core::register_op!`], the same
//! public API an op written outside opforge uses; the registrations run into
//! [`opforge_core::Registry::global`] when it is first used.
//!
//! The ops live in one crate per family, which compile in parallel and
//! alone when one of their files changes: `opforge-ops-array`,
//! `opforge-ops-math`, `opforge-ops-math-unary`, `opforge-ops-reduce`, `opforge-ops-nn`,
//! `opforge-ops-linalg` and `opforge-ops-state`. Their shared engines are in
//! `opforge-ops-base`. This crate links them all. (The demo ops of
//! TensorFlow's "Create an op" guide, `ZeroOut` and its companions, are an
//! op library of their own: `examples/zero_out`.)
//!
//! A binary must link this crate for its registrations to be collected:
//! call [`link`] once (the `opforge` CLI does so at startup).
#![warn(missing_docs)]

// What links a family crate's registrations into a binary is that the crate
// is linked at all: rustc links a crate that is named here, and keeps every
// `#[used]` registration static of a linked crate. A dependency that is
// only listed in Cargo.toml and never named is not linked.
extern crate opforge_ops_array as _;
extern crate opforge_ops_linalg as _;
extern crate opforge_ops_math as _;
extern crate opforge_ops_math_unary as _;
extern crate opforge_ops_nn as _;
extern crate opforge_ops_reduce as _;
extern crate opforge_ops_state as _;

/// The engines and helpers the standard library's kernels share (parallel
/// loops, broadcasting, element traits, reductions, argument readers), for
/// an op author's kernel too: `opforge_ops::base::prelude::*`.
pub use opforge_ops_base as base;

/// Resource variables: the [`state::Var`] resource behind `VarHandleOp`,
/// its handles and container names.
pub use opforge_ops_state as state;

/// Makes sure this crate, and with it every op registration of the
/// standard library, is linked into the binary. Call it once before using
/// the global registry.
///
/// ```
/// opforge_ops::link();
/// let add = opforge_core::Registry::global().op_def("AddV2").unwrap();
/// assert_eq!(add.input_arg[0].name, "x");
/// ```
#[inline(never)]
pub fn link() {}
