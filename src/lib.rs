//! opforge: define, implement, test and ship tensor operations.
#![warn(missing_docs)]
pub use opforge_core::*;
