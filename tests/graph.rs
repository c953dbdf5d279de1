//! Graphs end to end: construction with attr and shape inference, GraphDef
//! round trips and TensorFlow-written GraphDefs, and the session executor.

use opforge::eager::EagerContext;
use opforge::graph::{Graph, NodeSpec, Output, Scope, Session, SessionOptions};
use opforge::proto::{self, GraphDef};
use opforge::{Code, DataType, Tensor};
use opforge_testing::util::const_node;

fn m(rows: i64, cols: i64, start: f32) -> Tensor {
    Tensor::from_vec(
        &[rows, cols],
        (0..rows * cols)
            .map(|i| start + i as f32 * 0.5 - 1.0)
            .collect(),
    )
    .unwrap()
}

#[test]
fn build_run_and_match_eager() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let a = const_node(&mut g, "a", &m(2, 3, 0.0));
    let x = g
        .add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
        .unwrap();
    let mm = g
        .add(NodeSpec::new("MatMul", "mm").input(a).input(x))
        .unwrap();
    let r = g.add(NodeSpec::new("Relu", "r").input(mm)).unwrap();
    assert_eq!(
        g.node(mm).unwrap().attrs["T"].value,
        Some(proto::attr_value::Value::Type(DataType::Float as i32))
    );
    // The shape function ran at construction: [2,3] x [?] -> [2,?]... the
    // placeholder's shape is unknown, so only the rows are known.
    assert_eq!(
        g.output_shape(Output::new(mm, 0)).unwrap(),
        Some(&[2, -1][..])
    );
    let feed = m(3, 4, 1.0);
    let sess = Session::new(g).unwrap();
    let out = sess
        .run(
            vec![(Output::new(x, 0), feed.clone())],
            &[Output::new(r, 0)],
            &[],
        )
        .unwrap();
    let eager = EagerContext::new(1).unwrap();
    let want = eager
        .op("Relu")
        .input(
            eager
                .op("MatMul")
                .input(m(2, 3, 0.0))
                .input(feed)
                .run1()
                .unwrap(),
        )
        .run1()
        .unwrap();
    assert_eq!(out[0], want);
}

#[test]
fn shape_errors_are_reported_at_construction_with_the_node_name() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let a = const_node(&mut g, "a", &m(2, 3, 0.0));
    let b = const_node(&mut g, "b", &m(4, 5, 0.0));
    let e = g
        .add(NodeSpec::new("MatMul", "bad_mm").input(a).input(b))
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .starts_with("Node 'bad_mm': Dimensions must be equal, but are 3 and 4"),
        "{e}"
    );
    assert!(
        e.message().contains("with input shapes: [2,3], [4,5]"),
        "{e}"
    );
    let e = g.add(NodeSpec::new("NoSuchOp", "n")).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[test]
fn scopes_name_uniquely_and_add_control_dependencies() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let mut root = Scope::new(&mut g);
    let t = Tensor::scalar(1.0f32);
    let a = root
        .op("Const")
        .attr("value", &t)
        .attr("dtype", DataType::Float)
        .build()
        .unwrap();
    let mut deps = root.with_control_dependencies(&[a]);
    let mut layer = deps.sub("layer");
    let b = layer
        .op("Const")
        .attr("value", &t)
        .attr("dtype", DataType::Float)
        .build()
        .unwrap();
    let c = layer
        .op("Const")
        .attr("value", &t)
        .attr("dtype", DataType::Float)
        .build()
        .unwrap();
    assert_eq!(g.node(b).unwrap().name, "layer/Const");
    assert_eq!(g.node(c).unwrap().name, "layer/Const_1");
    assert_eq!(g.node(c).unwrap().control_inputs, vec![a]);
}

#[test]
fn graph_def_round_trip_binary_and_text() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let a = const_node(&mut g, "a", &m(2, 2, 0.0));
    let b = const_node(&mut g, "b", &m(2, 2, 3.0));
    let s = g
        .add(NodeSpec::new("AddV2", "s").input(a).input(b))
        .unwrap();
    let n = g
        .add(NodeSpec::new("Neg", "n").input(s).control_input(a.node))
        .unwrap();
    let def = g.to_graph_def();
    assert_eq!(def.node[3].input, vec!["s", "^a"]);
    let want = Session::new(g)
        .unwrap()
        .run_by_name(&[], &["n:0"], &[])
        .unwrap();
    let from_bin =
        Graph::from_graph_def(&proto::from_binary::<GraphDef>(&proto::to_binary(&def)).unwrap())
            .unwrap();
    let from_text =
        Graph::from_graph_def(&proto::from_text::<GraphDef>(&proto::to_text(&def)).unwrap())
            .unwrap();
    for g2 in [from_bin, from_text] {
        assert_eq!(g2.to_graph_def(), def);
        let got = Session::new(g2)
            .unwrap()
            .run_by_name(&[], &["n"], &[])
            .unwrap();
        assert_eq!(got, want);
    }
    let _ = n;
}

#[test]
fn tensorflow_written_graph_def_with_control_inputs_and_omitted_default_attrs() {
    opforge::opforge_ops::link();
    // As TensorFlow writes it: out of order, `name:1` inputs, `^ctrl` inputs,
    // device strings, versions, and Unpack's `axis` attr omitted (default 0).
    let text = r#"
        node { name: "sum" op: "AddV2" input: "parts:1" input: "parts" input: "^init"
               device: "/job:localhost/replica:0/task:0/device:CPU:0"
               attr { key: "T" value { type: DT_FLOAT } } }
        node { name: "parts" op: "Unpack" input: "x"
               attr { key: "T" value { type: DT_FLOAT } } attr { key: "num" value { i: 2 } } }
        node { name: "x" op: "Const"
               attr { key: "dtype" value { type: DT_FLOAT } }
               attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } }
                                                     float_val: 1 float_val: 2 float_val: 3 float_val: 4 } } } }
        node { name: "init" op: "NoOp" }
        versions { producer: 1994 min_consumer: 12 }
    "#;
    let def: GraphDef = proto::from_text(text).unwrap();
    let g = Graph::from_graph_def(&def).unwrap();
    assert_eq!(g.versions.producer, 1994);
    assert!(g
        .node(g.find("parts").unwrap())
        .unwrap()
        .attrs
        .contains_key("axis"));
    let out = Session::new(g)
        .unwrap()
        .run_by_name(&[], &["sum:0"], &[])
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[4.0, 6.0]);
    let bad: GraphDef = proto::from_text(r#"node { name: "q" op: "TotallyUnknownOp" }"#).unwrap();
    let e = Graph::from_graph_def(&bad).err().unwrap();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("load the op library"), "{e}");
}

#[test]
fn pruning_runs_only_what_fetches_need() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let a = const_node(&mut g, "a", &Tensor::scalar(2.0f32));
    // An unfed placeholder fails if run; nothing fetched depends on it.
    let p = g
        .add(NodeSpec::new("Placeholder", "p").attr("dtype", DataType::Float))
        .unwrap();
    let _bad = g.add(NodeSpec::new("Neg", "bad").input(p)).unwrap();
    let good = g.add(NodeSpec::new("Neg", "good").input(a)).unwrap();
    let sess = Session::new(g).unwrap();
    let out = sess.run(vec![], &[Output::new(good, 0)], &[]).unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), -2.0);
    let e = sess.run_by_name(&[], &["bad"], &[]).unwrap_err();
    assert!(
        e.message()
            .contains("You must feed a value for placeholder tensor 'p'"),
        "{e}"
    );
    assert!(e.message().contains("{{node p}}"), "{e}");
    // Feeding the placeholder fixes it; a fed output is returned as is.
    let out = sess
        .run_by_name(&[("p", Tensor::scalar(5.0f32))], &["bad", "p"], &[])
        .unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), -5.0);
    assert_eq!(out[1].scalar_value::<f32>().unwrap(), 5.0);
    let e = sess
        .run_by_name(&[("p", Tensor::scalar(5i32))], &["bad"], &[])
        .unwrap_err();
    assert!(
        e.message()
            .contains("has dtype int32, but the graph expects float"),
        "{e}"
    );
}

#[test]
fn long_chains_and_wide_graphs_in_both_modes() {
    opforge::opforge_ops::link();
    for inter_op in [1, 4] {
        let mut g = Graph::new();
        let one = const_node(&mut g, "one", &Tensor::scalar(1.0f32));
        let mut x = one;
        for i in 0..1000 {
            x = Output::new(
                g.add(
                    NodeSpec::new("AddV2", &format!("add{i}"))
                        .input(x)
                        .input(one),
                )
                .unwrap(),
                0,
            );
        }
        // A wide part with large tensors, so the parallel path runs too.
        let big = const_node(
            &mut g,
            "big",
            &Tensor::from_vec(&[100_000], vec![1.0f32; 100_000]).unwrap(),
        );
        let branches: Vec<Output> = (0..8)
            .map(|i| {
                Output::new(
                    g.add(NodeSpec::new("Neg", &format!("neg{i}")).input(big))
                        .unwrap(),
                    0,
                )
            })
            .collect();
        let sum = g
            .add(NodeSpec::new("AddN", "sum").input_list(branches))
            .unwrap();
        let options = SessionOptions {
            inter_op_threads: inter_op,
            intra_op_threads: 1,
            ..Default::default()
        };
        let sess = Session::with_options(g, options).unwrap();
        let out = sess.run(vec![], &[x, Output::new(sum, 0)], &[]).unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), 1001.0);
        assert!(out[1].flat::<f32>().unwrap().iter().all(|&v| v == -8.0));
    }
}

#[test]
fn concurrent_runs_on_one_session() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let x = g
        .add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
        .unwrap();
    let y = g.add(NodeSpec::new("Square", "y").input(x)).unwrap();
    let sess = std::sync::Arc::new(Session::new(g).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let sess = sess.clone();
            std::thread::spawn(move || {
                for i in 0..100 {
                    let v = (t * 100 + i) as f32;
                    let out = sess
                        .run(
                            vec![(Output::new(x, 0), Tensor::scalar(v))],
                            &[Output::new(y, 0)],
                            &[],
                        )
                        .unwrap();
                    assert_eq!(out[0].scalar_value::<f32>().unwrap(), v * v);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Many nodes read one value at once in the parallel executor: every reader
/// must get it (the last reader takes it only after the others copied it).
#[test]
fn parallel_readers_of_one_value_all_get_it() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    // Unknown shapes keep the plan off the sequential small-tensor path.
    let x = g
        .add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
        .unwrap();
    let readers: Vec<Output> = (0..32)
        .map(|i| {
            let op = if i % 2 == 0 { "Neg" } else { "Square" };
            let id = g
                .add(NodeSpec::new(op, &format!("r{i}")).input(Output::new(x, 0)))
                .unwrap();
            Output::new(id, 0)
        })
        .collect();
    let sess = Session::with_options(
        g,
        SessionOptions {
            inter_op_threads: 4,
            intra_op_threads: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let feed = Tensor::from_vec(&[3], vec![1.0f32, -2.0, 3.0]).unwrap();
    for _ in 0..300 {
        let out = sess
            .run(vec![(Output::new(x, 0), feed.clone())], &readers, &[])
            .unwrap();
        for (i, t) in out.iter().enumerate() {
            let want: Vec<f32> = if i % 2 == 0 {
                vec![-1.0, 2.0, -3.0]
            } else {
                vec![1.0, 4.0, 9.0]
            };
            assert_eq!(t.flat::<f32>().unwrap(), &want[..], "reader {i}");
        }
    }
}

/// Updates and reads of one large variable, unordered, on the default
/// session (nodes share the intra-op pool with the kernels' shards). An
/// update holds the variable's lock while it shards its work; a thread that
/// ran another node (a read of the same variable) while waiting for those
/// shards would wait for its own lock forever, so updates shard with
/// `ThreadPool::chunks_isolated` (whose unit test reproduces that deadlock
/// with the stealing `shard`). The runs happen on a watchdog thread so a
/// deadlock fails the test instead of hanging it; every read must see whole
/// updates.
#[test]
fn updates_and_reads_of_one_variable_on_the_shared_pool_do_not_deadlock() {
    opforge::opforge_ops::link();
    let n = 1i64 << 20;
    let mut g = Graph::new();
    let shape = opforge::TensorShape::new(&[n]).unwrap().to_proto();
    let h = g
        .add(
            NodeSpec::new("VarHandleOp", "v")
                .attr("dtype", DataType::Float)
                .attr("shape", shape)
                .attr("shared_name", "v"),
        )
        .unwrap();
    let init = const_node(
        &mut g,
        "init",
        &Tensor::from_vec(&[n], vec![0.0f32; n as usize]).unwrap(),
    );
    let assign = g
        .add(
            NodeSpec::new("AssignVariableOp", "assign")
                .input(h)
                .input(init)
                .attr("dtype", DataType::Float),
        )
        .unwrap();
    let alpha = const_node(&mut g, "alpha", &Tensor::scalar(1.0f32));
    let delta = const_node(
        &mut g,
        "delta",
        &Tensor::from_vec(&[n], vec![-1.0f32; n as usize]).unwrap(),
    );
    let axis = const_node(&mut g, "axis", &Tensor::scalar(0i32));
    let mut updates = Vec::new();
    let mut sums = Vec::new();
    for i in 0..8 {
        updates.push(
            g.add(
                NodeSpec::new("ResourceApplyGradientDescent", &format!("sgd{i}"))
                    .input(h)
                    .input(alpha)
                    .input(delta),
            )
            .unwrap(),
        );
        let r = g
            .add(
                NodeSpec::new("ReadVariableOp", &format!("read{i}"))
                    .input(h)
                    .attr("dtype", DataType::Float),
            )
            .unwrap();
        for op in ["Max", "Min"] {
            let s = g
                .add(NodeSpec::new(op, &format!("{op}{i}")).input(r).input(axis))
                .unwrap();
            sums.push(Output::new(s, 0));
        }
    }
    let sess = std::sync::Arc::new(Session::new(g).unwrap());
    sess.run(vec![], &[], &[assign]).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = sess.clone();
    std::thread::spawn(move || {
        for run in 0..20 {
            let out = worker.run(vec![], &sums, &updates).unwrap();
            // Each read sees whole updates only (its max equals its min),
            // as many as have landed so far.
            for pair in out.chunks(2) {
                let (max, min) = (
                    pair[0].scalar_value::<f32>().unwrap(),
                    pair[1].scalar_value::<f32>().unwrap(),
                );
                assert_eq!(max, min, "a torn read");
                assert!(
                    max >= (8 * run) as f32 && max <= (8 * run + 8) as f32,
                    "{max}"
                );
            }
        }
        tx.send(()).unwrap();
    });
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("the runs finish (no deadlock)");
    let r = sess.run_by_name(&[], &["read0:0"], &[]).unwrap();
    assert!(r[0].flat::<f32>().unwrap().iter().all(|&x| x == 160.0));
}

/// A plan's run state is reused by later runs: a run that fails halfway
/// (values still in their slots) and a run that feeds a value nothing reads
/// leave nothing behind that changes a later run, sequential or parallel.
#[test]
fn runs_after_failed_runs_and_unread_feeds_see_only_their_own_values() {
    opforge::opforge_ops::link();
    for inter_op_threads in [1, 0, 3] {
        let mut g = Graph::new();
        let x = g
            .add(NodeSpec::new("Placeholder", "x").attr("dtype", DataType::Float))
            .unwrap();
        let y = g
            .add(NodeSpec::new("Placeholder", "y").attr("dtype", DataType::Float))
            .unwrap();
        let (x, y) = (Output::new(x, 0), Output::new(y, 0));
        let sq = g.add(NodeSpec::new("Square", "sq").input(x)).unwrap();
        // x*x + y: fails when y's shape does not broadcast with x's.
        let sum = g
            .add(
                NodeSpec::new("AddV2", "sum")
                    .input(Output::new(sq, 0))
                    .input(y),
            )
            .unwrap();
        let neg = g.add(NodeSpec::new("Neg", "neg").input(x)).unwrap();
        let (sum, neg) = (Output::new(sum, 0), Output::new(neg, 0));
        let sess = Session::with_options(
            g,
            SessionOptions {
                inter_op_threads,
                intra_op_threads: 0,
                ..Default::default()
            },
        )
        .unwrap();
        let v = |vals: &[f32]| Tensor::from_vec(&[vals.len() as i64], vals.to_vec()).unwrap();
        for round in 0..3 {
            let k = round as f32;
            let ok = sess
                .run(
                    vec![(x, v(&[k, 2.0])), (y, v(&[1.0, 1.0]))],
                    &[sum, neg],
                    &[],
                )
                .unwrap();
            assert_eq!(ok[0].flat::<f32>().unwrap(), &[k * k + 1.0, 5.0]);
            assert_eq!(ok[1].flat::<f32>().unwrap(), &[-k, -2.0]);
            let e = sess
                .run(
                    vec![(x, v(&[1.0, 2.0])), (y, v(&[1.0, 2.0, 3.0]))],
                    &[sum, neg],
                    &[],
                )
                .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
            assert!(e.message().contains("sum"), "{e}");
            // y fed but not read by anything this plan runs.
            let only_neg = sess
                .run(vec![(x, v(&[3.0, k])), (y, v(&[9.0]))], &[neg], &[])
                .unwrap();
            assert_eq!(only_neg[0].flat::<f32>().unwrap(), &[-3.0, -k]);
        }
    }
}

/// Found by scripts/hostile-cli: an inferred output shape whose element
/// count overflows int64 (Fill of dims [4, 7, 2^32, 2^63 - 1]) made the
/// session's planning overflow; the kernel must refuse it instead.
#[test]
fn an_inferred_shape_too_large_to_count_is_a_kernel_error_not_a_panic() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let dims = const_node(
        &mut g,
        "dims",
        &Tensor::from_vec(&[4], vec![4i64, 7, 1 << 32, i64::MAX]).unwrap(),
    );
    let value = const_node(
        &mut g,
        "value",
        &Tensor::from_vec(&[], vec![1.0f32]).unwrap(),
    );
    let fill = g
        .add(NodeSpec::new("Fill", "fill").input(dims).input(value))
        .unwrap();
    let sess = Session::new(g).unwrap();
    let e = sess.run(vec![], &[Output::new(fill, 0)], &[]).unwrap_err();
    assert!(
        matches!(e.code(), Code::InvalidArgument | Code::ResourceExhausted),
        "{e}"
    );
}

/// A chain of `n` MatMuls of a `size`x`size` matrix with itself, each
/// scaled back (so values stay finite): a run long enough to cancel.
fn matmul_chain(n: usize, size: i64) -> (Graph, Output) {
    let mut g = Graph::new();
    let t = Tensor::from_vec(
        &[size, size],
        vec![1.0f32 / size as f32; (size * size) as usize],
    )
    .unwrap();
    let mut x = const_node(&mut g, "x", &t);
    for i in 0..n {
        let id = g
            .add(NodeSpec::new("MatMul", &format!("mm{i}")).input(x).input(x))
            .unwrap();
        x = Output::new(id, 0);
    }
    (g, x)
}

#[test]
fn a_cancelled_run_stops_and_the_session_runs_again() {
    use std::sync::atomic::{AtomicBool, Ordering};
    opforge::opforge_ops::link();
    for inter_op in [1, 0] {
        let (g, y) = matmul_chain(20, 8);
        let sess = Session::with_options(
            g,
            SessionOptions {
                inter_op_threads: inter_op,
                ..SessionOptions::default()
            },
        )
        .unwrap();
        let flag = AtomicBool::new(true);
        let e = sess
            .run_cancellable(vec![], &[y], &[], Some(&flag))
            .unwrap_err();
        assert_eq!(e.code(), Code::Cancelled, "{e}");
        assert!(e.message().contains("{{node "), "{e}");
        flag.store(false, Ordering::Relaxed);
        let out = sess
            .run_cancellable(vec![], &[y], &[], Some(&flag))
            .unwrap();
        // (1/8)-filled 8x8 matrices are idempotent under MatMul.
        assert!(out[0]
            .flat::<f32>()
            .unwrap()
            .iter()
            .all(|&v| (v - 0.125).abs() < 1e-6));
    }
    // Set while a long run is under way (400 256x256 MatMuls, seconds
    // sequentially): the run stops early.
    let (g, y) = matmul_chain(400, 256);
    let sess = Session::with_options(
        g,
        SessionOptions {
            inter_op_threads: 1,
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let flag = AtomicBool::new(false);
    let e = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            flag.store(true, Ordering::Relaxed);
        });
        sess.run_cancellable(vec![], &[y], &[], Some(&flag))
            .unwrap_err()
    });
    assert_eq!(e.code(), Code::Cancelled);
    // It stopped at some node before the last.
    let at: usize = e
        .message()
        .split("{{node mm")
        .nth(1)
        .and_then(|r| r.split('}').next())
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("no node in {e}"));
    assert!(at < 399, "{e}");
}

#[test]
fn a_graph_clone_has_the_same_nodes_under_a_new_id() {
    opforge::opforge_ops::link();
    let mut g = Graph::new();
    let a = const_node(&mut g, "a", &Tensor::scalar(2.0f32));
    let sq = g.add(NodeSpec::new("Square", "sq").input(a)).unwrap();
    let c = g.clone();
    assert_eq!(c.len(), 2);
    assert_eq!(c.find("sq").map(|id| id.index()), Some(sq.index()));
    assert_eq!(c.node_id(1), c.find("sq"));
    assert_eq!(c.node_id(2), None);
    // The original's handles are not the copy's.
    assert_eq!(c.node(sq).unwrap_err().code(), Code::InvalidArgument);
    // Each runs on its own; the original keeps growing.
    g.add(NodeSpec::new("Neg", "neg").input(Output::new(sq, 0)))
        .unwrap();
    assert_eq!((g.len(), c.len()), (3, 2));
    let shared = std::sync::Arc::new(c);
    let sess = Session::builder_shared(shared.clone()).build().unwrap();
    let sq_c = Output::new(shared.node_id(1).unwrap(), 0);
    let out = sess.run(vec![], &[sq_c], &[]).unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[4.0]);
    // Feeding the copy's `a` reaches its `sq` (the copy's inputs name the copy).
    let a_c = Output::new(shared.node_id(0).unwrap(), 0);
    let out = sess
        .run(vec![(a_c, Tensor::scalar(3.0f32))], &[sq_c], &[])
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[9.0]);
    assert_eq!(
        shared.node(shared.node_id(1).unwrap()).unwrap().inputs[0],
        a_c
    );
}
