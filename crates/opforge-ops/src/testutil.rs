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

/// A function of its inputs built through [`Ops`](opforge_core::autodiff::Ops), for gradient checks.
pub type GradFnUnderTest<'a> = &'a dyn Fn(
    &mut dyn opforge_core::autodiff::Ops,
    &[opforge_core::autodiff::Sym],
) -> opforge_core::Result<opforge_core::autodiff::Sym>;

fn to_f32(x: &Tensor) -> Tensor {
    let v: Vec<f32> = x.flat::<f64>().unwrap().iter().map(|&v| v as f32).collect();
    t(x.dims(), v)
}

/// Gradient-checks `f` at float64 `xs` (error < 1e-6) and at the same
/// values in float32 (error < 1e-3).
pub fn check_gradients(f: GradFnUnderTest<'_>, xs: &[Tensor]) {
    use opforge_core::autodiff::{compute_gradient, compute_gradient_error};
    let jac = compute_gradient(ctx(), f, xs).unwrap();
    let e64 = compute_gradient_error(&jac);
    assert!(e64 < 1e-6, "float64 gradient error {e64}: {jac:?}");
    let xs32: Vec<Tensor> = xs.iter().map(to_f32).collect();
    let jac = compute_gradient(ctx(), f, &xs32).unwrap();
    let e32 = compute_gradient_error(&jac);
    assert!(e32 < 1e-3, "float32 gradient error {e32}: {jac:?}");
}

/// `n` distinct float64 values (no ties, away from 0).
pub fn distinct_values(n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|i| scale * (0.3 + ((i * 7 + 3) % n) as f64 * 0.37 + i as f64 * 0.011))
        .collect()
}
