//! Op benchmarks, each next to a baseline measured in the same run.
//!
//! `cargo bench --bench ops` runs them all; `cargo bench --bench ops -- NAME`
//! runs those whose name contains NAME (`dispatch`, `chain`, `addv2`, `relu`,
//! `sum`, `matmul`). Figures are medians over repeated runs. `benches/matmul_vs_numpy.sh`
//! compares MatMul with numpy's in the same run.

use opforge::eager::EagerContext;
use opforge::graph::{Graph, NodeSpec, Output, Session, SessionOptions};
use opforge::{DataType, Tensor, TensorShape};
use std::hint::black_box;
use std::time::Instant;

/// Median seconds per call of `f`, over `samples` samples of `iters` calls.
fn median_secs(samples: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm up: caches, kernel construction, allocator pools
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed().as_secs_f64() / iters as f64
        })
        .collect();
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}

fn gbps(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}

const N: usize = 16 << 20; // 16M f32 = 64 MiB

/// memcpy of `n` f32s with `threads` threads (each copies a contiguous part).
fn memcpy_secs(n: usize, threads: usize) -> f64 {
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    median_secs(9, 3, || {
        let chunk = n.div_ceil(threads);
        std::thread::scope(|s| {
            for (d, sr) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                s.spawn(move || d.copy_from_slice(sr));
            }
        });
        black_box(&dst);
    })
}

/// A read-only pass over `n` f32s with `threads` threads (integer lane sum, vectorized).
fn read_secs(n: usize, threads: usize) -> f64 {
    let src = vec![1u32; n];
    median_secs(9, 3, || {
        let chunk = n.div_ceil(threads);
        let total: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = src
                .chunks(chunk)
                .map(|c| s.spawn(move || c.iter().fold(0u32, |a, &b| a.wrapping_add(b)) as u64))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        black_box(total);
    })
}

fn main() {
    opforge::opforge_ops::link();
    opforge::Registry::global().verify().expect("op registry");
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let want = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ctx = EagerContext::new(0).expect("CPU device");
    println!("opforge op benchmarks ({threads} cores, intra-op threads = {threads})");

    if want("dispatch") {
        let x = Tensor::from_vec(&[1], vec![-1.5f32]).unwrap();
        let attrs = opforge::attrs::AttrMap::new();
        let t = median_secs(15, 200_000, || {
            let out = ctx.execute("Relu", vec![x.clone()], &attrs).unwrap();
            black_box(out);
        });
        let t_builder = median_secs(15, 200_000, || {
            black_box(ctx.op("Relu").input(x.clone()).run1().unwrap());
        });
        let direct = median_secs(15, 1_000_000, || {
            let v = black_box(-1.5f32);
            black_box(Tensor::from_vec(&[1], vec![v.max(0.0)]).unwrap());
        });
        println!(
            "dispatch: eager Relu on 1 f32: {:.0} ns/call (execute), {:.0} ns/call (op builder); \
             baseline: allocating a 1-element tensor and computing relu directly: {:.0} ns",
            t * 1e9,
            t_builder * 1e9,
            direct * 1e9
        );
    }

    if want("chain") {
        chain(threads);
    }

    let needs_bw = ["addv2", "relu", "sum"].iter().any(|n| want(n));
    let (copy1, copy_n, read_n) = if needs_bw {
        (
            memcpy_secs(N, 1),
            memcpy_secs(N, threads),
            read_secs(N, threads),
        )
    } else {
        (1.0, 1.0, 1.0)
    };
    let bytes = N * 4;
    let copy_bw = gbps(2 * bytes, copy1.min(copy_n)); // bytes moved: read + write
    if needs_bw {
        println!(
            "baseline: memcpy of 64 MiB: {:.2} GB/s moved with 1 thread, {:.2} GB/s with {threads} (best {:.2}); \
             memcpy read rate {:.2} GB/s; read-only pass {:.2} GB/s",
            gbps(2 * bytes, copy1),
            gbps(2 * bytes, copy_n),
            copy_bw,
            gbps(bytes, copy1.min(copy_n)),
            gbps(bytes, read_n)
        );
    }
    let a = Tensor::from_vec(
        &[N as i64],
        (0..N).map(|i| (i % 1000) as f32 - 500.0).collect(),
    )
    .unwrap();
    let b = Tensor::from_vec(&[N as i64], (0..N).map(|i| (i % 7) as f32).collect()).unwrap();
    if want("addv2") {
        let t = median_secs(9, 3, || {
            black_box(
                ctx.op("AddV2")
                    .input(a.clone())
                    .input(b.clone())
                    .run1()
                    .unwrap(),
            );
        });
        let bw = gbps(3 * bytes, t);
        println!(
            "addv2: AddV2 on 16M f32: {:.2} ms, {bw:.2} GB/s moved = {:.0}% of memcpy",
            t * 1e3,
            100.0 * bw / copy_bw
        );
    }
    if want("relu") {
        let t = median_secs(9, 3, || {
            black_box(ctx.op("Relu").input(a.clone()).run1().unwrap());
        });
        let bw = gbps(2 * bytes, t);
        println!(
            "relu: Relu on 16M f32: {:.2} ms, {bw:.2} GB/s moved = {:.0}% of memcpy",
            t * 1e3,
            100.0 * bw / copy_bw
        );
    }
    if want("sum") {
        let axis = Tensor::from_vec(&[1], vec![0i32]).unwrap();
        let t = median_secs(9, 3, || {
            black_box(
                ctx.op("Sum")
                    .input(a.clone())
                    .input(axis.clone())
                    .run1()
                    .unwrap(),
            );
        });
        let bw = gbps(bytes, t);
        println!(
            "sum: Sum over 16M f32: {:.2} ms, {bw:.2} GB/s read = {:.0}% of memcpy's read rate, {:.0}% of a read-only pass",
            t * 1e3,
            100.0 * bw / gbps(bytes, copy1.min(copy_n)),
            100.0 * bw / gbps(bytes, read_n)
        );
    }
    if want("matmul") {
        let n = 1024usize;
        let x = Tensor::from_vec(
            &[n as i64, n as i64],
            (0..n * n).map(|i| ((i * 7) % 13) as f32 * 0.1).collect(),
        )
        .unwrap();
        let y = Tensor::from_vec(
            &[n as i64, n as i64],
            (0..n * n).map(|i| ((i * 5) % 11) as f32 * 0.1).collect(),
        )
        .unwrap();
        let t = median_secs(7, 3, || {
            black_box(
                ctx.op("MatMul")
                    .input(x.clone())
                    .input(y.clone())
                    .run1()
                    .unwrap(),
            );
        });
        println!(
            "matmul: MatMul 1024x1024x1024 f32: {:.2} ms, {:.1} GFLOP/s",
            t * 1e3,
            2.0 * (n * n * n) as f64 / t / 1e9
        );
    }
}

/// Executor overhead: a graph of 10,000 scalar `AddV2` nodes in a chain
/// (`x + 1 + 1 + ...`), run by a session, per node; next to the same
/// additions as eager calls and as direct kernel-free arithmetic.
fn chain(threads: usize) {
    const NODES: usize = 10_000;
    let mut g = Graph::new();
    let x = g
        .add(
            NodeSpec::new("Placeholder", "x")
                .attr("dtype", DataType::Float)
                .attr("shape", TensorShape::scalar().to_proto()),
        )
        .expect("placeholder");
    let one = Tensor::scalar(1.0f32);
    let c = g
        .add(
            NodeSpec::new("Const", "one")
                .attr("value", &one)
                .attr("dtype", DataType::Float),
        )
        .expect("const");
    let mut prev = Output::new(x, 0);
    for i in 0..NODES {
        let id = g
            .add(
                NodeSpec::new("AddV2", &format!("add_{i}"))
                    .input(prev)
                    .input(Output::new(c, 0)),
            )
            .expect("AddV2 node");
        prev = Output::new(id, 0);
    }
    let sess = Session::with_options(
        g,
        SessionOptions {
            inter_op_threads: threads,
            intra_op_threads: 1,
            ..Default::default()
        },
    )
    .expect("session");
    let x0 = Tensor::scalar(0.5f32);
    let run = || {
        sess.run(vec![(Output::new(x, 0), x0.clone())], &[prev], &[])
            .expect("chain run")
    };
    let got = run()[0].flat::<f32>().expect("f32")[0];
    assert_eq!(got, 0.5 + NODES as f32, "the chain computes x + 10000");
    let t = median_secs(11, 20, || {
        black_box(run());
    });
    let ctx = EagerContext::new(1).expect("CPU device");
    let attrs = opforge::attrs::AttrMap::new();
    let eager = median_secs(11, 3, || {
        let mut v = x0.clone();
        for _ in 0..NODES {
            let mut out = ctx
                .execute("AddV2", vec![v, one.clone()], &attrs)
                .expect("AddV2");
            v = out.pop().expect("one output");
        }
        black_box(v);
    });
    let direct = median_secs(11, 20, || {
        let mut v = black_box(0.5f32);
        for _ in 0..NODES {
            v = black_box(v + 1.0);
        }
        black_box(v);
    });
    println!(
        "chain: executor, {NODES}-node chain of scalar AddV2: {:.1} ns/node ({:.3} ms/run); \
         baseline: the same additions as eager calls: {:.1} ns/node; plain arithmetic: {:.1} ns/node",
        t / NODES as f64 * 1e9,
        t * 1e3,
        eager / NODES as f64 * 1e9,
        direct / NODES as f64 * 1e9
    );
}
