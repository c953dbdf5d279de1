//! Output requests with the standard library's kernels: the gradient of a
//! tensor with several consumers is summed by `Add` requests into the first
//! part's buffer (`AddV2`/`Sub`/`Mul` and float `MatMul` kernels add into
//! an accumulator) and gives exactly the gradients `AddN` gives; a part
//! whose kernel does not add stays in the (shortened) `AddN`.

use opforge::autodiff::gradients;
use opforge::graph::{Graph, NodeSpec, Output, Session, SessionOptions};
use opforge::kernel::OutputRequest;
use opforge::{DataType, Tensor, TensorShape};
use std::sync::Arc;

fn konst(g: &mut Graph, name: &str, t: &Tensor) -> Output {
    let n = g
        .add(
            NodeSpec::new("Const", name)
                .attr("value", t)
                .attr("dtype", t.dtype()),
        )
        .unwrap();
    Output::new(n, 0)
}

fn op(g: &mut Graph, op: &str, name: &str, inputs: &[Output]) -> Output {
    let mut spec = NodeSpec::new(op, name);
    for &i in inputs {
        spec = spec.input(i);
    }
    Output::new(g.add(spec).unwrap(), 0)
}

/// Integer values (sums of products of them are exact in float), or with
/// `frac`, values with fractions (sums rounded).
fn values(n: usize, seed: i32, frac: bool) -> Vec<f32> {
    (0..n as i32)
        .map(|i| {
            let v = ((i * 7 + seed * 3) % 11 - 5) as f32;
            if frac {
                v * 0.1 + 1.0 / (3.0 + i as f32)
            } else {
                v
            }
        })
        .collect()
}

/// `x` (a 4x4 placeholder) read by the ops of `extra`, `Mul(x, a)`,
/// `MatMul(x, w)` and `Square(x)`; the gradient of all of them (seeded
/// with ones) with respect to `x`.
fn graph(extra: &[&str], frac: bool) -> (Arc<Graph>, Output, Output) {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let x = g
        .add(
            NodeSpec::new("Placeholder", "x")
                .attr("dtype", DataType::Float)
                .attr("shape", TensorShape::new(&[4, 4]).unwrap().to_proto()),
        )
        .unwrap();
    let x = Output::new(x, 0);
    let a = konst(
        &mut g,
        "a",
        &Tensor::from_vec(&[4, 4], values(16, 1, frac)).unwrap(),
    );
    let w = konst(
        &mut g,
        "w",
        &Tensor::from_vec(&[4, 4], values(16, 2, frac)).unwrap(),
    );
    // The extra consumers first: backprop meets them last, so their parts
    // come last in the AddN (the first part, written, is Square's).
    let mut ys: Vec<Output> = extra
        .iter()
        .enumerate()
        .map(|(i, e)| op(&mut g, e, &format!("extra{i}"), &[x]))
        .collect();
    ys.push(op(&mut g, "Mul", "m", &[x, a]));
    ys.push(op(&mut g, "MatMul", "p", &[x, w]));
    ys.push(op(&mut g, "Square", "s", &[x]));
    let dx = gradients(&mut g, &ys, &[x], None).unwrap()[0].unwrap();
    (Arc::new(g), x, dx)
}

/// `dx` with requests on or off, sequential and parallel: the values and
/// the requests the plan makes.
type Runs = Vec<(Vec<f32>, Vec<(String, Vec<OutputRequest>)>)>;

fn run(g: &Arc<Graph>, x: Output, dx: Output, requests: bool, frac: bool) -> Runs {
    [1, 0]
        .into_iter()
        .map(|threads| {
            let options = SessionOptions {
                output_requests: requests,
                inter_op_threads: threads,
                check_inplace: true,
                ..SessionOptions::default()
            };
            let s = Session::builder_shared(g.clone())
                .options(options)
                .build()
                .unwrap();
            let feed = Tensor::from_vec(&[4, 4], values(16, 3, frac)).unwrap();
            let mut got = Vec::new();
            // Twice: the second run reuses the plan and its buffers.
            for _ in 0..2 {
                let out = s.run(vec![(x, feed.clone())], &[dx], &[]).unwrap();
                got = out[0].flat::<f32>().unwrap().to_vec();
            }
            (got, s.planned_requests(&[x], &[dx], &[]).unwrap())
        })
        .collect()
}

/// The gradient by hand: `a + ones * w^T + 2 x` (+ `-1` per `Neg`).
fn expected(negs: usize) -> Vec<f32> {
    let (a, w, x) = (
        values(16, 1, false),
        values(16, 2, false),
        values(16, 3, false),
    );
    (0..16)
        .map(|k| {
            let j = k % 4;
            let row_sum_w: f32 = (0..4).map(|c| w[j * 4 + c]).sum();
            a[k] + row_sum_w + 2.0 * x[k] - negs as f32
        })
        .collect()
}

fn adds(plan: &[(String, Vec<OutputRequest>)]) -> usize {
    plan.iter()
        .filter(|(_, r)| r.contains(&OutputRequest::Add))
        .count()
}

#[test]
fn add_to_accumulation_gives_the_gradients_add_n_gives() {
    let (g, x, dx) = graph(&[], false);
    let with = run(&g, x, dx, true, false);
    let without = run(&g, x, dx, false, false);
    for ((got, plan), (want, plain)) in with.iter().zip(&without) {
        assert_eq!(got, want, "Add requests change nothing in the result");
        assert_eq!(got, &expected(0));
        // Three parts: the first is written, the other two added into it.
        assert_eq!(adds(plan), 2, "{plan:?}");
        assert!(plain.is_empty(), "{plain:?}");
    }
}

#[test]
fn a_part_whose_kernel_does_not_add_stays_in_the_add_n() {
    // Neg's gradient is a Neg, whose kernel does not handle Add.
    let (g, x, dx) = graph(&["Neg"], false);
    let with = run(&g, x, dx, true, false);
    let without = run(&g, x, dx, false, false);
    for ((got, plan), (want, _)) in with.iter().zip(&without) {
        assert_eq!(got, want);
        assert_eq!(got, &expected(1));
        assert_eq!(adds(plan), 2, "{plan:?}");
    }
}

#[test]
fn with_rounded_sums_the_gradients_are_still_bit_identical() {
    // The chain adds the parts in the AddN's order (backprop's), and each
    // kernel adds its result into the accumulator as AddN would (MatMul's
    // GEMM adds the product to the accumulator once when the inner
    // dimension fits one of faer's k-blocks, as here; for long inner
    // dimensions it adds block by block, and the sum may round
    // differently).
    let (g, x, dx) = graph(&[], true);
    let with = run(&g, x, dx, true, true);
    let without = run(&g, x, dx, false, true);
    for ((got, plan), (want, _)) in with.iter().zip(&without) {
        assert_eq!(got, want);
        assert_eq!(adds(plan), 2, "{plan:?}");
    }
}
