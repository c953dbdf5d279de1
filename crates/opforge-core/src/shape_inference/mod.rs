//! Shape inference with TensorFlow's model: shapes of unknown rank, known
//! rank with unknown dims, and *identity* of shape and dimension handles (an
//! output dim can be the very same dim as an input's, which `merge` and
//! later checks rely on). Shape functions get an [`InferenceContext`].

pub mod common;
mod context;
pub mod testutil;

pub use context::{DimOrConst, DimensionHandle, InferenceContext, ShapeAndType, ShapeHandle};

use crate::Result;
use std::sync::Arc;

/// A shape function: sets every output's shape (and may check the inputs').
pub type ShapeFn = Arc<dyn Fn(&mut InferenceContext) -> Result<()> + Send + Sync>;
