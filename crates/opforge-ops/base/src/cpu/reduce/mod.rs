//! Reductions over any set of axes (see [`engine`]).

pub mod engine;
pub mod reducers;

pub use engine::{reduce_into, ReducePlan};
pub use reducers::*;
