//! Gradient checks that run on every target: [`check_gradients`] compares
//! the registered gradients with central differences (TensorFlow's
//! `tf.test.compute_gradient`) in float64 and float32, eagerly on the CPU
//! and on the [fake device](crate::fake_device), so each gradient also runs
//! with every value crossing the device interface.

use crate::fake_device::{mirror_cpu_kernels, FakeDevice, DEVICE_FAKE};
use opforge_core::autodiff::{compute_gradient, compute_gradient_error, Ops, Sym};
use opforge_core::eager::EagerContext;
use opforge_core::registry::Registry;
use opforge_core::{DataType, Result, Tensor};
use std::sync::{Arc, OnceLock};

/// A function of its inputs built through [`Ops`], for gradient checks.
pub type Builder<'a> = &'a dyn Fn(&mut dyn Ops, &[Sym]) -> Result<Sym>;

/// An eager context on a 2-thread CPU device, shared by the tests.
pub fn cpu() -> &'static EagerContext {
    static CTX: OnceLock<EagerContext> = OnceLock::new();
    CTX.get_or_init(|| EagerContext::new(2).expect("a CPU device"))
}

/// An eager context on the fake device, whose kernels are mirrors of the
/// global registry's CPU kernels (made on first use: link the op
/// libraries first).
pub fn fake() -> &'static EagerContext {
    static CTX: OnceLock<EagerContext> = OnceLock::new();
    CTX.get_or_init(|| {
        mirror_cpu_kernels(Registry::global(), DEVICE_FAKE).expect("mirrors of the CPU kernels");
        EagerContext::with_device(Arc::new(FakeDevice::new(0)))
    })
}

/// Both targets: the CPU and the fake device.
pub fn targets() -> [&'static EagerContext; 2] {
    [cpu(), fake()]
}

/// `x` (float64) as float32.
pub fn to_f32(x: &Tensor) -> Tensor {
    let v: Vec<f32> = x
        .flat::<f64>()
        .expect("a float64 tensor")
        .iter()
        .map(|&v| v as f32)
        .collect();
    Tensor::from_vec(x.dims(), v).expect("the same shape")
}

/// The largest Jacobian error of `f` at `xs` on `ctx`.
pub fn gradient_error(ctx: &EagerContext, f: Builder<'_>, xs: &[Tensor]) -> Result<f64> {
    Ok(compute_gradient_error(&compute_gradient(ctx, f, xs)?))
}

/// Gradient-checks `f` at float64 `xs` (error < 1e-6) and at the same
/// values in float32 (error < 1e-3), on the CPU and on the fake device.
pub fn check_gradients(f: Builder<'_>, xs: &[Tensor]) {
    assert!(
        xs.iter().all(|x| x.dtype() == DataType::Double),
        "check_gradients takes float64 inputs"
    );
    let xs32: Vec<Tensor> = xs.iter().map(to_f32).collect();
    for ctx in targets() {
        let on = ctx.device().name();
        let e64 = gradient_error(ctx, f, xs).unwrap_or_else(|e| panic!("on {on}: {e}"));
        assert!(e64 < 1e-6, "float64 gradient error {e64} on {on}");
        let e32 = gradient_error(ctx, f, &xs32).unwrap_or_else(|e| panic!("on {on}: {e}"));
        assert!(e32 < 1e-3, "float32 gradient error {e32} on {on}");
    }
}

/// `n` distinct float64 values (no ties, away from 0).
pub fn distinct_values(n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|i| scale * (0.3 + ((i * 7 + 3) % n) as f64 * 0.37 + i as f64 * 0.011))
        .collect()
}
