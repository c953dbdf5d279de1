//! Shape inference with TensorFlow's model: shapes of unknown rank, known
//! rank with unknown dims, and *identity* of shape and dimension handles (an
//! output dim can be the very same dim as an input's, which `merge` and
//! later checks rely on). Shape functions get an [`InferenceContext`].

pub mod common;
mod context;
pub mod harness;

pub use context::{
    DimOrConst, DimensionHandle, InferenceContext, ShapeAndType, ShapeHandle, MAX_RANK,
};

use crate::op_attr::OpAttr;
use crate::{OpDefBuilder, Result};
use std::sync::Arc;

/// A shape function: sets every output's shape (and may check the inputs').
pub type ShapeFunction = dyn Fn(&mut InferenceContext) -> Result<()> + Send + Sync;

/// The per-op attribute holding an op's shape function (TensorFlow's
/// `SetShapeFn`): `registry.attr::<ShapeFn>("Relu")`.
pub struct ShapeFn;

impl OpAttr for ShapeFn {
    type Value = ShapeFunction;
    const NAME: &'static str = "ShapeFn";
}

impl OpDefBuilder {
    /// Sets the shape function: given the input shapes (and constant inputs
    /// and attrs), it sets the output shapes. It is registered with the op
    /// as its [`ShapeFn`] attribute.
    pub fn set_shape_fn(
        self,
        f: impl Fn(&mut InferenceContext) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.set_attr::<ShapeFn>(Arc::new(f))
    }

    /// Sets a shared shape function.
    pub fn shape_fn_arc(self, f: Arc<ShapeFunction>) -> Self {
        self.set_attr::<ShapeFn>(f)
    }

    /// The shape function, if set.
    pub fn shape_fn(&self) -> Option<Arc<ShapeFunction>> {
        self.get_attr::<ShapeFn>()
    }
}
