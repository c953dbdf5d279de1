//! Output requests across the C ABI: a Rust SDK plugin
//! (tests/plugins/req_plugin.rs, built here as a cdylib with a nested
//! cargo) whose kernel reports the requests it sees. Registered with
//! `output_requests` it gets NULL, INPLACE (its output bound to the input's
//! buffer) and ADD (its output bound to the accumulator) as core asks;
//! registered without, it gets WRITE and core does the rest. In a session
//! the executor asks for INPLACE through the kernel's own in-place
//! declaration (`output_like_forwarding`) and for NULL for an output
//! nobody reads. A C library (tests/c/requests.c) reads the requests
//! through the 1.0 compute entry, where INPLACE and ADD outputs are bound
//! before it runs too.

use opforge_core::attrs::AttrMap;
use opforge_core::device::CpuDevice;
use opforge_core::graph::{Graph, NodeSpec, Output, Session, SessionOptions};
use opforge_core::kernel::{call_kernel_with, OutputBinding, TensorVec};
use opforge_core::registry::Registry;
use opforge_core::resource::ResourceMgr;
use opforge_core::{DataType, Tensor, TensorShape};
use opforge_loader::Loader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// One test at a time: the SDK keeps its host table in a global of the
/// library, so one test's unload would cut off another's kernels.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

#[path = "plugins/build.rs"]
mod plugin_build;

/// The plugin, built once per test binary.
fn build() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| plugin_build::build_plugin("req_plugin"))
}

/// A sandbox registry with the standard library and the plugin loaded.
fn registry() -> (Arc<Registry>, Loader) {
    opforge_ops::link();
    let r = Arc::new(Registry::with_builtins());
    let loader = Loader::new(r.clone());
    loader.load(build()).unwrap();
    (r, loader)
}

fn vec_f32(v: &[f32]) -> Tensor {
    Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
}

/// Runs `op`'s kernel once on `x` with `bindings` (for `y`, `seen`): the
/// outputs handed back, by index.
fn call(r: &Registry, op: &str, x: Tensor, bindings: [OutputBinding; 2]) -> Vec<(usize, Tensor)> {
    let dev = CpuDevice::new(1).unwrap();
    let op_def = r.lookup(op).unwrap().op_def.clone();
    let built = r.build_kernel(&op_def, op, AttrMap::new(), &dev).unwrap();
    let mut inputs = TensorVec::new();
    inputs.push(x);
    let mut bindings = bindings;
    let mut out = Vec::new();
    call_kernel_with(
        built.kernel.as_ref(),
        &built.sig,
        &mut inputs,
        &dev,
        &ResourceMgr::new(),
        &mut bindings,
        |_, i, t| out.push((i, t)),
    )
    .unwrap();
    out
}

fn seen(out: &[(usize, Tensor)]) -> Vec<i32> {
    let (_, t) = out
        .iter()
        .find(|(i, _)| *i == 1)
        .expect("seen was handed back");
    t.flat::<i32>().unwrap().to_vec()
}

fn y(out: &[(usize, Tensor)]) -> Option<&Tensor> {
    out.iter().find(|(i, _)| *i == 0).map(|(_, t)| t)
}

#[test]
fn a_plugin_kernel_declaring_requests_sees_each_of_them() {
    let _s = serial();
    let (r, _loader) = registry();
    use OutputBinding::*;
    // NULL: y left unset and not handed back.
    let out = call(&r, "ReqProbe", vec_f32(&[1.0, 2.0]), [Null, Write]);
    assert_eq!(seen(&out), [0, 1, -1]);
    assert!(y(&out).is_none());
    // INPLACE: y is bound to x's buffer before the kernel runs.
    let x = vec_f32(&[1.0, 2.0]);
    let x_data = x.host_data().unwrap().0;
    let out = call(&r, "ReqProbe", x, [InPlace { input: 0 }, Write]);
    assert_eq!(seen(&out), [2, 1, 0]);
    let got = y(&out).unwrap();
    assert_eq!(got.flat::<f32>().unwrap(), &[2.0, 4.0]);
    assert_eq!(got.host_data().unwrap().0, x_data);
    // ADD: y is bound to the accumulator, and the kernel adds into it.
    let acc = vec_f32(&[10.0, 20.0]);
    let acc_data = acc.host_data().unwrap().0;
    let out = call(&r, "ReqProbe", vec_f32(&[1.0, 2.0]), [Add(acc), Write]);
    assert_eq!(seen(&out), [3, 1, -1]);
    let got = y(&out).unwrap();
    assert_eq!(got.flat::<f32>().unwrap(), &[12.0, 24.0]);
    assert_eq!(got.host_data().unwrap().0, acc_data);
    // NULL for `seen`: y alone comes back.
    let out = call(&r, "ReqProbe", vec_f32(&[3.0]), [Write, Null]);
    assert_eq!(out.len(), 1);
    assert_eq!(y(&out).unwrap().flat::<f32>().unwrap(), &[6.0]);
}

#[test]
fn a_plugin_kernel_without_the_flag_sees_write_and_the_host_does_the_rest() {
    let _s = serial();
    let (r, _loader) = registry();
    use OutputBinding::*;
    let out = call(&r, "ReqProbePlain", vec_f32(&[1.0, 2.0]), [Null, Write]);
    assert_eq!(&seen(&out)[..2], [1, 1]);
    assert!(y(&out).is_none(), "the host drops an output asked for NULL");
    let acc = vec_f32(&[10.0, 20.0]);
    let out = call(&r, "ReqProbePlain", vec_f32(&[1.0, 2.0]), [Add(acc), Write]);
    assert_eq!(&seen(&out)[..2], [1, 1]);
    assert_eq!(y(&out).unwrap().flat::<f32>().unwrap(), &[12.0, 24.0]);
    let x = vec_f32(&[1.0]);
    let out = call(&r, "ReqProbePlain", x, [InPlace { input: 0 }, Write]);
    assert_eq!(&seen(&out)[..2], [1, 1]);
    assert_eq!(y(&out).unwrap().flat::<f32>().unwrap(), &[2.0]);
}

/// `Square(x)` (a fresh buffer of known shape) into `op`: fetching `y`
/// and `seen`, then `seen` alone.
fn session_requests(r: &Arc<Registry>, op: &str) -> (Vec<i32>, Vec<f32>, Vec<i32>) {
    let mut g = Graph::with_registry(r.clone());
    let x = g
        .add(
            NodeSpec::new("Placeholder", "x")
                .attr("dtype", DataType::Float)
                .attr("shape", TensorShape::new(&[3]).unwrap().to_proto()),
        )
        .unwrap();
    let sq = g
        .add(NodeSpec::new("Square", "sq").input(Output::new(x, 0)))
        .unwrap();
    let p = g
        .add(NodeSpec::new(op, "p").input(Output::new(sq, 0)))
        .unwrap();
    let options = SessionOptions {
        // Three elements: ask InPlace at any size.
        inplace_min_elements: 0,
        ..SessionOptions::default()
    };
    let s = Session::with_options(g, options).unwrap();
    let feed = || vec![(Output::new(x, 0), vec_f32(&[1.0, 2.0, 3.0]))];
    let got = s
        .run(feed(), &[Output::new(p, 0), Output::new(p, 1)], &[])
        .unwrap();
    let y = got[0].flat::<f32>().unwrap().to_vec();
    let seen_both = got[1].flat::<i32>().unwrap().to_vec();
    let got = s.run(feed(), &[Output::new(p, 1)], &[]).unwrap();
    (seen_both, y, got[0].flat::<i32>().unwrap().to_vec())
}

#[test]
fn a_session_asks_a_plugin_kernel_for_inplace_and_null() {
    let _s = serial();
    let (r, _loader) = registry();
    // The kernel's own in-place declaration (output_like_forwarding) and a
    // value nothing else reads: INPLACE, y bound to Square's buffer.
    let (seen_both, y, seen_alone) = session_requests(&r, "ReqProbe");
    assert_eq!(seen_both, [2, 1, 0]);
    assert_eq!(y, [2.0, 8.0, 18.0]);
    // y not fetched: NULL.
    assert_eq!(seen_alone, [0, 1, -1]);
    // Without the flag: WRITE only (the host still forwards on its own).
    let (seen_both, y, seen_alone) = session_requests(&r, "ReqProbePlain");
    assert_eq!(&seen_both[..2], [1, 1]);
    assert_eq!(y, [2.0, 8.0, 18.0]);
    assert_eq!(&seen_alone[..2], [1, 1]);
}

#[test]
fn a_c_kernel_on_the_1_0_entry_sees_the_requests_and_its_bound_outputs() {
    let lib = opforge_testing::examples::build_c_library(
        "crates/opforge-loader/tests/c/requests.c",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        "requests_c",
        &[],
    );
    opforge_ops::link();
    let r = Arc::new(Registry::with_builtins());
    let loader = Loader::new(r.clone());
    loader.load(&lib).unwrap();
    use OutputBinding::*;
    // seen = [request of y, request of seen, input() refused x]
    let out = call(&r, "ReqC", vec_f32(&[1.0, 2.0]), [Write, Write]);
    assert_eq!(seen(&out), [1, 1, 0]);
    assert_eq!(y(&out).unwrap().flat::<f32>().unwrap(), &[2.0, 4.0]);
    let out = call(&r, "ReqC", vec_f32(&[1.0, 2.0]), [Null, Write]);
    assert_eq!(seen(&out), [0, 1, 0]);
    assert!(y(&out).is_none());
    // INPLACE: y is bound to x's buffer, and x moved there (input() refuses it).
    let x = vec_f32(&[1.0, 2.0]);
    let x_data = x.host_data().unwrap().0;
    let out = call(&r, "ReqC", x, [InPlace { input: 0 }, Write]);
    assert_eq!(seen(&out), [2, 1, 1]);
    assert_eq!(y(&out).unwrap().flat::<f32>().unwrap(), &[2.0, 4.0]);
    assert_eq!(y(&out).unwrap().host_data().unwrap().0, x_data);
    let acc = vec_f32(&[10.0, 20.0]);
    let out = call(&r, "ReqC", vec_f32(&[1.0, 2.0]), [Add(acc), Null]);
    assert_eq!(out.len(), 1);
    assert_eq!(y(&out).unwrap().flat::<f32>().unwrap(), &[12.0, 24.0]);
}
