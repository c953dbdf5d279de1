//! TensorFlow custom-op C++ sources (tests/tf/*.cc, written the way
//! TensorFlow's guide writes them) built with TensorFlow's documented build
//! line and opforge's flags,
//!
//!     c++ -std=c++17 -shared -fPIC -O2 SRC... -o LIB $(opforge lib cflags) $(opforge lib ldflags)
//!
//! then loaded and run eagerly, in a graph, through their shape functions,
//! and through the CLI. Expected values are worked out by hand from each
//! op's definition.

use opforge::autodiff::{compute_gradient, compute_gradient_error, OpsExt};
use opforge::device::CpuDevice;
use opforge::eager::EagerContext;
use opforge::graph::{Graph, NodeSpec, Output, Session};
use opforge::registry::Registry;
use opforge::shape_inference::harness::{infer_error, infer_ok, ShapeTestOp};
use opforge::{Code, DataType, OpDefBuilder, Tensor};
use opforge_loader::Loader;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

/// The libraries of tests/tf/: each `.cc` file is one, except
/// `NAME_ops.cc` and `NAME_kernels.cc`, which build one library `NAME`, as
/// TensorFlow's custom-op repository lays an op out (the rule of
/// scripts/compare_tf_cpp.py, which builds the same files against
/// TensorFlow's own headers).
fn library_sources(dir: &Path) -> Vec<(String, Vec<String>)> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".cc"))
        .collect();
    files.sort();
    let mut libs: Vec<(String, Vec<String>)> = Vec::new();
    for f in files {
        let stem = f.trim_end_matches(".cc");
        let name = stem
            .strip_suffix("_ops")
            .or_else(|| stem.strip_suffix("_kernels"))
            .unwrap_or(stem)
            .to_string();
        match libs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, srcs)) => srcs.push(f),
            None => libs.push((name, vec![f])),
        }
    }
    libs
}

/// Builds every library once (in parallel: each file takes seconds with
/// Eigen), with the documented command line run by `sh`; the opforge
/// binary is found on PATH as a user's would be.
fn libs() -> &'static HashMap<String, PathBuf> {
    static LIBS: OnceLock<HashMap<String, PathBuf>> = OnceLock::new();
    LIBS.get_or_init(|| {
        let bin = Path::new(env!("CARGO_BIN_EXE_opforge")).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tf");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tf_layer");
        std::fs::create_dir_all(&out).unwrap();
        let handles: Vec<_> = library_sources(&src)
            .into_iter()
            .map(|(name, files)| {
                let lib = out.join(format!("lib{name}.so"));
                let line = format!(
                    "c++ -std=c++17 -shared -fPIC -O2 -Wall -Wextra -Werror {} -o {} \
                     $(opforge lib cflags) $(opforge lib ldflags)",
                    files.join(" "),
                    lib.display()
                );
                let (src, path) = (src.clone(), path.clone());
                std::thread::spawn(move || {
                    let o = Command::new("sh")
                        .args(["-c", &line])
                        .current_dir(&src)
                        .env("PATH", &path)
                        .output()
                        .expect("sh runs");
                    assert!(
                        o.status.success(),
                        "{line}\n{}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                    (name, lib)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A fresh registry of the standard ops (autodiff builds gradients from
/// them), with a feed op for graphs, holding library `name`.
fn load(name: &str) -> (Arc<Registry>, EagerContext) {
    opforge::opforge_ops::link();
    let r = Registry::with_builtins();
    r.register_op(
        OpDefBuilder::new("TFeed")
            .attr("dtype: type")
            .output("y: dtype"),
    )
    .unwrap();
    let r = Arc::new(r);
    Loader::new(r.clone()).load(&libs()[name]).unwrap();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone());
    (r, ctx)
}

fn t<T: opforge::tensor::Element>(dims: &[i64], v: Vec<T>) -> Tensor {
    Tensor::from_vec(dims, v).unwrap()
}

#[test]
fn the_guides_zero_out_runs_eagerly_and_in_a_graph() {
    let (r, ctx) = load("zero_out");
    let y = ctx
        .op("ZeroOut")
        .input(t(&[2, 2], vec![5i32, 6, 7, 8]))
        .run1()
        .unwrap();
    assert_eq!(y.dims(), &[2, 2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[5, 0, 0, 0]);
    let e = ctx
        .op("ZeroOut")
        .input(Tensor::scalar(1f32))
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("TFeed", "x").attr("dtype", DataType::Int32))
            .unwrap(),
        0,
    );
    let z = g.add(NodeSpec::new("ZeroOut", "z").input(x)).unwrap();
    let s = Session::new(g).unwrap();
    let out = s
        .run(
            vec![(x, t(&[3], vec![9i32, 8, 7]))],
            &[Output::new(z, 0)],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].flat::<i32>().unwrap(), &[9, 0, 0]);

    let shape = ShapeTestOp::new("ZeroOut").in_registry(r.clone());
    infer_ok(&shape, "[2,?]", "in0").unwrap();
    infer_ok(&shape, "?", "in0").unwrap();
}

#[test]
fn the_guides_variants_polymorphism_attrs_and_lists() {
    let (_r, ctx) = load("guide_variants");
    let y = ctx
        .op("ZeroOutPoly")
        .input(t(&[3], vec![1.5f32, 2.0, 3.0]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[1.5, 0.0, 0.0]);
    let y = ctx
        .op("ZeroOutPoly")
        .input(t(&[2], vec![-4i32, 2]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[-4, 0]);
    // No kernel for double (the op's T allows only float and int32).
    let e = ctx
        .op("ZeroOutPoly")
        .input(t(&[1], vec![1f64]))
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");

    let preserve = |i: i64| {
        ctx.op("ZeroOutPreserve")
            .attr("preserve_index", i)
            .input(t(&[4], vec![5i32, 6, 7, 8]))
            .run1()
    };
    assert_eq!(preserve(2).unwrap().flat::<i32>().unwrap(), &[0, 0, 7, 0]);
    // OP_REQUIRES in Compute and in the constructor: TensorFlow's code and
    // message.
    let e = preserve(9).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("preserve_index out of range"), "{e}");
    let e = preserve(-1).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("Need preserve_index >= 0, got -1"),
        "{e}"
    );

    let ys = ctx
        .op("ZeroOutList")
        .input_list(vec![t(&[2], vec![5i32, 6]), t(&[3], vec![7i32, 8, 9])])
        .run()
        .unwrap();
    assert_eq!(ys.len(), 2);
    assert_eq!(ys[0].flat::<i32>().unwrap(), &[5, 0]);
    assert_eq!(ys[1].flat::<i32>().unwrap(), &[7, 0, 0]);

    let ys = ctx
        .op("ZeroOutTypes")
        .input_list(vec![t(&[2], vec![5i64, 6]), t(&[2], vec![7.5f64, 8.0])])
        .run()
        .unwrap();
    assert_eq!(ys[0].flat::<i64>().unwrap(), &[5, 0]);
    assert_eq!(ys[1].flat::<f64>().unwrap(), &[7.5, 0.0]);
}

#[test]
fn shape_functions_use_the_inference_context() {
    let (r, ctx) = load("shapes");
    let op = |name: &str| ShapeTestOp::new(name).in_registry(r.clone());
    let pair = op("PairConcat").attr("T", DataType::Float);
    infer_ok(&pair, "[2,3];[2,4]", "[d0_0,7]").unwrap();
    infer_ok(&pair, "[?,3];[5,?]", "[d1_0,?]").unwrap();
    infer_ok(&pair, "?;[5,1]", "[d1_0,?]").unwrap();
    infer_error(
        &pair,
        "[2,3];[3,4]",
        "Dimensions must be equal, but are 2 and 3",
    )
    .unwrap();
    infer_error(&pair, "[2];[2,4]", "Shape must be rank 2 but is rank 1").unwrap();

    let repeat = op("RepeatRows");
    infer_ok(&repeat, "[3];[]", "[?,d0_0]").unwrap();
    let known = op("RepeatRows").input_tensor(1, Tensor::scalar(4i32));
    infer_ok(&known, "[3];[]", "[4,d0_0]").unwrap();
    let negative = op("RepeatRows").input_tensor(1, Tensor::scalar(-2i32));
    infer_error(&negative, "[3];[]", "rows must be >= 0, got -2").unwrap();

    let sum = op("LastDimSum").attr("T", DataType::Double);
    infer_ok(&sum, "[2,3,4]", "[d0_0,d0_1]").unwrap();
    infer_ok(&sum, "[5]", "[]").unwrap();
    infer_error(&sum, "[]", "must be at least rank 1").unwrap();

    let bmax = op("BroadcastMax").attr("T", DataType::Float);
    infer_ok(&bmax, "[2,1,3];[4,1]", "[d0_0,d1_0,d0_2]").unwrap();
    infer_ok(&bmax, "?;[4,1]", "?").unwrap();
    infer_error(
        &bmax,
        "[2];[3]",
        "Dimensions must be equal, but are 2 and 3",
    )
    .unwrap();

    // The kernels agree with their shape functions.
    let c = ctx
        .op("PairConcat")
        .input(t(&[2, 1], vec![1i32, 2]))
        .input(t(&[2, 2], vec![3i32, 4, 5, 6]))
        .run1()
        .unwrap();
    assert_eq!(c.dims(), &[2, 3]);
    assert_eq!(c.flat::<i32>().unwrap(), &[1, 3, 4, 2, 5, 6]);
    let y = ctx
        .op("RepeatRows")
        .input(t(&[2], vec![1.5f32, -1.0]))
        .input(Tensor::scalar(3i32))
        .run1()
        .unwrap();
    assert_eq!(y.dims(), &[3, 2]);
    assert_eq!(y.flat::<f32>().unwrap(), &[1.5, -1.0, 1.5, -1.0, 1.5, -1.0]);
    let e = ctx
        .op("RepeatRows")
        .input(t(&[2], vec![1.5f32, -1.0]))
        .input(Tensor::scalar(-1i32))
        .run1()
        .unwrap_err();
    assert!(e.message().contains("rows must be >= 0, got -1"), "{e}");
    let s = ctx
        .op("LastDimSum")
        .input(t(&[2, 3], vec![1f64, 2.0, 3.0, 4.0, 5.0, 6.0]))
        .run1()
        .unwrap();
    assert_eq!(s.dims(), &[2]);
    assert_eq!(s.flat::<f64>().unwrap(), &[6.0, 15.0]);
}

#[test]
fn eigen_expressions_shard_temporaries_and_forwarding() {
    let (r, ctx) = load("kernels");
    let y = ctx
        .op("ScaleShift")
        .attr("scale", 2.0f32)
        .attr("shift", 0.5f32)
        .input(t(&[3], vec![1f32, 2.0, 3.0]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[2.5, 4.5, 6.5]);
    // The attr's default shift, double, and an odd length (Eigen's vector
    // loop and its tail).
    let x: Vec<f64> = (0..37).map(|i| i as f64 * 0.25).collect();
    let y = ctx
        .op("ScaleShift")
        .attr("scale", -3.0f32)
        .input(t(&[37], x.clone()))
        .run1()
        .unwrap();
    let want: Vec<f64> = x.iter().map(|v| v * -3.0).collect();
    assert_eq!(y.flat::<f64>().unwrap(), want.as_slice());

    let stats = ctx
        .op("RowStats")
        .input(t(&[2, 3], vec![1f32, 2.0, 6.0, -1.0, -5.0, 0.0]))
        .run()
        .unwrap();
    assert_eq!(stats[0].flat::<f32>().unwrap(), &[3.0, -2.0]);
    assert_eq!(stats[1].flat::<f32>().unwrap(), &[6.0, 0.0]);
    let e = ctx
        .op("RowStats")
        .input(t(&[3], vec![1f32, 2.0, 3.0]))
        .run()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("x must be a matrix, got shape [3]"),
        "{e}"
    );

    // Shard on the host's two threads: more than one shard, every element.
    let n = 200_000usize;
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
    let out = ctx
        .op("ShardSquare")
        .input(t(&[n as i64], x.clone()))
        .run()
        .unwrap();
    let y = out[0].flat::<f64>().unwrap();
    assert!(y.iter().zip(&x).all(|(y, x)| *y == x * x));
    assert!(out[1].scalar_value::<i32>().unwrap() >= 2, "{:?}", out[1]);

    // forward_input_or_allocate_output: in place when nothing else holds
    // the input, a new buffer when the caller keeps it.
    let x = t(&[2], vec![1f32, 2.0]);
    let held = ctx.op("AddOneInPlace").input(x.clone()).run().unwrap();
    assert_eq!(held[0].flat::<f32>().unwrap(), &[2.0, 3.0]);
    assert!(!held[1].scalar_value::<bool>().unwrap());
    assert_eq!(x.flat::<f32>().unwrap(), &[1.0, 2.0]);
    let free = ctx.op("AddOneInPlace").input(x).run().unwrap();
    assert_eq!(free[0].flat::<f32>().unwrap(), &[2.0, 3.0]);
    assert!(free[1].scalar_value::<bool>().unwrap());

    // allocate_temp made an output, and an input set as an output.
    let x = t(&[4], vec![1i64, 2, 3, 4]);
    let out = ctx.op("CumsumTemp").input(x.clone()).run().unwrap();
    assert_eq!(out[0].flat::<i64>().unwrap(), &[1, 3, 6, 10]);
    assert_eq!(out[1].flat::<i64>().unwrap(), &[1, 2, 3, 4]);

    // String input and output.
    let out = ctx
        .op("RepeatString")
        .attr("times", 2i64)
        .input(
            Tensor::from_strings(&[3], vec![b"ab".to_vec(), Vec::new(), b"xyz".to_vec()]).unwrap(),
        )
        .run()
        .unwrap();
    assert_eq!(
        out[0].strings().unwrap(),
        &[b"abab".to_vec(), Vec::new(), b"xyzxyz".to_vec()]
    );
    assert_eq!(out[1].flat::<i64>().unwrap(), &[4, 0, 6]);

    // The same kernels in a graph.
    let mut g = Graph::with_registry(r.clone());
    let xf = Output::new(
        g.add(NodeSpec::new("TFeed", "x").attr("dtype", DataType::Float))
            .unwrap(),
        0,
    );
    let ss = g
        .add(
            NodeSpec::new("ScaleShift", "ss")
                .input(xf)
                .attr("scale", 10.0f32),
        )
        .unwrap();
    let cs = g
        .add(NodeSpec::new("CumsumTemp", "cs").input(Output::new(ss, 0)))
        .unwrap();
    let s = Session::new(g).unwrap();
    let out = s
        .run(
            vec![(xf, t(&[3], vec![1f32, 2.0, 3.0]))],
            &[Output::new(cs, 0), Output::new(cs, 1)],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[10.0, 30.0, 60.0]);
    assert_eq!(out[1].flat::<f32>().unwrap(), &[10.0, 20.0, 30.0]);
}

#[test]
fn misuse_and_exceptions_are_clean_errors_and_the_kernel_goes_on() {
    let (_r, ctx) = load("kernels");
    let run = |how: &str| {
        ctx.op("Misuse")
            .attr("how", how)
            .input(t(&[2], vec![3i32, 4]))
            .run1()
    };
    for (how, text) in [
        ("wrong_type", "a Tensor of dtype int32 read as float"),
        ("throw", "the kernel threw"),
        ("bad_index", "input(7): the op has 1 inputs"),
    ] {
        let e = run(how).unwrap_err();
        assert_eq!(e.code(), Code::Internal, "{e}");
        assert!(e.message().contains(text), "{e}");
        assert!(e.message().contains("[library kernels 0.0.0"), "{e}");
    }
    // The library and its other kernels still work.
    let y = ctx
        .op("ScaleShift")
        .attr("scale", 1.0f32)
        .input(t(&[1], vec![4f32]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[4.0]);
}

#[test]
fn a_library_of_two_files_holds_one_library_record() {
    let (_r, ctx) = load("split");
    let y = ctx
        .op("Negated")
        .input(t(&[2], vec![1.5f32, -2.0]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[-1.5, 2.0]);
    // `lib inspect`: named after the file, its declaration unknown until
    // sealed; `lib seal` records the op and its two kernels.
    let lib = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tf_layer/libsplit_sealed.so");
    std::fs::copy(&libs()["split"], &lib).unwrap();
    let opforge = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_opforge"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or(serde_json::Value::Null)
    };
    let file = lib.to_str().unwrap();
    let j = opforge(&["lib", "inspect", file]);
    assert_eq!(j["name"], "split_sealed");
    assert_eq!(j["ops"], serde_json::Value::Null);
    assert_eq!(j["abi"]["major"], 1);
    opforge(&["lib", "seal", file]);
    let j = opforge(&["lib", "inspect", file]);
    assert_eq!(j["sealed"], true);
    assert_eq!(j["ops"][0]["name"], "Negated");
    assert_eq!(j["kernels"].as_array().unwrap().len(), 2);
}

#[test]
fn libraries_built_with_the_flags_unload() {
    // The cflags keep libstdc++ from binding to the library's copies of its
    // inline functions and (with GCC) statics from becoming unique symbols,
    // either of which would pin the library for the life of the process.
    for name in ["kernels", "shapes"] {
        let lib = libs()[name].to_str().unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_opforge"))
            .args(["lib", "cycle", lib, "--times", "3"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            text.contains("unmapped after every unload: yes"),
            "{name}: {text}"
        );
    }
}

#[test]
fn a_gradient_registered_with_register_op_gradient() {
    let (_r, ctx) = load("gradient");
    let xs = [0.5f64, -1.25, 2.0];
    let cube = |ops: &mut dyn opforge::autodiff::Ops, x: &[opforge::autodiff::Sym]| {
        ops.op1("Cube", &[x[0]], &[])
    };
    let jac = compute_gradient(&ctx, &cube, &[t(&[3], xs.to_vec())]).unwrap();
    // The theoretical Jacobian is diagonal with 3 x^2 (FunctionDefHelper's
    // Const, Cast to $T, Square and Mul, evaluated by the host).
    let j = &jac[0];
    for (r, x) in xs.iter().enumerate() {
        for c in 0..3 {
            let want = if r == c { 3.0 * x * x } else { 0.0 };
            assert_eq!(j.theoretical[r * 3 + c], want, "({r}, {c})");
        }
    }
    assert!(
        compute_gradient_error(&jac) < 1e-6,
        "{}",
        compute_gradient_error(&jac)
    );
    // float32: the Cast goes to the node's T.
    let jac = compute_gradient(&ctx, &cube, &[t(&[2], vec![1.5f32, -0.5])]).unwrap();
    assert_eq!(jac[0].theoretical, vec![6.75, 0.0, 0.0, 0.75]);
}
