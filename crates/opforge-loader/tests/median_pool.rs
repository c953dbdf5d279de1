//! The `median_pool` example op library (`examples/median_pool`, a cdylib
//! built here with a nested `cargo build`, as `rust_plugin.rs` builds
//! `zero_out`) through the host loader, in a sandbox registry holding the
//! standard op library (what autodiff calls): `MedianPool` run eagerly
//! against a naive reference computed here (SAME and VALID, strides 1 and
//! 2, even and odd window counts at the borders, NaN, every dtype), its
//! shape function through a `Graph`, its gradient (`MedianPoolGrad`)
//! through autodiff and the numeric gradient checker, and the attr errors.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{
    compute_gradient, compute_gradient_error, gradients, GradientTape, Ops, Sym, SymArg,
};
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::half::{bf16, f16};
use opforge_core::registry::Registry;
use opforge_core::shape_inference::DimOrConst;
use opforge_core::Code;
use opforge_core::{DataType, OpDefBuilder, Tensor};
use opforge_loader::{LibraryHandle, Loader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// Builds `examples/median_pool` once per test binary; the path of the cdylib.
fn built_plugin() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        opforge_testing::examples::build_example(
            "median_pool",
            false,
            Path::new(env!("CARGO_TARGET_TMPDIR")),
        )
    })
}

/// One test at a time: the SDK keeps its host table in a global of the
/// library, so each test loads its own copy of the file (its own mapping).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fresh copy of the plugin, loaded into a fresh sandbox holding the
/// standard op library and a feed op `TFeed(dtype, shape)` (always fed;
/// its shape function gives `shape`, -1 an unknown dim).
fn setup(name: &str) -> (Arc<Registry>, Loader, LibraryHandle) {
    opforge_ops::link();
    let r = Registry::with_builtins();
    r.register_op(
        OpDefBuilder::new("TFeed")
            .attr("dtype: type")
            .attr("shape: list(int) = []")
            .output("y: dtype")
            .set_shape_fn(|c| {
                let dims: Vec<i64> = c.get_attr("shape")?;
                let dims: Vec<DimOrConst> = dims.into_iter().map(DimOrConst::Const).collect();
                let s = c.make_shape(&dims);
                c.set_output(0, s);
                Ok(())
            }),
    )
    .unwrap();
    let r = Arc::new(r);
    let copy = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    std::fs::copy(built_plugin(), &copy).unwrap();
    let loader = Loader::new(r.clone());
    let h = loader.load(&copy).unwrap();
    (r, loader, h)
}

fn eager(r: &Arc<Registry>) -> EagerContext {
    EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone())
}

fn attrs(k: [i64; 4], s: [i64; 4], padding: &str) -> AttrMap {
    let mut a = AttrMap::new();
    a.insert("ksize".into(), k.to_vec().into_attr_value());
    a.insert("strides".into(), s.to_vec().into_attr_value());
    a.insert("padding".into(), padding.into_attr_value());
    a
}

fn pool(
    ctx: &EagerContext,
    x: Tensor,
    k: [i64; 4],
    s: [i64; 4],
    padding: &str,
) -> opforge_core::Result<Tensor> {
    ctx.op("MedianPool")
        .input(x)
        .attr("ksize", k.to_vec())
        .attr("strides", s.to_vec())
        .attr("padding", padding)
        .run1()
}

/// MedianPool by its definition: TensorFlow's output sizes and padding,
/// the window's elements inside the input, numpy.median of them.
fn reference(
    x: &[f64],
    dims: [usize; 4],
    k: [usize; 2],
    s: [usize; 2],
    same: bool,
) -> (Vec<i64>, Vec<f64>) {
    let [n, h, w, c] = dims;
    let size = |i: usize, k: usize, s: usize| -> (usize, usize) {
        if same {
            let out = i.div_ceil(s);
            (out, ((out - 1) * s + k).saturating_sub(i) / 2)
        } else {
            ((i + 1 - k).div_ceil(s), 0)
        }
    };
    let (oh, pt) = size(h, k[0], s[0]);
    let (ow, pl) = size(w, k[1], s[1]);
    let mut out = Vec::new();
    for b in 0..n {
        for i in 0..oh {
            for j in 0..ow {
                for ch in 0..c {
                    let mut v = Vec::new();
                    for di in 0..k[0] {
                        for dj in 0..k[1] {
                            let (y, xx) = (
                                (i * s[0] + di) as i64 - pt as i64,
                                (j * s[1] + dj) as i64 - pl as i64,
                            );
                            if y >= 0 && xx >= 0 && (y as usize) < h && (xx as usize) < w {
                                v.push(x[((b * h + y as usize) * w + xx as usize) * c + ch]);
                            }
                        }
                    }
                    out.push(if v.iter().any(|e| e.is_nan()) {
                        f64::NAN
                    } else {
                        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                        let m = v.len() / 2;
                        if v.len() % 2 == 1 {
                            v[m]
                        } else {
                            (v[m - 1] + v[m]) / 2.0
                        }
                    });
                }
            }
        }
    }
    (vec![n as i64, oh as i64, ow as i64, c as i64], out)
}

fn same_values(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a.is_nan() && b.is_nan()) || a == b,
            "{what}: element {i}: got {a}, want {b}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// Small integers (halves after the even-count mean), with ties, and a NaN
/// when asked: exact in every dtype.
fn input(dims: [usize; 4], seed: u64, nan: bool) -> Vec<f64> {
    let len: usize = dims.iter().product();
    let mut state = seed;
    let mut x: Vec<f64> = (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % 13) as f64 - 6.0
        })
        .collect();
    if nan && len > 0 {
        x[len / 2] = f64::NAN;
    }
    x
}

#[test]
fn median_pool_matches_the_reference_eagerly() {
    let _s = serial();
    let (r, _loader, _h) = setup("mp_eager");
    let ctx = eager(&r);
    let cases: &[([usize; 4], [usize; 2], [usize; 2])] = &[
        // 3x3 stride 1: odd counts inside, 6 and 4 at the SAME borders.
        ([2, 5, 6, 3], [3, 3], [1, 1]),
        ([1, 3, 3, 1], [3, 3], [1, 1]),
        // Stride 2, odd sizes and even ones.
        ([1, 7, 6, 2], [3, 3], [2, 2]),
        // Even windows: even counts everywhere (2x2) or at borders.
        ([1, 4, 5, 2], [2, 2], [1, 1]),
        ([2, 6, 5, 1], [2, 3], [2, 1]),
        ([1, 5, 4, 3], [4, 1], [1, 2]),
        // Many channels (the SIMD lanes) and a 5x5 window.
        ([1, 6, 7, 17], [5, 5], [1, 1]),
        ([1, 8, 8, 16], [3, 3], [1, 1]),
    ];
    for (ci, &(dims, k, s)) in cases.iter().enumerate() {
        for same in [true, false] {
            for nan in [false, true] {
                let padding = if same { "SAME" } else { "VALID" };
                let x = input(dims, ci as u64 * 7 + 1, nan);
                let (want_dims, want) = reference(&x, dims, k, s, same);
                let what = format!("{dims:?} k {k:?} s {s:?} {padding} nan {nan}");
                let kk = [1, k[0] as i64, k[1] as i64, 1];
                let ss = [1, s[0] as i64, s[1] as i64, 1];
                let d: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
                // float and double.
                let y = pool(
                    &ctx,
                    Tensor::from_vec(&d, x.clone()).unwrap(),
                    kk,
                    ss,
                    padding,
                )
                .unwrap();
                assert_eq!(y.dtype(), DataType::Double);
                assert_eq!(y.dims(), &want_dims[..], "{what}");
                same_values(y.flat::<f64>().unwrap(), &want, &format!("double {what}"));
                let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                let y = pool(&ctx, Tensor::from_vec(&d, xf).unwrap(), kk, ss, padding).unwrap();
                assert_eq!(y.dtype(), DataType::Float);
                let got: Vec<f64> = y.flat::<f32>().unwrap().iter().map(|&v| v as f64).collect();
                same_values(&got, &want, &format!("float {what}"));
                // half and bfloat16 (computed in f32; these values are exact).
                let xh: Vec<f16> = x.iter().map(|&v| f16::from_f64(v)).collect();
                let y = pool(&ctx, Tensor::from_vec(&d, xh).unwrap(), kk, ss, padding).unwrap();
                assert_eq!(y.dtype(), DataType::Half);
                let got: Vec<f64> = y
                    .flat::<f16>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_f64())
                    .collect();
                same_values(&got, &want, &format!("half {what}"));
                let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f64(v)).collect();
                let y = pool(&ctx, Tensor::from_vec(&d, xb).unwrap(), kk, ss, padding).unwrap();
                assert_eq!(y.dtype(), DataType::BFloat16);
                let got: Vec<f64> = y
                    .flat::<bf16>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_f64())
                    .collect();
                same_values(&got, &want, &format!("bfloat16 {what}"));
            }
        }
    }
    // A hand-checked case: 3x3 SAME on a 3x3 ramp. Corners see 4 values
    // (even: the mean of the middle two), edges 6, the center 9.
    let x = Tensor::from_vec(&[1, 3, 3, 1], (1..=9).map(|v| v as f32).collect()).unwrap();
    let y = pool(&ctx, x, [1, 3, 3, 1], [1, 1, 1, 1], "SAME").unwrap();
    assert_eq!(
        y.flat::<f32>().unwrap(),
        &[3., 3.5, 4., 4.5, 5., 5.5, 6., 6.5, 7.]
    );
    // Empty outputs: VALID with a window one larger than the input.
    let x = Tensor::from_vec(&[1, 2, 2, 1], vec![1f32; 4]).unwrap();
    let y = pool(&ctx, x, [1, 3, 3, 1], [1, 1, 1, 1], "VALID").unwrap();
    assert_eq!(y.dims(), &[1, 0, 0, 1]);
}

#[test]
fn shapes_follow_tensorflows_pooling_rules() {
    let _s = serial();
    let (r, _loader, _h) = setup("mp_shapes");
    let mut g = Graph::with_registry(r.clone());
    let add =
        |g: &mut Graph, name: &str, shape: &[i64], k: [i64; 4], s: [i64; 4], padding: &str| {
            let x = Output::new(
                g.add(
                    NodeSpec::new("TFeed", &format!("{name}_x"))
                        .attr("dtype", DataType::Float)
                        .attr("shape", shape.to_vec()),
                )
                .unwrap(),
                0,
            );
            g.add(
                NodeSpec::new("MedianPool", name)
                    .input(x)
                    .attr("ksize", k.to_vec())
                    .attr("strides", s.to_vec())
                    .attr("padding", padding),
            )
            .map(|n| Output::new(n, 0))
        };
    let k3 = [1, 3, 3, 1];
    let y = add(&mut g, "a", &[8, 128, 128, 16], k3, [1, 1, 1, 1], "SAME").unwrap();
    assert_eq!(g.output_shape(y).unwrap(), Some(&[8, 128, 128, 16][..]));
    let y = add(&mut g, "b", &[2, 7, 8, 3], k3, [1, 2, 2, 1], "SAME").unwrap();
    assert_eq!(g.output_shape(y).unwrap(), Some(&[2, 4, 4, 3][..]));
    let y = add(&mut g, "c", &[2, 7, 8, 3], k3, [1, 2, 2, 1], "VALID").unwrap();
    assert_eq!(g.output_shape(y).unwrap(), Some(&[2, 3, 3, 3][..]));
    let y = add(
        &mut g,
        "d",
        &[2, 7, 8, 3],
        [1, 2, 4, 1],
        [1, 1, 3, 1],
        "VALID",
    )
    .unwrap();
    assert_eq!(g.output_shape(y).unwrap(), Some(&[2, 6, 2, 3][..]));
    // Unknown dims stay unknown, the others are computed.
    let y = add(&mut g, "e", &[-1, 7, -1, 3], k3, [1, 2, 2, 1], "VALID").unwrap();
    assert_eq!(g.output_shape(y).unwrap(), Some(&[-1, 3, -1, 3][..]));
    // An unknown rank gives four unknown dims.
    let p = Output::new(
        g.add(NodeSpec::new("Placeholder", "p").attr("dtype", DataType::Float))
            .unwrap(),
        0,
    );
    assert_eq!(g.output_shape(p).unwrap(), None);
    let y = Output::new(
        g.add(
            NodeSpec::new("MedianPool", "f")
                .input(p)
                .attr("ksize", k3.to_vec())
                .attr("strides", vec![1i64, 1, 1, 1])
                .attr("padding", "SAME"),
        )
        .unwrap(),
        0,
    );
    assert_eq!(g.output_shape(y).unwrap(), Some(&[-1, -1, -1, -1][..]));
    // The gradient op has orig_input's shape.
    let dy = Output::new(
        g.add(
            NodeSpec::new("TFeed", "dy")
                .attr("dtype", DataType::Float)
                .attr("shape", vec![2i64, 4, 4, 3]),
        )
        .unwrap(),
        0,
    );
    let x = Output::new(g.find("b_x").unwrap(), 0);
    let dx = Output::new(
        g.add(
            NodeSpec::new("MedianPoolGrad", "dx")
                .input(x)
                .input(dy)
                .attr("ksize", k3.to_vec())
                .attr("strides", vec![1i64, 2, 2, 1])
                .attr("padding", "SAME"),
        )
        .unwrap(),
        0,
    );
    assert_eq!(g.output_shape(dx).unwrap(), Some(&[2, 7, 8, 3][..]));
    // Errors at construction: a rank other than 4, a window larger than
    // a VALID input, ksize of 5 values.
    let e = add(&mut g, "g", &[7, 8, 3], k3, [1, 1, 1, 1], "SAME").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("rank"), "{e}");
    let e = add(&mut g, "h", &[1, 1, 8, 3], k3, [1, 1, 1, 1], "VALID").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("Negative dimension size"), "{e}");
    let mut g2 = Graph::with_registry(r.clone());
    let x = Output::new(
        g2.add(
            NodeSpec::new("TFeed", "x")
                .attr("dtype", DataType::Float)
                .attr("shape", vec![1i64, 4, 4, 1]),
        )
        .unwrap(),
        0,
    );
    let e = g2
        .add(
            NodeSpec::new("MedianPool", "j")
                .input(x)
                .attr("ksize", vec![1i64, 3, 3, 1, 1])
                .attr("strides", vec![1i64, 1, 1, 1])
                .attr("padding", "SAME"),
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message()
            .contains("MedianPool requires the ksize attribute to contain 4 values, but got: 5"),
        "{e}"
    );
    // A session runs the graph's MedianPool.
    let y = Output::new(
        g2.add(
            NodeSpec::new("MedianPool", "y")
                .input(x)
                .attr("ksize", vec![1i64, 2, 2, 1])
                .attr("strides", vec![1i64, 2, 2, 1])
                .attr("padding", "VALID"),
        )
        .unwrap(),
        0,
    );
    assert_eq!(g2.output_shape(y).unwrap(), Some(&[1, 2, 2, 1][..]));
    let s = Session::new(g2).unwrap();
    let xs: Vec<f32> = (1..=16).map(|v| v as f32).collect();
    let out = s
        .run(
            vec![(x, Tensor::from_vec(&[1, 4, 4, 1], xs).unwrap())],
            &[y],
            &[],
        )
        .unwrap();
    // Windows {1,2,5,6}, {3,4,7,8}, {9,10,13,14}, {11,12,15,16}.
    assert_eq!(out[0].flat::<f32>().unwrap(), &[3.5, 5.5, 11.5, 13.5]);
}

/// Distinct values (no ties): a permutation of 0..len scaled, so the
/// median is differentiable around them with the checker's step.
fn distinct(dims: &[i64], seed: u64) -> Tensor {
    let len = dims.iter().product::<i64>() as usize;
    let mut perm: Vec<usize> = (0..len).collect();
    let mut state = seed;
    for i in (1..len).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        perm.swap(i, (state >> 33) as usize % (i + 1));
    }
    Tensor::from_vec(
        dims,
        perm.into_iter().map(|v| v as f64 * 0.25 - 3.0).collect(),
    )
    .unwrap()
}

#[test]
fn gradient_through_autodiff_and_the_numeric_checker() {
    let _s = serial();
    let (r, _loader, _h) = setup("mp_grad");
    let ctx = eager(&r);
    // Eagerly on a tape, hand-checked: 3x3 SAME over a 3x3 ramp. Center
    // window (9 values): 1 to 5. Corners (4 values): 1/2 to each middle
    // one. Edges (6 values): 1/2 to each of the 3rd and 4th.
    let a = attrs([1, 3, 3, 1], [1, 1, 1, 1], "SAME");
    let mut tape = GradientTape::new(&ctx, false);
    let x =
        tape.watch(Tensor::from_vec(&[1, 3, 3, 1], (1..=9).map(|v| v as f32).collect()).unwrap());
    let y = tape.call("MedianPool", &[SymArg::One(x)], &a).unwrap()[0];
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    let g = g[0].as_ref().unwrap();
    assert_eq!(g.dims(), &[1, 3, 3, 1]);
    // Output (0,0): {1,2,4,5} -> 2,4. (0,1): {1,2,3,4,5,6} -> 3,4.
    // (0,2): {2,3,5,6} -> 3,5. (1,0): {1,2,4,5,7,8} -> 4,5. (1,1): 5.
    // (1,2): {2,3,5,6,8,9} -> 5,6. (2,0): {4,5,7,8} -> 5,7.
    // (2,1): {4,5,6,7,8,9} -> 6,7. (2,2): {5,6,8,9} -> 6,8.
    let want = [0., 0.5, 1.0, 1.5, 3.0, 1.5, 1.0, 0.5, 0.];
    assert_eq!(g.flat::<f32>().unwrap(), &want);
    // Ties go to the lowest flat index.
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[1, 1, 3, 1], vec![2f64, 2., 2.]).unwrap());
    let y = tape
        .call(
            "MedianPool",
            &[SymArg::One(x)],
            &attrs([1, 1, 3, 1], [1, 1, 1, 1], "VALID"),
        )
        .unwrap()[0];
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    assert_eq!(g[0].as_ref().unwrap().flat::<f64>().unwrap(), &[0., 1., 0.]);
    // The numeric checker agrees, on inputs without ties: SAME and VALID,
    // strides 1 and 2, odd and even windows.
    for (k, s, padding) in [
        ([1, 3, 3, 1], [1, 1, 1, 1], "SAME"),
        ([1, 3, 3, 1], [1, 2, 2, 1], "VALID"),
        ([1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        ([1, 2, 3, 1], [1, 2, 1, 1], "SAME"),
    ] {
        let a = attrs(k, s, padding);
        let jac = compute_gradient(
            &ctx,
            &move |ops: &mut dyn Ops, xs: &[Sym]| {
                Ok(ops.call("MedianPool", &[SymArg::One(xs[0])], &a)?[0])
            },
            &[distinct(&[2, 5, 4, 2], 3)],
        )
        .unwrap();
        let err = compute_gradient_error(&jac);
        assert!(err < 1e-6, "{k:?} {s:?} {padding}: {err}");
    }
    // In a graph: gradients() adds MedianPoolGrad; MedianPoolGrad itself is
    // not differentiable.
    let mut g = Graph::with_registry(r.clone());
    let x = Output::new(
        g.add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
            .unwrap(),
        0,
    );
    let y = Output::new(
        g.add(
            NodeSpec::new("MedianPool", "y")
                .input(x)
                .attr("ksize", vec![1i64, 3, 3, 1])
                .attr("strides", vec![1i64, 1, 1, 1])
                .attr("padding", "SAME"),
        )
        .unwrap(),
        0,
    );
    let dx = gradients(&mut g, &[y], &[x], None).unwrap()[0].unwrap();
    let s = Session::new(g).unwrap();
    let out = s
        .run(
            vec![(
                x,
                Tensor::from_vec(&[1, 3, 3, 1], (1..=9).map(|v| v as f32).collect()).unwrap(),
            )],
            &[dx],
            &[],
        )
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &want);
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[1, 1, 3, 1], vec![1f32, 2., 3.]).unwrap());
    let dy = tape.watch(Tensor::from_vec(&[1, 1, 1, 1], vec![1f32]).unwrap());
    let a = attrs([1, 1, 3, 1], [1, 1, 1, 1], "VALID");
    let dx = tape
        .call("MedianPoolGrad", &[SymArg::One(x), SymArg::One(dy)], &a)
        .unwrap()[0];
    let g = tape.gradient_tensors(dx, &[x, dy]).unwrap();
    assert!(g.iter().all(Option::is_none));
    // A grad of the wrong shape is refused.
    let e = ctx
        .op("MedianPoolGrad")
        .input(Tensor::from_vec(&[1, 1, 3, 1], vec![1f32, 2., 3.]).unwrap())
        .input(Tensor::from_vec(&[1, 1, 2, 1], vec![1f32, 1.]).unwrap())
        .attr("ksize", vec![1i64, 1, 3, 1])
        .attr("strides", vec![1i64, 1, 1, 1])
        .attr("padding", "VALID")
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("grad must have the shape"), "{e}");
}

#[test]
fn attr_errors_are_tensorflows() {
    let _s = serial();
    let (r, _loader, _h) = setup("mp_errors");
    let ctx = eager(&r);
    let x = || Tensor::from_vec(&[1, 3, 3, 1], vec![1f32; 9]).unwrap();
    let err = |k: Vec<i64>, s: Vec<i64>, padding: &str| {
        ctx.op("MedianPool")
            .input(x())
            .attr("ksize", k)
            .attr("strides", s)
            .attr("padding", padding)
            .run1()
            .unwrap_err()
    };
    let one = vec![1i64, 1, 1, 1];
    for (k, s, padding, want) in [
        (
            vec![2, 1, 1, 1],
            one.clone(),
            "SAME",
            "Pooling is not yet supported on the batch dimension.",
        ),
        (
            one.clone(),
            vec![2, 1, 1, 1],
            "SAME",
            "Pooling is not yet supported on the batch dimension.",
        ),
        (
            vec![1, 1, 1, 2],
            one.clone(),
            "SAME",
            "Pooling is not yet supported on the depth dimension.",
        ),
        (
            one.clone(),
            vec![1, 1, 1, 3],
            "VALID",
            "Pooling is not yet supported on the depth dimension.",
        ),
        (
            vec![1, 3, 3, 1, 1],
            one.clone(),
            "SAME",
            "Sliding window ksize field must specify 4 dimensions",
        ),
        (
            one.clone(),
            vec![1, 1, 1, 1, 1],
            "SAME",
            "Sliding window stride field must specify 4 dimensions",
        ),
        (
            vec![1, 0, 3, 1],
            one.clone(),
            "SAME",
            "Sliding window ksize for dimension 1 must be >= 1, got 0",
        ),
        (
            one.clone(),
            vec![1, 1, -2, 1],
            "SAME",
            "Sliding window stride for dimension 2 must be >= 1, got -2",
        ),
    ] {
        let e = err(k.clone(), s.clone(), padding);
        assert_eq!(e.code(), Code::InvalidArgument, "{k:?} {s:?}: {e}");
        assert!(
            e.message().starts_with(&format!(
                "the kernel creation of op 'MedianPool' (node 'MedianPool') failed: {want} [library median_pool 0.1.0"
            )),
            "{k:?} {s:?}: {e}"
        );
    }
    // What the OpDef checks: list lengths >= 4, the padding values, T.
    let e = err(vec![1, 3, 3], one.clone(), "SAME");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("ksize"), "{e}");
    let e = err(vec![1, 3, 3, 1], one.clone(), "FULL");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("FULL"), "{e}");
    let e = ctx
        .op("MedianPool")
        .input(Tensor::from_vec(&[1, 1, 1, 1], vec![1i32]).unwrap())
        .attr("ksize", one.clone())
        .attr("strides", one.clone())
        .attr("padding", "SAME")
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // At compute: the input's rank, a VALID window larger than the input.
    let e = ctx
        .op("MedianPool")
        .input(Tensor::from_vec(&[3, 3], vec![1f32; 9]).unwrap())
        .attr("ksize", one.clone())
        .attr("strides", one.clone())
        .attr("padding", "SAME")
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message()
            .contains("input must be 4-dimensional, got shape [3,3]"),
        "{e}"
    );
    let e = ctx
        .op("MedianPool")
        .input(Tensor::from_vec(&[1, 1, 3, 1], vec![1f32; 3]).unwrap())
        .attr("ksize", vec![1i64, 3, 3, 1])
        .attr("strides", one.clone())
        .attr("padding", "VALID")
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message()
            .contains("Computed output size would be negative: -1"),
        "{e}"
    );
    // The kernel still works afterwards.
    let y = ctx
        .op("MedianPool")
        .input(x())
        .attr("ksize", vec![1i64, 3, 3, 1])
        .attr("strides", one.clone())
        .attr("padding", "VALID")
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[1.]);
}
