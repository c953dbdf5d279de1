//! Helpers for the kernels' unit tests (the `testutil` feature, which the
//! op-family crates turn on for their tests only).
//!
//! [`ctx`] runs ops registered in the test binary: a family crate's tests
//! link the other family crates whose ops they use with
//! `extern crate opforge_ops_x as _;`.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{compute_gradient, compute_gradient_error, Ops, OpsExt, Sym};
use opforge_core::eager::EagerContext;
use opforge_core::{Element, Result, Tensor};
use std::sync::OnceLock;

/// An eager context on a 2-thread CPU device, shared by the tests.
pub fn ctx() -> &'static EagerContext {
    static CTX: OnceLock<EagerContext> = OnceLock::new();
    CTX.get_or_init(|| EagerContext::new(2).expect("a CPU device"))
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

/// A function of its inputs, for [`check`].
pub type Builder = dyn Fn(&mut dyn Ops, &[Sym]) -> Result<Sym>;

/// Six distinct values, the inputs of many gradient checks.
pub const X: [f64; 6] = [1.3, 2.7, -0.6, 4.1, -3.2, 0.45];

/// Checks `f`'s gradient at `xs` in float64 (< 1e-6) and float32 (< 1e-3).
pub fn check(name: &str, f: &Builder, xs: &[(Vec<i64>, Vec<f64>)]) {
    let x64: Vec<Tensor> = xs.iter().map(|(d, v)| t(d, v.clone())).collect();
    let x32: Vec<Tensor> = xs
        .iter()
        .map(|(d, v)| t(d, v.iter().map(|&x| x as f32).collect()))
        .collect();
    let j = compute_gradient(ctx(), f, &x64).unwrap();
    for (i, j) in j.iter().enumerate() {
        assert!(
            j.theoretical.iter().any(|&v| v != 0.0),
            "{name}: input {i} gets no gradient"
        );
    }
    let e64 = compute_gradient_error(&j);
    let e32 = compute_gradient_error(&compute_gradient(ctx(), f, &x32).unwrap());
    assert!(e64 < 1e-6, "{name}: float64 gradient error {e64}");
    assert!(e32 < 1e-3, "{name}: float32 gradient error {e32}");
}

/// `f(x) * w` with fixed distinct weights, so that the Jacobian of a
/// pass-through op is not trivially all ones.
pub fn weighted(o: &mut dyn Ops, y: Sym) -> Result<Sym> {
    let s = o.shape_of(y)?;
    let n = o.op1("Size", &[y], &[])?;
    let zero = o.constant(Tensor::scalar(0i32))?;
    let one = o.constant(Tensor::scalar(1i32))?;
    let r = o.op1("Range", &[zero, n, one], &[])?;
    let dt = o.dtype(y);
    let r = o.op1("Cast", &[r], &[("DstT", dt.into_attr_value())])?;
    let r = o.reshape(r, s)?;
    let y2 = o.mul(y, y)?;
    o.add(y2, r)
}
