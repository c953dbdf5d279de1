//! Graph rewrites a [`Session`](super::Session) applies before it runs a
//! graph, as TensorFlow's grappler does (its remapper fuses patterns of
//! ops into one kernel). A rewrite keeps every node's id, name and output
//! types, so feeds, fetches, targets and the nodes' consumers mean the same
//! nodes; it changes no result. [`SessionOptions::optimize`] turns it off.
//!
//! The one rewrite so far is the SGD update as Python code writes it,
//! `v.assign_sub(lr * grad)`: `AssignSubVariableOp(v, Mul(lr, grad))`, with
//! `lr` a scalar `Const` and the `Mul` read by nothing else, becomes
//! `ResourceApplyGradientDescent(v, lr, grad)`, which updates the variable
//! in one pass instead of writing `lr * grad` to a new buffer and reading
//! it back (the same arithmetic: `v - lr * grad`, rounded the same way).
//!
//! [`SessionOptions::optimize`]: super::SessionOptions::optimize

use super::{Graph, Input, NodeSpec, Output};
use crate::attrs::{AttrMap, IntoAttrValue};
use crate::{DataType, Result};

/// `graph` rewritten, or `None` when no rewrite applies. `cpu_only`: every
/// device of the session is a CPU (a rewrite only uses ops whose CPU
/// kernels opforge has, so placement cannot change).
pub(crate) fn optimize(graph: &Graph, cpu_only: bool) -> Result<Option<Graph>> {
    if !cpu_only {
        return Ok(None);
    }
    let fusions = scaled_updates(graph);
    if fusions.is_empty() {
        return Ok(None);
    }
    let mut g = graph.clone_as_same();
    for f in fusions {
        let update = g.at(f.update);
        let mul = g.at(f.mul);
        let mut control = update.control_inputs.clone();
        for &c in &mul.control_inputs {
            if !control.contains(&c) {
                control.push(c);
            }
        }
        let spec = NodeSpec {
            op: "ResourceApplyGradientDescent".into(),
            name: update.name.clone(),
            inputs: vec![
                Input::One(update.inputs[0]),
                Input::One(f.alpha),
                Input::One(f.delta),
            ],
            attrs: Default::default(),
            control_inputs: control,
            device: update.device.clone(),
        }
        .attr("use_locking", false);
        let id = g.id_at(f.update);
        g.replace_node(id, spec)?;
    }
    Ok(Some(g))
}

/// One `AssignSubVariableOp(v, Mul(alpha, delta))` to fuse.
struct ScaledUpdate {
    /// The indices of the update and of the `Mul`.
    update: usize,
    mul: usize,
    alpha: Output,
    delta: Output,
}

/// The float dtypes the fused update covers (its kernel computes
/// `v - alpha * delta` exactly as `Mul` then `AssignSubVariableOp` do).
const FLOATS: [DataType; 4] = [
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
];

fn scaled_updates(graph: &Graph) -> Vec<ScaledUpdate> {
    let registry = graph.registry();
    if registry.lookup("ResourceApplyGradientDescent").is_err() {
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
    let mut found = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.op != "AssignSubVariableOp" || n.inputs.len() != 2 {
            continue;
        }
        let d = n.inputs[1];
        let m = &nodes[d.node.index()];
        if d.index != 0
            || m.op != "Mul"
            || readers[d.node.index()] != 1
            || m.device != n.device
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
        // Both operands of the Mul have its dtype; `delta` must already
        // have the update's shape (a scalar Mul does not broadcast it).
        if !registry.has_kernel(
            "ResourceApplyGradientDescent",
            &resolved_attrs(m.output_types[0]),
            "CPU",
        ) {
            continue;
        }
        found.push(ScaledUpdate {
            update: i,
            mul: d.node.index(),
            alpha,
            delta,
        });
    }
    found
}

/// The attrs a `ResourceApplyGradientDescent` of dtype `t` resolves to.
fn resolved_attrs(t: DataType) -> AttrMap {
    let mut a = AttrMap::new();
    a.insert("T".to_string(), t.into_attr_value());
    a.insert("use_locking".to_string(), false.into_attr_value());
    a
}
