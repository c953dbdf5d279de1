//! Eager dispatch of an op-library op against the same op compiled into
//! opforge, in one run: the `zero_out` plugin's `ZeroOut` (examples/zero_out,
//! built here in release with a nested cargo and loaded into a sandbox
//! registry) against the standard library's built-in tutorial `ZeroOut`
//! (`opforge-ops`' `tutorial-ops`, in the global registry), both on a
//! 1-element int32 tensor with the same device. Issue 14's target: the
//! plugin within 10% of the built-in.
//!
//! `cargo bench -p opforge-loader --bench plugin_dispatch`. Samples of the
//! two alternate, so load from other processes hits both alike; the figures
//! are medians (and minimums) over the samples.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::device::{CpuDevice, Device};
use opforge_core::eager::EagerContext;
use opforge_core::registry::Registry;
use opforge_core::Tensor;
use opforge_loader::Loader;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

/// Builds `examples/zero_out` in release into its own target dir; the path
/// of the cdylib.
fn build_plugin() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("zero_out_plugin_bench");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&repo)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "zero_out",
            "--lib",
            "--target-dir",
        ])
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build --release -p zero_out failed");
    target.join("release").join(format!(
        "{}zero_out{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

/// Seconds per call of `f` over `iters` calls.
fn sample(iters: usize, f: &mut impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    start.elapsed().as_secs_f64() / iters as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    opforge_ops::link();
    let global = Registry::global();
    global.verify().expect("op registry");
    assert!(
        global.op_def("ZeroOut").is_ok(),
        "the built-in ZeroOut needs opforge-ops' tutorial-ops feature"
    );

    let lib = build_plugin();
    let sandbox = Arc::new(Registry::new());
    let loader = Loader::new(sandbox.clone());
    let h = loader.load(&lib).expect("the plugin loads");

    let device: Arc<dyn Device> = Arc::new(CpuDevice::new(0).expect("CPU device"));
    let builtin = EagerContext::with_registry(device.clone(), global.clone());
    let plugin = EagerContext::with_registry(device, sandbox.clone());

    let x = Tensor::from_vec(&[1], vec![42i32]).unwrap();
    let mut attrs = AttrMap::new();
    attrs.insert("preserve_index".into(), 0i64.into_attr_value());
    let run = |ctx: &EagerContext| {
        let out = ctx.execute("ZeroOut", vec![x.clone()], &attrs).unwrap();
        black_box(out);
    };
    // Same results, and warm caches and pools.
    for ctx in [&builtin, &plugin] {
        let y = ctx.execute("ZeroOut", vec![x.clone()], &attrs).unwrap();
        assert_eq!(y[0].flat::<i32>().unwrap(), &[42]);
        for _ in 0..10_000 {
            run(ctx);
        }
    }

    const SAMPLES: usize = 31;
    const ITERS: usize = 100_000;
    let (mut b, mut p) = (Vec::new(), Vec::new());
    for s in 0..SAMPLES {
        // Alternate which goes first.
        if s % 2 == 0 {
            b.push(sample(ITERS, &mut || run(&builtin)));
            p.push(sample(ITERS, &mut || run(&plugin)));
        } else {
            p.push(sample(ITERS, &mut || run(&plugin)));
            b.push(sample(ITERS, &mut || run(&builtin)));
        }
    }
    let (b_min, p_min) = (
        b.iter().copied().fold(f64::INFINITY, f64::min),
        p.iter().copied().fold(f64::INFINITY, f64::min),
    );
    let (b_med, p_med) = (median(&mut b), median(&mut p));
    println!(
        "plugin_dispatch: eager ZeroOut on 1 int32 ({SAMPLES} alternating samples of {ITERS} calls)"
    );
    println!(
        "  built-in (tutorial-ops, global registry): {:.1} ns/call median, {:.1} min",
        b_med * 1e9,
        b_min * 1e9
    );
    println!(
        "  plugin ({} {}, {}): {:.1} ns/call median, {:.1} min",
        h.name(),
        h.version(),
        lib.display(),
        p_med * 1e9,
        p_min * 1e9
    );
    let ratio = p_med / b_med;
    println!(
        "  plugin / built-in: {ratio:.3} (median), {:.3} (min); target <= 1.10: {}",
        p_min / b_min,
        if ratio <= 1.10 { "met" } else { "MISSED" }
    );
    drop(plugin);
    let report = loader.unload(&h).expect("unload");
    assert!(report.unmapped, "{report:?}");
}
