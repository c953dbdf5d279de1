//! Trains the 784-512-512-10 MLP of `model.rs` (batch 128, SGD) in graph
//! mode on synthetic data and reports steps per second.
//! `cargo run --release --example mlp [STEPS]`

mod model;

use model::{build, synthetic_batches};
use opforge::graph::SessionOptions;
use std::time::Instant;

fn main() -> opforge::Result<()> {
    opforge::opforge_ops::link();
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let (batch, sizes) = (128, [784, 512, 512, 10]);
    let data = synthetic_batches(16, batch, sizes[0], sizes[3], 7)?;
    let model = build(&sizes, batch, 0.05, 1, SessionOptions::default())?;
    model.init()?;
    let first = model.loss(&data[0].0, &data[0].1)?;
    for (x, y) in data.iter().take(5) {
        model.step(x, y)?; // warm-up: kernels, plans, allocator pools
    }
    let start = Instant::now();
    let mut last = 0.0;
    for s in 0..steps {
        let (x, y) = &data[s % data.len()];
        last = model.step(x, y)?;
    }
    let secs = start.elapsed().as_secs_f64();
    // Matmul work per step: forward and weight gradients for every layer,
    // input gradients for layers 2 and 3 (nothing needs the gradient of x).
    let weights = 784.0 * 512.0 + 512.0 * 512.0 + 512.0 * 10.0;
    let flops = 2.0 * 128.0 * (2.0 * weights + 512.0 * 512.0 + 512.0 * 10.0);
    println!(
        "mlp 784-512-512-10, batch 128: {steps} steps in {secs:.2} s = {:.1} steps/s ({:.1} GFLOP/s of matmul); loss {first:.4} -> {last:.4}",
        steps as f64 / secs,
        flops * steps as f64 / secs / 1e9
    );
    Ok(())
}
