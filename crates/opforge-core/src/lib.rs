//! # opforge-core
//!
//! The core of opforge, with TensorFlow's semantics and formats: everything
//! but the ops themselves (`opforge-ops`) and the command line
//! (`opforge-cli`).
//!
//! * foundations: data types ([`dtype`]), TensorFlow-compatible protos and
//!   their encodings ([`proto`]), the error type ([`error`]), string
//!   helpers ([`strings`]);
//! * op definitions: the spec language, [`OpDefBuilder`] and validation
//!   ([`op_def`]), node attrs ([`attrs`]), the op registry ([`registry`]),
//!   Python-style signatures ([`signature`]), backward compatibility
//!   ([`compat`]) and typed parameter structs ([`param`]);
//! * values: [`Tensor`]s and their buffers, protos and JSON ([`tensor`]),
//!   resources and resource handles ([`resource`]);
//! * running ops: kernels and their registry ([`kernel`]), devices
//!   ([`device`]), shape inference ([`shape_inference`]), eager execution
//!   ([`eager`]) and graphs with their executor ([`graph`]);
//! * gradients: graph gradients, the eager gradient tape and the gradient
//!   checker ([`autodiff`]).
//!
//! Op libraries, the standard one included, use only this crate's public
//! API.
#![warn(missing_docs)]

// The code `#[derive(Parameter)]` generates names `::opforge_core`, which
// this crate's own uses (its tests) then find too.
extern crate self as opforge_core;

pub mod attrs;
pub mod autodiff;
pub mod compat;
pub mod device;
pub mod dtype;
pub mod eager;
pub mod error;
pub mod graph;
pub mod kernel;
pub mod op_attr;
pub mod op_def;
pub mod origin;
pub mod param;
pub mod proto;
pub mod registry;
pub mod resource;
mod resource_handle;
pub mod shape_inference;
pub mod signature;
pub mod strings;
pub mod tensor;

pub use dtype::DataType;
pub use error::{Code, Result, Status};
pub use op_def::OpDefBuilder;
pub use tensor::{Element, Tensor, TensorShape};

#[doc(hidden)]
pub use half;
#[doc(hidden)]
pub use num_complex;
pub use registry::{OpRegistrationData, Registry};

#[doc(hidden)]
pub use inventory;
