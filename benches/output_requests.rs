//! The effect of output requests (`SessionOptions::output_requests`) on
//! the MLP's backward pass, measured in one run, with and without.
//!
//! The model is the MLP of `examples/mlp` (784-512-512-10, batch 128,
//! MatMul, BiasAdd, Relu, sparse softmax cross-entropy, float32), its
//! weights constants; one step computes the loss and the gradients of every
//! weight and bias (the backward pass, no update). Two variants: the plain
//! MLP (its gradients have one contribution each: the requests are `Null`
//! and `InPlace`), and the MLP with weight decay (`loss + 1e-4 * sum(W^2)`
//! per layer: each weight's gradient is the `AddN` of its `MatMul` part and
//! its decay part, which `Add` requests sum into one buffer).
//!
//! Figures per variant, requests off and on: the median time of a step
//! (the default executor, nodes in parallel), and the peak of the bytes
//! held by tensors the kernels allocated during a step (a sequential
//! executor, whose order and so whose peak does not change from run to
//! run, on a metered CPU device: each allocation is counted until its last
//! tensor is dropped), then the same-run ratio on /
//! off; and the executor's cost per node with and without requests (a
//! chain of 10,000 scalar `AddV2` nodes, as `benches/ops.rs`'s `chain`).
//! `cargo bench --bench output_requests [-- STEPS]`.

use opforge::autodiff::gradients;
use opforge::device::{CpuDevice, Device};
use opforge::graph::{Graph, NodeSpec, Output, Session, SessionOptions};
use opforge::kernel::OutputRequest;
use opforge::tensor::{Buffer, Location};
use opforge::{DataType, Result, Tensor, TensorShape};
use std::hint::black_box;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

const SIZES: [usize; 4] = [784, 512, 512, 10];
const BATCH: usize = 128;
const DECAY: f32 = 1e-4;

/// Bytes held by metered allocations now, and the most since the last reset.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// A CPU device whose allocations are counted in [`LIVE`]/[`PEAK`] until
/// the last tensor sharing them is dropped.
struct Metered {
    cpu: CpuDevice,
}

impl Device for Metered {
    fn name(&self) -> &str {
        self.cpu.name()
    }
    fn device_type(&self) -> &'static str {
        self.cpu.device_type()
    }
    fn allocate(&self, dtype: DataType, shape: TensorShape) -> Result<Tensor> {
        let mut t = self.cpu.allocate(dtype, shape)?;
        let Some((ptr, len)) = t.host_data_mut() else {
            return Ok(t);
        };
        let Some(ptr) = NonNull::new(ptr).filter(|_| len > 0) else {
            return Ok(t);
        };
        let dims = t.dims().to_vec();
        let now = LIVE.fetch_add(len, Ordering::Relaxed) + len;
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: `ptr` points to `len` initialized bytes of `t`'s buffer,
        // which `t` alone holds (host_data_mut checked it) and which stays
        // allocated, unread and unwritten by anyone else, until the release
        // callback drops `t`.
        let buffer = unsafe {
            Buffer::from_foreign(ptr, len, Location::Host, move || {
                LIVE.fetch_sub(len, Ordering::Relaxed);
                drop(t);
            })
        };
        Tensor::from_buffer(dtype, &dims, buffer)
    }
    fn copy_to_host(&self, t: &Tensor) -> Result<Tensor> {
        self.cpu.copy_to_host(t)
    }
    fn copy_from_host(&self, t: &Tensor) -> Result<Tensor> {
        self.cpu.copy_from_host(t)
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn thread_pool(&self) -> Option<&opforge::device::ThreadPool> {
        self.cpu.thread_pool()
    }
}

/// SplitMix64 uniform floats in [-1, 1), repeatable.
fn uniform(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn node(g: &mut Graph, op: &str, name: &str, inputs: &[Output]) -> Output {
    let mut spec = NodeSpec::new(op, name);
    for &i in inputs {
        spec = spec.input(i);
    }
    Output::new(g.add(spec).expect(name), 0)
}

fn konst(g: &mut Graph, name: &str, t: &Tensor) -> Output {
    let spec = NodeSpec::new("Const", name)
        .attr("value", t)
        .attr("dtype", t.dtype());
    Output::new(g.add(spec).expect(name), 0)
}

fn placeholder(g: &mut Graph, name: &str, dtype: DataType, dims: &[usize]) -> Output {
    let shape = TensorShape::from_usize(dims).expect("shape").to_proto();
    let spec = NodeSpec::new("Placeholder", name)
        .attr("dtype", dtype)
        .attr("shape", shape);
    Output::new(g.add(spec).expect(name), 0)
}

/// The step's graph: (graph, x, labels, fetches = loss then every gradient).
fn model(decay: bool) -> (Arc<Graph>, Output, Output, Vec<Output>) {
    let mut g = Graph::new();
    let x = placeholder(&mut g, "x", DataType::Float, &[BATCH, SIZES[0]]);
    let labels = placeholder(&mut g, "labels", DataType::Int32, &[BATCH]);
    let (mut h, mut params, mut weights) = (x, Vec::new(), Vec::new());
    for l in 0..SIZES.len() - 1 {
        let (i, o) = (SIZES[l], SIZES[l + 1]);
        let scale = (6.0 / i as f32).sqrt();
        let w = Tensor::from_vec(&[i as i64, o as i64], uniform(i * o, l as u64, scale));
        let w = konst(&mut g, &format!("w{l}"), &w.expect("w"));
        let b = konst(
            &mut g,
            &format!("b{l}"),
            &Tensor::from_vec(&[o as i64], vec![0f32; o]).expect("b"),
        );
        let mm = node(&mut g, "MatMul", &format!("mm{l}"), &[h, w]);
        h = node(&mut g, "BiasAdd", &format!("z{l}"), &[mm, b]);
        if l + 2 < SIZES.len() {
            h = node(&mut g, "Relu", &format!("h{l}"), &[h]);
        }
        params.extend([w, b]);
        weights.push(w);
    }
    let xent = g
        .add(
            NodeSpec::new("SparseSoftmaxCrossEntropyWithLogits", "xent")
                .input(h)
                .input(labels),
        )
        .expect("xent");
    let axis0 = konst(
        &mut g,
        "axis0",
        &Tensor::from_vec(&[1], vec![0i32]).expect("axis"),
    );
    let mut loss = node(&mut g, "Mean", "loss", &[Output::new(xent, 0), axis0]);
    if decay {
        let axes = konst(
            &mut g,
            "axes",
            &Tensor::from_vec(&[2], vec![0i32, 1]).expect("axes"),
        );
        let lambda = konst(&mut g, "lambda", &Tensor::scalar(DECAY));
        for (l, &w) in weights.iter().enumerate() {
            let sq = node(&mut g, "Square", &format!("decay{l}/sq"), &[w]);
            let sum = node(&mut g, "Sum", &format!("decay{l}/sum"), &[sq, axes]);
            let term = node(&mut g, "Mul", &format!("decay{l}/mul"), &[lambda, sum]);
            loss = node(&mut g, "AddV2", &format!("decay{l}/add"), &[loss, term]);
        }
    }
    let grads = gradients(&mut g, &[loss], &params, None).expect("gradients");
    let mut fetches = vec![loss];
    fetches.extend(grads.into_iter().map(|g| g.expect("a gradient")));
    (Arc::new(g), x, labels, fetches)
}

/// One configuration's figures: median seconds per step, peak bytes, the
/// fetched values of the last step, and the plan's request counts.
struct Figures {
    secs: f64,
    peak: usize,
    values: Vec<Tensor>,
    counts: [usize; 3],
}

fn measure(decay: bool, requests: bool, steps: usize) -> Figures {
    let (g, x, labels, fetches) = model(decay);
    let device: Arc<dyn Device> = Arc::new(Metered {
        cpu: CpuDevice::with_pool(opforge::device::ThreadPool::global().clone()),
    });
    // Time on the default (parallel) executor; the peak on a sequential one,
    // whose order, and so whose peak, is the same every run.
    let session = |inter_op_threads| {
        let options = SessionOptions {
            output_requests: requests,
            inter_op_threads,
            ..SessionOptions::default()
        };
        Session::builder_shared(g.clone())
            .devices(vec![device.clone()])
            .options(options)
            .build()
            .expect("session")
    };
    let (s, seq) = (session(0), session(1));
    let xs = Tensor::from_vec(
        &[BATCH as i64, SIZES[0] as i64],
        uniform(BATCH * SIZES[0], 99, 1.0),
    );
    let xs = xs.expect("x");
    let ys: Vec<i32> = (0..BATCH).map(|i| (i * 7 % SIZES[3]) as i32).collect();
    let ys = Tensor::from_vec(&[BATCH as i64], ys).expect("labels");
    let run_on = |s: &Session| {
        s.run(vec![(x, xs.clone()), (labels, ys.clone())], &fetches, &[])
            .expect("step")
    };
    let run = || run_on(&s);
    let mut values = run();
    // Peak of one step: counted from what is held between steps.
    let mut peak = 0;
    for _ in 0..3 {
        PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
        let base = LIVE.load(Ordering::Relaxed);
        values = run_on(&seq);
        peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
    }
    let mut times: Vec<f64> = (0..steps)
        .map(|_| {
            let start = Instant::now();
            black_box(run());
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(|a, b| a.total_cmp(b));
    let plan = s
        .planned_requests(&[x, labels], &fetches, &[])
        .expect("plan");
    let mut counts = [0; 3];
    for r in plan.iter().flat_map(|(_, r)| r) {
        match r {
            OutputRequest::Null => counts[0] += 1,
            OutputRequest::InPlace => counts[1] += 1,
            OutputRequest::Add => counts[2] += 1,
            OutputRequest::Write => {}
        }
    }
    Figures {
        secs: times[times.len() / 2],
        peak,
        values,
        counts,
    }
}

fn max_abs_diff(a: &[Tensor], b: &[Tensor]) -> f32 {
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            let (x, y) = (x.flat::<f32>().expect("f32"), y.flat::<f32>().expect("f32"));
            x.iter()
                .zip(y)
                .map(|(p, q)| (p - q).abs())
                .collect::<Vec<_>>()
        })
        .fold(0.0, f32::max)
}

/// The executor's cost per node with and without requests: a chain of
/// 10,000 scalar `AddV2` nodes (each one's input has one reader, so with
/// requests every node is asked `InPlace`), seconds per node.
/// `requests`: off; on with the default options (scalars are below
/// `inplace_min_elements`: no InPlace); or on with InPlace at any size.
#[derive(Clone, Copy, PartialEq)]
enum Requests {
    Off,
    On,
    AnySize,
}

fn chain(requests: Requests) -> f64 {
    const NODES: usize = 10_000;
    let mut g = Graph::new();
    let x = placeholder(&mut g, "x", DataType::Float, &[]);
    let one = konst(&mut g, "one", &Tensor::scalar(1.0f32));
    let mut prev = x;
    for i in 0..NODES {
        prev = node(&mut g, "AddV2", &format!("add{i}"), &[prev, one]);
    }
    let mut options = SessionOptions {
        output_requests: requests != Requests::Off,
        inter_op_threads: 1,
        ..SessionOptions::default()
    };
    if requests == Requests::AnySize {
        options.inplace_min_elements = 0;
    }
    let s = Session::with_options(g, options).expect("session");
    let run = || {
        s.run(vec![(x, Tensor::scalar(0.5f32))], &[prev], &[])
            .expect("chain")
    };
    assert_eq!(
        run()[0].scalar_value::<f32>().expect("f32"),
        0.5 + NODES as f32
    );
    let mut times: Vec<f64> = (0..21)
        .map(|_| {
            let start = Instant::now();
            black_box(run());
            start.elapsed().as_secs_f64() / NODES as f64
        })
        .collect();
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}

fn main() {
    opforge::opforge_ops::link();
    let steps = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50usize);
    println!(
        "MLP {SIZES:?}, batch {BATCH}, backward pass (loss and every gradient), {steps} steps, \
         {} threads",
        opforge::device::ThreadPool::global().num_threads()
    );
    if let Some(mode) = std::env::args().find_map(|a| a.strip_prefix("chain=").map(str::to_string))
    {
        // Only the chain (for profiling): `chain=on`, `chain=off` or `chain=any`.
        let r = match mode.as_str() {
            "on" => Requests::On,
            "any" => Requests::AnySize,
            _ => Requests::Off,
        };
        for _ in 0..3 {
            println!("chain {mode}: {:.1} ns/node", chain(r) * 1e9);
        }
        return;
    }
    // Interleaved, the better of two each.
    let mut best = [f64::INFINITY; 3];
    for _ in 0..2 {
        for (i, r) in [Requests::Off, Requests::On, Requests::AnySize]
            .into_iter()
            .enumerate()
        {
            best[i] = best[i].min(chain(r));
        }
    }
    let [off, on, any] = best;
    println!(
        "executor, 10000-node scalar AddV2 chain: {:.1} ns/node off, {:.1} ns/node on \
         (scalars below inplace_min_elements: no InPlace), {:.1} ns/node with InPlace at any \
         size (every node asked); on / off {:.3}, any size / off {:.3}",
        off * 1e9,
        on * 1e9,
        any * 1e9,
        on / off,
        any / off
    );
    for decay in [false, true] {
        let name = if decay { "with weight decay" } else { "plain" };
        // Interleaved (off, on, off, on): the better of two per setting.
        let mut off = measure(decay, false, steps);
        let mut on = measure(decay, true, steps);
        let off2 = measure(decay, false, steps);
        let on2 = measure(decay, true, steps);
        off.secs = off.secs.min(off2.secs);
        on.secs = on.secs.min(on2.secs);
        let diff = max_abs_diff(&off.values, &on.values);
        println!("{name}:");
        for (label, f) in [("requests off", &off), ("requests on ", &on)] {
            println!(
                "  {label}: {:8.3} ms/step, peak {:7.2} MiB  (planned: {} Null, {} InPlace, {} Add)",
                f.secs * 1e3,
                f.peak as f64 / (1 << 20) as f64,
                f.counts[0],
                f.counts[1],
                f.counts[2]
            );
        }
        println!(
            "  on / off: time {:.3}, peak memory {:.3}; largest difference of a result {diff:e}",
            on.secs / off.secs,
            on.peak as f64 / off.peak as f64
        );
    }
}
