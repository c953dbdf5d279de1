//! `MedianPool` of the `median_pool` example op library (examples/median_pool,
//! built here in release with a nested cargo and loaded into a sandbox
//! registry) on `[8, 128, 128, 16]` float32, 3x3 windows, stride 1, SAME,
//! eagerly, against numpy's `sliding_window_view` + `median` in the same
//! run when a Python with numpy is found (`target/bench-venv/bin/python`,
//! the repo's venv for baselines, then `python3`). numpy runs on the input
//! padded by one (edge values) with VALID windows, the same 2M medians of
//! 9; its interior outputs (windows inside the input) must equal ours.
//! Issue 14's targets: at least 20x numpy, at most 3 ms.
//!
//! `cargo bench -p opforge-loader --bench median_pool`. The figures are
//! medians (and minimums) over the samples.

use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::registry::Registry;
use opforge_core::Tensor;
use opforge_loader::Loader;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

const DIMS: [usize; 4] = [8, 128, 128, 16];

/// Builds `examples/median_pool` in release into its own target dir; the
/// path of the cdylib.
fn build_plugin() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("median_pool_plugin_bench");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&repo)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "median_pool",
            "--lib",
            "--target-dir",
        ])
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "cargo build --release -p median_pool failed"
    );
    target.join("release").join(format!(
        "{}median_pool{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A Python that imports numpy: the bench venv's, else `python3`.
fn python_with_numpy() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-venv/bin/python");
    [venv, PathBuf::from("python3")].into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

const NUMPY: &str = r#"
import sys, time, numpy as np
from numpy.lib.stride_tricks import sliding_window_view
src, dst, n, h, w, c = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
x = np.fromfile(src, dtype=np.float32).reshape(n, h, w, c)
def run():
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="edge")
    return np.median(sliding_window_view(p, (3, 3), axis=(1, 2)), axis=(-2, -1))
y = run()
ts = []
for _ in range(5):
    t = time.perf_counter()
    run()
    ts.append(time.perf_counter() - t)
ts.sort()
y.astype(np.float32).tofile(dst)
print(f"{ts[len(ts) // 2] * 1e3:.3f} {ts[0] * 1e3:.3f} {np.__version__}")
"#;

/// TensorFlow's composition (the guide's alternative to a custom op):
/// `extract_patches` + `sort`, in a `tf.function`. Exits 3 when TensorFlow
/// is not installed.
const TENSORFLOW: &str = r#"
import sys, time, numpy as np
try:
    import tensorflow as tf
except Exception as e:
    print(f"SKIP {type(e).__name__}: {e}")
    sys.exit(3)
src, dst, n, h, w, c = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
x = tf.constant(np.fromfile(src, dtype=np.float32).reshape(n, h, w, c))
@tf.function
def run(x):
    p = tf.image.extract_patches(x, sizes=[1, 3, 3, 1], strides=[1, 1, 1, 1],
                                 rates=[1, 1, 1, 1], padding="SAME")
    p = tf.reshape(p, [n, h, w, 9, c])
    return tf.sort(p, axis=3)[:, :, :, 4, :]
y = run(x).numpy()
ts = []
for _ in range(5):
    t = time.perf_counter()
    run(x).numpy()
    ts.append(time.perf_counter() - t)
ts.sort()
y.astype(np.float32).tofile(dst)
print(f"{ts[len(ts) // 2] * 1e3:.3f} {ts[0] * 1e3:.3f} {tf.__version__}")
"#;

/// A baseline script's median ms (median, min), version and outputs;
/// `Ok(None)` when it reports SKIP (its framework is not installed).
type Baseline = Option<(f64, f64, String, Vec<f32>)>;

/// Runs `script` (NUMPY or TENSORFLOW) on `x`.
fn python_baseline(python: &Path, script: &str, x: &[f32]) -> Result<Baseline, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("median_pool_bench_in.f32");
    let dst = dir.join("median_pool_bench_out.f32");
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&src, bytes).map_err(|e| e.to_string())?;
    let out = Command::new(python)
        .env_remove("OPENBLAS_CORETYPE")
        .env_remove("OPENBLAS_L2_SIZE")
        .arg("-c")
        .arg(script)
        .arg(&src)
        .arg(&dst)
        .args(DIMS.map(|d| d.to_string()))
        .output()
        .map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.code() == Some(3) && line.starts_with("SKIP") {
        return Ok(None);
    }
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let f: Vec<&str> = line.split_whitespace().collect();
    let parse = |s: &str| s.parse::<f64>().map_err(|e| format!("{line}: {e}"));
    let y: Vec<f32> = std::fs::read(&dst)
        .map_err(|e| e.to_string())?
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok(Some((parse(f[0])?, parse(f[1])?, f[2].to_string(), y)))
}

/// How many interior outputs (borders aside: padding differs) of `got`
/// differ from `want`.
fn interior_mismatches(got: &[f32], want: &[f32]) -> usize {
    let [n, h, w, c] = DIMS;
    let mut mismatches = 0usize;
    for b in 0..n {
        for i in 1..h - 1 {
            for j in 1..w - 1 {
                let at = ((b * h + i) * w + j) * c;
                mismatches += (0..c).filter(|&k| got[at + k] != want[at + k]).count();
            }
        }
    }
    mismatches
}

fn equal_text(mismatches: usize) -> String {
    if mismatches == 0 {
        "yes".to_string()
    } else {
        format!("NO, {mismatches} differ")
    }
}

fn main() {
    let lib = build_plugin();
    let sandbox = Arc::new(Registry::new());
    let loader = Loader::new(sandbox.clone());
    loader.load(&lib).expect("the plugin loads");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ctx =
        EagerContext::with_registry(Arc::new(CpuDevice::new(threads).unwrap()), sandbox.clone());
    let ctx1 = EagerContext::with_registry(Arc::new(CpuDevice::new(1).unwrap()), sandbox);

    let len: usize = DIMS.iter().product();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let x: Vec<f32> = (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let dims = DIMS.map(|d| d as i64);
    let input = Tensor::from_vec(&dims, x.clone()).unwrap();
    let run_on = |ctx: &EagerContext| {
        ctx.op("MedianPool")
            .input(input.clone())
            .attr("ksize", vec![1i64, 3, 3, 1])
            .attr("strides", vec![1i64, 1, 1, 1])
            .attr("padding", "SAME")
            .run1()
            .unwrap()
    };
    let run = || run_on(&ctx);
    let y = run();
    for _ in 0..5 {
        run();
    }
    let mut samples: Vec<f64> = (0..31)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(run());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let ours_min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let ours = median(&mut samples);
    println!(
        "median_pool [8,128,128,16] f32 3x3 stride 1 SAME, {threads} threads: \
         opforge plugin {ours:.3} ms (min {ours_min:.3} ms) over {} runs; target <= 3 ms: {}",
        samples.len(),
        if ours <= 3.0 { "met" } else { "NOT met" }
    );

    for _ in 0..3 {
        run_on(&ctx1);
    }
    let mut one: Vec<f64> = (0..15)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(run_on(&ctx1));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    println!(
        "median_pool, the same on 1 thread: {:.3} ms (median of {})",
        median(&mut one),
        one.len()
    );

    // The gradient kernel (not tuned: a sort of each window, per channel).
    let dy = Tensor::from_vec(&dims, vec![1f32; len]).unwrap();
    let grad = || {
        ctx.op("MedianPoolGrad")
            .input(input.clone())
            .input(dy.clone())
            .attr("ksize", vec![1i64, 3, 3, 1])
            .attr("strides", vec![1i64, 1, 1, 1])
            .attr("padding", "SAME")
            .run1()
            .unwrap()
    };
    grad();
    let mut g: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(grad());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    println!(
        "median_pool_grad, the same shape, {threads} threads: {:.1} ms (median of {})",
        median(&mut g),
        g.len()
    );

    let Some(python) = python_with_numpy() else {
        println!(
            "numpy baseline unavailable: no Python with numpy (make the repo's venv: \
             python3 -m venv target/bench-venv && target/bench-venv/bin/pip install numpy)"
        );
        return;
    };
    let got = y.flat::<f32>().unwrap();
    match python_baseline(&python, NUMPY, &x) {
        Ok(Some((np_ms, np_min, version, ny))) => {
            println!(
                "numpy {version} sliding_window_view + median ({}): {np_ms:.1} ms (min {np_min:.1} ms); \
                 opforge is {:.0}x numpy (target >= 20x: {}); interior outputs equal to numpy's: {}",
                python.display(),
                np_ms / ours,
                if np_ms / ours >= 20.0 { "met" } else { "NOT met" },
                equal_text(interior_mismatches(got, &ny))
            );
        }
        Ok(None) => println!("numpy baseline unavailable"),
        Err(e) => println!("numpy baseline unavailable: {e}"),
    }
    match python_baseline(&python, TENSORFLOW, &x) {
        Ok(Some((tf_ms, tf_min, version, ty))) => println!(
            "TensorFlow {version} extract_patches + sort in a tf.function: {tf_ms:.1} ms \
             (min {tf_min:.1} ms); opforge is {:.1}x TensorFlow's composition; interior outputs \
             equal: {}",
            tf_ms / ours,
            equal_text(interior_mismatches(got, &ty))
        ),
        Ok(None) => println!(
            "TensorFlow baseline skipped: TensorFlow is not installed in {} \
             (target/bench-venv/bin/pip install tensorflow-cpu)",
            python.display()
        ),
        Err(e) => println!("TensorFlow baseline failed: {e}"),
    }
}
