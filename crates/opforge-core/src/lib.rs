//! # opforge-core
//!
//! The foundation of opforge: data types, TensorFlow-compatible protos,
//! the structured error type, the op definition language (spec strings and
//! [`OpDefBuilder`]), OpDef validation and the op registry.
#![warn(missing_docs)]

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
pub mod proto;
pub mod registry;
pub mod resource;
pub mod shape_inference;
pub mod signature;
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
