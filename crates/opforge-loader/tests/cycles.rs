//! Load -> run -> unload, 1000 times, with flat memory: the process's
//! resident set after the cycles is within a small bound of the one after a
//! warm-up. (Its own test binary, so no other test allocates meanwhile.)

use opforge_core::device::{CpuDevice, Device};
use opforge_core::eager::EagerContext;
use opforge_core::registry::Registry;
use opforge_core::Tensor;
use opforge_loader::Loader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn build() -> PathBuf {
    opforge_testing::examples::build_c_library(
        "examples/c_zero_out/zero_out.c",
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        "zo_cycles1000",
        &[],
    )
}

/// Resident memory in KiB (Linux; None elsewhere).
fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4)
}

#[test]
fn a_thousand_load_run_unload_cycles_keep_memory_flat() {
    let lib = build();
    let r = Arc::new(Registry::new());
    let loader = Loader::new(r.clone());
    let device: Arc<dyn Device> = Arc::new(CpuDevice::new(2).unwrap());
    let cycle = |i: i32| {
        let h = loader.load(&lib).unwrap();
        {
            let ctx = EagerContext::with_registry(device.clone(), r.clone());
            let y = ctx
                .op("ZeroOut")
                .input(Tensor::from_vec(&[3], vec![i, i, i]).unwrap())
                .run1()
                .unwrap();
            assert_eq!(y.flat::<i32>().unwrap(), &[i, 0, 0]);
        }
        let report = loader.unload(&h).unwrap();
        assert!(report.unmapped, "cycle {i}: {report:?}");
    };
    for i in 0..100 {
        cycle(i);
    }
    let before = rss_kib();
    for i in 0..1000 {
        cycle(i);
    }
    let after = rss_kib();
    if let (Some(b), Some(a)) = (before, after) {
        let grown = a.saturating_sub(b);
        eprintln!("resident memory: {b} KiB after warm-up, {a} KiB after 1000 cycles");
        assert!(grown < 4096, "memory grew by {grown} KiB over 1000 cycles");
    }
}
