//! Reductions over any set of axes: [`plan`] decides, without the element
//! type, which dimensions are reduced and how each step of the reduction
//! is split; [`engine`] runs the steps' folds per reducer
//! ([`reducers`]) and element type.

pub mod engine;
pub mod plan;
pub mod reducers;

pub use engine::{reduce_into, run};
pub use plan::ReducePlan;
pub use reducers::*;
