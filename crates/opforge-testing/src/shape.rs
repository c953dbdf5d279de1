//! Shape-function tests in the style of TensorFlow's `INFER_OK` /
//! `INFER_ERROR`: the grammar and its driver are core's
//! ([`opforge_core::shape_inference::harness`], re-exported here, which
//! `opforge shape infer` uses too); this module adds the macros that panic
//! with the difference, for `#[test]`s.
//!
//! ```
//! use opforge_testing::shape::ShapeTestOp;
//! # use opforge_core::{register_op, OpDefBuilder};
//! # register_op!(OpDefBuilder::new("DocSquareMatrix2").input("x: float").output("y: float")
//! #     .set_shape_fn(|c| { let m = c.input(0); let m = c.with_rank(m, 2)?;
//! #         let (a, b) = (c.dim(m, 0), c.dim(m, 1)); c.merge_dim(a, b)?; c.set_output(0, m); Ok(()) }));
//! let op = ShapeTestOp::new("DocSquareMatrix2");
//! opforge_testing::infer_ok!(op, "[2,?]", "in0");
//! opforge_testing::infer_error!(op, "[2,3]", "Dimensions must be equal, but are 2 and 3");
//! ```

pub use opforge_core::shape_inference::harness::*;

/// `INFER_OK` that panics with the difference (for `#[test]`s).
#[macro_export]
macro_rules! infer_ok {
    ($op:expr, $ins:expr, $expected:expr) => {
        if let Err(e) = $crate::shape::infer_ok(&$op, $ins, $expected) {
            panic!("{}", e);
        }
    };
}

/// `INFER_ERROR` that panics with the difference (for `#[test]`s).
#[macro_export]
macro_rules! infer_error {
    ($op:expr, $ins:expr, $substring:expr) => {
        if let Err(e) = $crate::shape::infer_error(&$op, $ins, $substring) {
            panic!("{}", e);
        }
    };
}
