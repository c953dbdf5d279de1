//! The base of opforge's standard op library: what the op-family crates
//! (`opforge-ops-array`, `-math`, `-reduce`, `-nn`, `-linalg`, `-state`)
//! share, and an op author's kernel can use too.
//!
//! - [`cpu`]: the engines of the CPU kernels: the parallel-loop engine
//!   ([`cpu::par`]), broadcasting and the elementwise kernel bodies
//!   ([`cpu::broadcast`]), the element traits ([`cpu::elem`]), the element
//!   mover ([`cpu::mover`]) and the reduction engine ([`cpu::reduce`]);
//! - [`types`]: the dtype tables of kernel registrations and their
//!   dispatch macros;
//! - [`args`]: reading shape, axis and index arguments, printing shapes;
//! - [`shape`]: shape-function helpers;
//! - [`grad`]: helpers shared by gradient functions;
//! - [`var`]: resource variables' storage ([`var::Var`]) and the
//!   copy-on-write update every variable-updating kernel uses;
//! - [`prelude`]: the imports an op file starts from.
//!
//! This crate registers no op.
#![warn(missing_docs)]

pub mod args;
pub mod cpu;
pub mod grad;
pub mod prelude;
pub mod shape;
pub mod types;
pub mod var;
