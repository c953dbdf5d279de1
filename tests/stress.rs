//! Concurrency and faults: many sessions and eager contexts on many threads
//! running a mix of ops give exactly the single-threaded results; kernels
//! that fail or panic in the middle of a graph leave sessions and contexts
//! usable, and a long run of failing steps does not grow memory.

use opforge::eager::EagerContext;
use opforge::graph::{Graph, NodeSpec, Output, Session};
use opforge::kernel::{
    CreateKernel, KernelDefBuilder, KernelRegistration, OpKernel, OpKernelConstruction,
    OpKernelContext,
};
use opforge::registry::Registry;
use opforge::{Code, DataType, OpDefBuilder, Result, Tensor};
use opforge_testing::util::const_node;
use std::sync::Arc;

/// A deterministic pseudo-random stream (xorshift), so every thread can
/// recompute the inputs of any step.
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// The graph: y = Sum(Relu(MatMul(x, w) + b), axis 1), z = Concat(y, Max(x, axis 1)).
struct Model {
    graph: Graph,
    x: Output,
    fetch: Output,
}

fn model(registry: Arc<Registry>) -> Model {
    let mut g = Graph::with_registry(registry);
    let x = g
        .add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
        .unwrap();
    let x = Output::new(x, 0);
    let w = const_node(
        &mut g,
        "w",
        &Tensor::from_vec(&[16, 8], values(7, 128)).unwrap(),
    );
    let b = const_node(&mut g, "b", &Tensor::from_vec(&[8], values(8, 8)).unwrap());
    let one = const_node(&mut g, "one", &Tensor::from_vec(&[1], vec![1i32]).unwrap());
    let axis0 = const_node(&mut g, "axis0", &Tensor::from_vec(&[], vec![0i32]).unwrap());
    let mm = g
        .add(NodeSpec::new("MatMul", "mm").input(x).input(w))
        .unwrap();
    let add = g
        .add(
            NodeSpec::new("AddV2", "add")
                .input(Output::new(mm, 0))
                .input(b),
        )
        .unwrap();
    let relu = g
        .add(NodeSpec::new("Relu", "relu").input(Output::new(add, 0)))
        .unwrap();
    let y = g
        .add(
            NodeSpec::new("Sum", "y")
                .input(Output::new(relu, 0))
                .input(one),
        )
        .unwrap();
    let mx = g
        .add(NodeSpec::new("Max", "mx").input(x).input(one))
        .unwrap();
    let z = g
        .add(
            NodeSpec::new("ConcatV2", "z")
                .input_list(vec![Output::new(y, 0), Output::new(mx, 0)])
                .input(axis0),
        )
        .unwrap();
    Model {
        graph: g,
        x,
        fetch: Output::new(z, 0),
    }
}

fn input(seed: u64) -> Tensor {
    Tensor::from_vec(&[32, 16], values(seed, 32 * 16)).unwrap()
}

/// The same computation eagerly.
fn eager(ctx: &EagerContext, x: Tensor) -> Tensor {
    let w = Tensor::from_vec(&[16, 8], values(7, 128)).unwrap();
    let b = Tensor::from_vec(&[8], values(8, 8)).unwrap();
    let one = Tensor::from_vec(&[1], vec![1i32]).unwrap();
    let mm = ctx.op("MatMul").input(x.clone()).input(w).run1().unwrap();
    let add = ctx.op("AddV2").input(mm).input(b).run1().unwrap();
    let relu = ctx.op("Relu").input(add).run1().unwrap();
    let y = ctx.op("Sum").input(relu).input(one.clone()).run1().unwrap();
    let mx = ctx.op("Max").input(x).input(one).run1().unwrap();
    ctx.op("ConcatV2")
        .input_list(vec![y, mx])
        .input(Tensor::from_vec(&[], vec![0i32]).unwrap())
        .run1()
        .unwrap()
}

#[test]
fn many_threads_many_sessions_and_contexts_match_one_thread() {
    opforge::opforge_ops::link();
    let registry = Registry::global().clone();
    let m = model(registry.clone());
    let (mx, mfetch) = (m.x, m.fetch);
    let shared = Arc::new(Session::new(m.graph).unwrap());
    let ctx = EagerContext::default_cpu();
    // Single-threaded references.
    let seeds: Vec<u64> = (0..24).collect();
    let reference: Vec<Vec<f32>> = seeds
        .iter()
        .map(|&s| {
            let out = shared.run(vec![(mx, input(s))], &[mfetch], &[]).unwrap();
            out[0].flat::<f32>().unwrap().to_vec()
        })
        .collect();
    for (&s, want) in seeds.iter().zip(&reference) {
        assert_eq!(eager(&ctx, input(s)).flat::<f32>().unwrap(), &want[..]);
    }
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let (shared, reference, registry) = (&shared, &reference, registry.clone());
            scope.spawn(move || {
                // Each thread: the shared session, a session of its own and
                // an eager context of its own, interleaved.
                let m = model(registry);
                let own = Session::new(m.graph).unwrap();
                let ctx = EagerContext::default_cpu();
                for i in 0..60u64 {
                    let s = (t * 7 + i) % 24;
                    let got = match i % 3 {
                        0 => shared
                            .run(vec![(mx, input(s))], &[mfetch], &[])
                            .unwrap()
                            .remove(0),
                        1 => own
                            .run(vec![(m.x, input(s))], &[m.fetch], &[])
                            .unwrap()
                            .remove(0),
                        _ => eager(&ctx, input(s)),
                    };
                    assert_eq!(
                        got.flat::<f32>().unwrap(),
                        &reference[s as usize][..],
                        "thread {t} step {i} seed {s}"
                    );
                }
            });
        }
    });
}

/// An op whose kernel fails (`InvalidArgument`) on negative input and panics
/// on input exactly 13, else passes its input through.
struct Touchy;

impl OpKernel for Touchy {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let v = ctx.input(0).flat::<f32>()?[0];
        if v == 13.0 {
            panic!("touchy kernel met 13");
        }
        opforge::ensure!(v >= 0.0, InvalidArgument, "touchy kernel met {}", v);
        let t = ctx.input(0).clone();
        ctx.set_output(0, t)
    }
}

impl CreateKernel for Touchy {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Touchy)
    }
}

fn resident_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4
}

#[test]
fn failing_and_panicking_kernels_mid_graph_leave_everything_usable() {
    opforge::opforge_ops::link();
    let registry = Arc::new(Registry::with_builtins());
    registry
        .register_op(
            OpDefBuilder::new("StressTouchy")
                .input("x: float")
                .output("y: float"),
        )
        .unwrap();
    registry
        .register_kernel(KernelRegistration::of::<Touchy>(KernelDefBuilder::new(
            "StressTouchy",
        )))
        .unwrap();
    // x -> Relu -> Touchy -> AddV2(.., big MatMul product) : the failing node
    // sits between nodes that allocate.
    let mut g = Graph::with_registry(registry.clone());
    let x = g
        .add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
        .unwrap();
    let neg = g
        .add(NodeSpec::new("Neg", "neg").input(Output::new(x, 0)))
        .unwrap();
    let touchy = g
        .add(NodeSpec::new("StressTouchy", "touchy").input(Output::new(neg, 0)))
        .unwrap();
    let big = const_node(
        &mut g,
        "big",
        &Tensor::from_vec(&[256, 256], values(3, 65536)).unwrap(),
    );
    let mm = g
        .add(NodeSpec::new("MatMul", "mm").input(big).input(big))
        .unwrap();
    let axes = const_node(
        &mut g,
        "axes",
        &Tensor::from_vec(&[2], vec![0i32, 1]).unwrap(),
    );
    let sum = g
        .add(
            NodeSpec::new("Sum", "sum")
                .input(Output::new(mm, 0))
                .input(axes),
        )
        .unwrap();
    let out = g
        .add(
            NodeSpec::new("AddV2", "out")
                .input(Output::new(touchy, 0))
                .input(Output::new(sum, 0)),
        )
        .unwrap();
    let sess = Session::new(g).unwrap();
    let run = |v: f32| {
        sess.run(
            vec![(Output::new(x, 0), Tensor::from_vec(&[], vec![v]).unwrap())],
            &[Output::new(out, 0)],
            &[],
        )
    };
    let ok = run(-1.0).unwrap()[0].flat::<f32>().unwrap()[0];
    let e = run(1.0).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("touchy kernel met -1"), "{e}");
    let e = run(-13.0).unwrap_err();
    assert_eq!(e.code(), Code::Internal, "{e}");
    assert!(
        e.message().contains("panicked") && e.message().contains("touchy kernel met 13"),
        "{e}"
    );
    assert_eq!(run(-1.0).unwrap()[0].flat::<f32>().unwrap()[0], ok);

    // Eager too, on the same registry.
    let ctx = EagerContext::with_registry(
        Arc::new(opforge::device::CpuDevice::new(1).unwrap()),
        registry.clone(),
    );
    let t = |v: f32| Tensor::from_vec(&[], vec![v]).unwrap();
    assert_eq!(
        ctx.op("StressTouchy")
            .input(t(13.0))
            .run1()
            .unwrap_err()
            .code(),
        Code::Internal
    );
    assert_eq!(
        ctx.op("StressTouchy")
            .input(t(2.0))
            .run1()
            .unwrap()
            .flat::<f32>()
            .unwrap(),
        &[2.0]
    );

    // A long run of failing and panicking steps from 4 threads: memory stays
    // flat (what a failed step allocated is freed).
    let silence = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let step = |i: usize| {
        let v = match i % 3 {
            0 => 1.0,
            1 => -13.0,
            _ => -1.0,
        };
        let _ = run(v);
        let _ = ctx.op("StressTouchy").input(t(-v)).run1();
    };
    for i in 0..300 {
        step(i);
    }
    let before = resident_kib();
    std::thread::scope(|scope| {
        for th in 0..4 {
            scope.spawn(move || {
                for i in 0..600 {
                    step(th + i);
                }
            });
        }
    });
    for i in 0..300 {
        step(i);
    }
    let after = resident_kib();
    std::panic::set_hook(silence);
    eprintln!(
        "resident memory: {before} KiB after 300 failing steps, {after} KiB after 2,700 more"
    );
    assert!(
        after < before + 8 * 1024,
        "memory grew from {before} KiB to {after} KiB over failing steps"
    );
    assert_eq!(run(-1.0).unwrap()[0].flat::<f32>().unwrap()[0], ok);
}
