//! Helpers for kernels' unit tests: an eager context, tensors, approximate
//! comparison, and gradient checks that run on the CPU and on the fake
//! device ([`crate::gradcheck`]).
//!
//! [`ctx`] runs ops registered in the test binary: a family crate's tests
//! link the other family crates whose ops they use with
//! `extern crate opforge_ops_x as _;`.

pub use crate::gradcheck::{check_gradients, distinct_values};

use crate::gradcheck::{targets, Builder};
use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{compute_gradient, compute_gradient_error, Ops, OpsExt, Sym};
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output};
use opforge_core::op_def::WithoutKernel;
use opforge_core::registry::Registry;
use opforge_core::{Element, Result, Tensor};

/// The ops of the global registry whose OpDefs were registered by code
/// under `dir` (a source path as `file!()` gives it, from the workspace
/// root, such as `crates/opforge-ops/nn/src/nn/`), sorted: a family's or a
/// module's ops, asked of the registry instead of kept in a list beside it.
/// Panics if there is none (the path is wrong, or nothing is linked).
pub fn ops_registered_under(dir: &str) -> Vec<String> {
    let registry = Registry::global();
    let ops: Vec<String> = registry
        .names()
        .into_iter()
        .filter(|op| {
            registry.lookup(op).is_ok_and(|data| {
                data.state()
                    .origins()
                    .iter()
                    .any(|o| o.location().starts_with(dir))
            })
        })
        .collect();
    assert!(
        !ops.is_empty(),
        "no op of the global registry was registered by code under {dir}"
    );
    ops
}

/// Asserts that every op registered by code under `dir` (see
/// [`ops_registered_under`]) has exactly one CPU kernel, or none when it
/// declares why (`OpDefBuilder::without_kernel`); returns the ops.
pub fn assert_one_cpu_kernel_each(dir: &str) -> Vec<String> {
    let ops = ops_registered_under(dir);
    for op in &ops {
        // (Other tests of the binary may add fake-device mirrors.)
        let cpu = Registry::global()
            .kernels_for(op)
            .iter()
            .filter(|k| k.def.device_type == "CPU")
            .count();
        let want = match Registry::global().attr::<WithoutKernel>(op) {
            Some(_) => 0,
            None => 1,
        };
        assert_eq!(
            cpu, want,
            "{op} (registered under {dir}) has {cpu} CPU kernels"
        );
    }
    ops
}

/// An eager context on a 2-thread CPU device, shared by the tests.
pub fn ctx() -> &'static EagerContext {
    crate::gradcheck::cpu()
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

/// Six distinct values, the inputs of many gradient checks.
pub const X: [f64; 6] = [1.3, 2.7, -0.6, 4.1, -3.2, 0.45];

/// Checks `f`'s gradient at `xs` in float64 (< 1e-6) and float32 (< 1e-3),
/// on the CPU and on the fake device; every input must get a gradient.
pub fn check(name: &str, f: Builder<'_>, xs: &[(Vec<i64>, Vec<f64>)]) {
    check_with(name, f, xs, true)
}

/// [`check`], where `every_input` says whether each input must get a
/// non-zero gradient (false for ops whose gradient is zero, like `Sign`).
pub fn check_with(name: &str, f: Builder<'_>, xs: &[(Vec<i64>, Vec<f64>)], every_input: bool) {
    let x64: Vec<Tensor> = xs.iter().map(|(d, v)| t(d, v.clone())).collect();
    let x32: Vec<Tensor> = xs
        .iter()
        .map(|(d, v)| t(d, v.iter().map(|&x| x as f32).collect()))
        .collect();
    for ctx in targets() {
        let on = ctx.device().name();
        let j = compute_gradient(ctx, f, &x64).unwrap_or_else(|e| panic!("{name} on {on}: {e}"));
        for (i, j) in j.iter().enumerate() {
            assert!(
                !every_input || j.theoretical.iter().any(|&v| v != 0.0),
                "{name}: input {i} gets no gradient on {on}"
            );
        }
        let e64 = compute_gradient_error(&j);
        let e32 = compute_gradient_error(
            &compute_gradient(ctx, f, &x32).unwrap_or_else(|e| panic!("{name} on {on}: {e}")),
        );
        assert!(e64 < 1e-6, "{name}: float64 gradient error {e64} on {on}");
        assert!(e32 < 1e-3, "{name}: float32 gradient error {e32} on {on}");
    }
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

/// Adds a `Const` node of `t` named `name` to `g` (panics on error, for
/// tests); its output.
pub fn const_node(g: &mut Graph, name: &str, t: &Tensor) -> Output {
    let id = g
        .add(
            NodeSpec::new("Const", name)
                .attr("value", t)
                .attr("dtype", t.dtype()),
        )
        .unwrap_or_else(|e| panic!("Const {name}: {e}"));
    Output::new(id, 0)
}

/// Runs the global registry's CPU kernel of `op` once on single-tensor
/// inputs `inputs` (attrs resolved from them, `attrs` given) with an
/// output request per output (`bindings`, see
/// [`call_kernel_with`](opforge_core::kernel::call_kernel_with)): the
/// outputs handed back, by index. For tests of kernels that handle output
/// requests.
pub fn call_with_requests(
    op: &str,
    inputs: Vec<Tensor>,
    attrs: &[(&str, opforge_core::proto::AttrValue)],
    bindings: &mut [opforge_core::kernel::OutputBinding],
) -> Result<Vec<(usize, Tensor)>> {
    use opforge_core::attrs::{resolve_call, ArgTypes, AttrMap};
    let r = Registry::global();
    let op_def = r.lookup(op)?.op_def.clone();
    let mut given = AttrMap::new();
    for (k, v) in attrs {
        given.insert(k.to_string(), v.clone());
    }
    let types: Vec<ArgTypes> = inputs.iter().map(|t| ArgTypes::Single(t.dtype())).collect();
    let call = resolve_call(&op_def, &types, &given)?;
    let dev = opforge_core::device::CpuDevice::new(2)?;
    let built = r.build_kernel(&op_def, op, call.attrs, &dev)?;
    let mut ins: opforge_core::kernel::TensorVec = inputs.into_iter().collect();
    let mut out = Vec::new();
    opforge_core::kernel::call_kernel_with(
        built.kernel.as_ref(),
        &built.sig,
        &mut ins,
        &dev,
        &opforge_core::resource::ResourceMgr::new(),
        bindings,
        |_, i, t| out.push((i, t)),
    )?;
    Ok(out)
}
