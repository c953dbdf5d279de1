//! opforge: define, implement, test and ship tensor operations.
//!
//! This facade re-exports [`opforge_core`] (data types, protos, errors, op
//! definitions and registries, tensors, kernels, shape inference, the eager
//! and graph runtimes, autodiff, op compatibility) and the standard op
//! library [`opforge_ops`]. The `opforge` command line is the `opforge-cli`
//! crate, built on this one.
//!
//! Define an op next to its code and find it in the global registry:
//!
//! ```rust,standalone_crate
//! use opforge::{register_op, OpDefBuilder, Registry};
//!
//! register_op!(OpDefBuilder::new("TimesTwo")
//!     .attr("T: {float, int32}")
//!     .input("x: T")
//!     .output("y: T")
//!     .doc("Returns `2 * x`."));
//!
//! opforge::opforge_ops::link(); // the standard op library
//! let registry = Registry::global();
//! registry.verify().unwrap();
//! let op = registry.op_def("TimesTwo").unwrap();
//! assert_eq!(opforge::signature::python_signature(&op), "times_two(x, name=None)");
//! assert!(registry.lookup("MatMul").is_ok());
//! ```
//!
//! Typed parameters (MXNet's `dmlc::Parameter`, see [`param`]): the
//! derive's code names `::opforge_core` unless told otherwise, so a crate
//! that uses only this facade says `crate = "::opforge"`:
//!
//! ```rust,standalone_crate
//! use opforge::param::Parameter;
//! use opforge::OpDefBuilder;
//!
//! #[derive(Parameter)]
//! #[param(crate = "::opforge")]
//! struct ClipParam {
//!     /// The smallest value kept.
//!     #[param(default = 0.0)]
//!     low: f32,
//!     /// The largest value kept.
//!     #[param(default = 6.0, lower_bound = 0)]
//!     high: f32,
//! }
//!
//! let op = OpDefBuilder::new("MyClip")
//!     .input("x: float")
//!     .output("y: float")
//!     .params::<ClipParam>()
//!     .finalize()
//!     .unwrap();
//! assert_eq!(op.attr[1].description, "The largest value kept.");
//! let p = ClipParam::from_kwargs(&[("high", "2.5")]).unwrap();
//! assert_eq!((p.low, p.high), (0.0, 2.5));
//! ```
#![warn(missing_docs)]
pub use opforge_core::*;
pub use opforge_ops;

#[doc = include_str!("../docs/adding-an-op.md")]
pub mod guide {}
