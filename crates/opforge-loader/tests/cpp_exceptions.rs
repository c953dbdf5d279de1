//! A C++ op library (tests/cpp/throwing.cc) whose kernel and shape function
//! throw inside the header's OPFORGE_GUARD: the host reports INTERNAL errors
//! carrying the exception's text and the library's name, and the process
//! and the kernel go on working.

use opforge_core::attrs::AttrMap;
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::registry::Registry;
use opforge_core::shape_inference::{InferenceContext, ShapeFn};
use opforge_core::Code;
use opforge_core::Tensor;
use opforge_loader::Loader;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

#[test]
fn cpp_exceptions_become_internal_errors() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = Path::new(env!("CARGO_TARGET_TMPDIR")).join("libthrowing_cpp.so");
    let status = Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
        .args(["-std=c++11", "-Wall", "-Wextra", "-shared", "-fPIC", "-I"])
        .arg(repo.join("include"))
        .arg("-o")
        .arg(&lib)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cpp/throwing.cc"))
        .status()
        .expect("the tests need a C++ compiler: install one (apt-get install g++) or set CXX");
    assert!(status.success(), "c++ failed");
    let r = Arc::new(Registry::new());
    let loader = Loader::new(r.clone());
    loader.load(&lib).unwrap();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(1).unwrap()), r.clone());
    let run = |v: f32| {
        ctx.op("CppThrow")
            .input(Tensor::from_vec(&[1], vec![v]).unwrap())
            .run1()
    };

    let e = run(-1.0).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    let m = e.message();
    assert!(m.contains("C++ exception: negative input in C++"), "{m}");
    assert!(m.contains("caught a panic or exception"), "{m}");
    assert!(m.contains("[library throwing_cpp 0.0.1"), "{m}");
    let e = run(1000.0).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(e.message().contains("unknown exception"), "{e}");
    // The kernel goes on working.
    assert_eq!(run(2.5).unwrap().flat::<f32>().unwrap(), &[2.5]);

    let f = r.attr::<ShapeFn>("CppThrow").unwrap();
    let def = r.op_def("CppThrow").unwrap();
    let mut ic = InferenceContext::new(&def, "t", &AttrMap::new(), &[Some(vec![1, 2, 3])], 1);
    let e = f(&mut ic).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(
        e.message()
            .contains("C++ exception: rank 3 is not supported"),
        "{e}"
    );
    assert!(
        e.message().contains("shape function of op 'CppThrow'"),
        "{e}"
    );
    let mut ic = InferenceContext::new(&def, "t", &AttrMap::new(), &[Some(vec![4])], 1);
    f(&mut ic).unwrap();
    assert_eq!(ic.debug_string(ic.output(0).unwrap()), "[4]");
}
