//! Helpers for the kernels' unit tests.

use opforge_core::eager::EagerContext;
use opforge_core::{Element, Tensor};
use std::sync::OnceLock;

/// An eager context on a 2-thread CPU device, shared by the tests.
pub fn ctx() -> &'static EagerContext {
    static CTX: OnceLock<EagerContext> = OnceLock::new();
    CTX.get_or_init(|| {
        crate::link();
        EagerContext::new(2).expect("a CPU device")
    })
}

/// A tensor of shape `dims` holding `values`.
pub fn t<T: Element>(dims: &[i64], values: Vec<T>) -> Tensor {
    Tensor::from_vec(dims, values).expect("values fit the shape")
}

/// Asserts that `got` has shape `dims` and float values within `tol` of `want`.
pub fn assert_close(got: &Tensor, dims: &[i64], want: &[f64], tol: f64) {
    assert_eq!(got.dims(), dims, "shape of {got:?}");
    let vals: Vec<f64> = opforge_core::dispatch!(
        got.dtype(),
        T => got.flat::<T>().unwrap().iter().map(|v| num_traits::ToPrimitive::to_f64(v).unwrap()).collect(),
        [Float, Double, Half, BFloat16, Int32, Int64, Int8, Int16, UInt8, UInt16, UInt32, UInt64],
        panic!("assert_close on {:?}", got.dtype())
    );
    assert_eq!(vals.len(), want.len(), "{got:?}");
    for (i, (g, w)) in vals.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan()) || g == w;
        assert!(ok, "element {i}: got {g}, want {w} (tol {tol}) in {got:?}");
    }
}
