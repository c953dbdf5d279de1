//! Gradients on graphs: [`gradients`] adds the gradient subgraph of `ys`
//! with respect to `xs` (TensorFlow's `tf.gradients`).

use super::{backprop, Ops, Record, Sym, SymArg};
use crate::attrs::AttrMap;
use crate::graph::{Graph, Input, NodeId, NodeSpec, Output};
use crate::registry::Registry;
use crate::{DataType, Result, Status, Tensor};
use std::collections::HashMap;

/// [`Ops`] that adds nodes to a graph (under a name scope).
pub struct GraphOps<'g> {
    graph: &'g mut Graph,
    prefix: String,
    scope: u32,
    syms: Vec<Output>,
    index: HashMap<Output, Sym>,
}

impl<'g> GraphOps<'g> {
    /// Adds nodes to `graph`, named under `prefix/`.
    pub fn new(graph: &'g mut Graph, prefix: &str) -> GraphOps<'g> {
        GraphOps {
            graph,
            prefix: prefix.to_string(),
            scope: Sym::new_scope(),
            syms: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// The handle of a graph output.
    pub fn sym(&mut self, o: Output) -> Sym {
        if let Some(&s) = self.index.get(&o) {
            return s;
        }
        let s = Sym::new(self.scope, self.syms.len() as u32);
        self.syms.push(o);
        self.index.insert(o, s);
        s
    }

    /// The graph output of a handle (`InvalidArgument` for a handle this
    /// builder did not hand out).
    pub fn output(&self, s: Sym) -> Result<Output> {
        let i = s.check(self.scope, self.syms.len(), "gradient graph builder")?;
        Ok(self.syms[i])
    }

    /// The graph.
    pub fn graph(&mut self) -> &mut Graph {
        self.graph
    }
}

impl Ops for GraphOps<'_> {
    fn call(&mut self, op: &str, inputs: &[SymArg], attrs: &AttrMap) -> Result<Vec<Sym>> {
        let name = self.graph.unique_name(&format!("{}/{op}", self.prefix));
        let mut spec = NodeSpec::new(op, &name);
        spec.attrs = attrs.clone();
        for a in inputs {
            spec.inputs.push(match a {
                SymArg::One(s) => Input::One(self.output(*s)?),
                SymArg::List(l) => {
                    Input::List(l.iter().map(|s| self.output(*s)).collect::<Result<_>>()?)
                }
            });
        }
        let id = self.graph.add(spec)?;
        let n = self.graph.node(id)?.output_types.len();
        Ok((0..n).map(|i| self.sym(Output::new(id, i))).collect())
    }

    fn dtype(&self, s: Sym) -> DataType {
        self.output(s)
            .and_then(|o| self.graph.output_type(o))
            .unwrap_or(DataType::Invalid)
    }

    fn shape(&self, s: Sym) -> Option<Vec<i64>> {
        let o = self.output(s).ok()?;
        self.graph
            .output_shape(o)
            .ok()
            .flatten()
            .map(<[i64]>::to_vec)
    }

    fn registry(&self) -> &Registry {
        self.graph.registry()
    }

    fn constant(&mut self, t: Tensor) -> Result<Sym> {
        let name = self.graph.unique_name(&format!("{}/Const", self.prefix));
        let spec = NodeSpec::new("Const", &name)
            .attr("value", &t)
            .attr("dtype", t.dtype());
        let id = self.graph.add(spec)?;
        Ok(self.sym(Output::new(id, 0)))
    }
}

/// Adds the gradients of `ys` with respect to `xs` to the graph, seeded
/// with `grad_ys` (default: ones), under the name scope `gradients`.
/// `None` for an x that no y depends on (or only through integer values).
pub fn gradients(
    graph: &mut Graph,
    ys: &[Output],
    xs: &[Output],
    grad_ys: Option<&[Output]>,
) -> Result<Vec<Option<Output>>> {
    for &o in ys.iter().chain(xs).chain(grad_ys.unwrap_or_default()) {
        graph.check_output(o)?;
    }
    if let Some(g) = grad_ys {
        if g.len() != ys.len() {
            return Err(Status::invalid_argument(format!(
                "{} grad_ys given for {} ys",
                g.len(),
                ys.len()
            )));
        }
    }
    let prefix = graph.unique_name("gradients");
    let node_count = graph.len();
    let mut ops = GraphOps::new(graph, &prefix);
    let mut records = Vec::with_capacity(node_count);
    let ids: Vec<NodeId> = ops.graph.node_ids().take(node_count).collect();
    for id in ids {
        let (op, attrs, ins, n_out) = {
            let n = ops.graph.node(id)?;
            (
                n.op.clone(),
                n.attrs.clone(),
                n.inputs.clone(),
                n.output_types.len(),
            )
        };
        let inputs = ins.into_iter().map(|o| ops.sym(o)).collect();
        let outputs = (0..n_out).map(|i| ops.sym(Output::new(id, i))).collect();
        records.push(Record {
            op: op.into(),
            attrs,
            inputs,
            outputs,
        });
    }
    let ys: Vec<Sym> = ys.iter().map(|&o| ops.sym(o)).collect();
    let xs_syms: Vec<Sym> = xs.iter().map(|&o| ops.sym(o)).collect();
    let seeds: Vec<Option<Sym>> = match grad_ys {
        Some(g) => g.iter().map(|&o| Some(ops.sym(o))).collect(),
        None => vec![None; ys.len()],
    };
    let grads = backprop(&mut ops, &records, &ys, &seeds, &xs_syms)?;
    grads
        .into_iter()
        .map(|g| g.map(|s| ops.output(s)).transpose())
        .collect()
}
