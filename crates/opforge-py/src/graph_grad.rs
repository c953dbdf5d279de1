//! `opforge.gradients` on a Python-built graph: the core's reverse-mode
//! [`backprop`] over the graph's nodes, with an [`Ops`] that adds each
//! gradient node to the `opforge.Graph` object (borrowing it only for that
//! one node). Between those borrows a gradient written in Python runs: it
//! gets symbolic tensors for the forward op's inputs and outputs and for
//! the incoming gradients ([`graph_tensor`]), and builds its gradient
//! nodes through the ordinary op functions, which add them to the same
//! (default) graph. Its results come back as handles of this builder.

use crate::errors;
use crate::graph::{PyGraph, Ref};
use opforge::attrs::AttrMap;
use opforge::autodiff::{backprop, Ops, Record, Sym, SymArg};
use opforge::{DataType, Registry, Result as OfResult, Status, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The graph outputs a builder has handed out handles for.
#[derive(Default)]
struct SymMap {
    refs: Vec<Ref>,
    index: HashMap<Ref, u32>,
}

/// One graph-gradient computation in progress on this thread.
struct Active {
    scope: u32,
    graph: Py<PyGraph>,
    map: Rc<RefCell<SymMap>>,
}

thread_local! {
    /// The graph-gradient builders running on this thread (innermost last).
    static ACTIVE: RefCell<Vec<Active>> = const { RefCell::new(Vec::new()) };
}

/// [`Ops`] adding nodes to a Python graph.
struct PyGraphOps {
    graph: Py<PyGraph>,
    scope: u32,
    prefix: String,
    map: Rc<RefCell<SymMap>>,
}

fn sym_of(scope: u32, map: &RefCell<SymMap>, r: Ref) -> Sym {
    let mut m = map.borrow_mut();
    if let Some(&i) = m.index.get(&r) {
        return Sym::new(scope, i);
    }
    let i = m.refs.len() as u32;
    m.refs.push(r);
    m.index.insert(r, i);
    Sym::new(scope, i)
}

fn ref_of(scope: u32, map: &RefCell<SymMap>, s: Sym) -> OfResult<Ref> {
    let m = map.borrow();
    let i = s.check(scope, m.refs.len(), "gradient graph builder")?;
    Ok(m.refs[i])
}

fn busy() -> Status {
    Status::failed_precondition(
        "the graph is in use (borrowed) while its gradients are built: do not run or change \
         it from another thread meanwhile",
    )
}

impl PyGraphOps {
    fn with_graph<T>(&self, f: impl FnOnce(&mut PyGraph) -> OfResult<T>) -> OfResult<T> {
        Python::attach(|py| {
            let mut g = self.graph.bind(py).try_borrow_mut().map_err(|_| busy())?;
            f(&mut g)
        })
    }

    fn output_info(&self, s: Sym) -> Option<(DataType, Option<Vec<i64>>)> {
        let r = ref_of(self.scope, &self.map, s).ok()?;
        Python::attach(|py| {
            let g = self.graph.bind(py).try_borrow().ok()?;
            let o = g.output(r).ok()?;
            let t = g.graph().output_type(o).ok()?;
            let shape = g.graph().output_shape(o).ok()?.map(<[i64]>::to_vec);
            Some((t, shape))
        })
    }

    fn outputs(&self, index: usize) -> OfResult<Vec<Sym>> {
        let n = self.with_graph(|g| {
            let id = g
                .graph()
                .node_id(index)
                .ok_or_else(|| Status::internal("a node just added is missing"))?;
            Ok(g.graph().node(id)?.output_types.len())
        })?;
        Ok((0..n)
            .map(|i| sym_of(self.scope, &self.map, (index, i)))
            .collect())
    }
}

impl Ops for PyGraphOps {
    fn call(&mut self, op: &str, inputs: &[SymArg], attrs: &AttrMap) -> OfResult<Vec<Sym>> {
        let mut refs = Vec::with_capacity(inputs.len());
        for a in inputs {
            refs.push(match a {
                SymArg::One(s) => crate::graph::InputRef::One(ref_of(self.scope, &self.map, *s)?),
                SymArg::List(l) => crate::graph::InputRef::List(
                    l.iter()
                        .map(|s| ref_of(self.scope, &self.map, *s))
                        .collect::<OfResult<_>>()?,
                ),
            });
        }
        let name = format!("{}/{op}", self.prefix);
        let index = self.with_graph(|g| g.add_node(op, &name, refs, attrs.clone(), &[]))?;
        self.outputs(index)
    }

    fn dtype(&self, s: Sym) -> DataType {
        self.output_info(s).map_or(DataType::Invalid, |(t, _)| t)
    }

    fn shape(&self, s: Sym) -> Option<Vec<i64>> {
        self.output_info(s).and_then(|(_, shape)| shape)
    }

    fn constant(&mut self, t: Tensor) -> OfResult<Sym> {
        let name = format!("{}/Const", self.prefix);
        let index = self.with_graph(|g| g.add_const(&t, &name))?;
        Ok(sym_of(self.scope, &self.map, (index, 0)))
    }

    fn registry(&self) -> &Registry {
        Registry::global()
    }
}

/// The symbolic tensor (`opforge.SymbolicTensor`) of a handle of a graph
/// gradient running on this thread, or None if `s` is not one.
pub fn graph_tensor<'py>(py: Python<'py>, s: Sym) -> Option<PyResult<Bound<'py, PyAny>>> {
    let found = ACTIVE.with(|a| {
        a.borrow()
            .iter()
            .rev()
            .find(|b| b.scope == s.scope())
            .map(|b| (b.graph.clone_ref(py), ref_of(b.scope, &b.map, s)))
    })?;
    let (graph, r) = found;
    Some(match r {
        Err(e) => Err(errors::to_py(py, &e, None)),
        Ok((node, index)) => graph.bind(py).call_method1("_tensor", (node, index)),
    })
}

/// The handle, in the builder of scope `scope`, of a symbolic tensor a
/// Python gradient returned: `Ok(None)` if no builder of that scope runs
/// on this thread.
pub fn graph_sym(scope: u32, v: &Bound<'_, PyAny>) -> PyResult<Option<Sym>> {
    let py = v.py();
    let found = ACTIVE.with(|a| {
        a.borrow()
            .iter()
            .rev()
            .find(|b| b.scope == scope)
            .map(|b| (b.graph.clone_ref(py), b.map.clone()))
    });
    let Some((graph, map)) = found else {
        return Ok(None);
    };
    let g = v.getattr("graph")?;
    if !g.is(graph.bind(py)) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "a gradient function returned a tensor of another graph",
        ));
    }
    let r: Ref = (
        v.getattr("_node")?.extract()?,
        v.getattr("_index")?.extract()?,
    );
    Ok(Some(sym_of(scope, &map, r)))
}

/// Pops this thread's innermost builder when the computation ends (also on
/// an early return or a panic).
struct Pop;

impl Drop for Pop {
    fn drop(&mut self) {
        ACTIVE.with(|a| {
            a.borrow_mut().pop();
        });
    }
}

/// `Graph._gradients(ys, xs, grad_ys, prefix, recorded=None)`: adds the
/// gradients of the sum of `ys` (weighted by `grad_ys`, ones by default;
/// None entries are ones) with respect to `xs` under the name scope
/// `prefix`; one `(node, index)` or None per x. `recorded` (`(start, end)`
/// node-index ranges): only those nodes pass gradients, as a
/// `GradientTape` in a graph records only the ops added while it was
/// recording; the outputs of the others are constants.
#[pyfunction]
#[pyo3(signature = (graph, ys, xs, grad_ys, prefix, recorded=None))]
pub fn graph_gradients<'py>(
    py: Python<'py>,
    graph: Bound<'py, PyGraph>,
    ys: Vec<Ref>,
    xs: Vec<Ref>,
    grad_ys: Vec<Option<Ref>>,
    prefix: &str,
    recorded: Option<Vec<(usize, usize)>>,
) -> PyResult<Bound<'py, PyList>> {
    errors::guard(py, "gradients", || {
        if grad_ys.len() != ys.len() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{} grad_ys given for {} ys",
                grad_ys.len(),
                ys.len()
            )));
        }
        let scope = Sym::new_scope();
        let map = Rc::new(RefCell::new(SymMap::default()));
        // The forward records: every node the graph has now.
        let records = {
            let g = graph.borrow();
            let gr = g.graph();
            for &r in ys.iter().chain(&xs).chain(grad_ys.iter().flatten()) {
                errors::check(py, g.output(r), None)?;
            }
            let mut records = Vec::with_capacity(gr.len());
            let kept = |i: usize| {
                recorded
                    .as_ref()
                    .is_none_or(|spans| spans.iter().any(|&(a, b)| (a..b).contains(&i)))
            };
            for (i, n) in gr.nodes().iter().enumerate() {
                if !kept(i) {
                    continue;
                }
                records.push(Record {
                    op: n.op.as_str().into(),
                    attrs: n.attrs.clone(),
                    inputs: n
                        .inputs
                        .iter()
                        .map(|o| sym_of(scope, &map, (o.node.index(), o.index)))
                        .collect(),
                    outputs: (0..n.output_types.len())
                        .map(|k| sym_of(scope, &map, (i, k)))
                        .collect(),
                });
            }
            records
        };
        let sym = |r: Ref| sym_of(scope, &map, r);
        let ys: Vec<Sym> = ys.into_iter().map(sym).collect();
        let xs: Vec<Sym> = xs.into_iter().map(sym).collect();
        let seeds: Vec<Option<Sym>> = grad_ys.into_iter().map(|g| g.map(sym)).collect();
        let mut ops = PyGraphOps {
            graph: graph.clone().unbind(),
            scope,
            prefix: prefix.to_string(),
            map: map.clone(),
        };
        ACTIVE.with(|a| {
            a.borrow_mut().push(Active {
                scope,
                graph: graph.clone().unbind(),
                map: map.clone(),
            })
        });
        let _pop = Pop;
        let grads = errors::check(py, backprop(&mut ops, &records, &ys, &seeds, &xs), None)?;
        let out = PyList::empty(py);
        for g in grads {
            match g {
                None => out.append(py.None())?,
                Some(s) => {
                    let r = errors::check(py, ref_of(scope, &map, s), None)?;
                    out.append(r)?;
                }
            }
        }
        Ok(out)
    })
}
