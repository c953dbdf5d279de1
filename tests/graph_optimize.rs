//! The session's graph rewrites (`SessionOptions::optimize`): the fused SGD
//! update gives bit-for-bit the results of the unfused graph, keeps node
//! ids and names, and applies only where its conditions hold.

use opforge::attrs::{AttrMap, IntoAttrValue};
use opforge::eager::EagerContext;
use opforge::graph::{Graph, NodeId, NodeSpec, Output, Session, SessionOptions};
use opforge::{DataType, Tensor};
use opforge_testing::util::const_node;

/// Values with a spread of magnitudes (products and differences that round).
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32 - 0.5) * 10f32.powi((x % 7) as i32 - 3)
        })
        .collect()
}

/// `v` (float32 values) as a tensor of `dtype`, of shape `dims`.
fn of_dtype(v: Vec<f32>, dims: &[i64], dtype: DataType) -> Tensor {
    let t = Tensor::from_vec(dims, v).unwrap();
    let mut attrs = AttrMap::new();
    attrs.insert("DstT".into(), dtype.into_attr_value());
    EagerContext::new(1)
        .unwrap()
        .execute("Cast", vec![t], &attrs)
        .unwrap()
        .remove(0)
}

/// How the update's delta is made.
#[derive(Clone, Copy, PartialEq)]
enum Delta {
    /// `Mul(lr, grad)`.
    LrFirst,
    /// `Mul(grad, lr)`.
    LrSecond,
    /// `Mul(lr, grad)` whose output is also read by another node.
    SharedMul,
    /// `Mul(scale, grad)` with a non-scalar `scale`.
    VectorScale,
}

struct Model {
    graph: Graph,
    init: NodeId,
    update: NodeId,
    read: Output,
    mul: Output,
}

/// A variable `v` of `dtype` and shape `dims`, and the node that assigns
/// it its first values.
fn variable(g: &mut Graph, dtype: DataType, dims: &[i64]) -> (NodeId, NodeId) {
    let shape = opforge::TensorShape::new(dims).unwrap().to_proto();
    let h = g
        .add(
            NodeSpec::new("VarHandleOp", "v")
                .attr("dtype", dtype)
                .attr("shape", shape)
                .attr("shared_name", "v"),
        )
        .unwrap();
    let n = dims.iter().product::<i64>() as usize;
    let init_value = const_node(g, "init_value", &of_dtype(values(n, 1), dims, dtype));
    let init = g
        .add(
            NodeSpec::new("AssignVariableOp", "init")
                .input(h)
                .input(init_value)
                .attr("dtype", dtype),
        )
        .unwrap();
    (h, init)
}

/// The model around `update`: `mul` (the update's scaled or product
/// gradient) also read by another node when `shared`, and a read of the
/// variable.
fn finish(
    mut g: Graph,
    h: NodeId,
    init: NodeId,
    update: NodeId,
    mul: Output,
    shared: bool,
) -> Model {
    let dtype = g.node(h).unwrap().attrs.get("dtype").cloned().unwrap();
    if shared {
        g.add(NodeSpec::new("Neg", "other_reader").input(mul))
            .unwrap();
    }
    let read = Output::new(
        g.add(
            NodeSpec::new("ReadVariableOp", "read")
                .input(h)
                .attr("dtype", dtype),
        )
        .unwrap(),
        0,
    );
    Model {
        graph: g,
        init,
        update,
        read,
        mul,
    }
}

fn model(dtype: DataType, delta: Delta) -> Model {
    let n = 257usize;
    let mut g = Graph::new();
    let (h, init) = variable(&mut g, dtype, &[n as i64]);
    let grad = const_node(&mut g, "grad", &of_dtype(values(n, 2), &[n as i64], dtype));
    let lr = match delta {
        Delta::VectorScale => of_dtype(values(n, 3), &[n as i64], dtype),
        _ => of_dtype(vec![0.0371], &[], dtype),
    };
    let lr = const_node(&mut g, "lr", &lr);
    let (a, b) = match delta {
        Delta::LrSecond => (grad, lr),
        _ => (lr, grad),
    };
    let mul = Output::new(
        g.add(NodeSpec::new("Mul", "scaled").input(a).input(b))
            .unwrap(),
        0,
    );
    let update = g
        .add(
            NodeSpec::new("AssignSubVariableOp", "update")
                .input(h)
                .input(mul)
                .attr("dtype", dtype)
                .control_input(init),
        )
        .unwrap();
    finish(g, h, init, update, mul, delta == Delta::SharedMul)
}

/// The variable after init and three updates, and the update node's op.
fn run(m: &Model, optimize: bool) -> (Vec<u8>, String) {
    let options = SessionOptions {
        optimize,
        ..Default::default()
    };
    let sess = Session::with_options(m.graph.clone(), options).unwrap();
    // The caller's handles (of the graph given) address the session's
    // graph, rewritten or not: the clone has another id, so build handles
    // of the clone by index.
    let g = sess.graph();
    let id = |n: NodeId| g.node_id(n.index()).unwrap();
    sess.run(vec![], &[], &[id(m.init)]).unwrap();
    for _ in 0..3 {
        sess.run(vec![], &[], &[id(m.update)]).unwrap();
    }
    let read = Output::new(id(m.read.node), 0);
    let out = sess.run(vec![], &[read], &[]).unwrap();
    let op = g.node(id(m.update)).unwrap().op.clone();
    (out[0].bytes().unwrap().to_vec(), op)
}

#[test]
fn the_fused_update_gives_the_unfused_results_bit_for_bit() {
    opforge::opforge_ops::link();
    for dtype in [
        DataType::Float,
        DataType::Double,
        DataType::Half,
        DataType::BFloat16,
    ] {
        for delta in [Delta::LrFirst, Delta::LrSecond] {
            let m = model(dtype, delta);
            let (fused, op) = run(&m, true);
            let (plain, plain_op) = run(&m, false);
            assert_eq!(op, "ResourceApplyGradientDescent", "{dtype:?}");
            assert_eq!(plain_op, "AssignSubVariableOp");
            assert_eq!(fused, plain, "{dtype:?}: the fused update differs");
        }
    }
}

#[test]
fn the_rewrite_applies_only_where_its_conditions_hold() {
    opforge::opforge_ops::link();
    // The Mul is read by another node too; the scale is not a scalar; the
    // dtype is an integer one.
    for (dtype, delta) in [
        (DataType::Float, Delta::SharedMul),
        (DataType::Float, Delta::VectorScale),
        (DataType::Int32, Delta::LrFirst),
    ] {
        let m = model(dtype, delta);
        let (a, op) = run(&m, true);
        let (b, _) = run(&m, false);
        assert_eq!(op, "AssignSubVariableOp");
        assert_eq!(a, b);
    }
}

#[test]
fn a_fetched_mul_still_runs_and_names_and_ids_are_kept() {
    opforge::opforge_ops::link();
    let m = model(DataType::Float, Delta::LrFirst);
    let sess = Session::new(m.graph.clone()).unwrap();
    let g = sess.graph();
    assert_eq!(g.len(), m.graph.len());
    for (a, b) in g.nodes().iter().zip(m.graph.nodes()) {
        assert_eq!(a.name, b.name);
        assert_eq!(a.output_types, b.output_types);
    }
    let id = |n: NodeId| g.node_id(n.index()).unwrap();
    sess.run(vec![], &[], &[id(m.init)]).unwrap();
    let mul = Output::new(id(m.mul.node), 0);
    let read = Output::new(id(m.read.node), 0);
    let before = sess.run(vec![], &[read], &[]).unwrap().remove(0);
    let scaled = sess.run(vec![], &[mul], &[id(m.update)]).unwrap().remove(0);
    let after = sess.run(vec![], &[read], &[]).unwrap().remove(0);
    let (b, s, a) = (
        before.flat::<f32>().unwrap(),
        scaled.flat::<f32>().unwrap(),
        after.flat::<f32>().unwrap(),
    );
    for i in 0..b.len() {
        assert_eq!(a[i], b[i] - s[i]);
    }
    // The given graph is unchanged.
    assert_eq!(m.graph.node(m.update).unwrap().op, "AssignSubVariableOp");
}

/// How a dense layer's weight update reads its gradient, a `MatMul`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum ProductUpdate {
    /// `AssignSubVariableOp(v, Mul(lr, MatMul(a, b)))`.
    AssignSub,
    /// `ResourceApplyGradientDescent(v, lr, MatMul(a, b))`.
    Apply,
    /// `AssignSubVariableOp(v, Mul(lr, product))`, the product also read
    /// by another node.
    SharedProduct,
}

/// `v` of shape `[m, n]` updated with `lr * op(a) · op(b)`.
fn product_model(
    dtype: DataType,
    (m, k, n): (usize, usize, usize),
    (ta, tb): (bool, bool),
    form: ProductUpdate,
) -> Model {
    let mut g = Graph::new();
    let (h, init) = variable(&mut g, dtype, &[m as i64, n as i64]);
    let a_dims = if ta { [k, m] } else { [m, k] }.map(|d| d as i64);
    let b_dims = if tb { [n, k] } else { [k, n] }.map(|d| d as i64);
    let a = const_node(&mut g, "a", &of_dtype(values(m * k, 2), &a_dims, dtype));
    let b = const_node(&mut g, "b", &of_dtype(values(k * n, 3), &b_dims, dtype));
    let product = Output::new(
        g.add(
            NodeSpec::new("MatMul", "product")
                .input(a)
                .input(b)
                .attr("transpose_a", ta)
                .attr("transpose_b", tb),
        )
        .unwrap(),
        0,
    );
    let lr = const_node(&mut g, "lr", &of_dtype(vec![0.0371], &[], dtype));
    let update = match form {
        ProductUpdate::Apply => g.add(
            NodeSpec::new("ResourceApplyGradientDescent", "update")
                .input(h)
                .input(lr)
                .input(product)
                .control_input(init),
        ),
        _ => {
            let mul = g
                .add(NodeSpec::new("Mul", "scaled").input(lr).input(product))
                .unwrap();
            g.add(
                NodeSpec::new("AssignSubVariableOp", "update")
                    .input(h)
                    .input(Output::new(mul, 0))
                    .attr("dtype", dtype)
                    .control_input(init),
            )
        }
    }
    .unwrap();
    finish(
        g,
        h,
        init,
        update,
        product,
        form == ProductUpdate::SharedProduct,
    )
}

#[test]
fn the_update_with_a_matmul_gradient_is_fused_and_bit_identical() {
    opforge::opforge_ops::link();
    // One block, and large enough to be split into blocks over the
    // session's threads.
    for shape in [(3, 4, 5), (96, 200, 160)] {
        for dtype in [DataType::Float, DataType::Double] {
            for form in [ProductUpdate::AssignSub, ProductUpdate::Apply] {
                for transposes in [(false, false), (true, false), (false, true), (true, true)] {
                    let m = product_model(dtype, shape, transposes, form);
                    let (fused, op) = run(&m, true);
                    let (plain, _) = run(&m, false);
                    let what = format!("{dtype:?} {shape:?} {form:?} {transposes:?}");
                    assert_eq!(op, "_ResourceApplyGradientDescentMatMul", "{what}");
                    assert!(fused == plain, "{what}: the fused update differs");
                }
            }
        }
    }
}

#[test]
fn a_shared_or_half_precision_product_is_not_fused() {
    opforge::opforge_ops::link();
    let shape = (8, 6, 4);
    for (dtype, form, want) in [
        // The product is read by another node: only the Mul is fused.
        (
            DataType::Float,
            ProductUpdate::SharedProduct,
            "ResourceApplyGradientDescent",
        ),
        // half's MatMul goes through float32: no fused kernel.
        (
            DataType::Half,
            ProductUpdate::AssignSub,
            "ResourceApplyGradientDescent",
        ),
        (
            DataType::Half,
            ProductUpdate::Apply,
            "ResourceApplyGradientDescent",
        ),
    ] {
        let m = product_model(dtype, shape, (true, false), form);
        let (a, op) = run(&m, true);
        let (b, _) = run(&m, false);
        assert_eq!(op, want, "{dtype:?} {form:?}");
        assert_eq!(a, b);
    }
}

#[test]
fn the_sgd_fusions_are_the_linalg_familys_registered_rewrite() {
    opforge::opforge_ops::link();
    let registry = opforge::Registry::global();
    assert_eq!(
        registry.ops_with_attr::<opforge::graph::GraphRewrite>(),
        ["_ResourceApplyGradientDescentMatMul"]
    );
    let origins = registry
        .attr_origins::<opforge::graph::GraphRewrite>("_ResourceApplyGradientDescentMatMul");
    assert!(
        origins
            .iter()
            .all(|o| o.location().contains("opforge-ops/linalg/")),
        "{origins:?}"
    );
}
