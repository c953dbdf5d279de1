//! Reductions over any set of axes (see [`engine`]).

pub mod elem;
pub mod engine;
pub mod reducers;

pub use elem::{AccNum, NumElem, OrdElem};
pub use engine::{reduce_into, ReducePlan};
pub use reducers::*;
