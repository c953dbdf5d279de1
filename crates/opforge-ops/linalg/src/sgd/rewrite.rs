//! The SGD update fusions, a graph rewrite (`opforge_core::graph::rewrite`)
//! registered with `_ResourceApplyGradientDescentMatMul`, which sessions
//! run before a graph (on CPU-only sessions: both fused ops are CPU
//! kernels). It fuses the SGD update as training code writes it:
//!
//! - `v.assign_sub(lr * grad)`: `AssignSubVariableOp(v, Mul(lr, grad))`,
//!   with `lr` a scalar `Const` and the `Mul` read by nothing else, becomes
//!   `ResourceApplyGradientDescent(v, lr, grad)`, which updates the variable
//!   in one pass instead of writing `lr * grad` to a new buffer and reading
//!   it back (the same arithmetic: `v - lr * grad`, rounded the same way).
//! - When `grad` (of that update, or of a `ResourceApplyGradientDescent`
//!   in the graph) is a `float`/`double` `MatMul` read by nothing else (a
//!   dense layer's weight gradient), the update becomes
//!   `_ResourceApplyGradientDescentMatMul(v, lr, a, b)`: each block of the
//!   product updates its part of the variable as soon as it is computed,
//!   so the gradient never goes through memory and the update overlaps the
//!   product (the same blocks and arithmetic as the two ops: bit-identical).
//!
//! The replaced update keeps its node id and name and waits for what the
//! nodes it absorbs (the `Mul`, the `MatMul`) waited for. Both fusions are
//! one rewrite because the second looks through the first: the `MatMul`
//! under `Mul(lr, MatMul(a, b))` is read only by the `Mul` the first
//! fusion absorbs.

use super::NAME as APPLY_MATMUL;
use opforge_core::attrs::{AttrMap, FromAttrValue, IntoAttrValue};
use opforge_core::graph::{Graph, Input, Node, NodeSpec, Output, Replacement, RewriteContext};
use opforge_core::{DataType, Result};

const APPLY: &str = "ResourceApplyGradientDescent";

/// The rewrite: every SGD update of `ctx`'s graph that fuses.
pub(super) fn fuse_sgd_updates(ctx: &RewriteContext<'_>) -> Result<Vec<Replacement>> {
    if !ctx.all_devices_are("CPU") {
        return Ok(Vec::new());
    }
    let graph = ctx.graph();
    let mut out = Vec::new();
    for f in sgd_updates(graph) {
        let nodes = graph.nodes();
        let update = &nodes[f.update];
        // The update waits for what the nodes it absorbs waited for.
        let mut control = update.control_inputs.clone();
        for &n in &f.absorbed {
            for &c in &nodes[n].control_inputs {
                if !control.contains(&c) {
                    control.push(c);
                }
            }
        }
        let var = Input::One(update.inputs[0]);
        let (op, inputs, attrs) = match f.delta {
            Delta::Tensor(d) => (
                APPLY,
                vec![var, Input::One(f.alpha), Input::One(d)],
                Vec::new(),
            ),
            Delta::Product { a, b, ta, tb } => (
                APPLY_MATMUL,
                vec![var, Input::One(f.alpha), Input::One(a), Input::One(b)],
                vec![("transpose_a", ta), ("transpose_b", tb)],
            ),
        };
        let mut spec = NodeSpec {
            op: op.into(),
            name: update.name.clone(),
            inputs,
            attrs: Default::default(),
            control_inputs: control,
            device: update.device.clone(),
        }
        .attr("use_locking", f.use_locking);
        for (name, value) in attrs {
            spec = spec.attr(name, value);
        }
        if let Some(id) = graph.node_id(f.update) {
            out.push(Replacement::new(id, spec));
        }
    }
    Ok(out)
}

/// One SGD update to rewrite.
struct SgdUpdate {
    /// The index of the update node.
    update: usize,
    /// The indices of the nodes whose work the new node takes over (the
    /// `Mul`, the `MatMul`): their control inputs become its own.
    absorbed: Vec<usize>,
    alpha: Output,
    delta: Delta,
    use_locking: bool,
}

/// The gradient of an update: a tensor, or a matrix product to fuse.
enum Delta {
    Tensor(Output),
    Product {
        a: Output,
        b: Output,
        ta: bool,
        tb: bool,
    },
}

/// The float dtypes the fused update covers (its kernel computes
/// `v - alpha * delta` exactly as `Mul` then `AssignSubVariableOp` do).
const FLOATS: [DataType; 4] = [
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
];

fn sgd_updates(graph: &Graph) -> Vec<SgdUpdate> {
    let registry = graph.registry();
    if registry.lookup(APPLY).is_err() {
        return Vec::new();
    }
    let nodes = graph.nodes();
    // How many data inputs read each node's first output.
    let mut readers = vec![0u32; nodes.len()];
    for n in nodes {
        for o in &n.inputs {
            if o.index == 0 {
                readers[o.node.index()] += 1;
            }
        }
    }
    let is_scalar_const = |o: Output| {
        let n = &nodes[o.node.index()];
        n.op == "Const" && n.output_shapes.first() == Some(&Some(Vec::new()))
    };
    // The node behind output `o` when `o` is its first output, read by
    // nothing else, on the reader's device.
    let sole = |o: Output, device: &str| -> Option<&Node> {
        let n = &nodes[o.node.index()];
        (o.index == 0 && readers[o.node.index()] == 1 && n.device == device).then_some(n)
    };
    let mut found = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let mut update = match (n.op.as_str(), n.inputs.as_slice()) {
            // `AssignSubVariableOp(v, Mul(alpha, delta))`, alpha a scalar Const.
            ("AssignSubVariableOp", &[_, d]) => {
                let Some(m) = sole(d, &n.device) else {
                    continue;
                };
                if m.op != "Mul"
                    || m.inputs.len() != 2
                    || !m.output_types.first().is_some_and(|t| FLOATS.contains(t))
                {
                    continue;
                }
                let (alpha, delta) = if is_scalar_const(m.inputs[0]) {
                    (m.inputs[0], m.inputs[1])
                } else if is_scalar_const(m.inputs[1]) {
                    (m.inputs[1], m.inputs[0])
                } else {
                    continue;
                };
                // Both operands of the Mul have its dtype; `delta` must
                // already have the update's shape (a scalar Mul does not
                // broadcast it).
                if !registry.has_kernel(APPLY, &resolved_attrs(m.output_types[0]), "CPU") {
                    continue;
                }
                SgdUpdate {
                    update: i,
                    absorbed: vec![d.node.index()],
                    alpha,
                    delta: Delta::Tensor(delta),
                    use_locking: false,
                }
            }
            (APPLY, &[_, alpha, delta]) => SgdUpdate {
                update: i,
                absorbed: Vec::new(),
                alpha,
                delta: Delta::Tensor(delta),
                use_locking: bool_attr(&n.attrs, "use_locking"),
            },
            _ => continue,
        };
        // A float or double `MatMul` as the gradient, read by nothing else.
        if let Delta::Tensor(d) = update.delta {
            let product = sole(d, &n.device).filter(|m| {
                m.op == "MatMul"
                    && m.inputs.len() == 2
                    && matches!(
                        m.output_types.first(),
                        Some(DataType::Float | DataType::Double)
                    )
            });
            if let Some(m) = product {
                let (ta, tb) = (
                    bool_attr(&m.attrs, "transpose_a"),
                    bool_attr(&m.attrs, "transpose_b"),
                );
                let mut attrs = resolved_attrs(m.output_types[0]);
                attrs.insert("transpose_a".to_string(), ta.into_attr_value());
                attrs.insert("transpose_b".to_string(), tb.into_attr_value());
                if registry.has_kernel(APPLY_MATMUL, &attrs, "CPU") {
                    update.absorbed.push(d.node.index());
                    update.delta = Delta::Product {
                        a: m.inputs[0],
                        b: m.inputs[1],
                        ta,
                        tb,
                    };
                }
            }
        }
        // An existing ResourceApplyGradientDescent is rewritten only to
        // take its product in.
        if update.absorbed.is_empty() {
            continue;
        }
        found.push(update);
    }
    found
}

/// A bool attr's value (false when missing).
fn bool_attr(attrs: &AttrMap, name: &str) -> bool {
    attrs
        .get(name)
        .and_then(<bool as FromAttrValue>::from_attr_value)
        .unwrap_or(false)
}

/// The attrs a `ResourceApplyGradientDescent` of dtype `t` resolves to.
fn resolved_attrs(t: DataType) -> AttrMap {
    let mut a = AttrMap::new();
    a.insert("T".to_string(), t.into_attr_value());
    a.insert("use_locking".to_string(), false.into_attr_value());
    a
}
