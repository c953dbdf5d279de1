//! The CPU engines the kernels share: parallel loops, broadcasting, the
//! element traits, the element mover, the reduction engine and the
//! scatter-add engine.

pub mod broadcast;
pub mod elem;
pub mod mover;
pub mod par;
pub mod reduce;
pub mod scatter;
