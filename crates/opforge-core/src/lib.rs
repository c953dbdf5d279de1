//! # opforge-core
//!
//! The foundation of opforge: data types, TensorFlow-compatible protos,
//! the structured error type, the op definition language (spec strings and
//! [`OpDefBuilder`]), OpDef validation and the op registry.
#![warn(missing_docs)]

pub mod dtype;
pub mod error;
pub mod op_def;
pub mod proto;

pub use dtype::DataType;
pub use error::{Code, Result, Status};
pub use op_def::OpDefBuilder;
