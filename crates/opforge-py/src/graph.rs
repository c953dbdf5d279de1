//! `_C.Graph`: the native half of `opforge.Graph` (the Python class
//! subclasses it). It owns an opforge [`Graph`] that the Python layer
//! grows node by node (the generated op functions call [`PyGraph::add_op`]
//! while a graph is the default), and runs it with a [`Session`] built
//! from a snapshot of the graph, on the eager context's device and
//! resource manager (so graphs see the variables eager code made).
//!
//! Python addresses nodes by index (the node's position in the graph),
//! never by [`NodeId`]: a snapshot taken for a session, or a graph copied
//! for an all-or-nothing import, has the same nodes at the same indices.

use crate::attrs::attr_to_py;
use crate::errors;
use crate::exec::{attr_map, context};
use crate::run::run_interruptible;
use crate::tensor::PyTensor;
use opforge::attrs::arg_ranges;
use opforge::graph::{Graph, Input, NodeId, NodeSpec, Output, Session};
use opforge::proto::{self, GraphDef};
use opforge::{Registry, Result as OfResult, Status, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use std::sync::Arc;

/// One output seen from Python: (node index, output index).
pub type Ref = (usize, usize);

/// A graph being built from Python (`opforge.Graph`).
#[pyclass(subclass, module = "opforge._C", name = "Graph")]
pub struct PyGraph {
    /// The graph; changed through `Arc::make_mut` (which copies it only
    /// when a session still runs the previous snapshot).
    graph: Arc<Graph>,
    /// A session over the current graph, built on the first run after a
    /// change.
    session: Option<Arc<Session>>,
    /// The next suffix to try for each base name made unique (so naming
    /// the n-th `MatMul` does not try the n - 1 names before it).
    suffixes: std::collections::HashMap<String, usize>,
}

impl PyGraph {
    /// The graph (read-only).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The graph, to change: drops the cached session first.
    fn graph_mut(&mut self) -> &mut Graph {
        self.session = None;
        Arc::make_mut(&mut self.graph)
    }

    /// A name based on `base` that no node has: `base`, else `base_1`,
    /// `base_2`, ... (TensorFlow's unique names).
    fn unique_name(&mut self, base: &str) -> String {
        let next = self.suffixes.entry(base.to_string()).or_insert(0);
        if *next == 0 {
            *next = 1;
            if self.graph.find(base).is_none() {
                return base.to_string();
            }
        }
        loop {
            let name = format!("{base}_{next}");
            *next += 1;
            if self.graph.find(&name).is_none() {
                return name;
            }
        }
    }

    /// The output `r` of this graph.
    pub fn output(&self, r: Ref) -> OfResult<Output> {
        let id = self.node_id(r.0)?;
        let o = Output::new(id, r.1);
        self.graph.check_output(o)?;
        Ok(o)
    }

    fn node_id(&self, index: usize) -> OfResult<NodeId> {
        self.graph.node_id(index).ok_or_else(|| {
            Status::invalid_argument(format!(
                "node {index} is not a node of this graph (it has {} nodes): \
                 a tensor of another graph?",
                self.graph.len()
            ))
        })
    }

    /// Adds a node of `op` named `name` (made unique) with `inputs` (one
    /// entry per input argument) and complete or inferable `attrs`; its
    /// index.
    pub fn add_node(
        &mut self,
        op: &str,
        name: &str,
        inputs: Vec<InputRef>,
        attrs: opforge::attrs::AttrMap,
        control: &[usize],
    ) -> OfResult<usize> {
        let name = self.unique_name(name);
        let mut spec = NodeSpec::new(op, &name);
        for i in inputs {
            spec.inputs.push(match i {
                InputRef::One(r) => Input::One(self.output(r)?),
                InputRef::List(l) => Input::List(
                    l.into_iter()
                        .map(|r| self.output(r))
                        .collect::<OfResult<_>>()?,
                ),
            });
        }
        for &c in control {
            spec.control_inputs.push(self.node_id(c)?);
        }
        spec.attrs = attrs;
        let id = self.graph_mut().add(spec)?;
        Ok(id.index())
    }

    /// Adds a `Const` node holding `t`; its index.
    pub fn add_const(&mut self, t: &Tensor, name: &str) -> OfResult<usize> {
        let name = self.unique_name(name);
        let spec = NodeSpec::new("Const", &name)
            .attr("value", t)
            .attr("dtype", t.dtype());
        Ok(self.graph_mut().add(spec)?.index())
    }

    /// The dtype number and shape (a list with None for unknown dims, or
    /// None for an unknown rank) of each output of node `index`.
    fn outputs_of<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyList>> {
        let n = errors::check(
            py,
            self.node_id(index).and_then(|id| self.graph.node(id)),
            None,
        )?;
        let out = PyList::empty(py);
        for (t, s) in n.output_types.iter().zip(&n.output_shapes) {
            let shape = match s {
                None => py.None().into_bound(py),
                Some(dims) => {
                    PyList::new(py, dims.iter().map(|&d| (d >= 0).then_some(d)))?.into_any()
                }
            };
            out.append((*t as i32, shape))?;
        }
        Ok(out)
    }

    /// The session for the current graph.
    fn session(&mut self) -> OfResult<Arc<Session>> {
        if let Some(s) = &self.session {
            return Ok(s.clone());
        }
        let s = Arc::new(
            Session::builder_shared(self.graph.clone())
                .eager_context(context())
                .build()?,
        );
        self.session = Some(s.clone());
        Ok(s)
    }
}

/// An input argument from Python: one output or a list.
pub enum InputRef {
    /// A single tensor.
    One(Ref),
    /// A list argument.
    List(Vec<Ref>),
}

fn input_ref(op: &str, i: usize, v: &Bound<'_, PyAny>) -> PyResult<InputRef> {
    if let Ok(r) = v.extract::<Ref>() {
        return Ok(InputRef::One(r));
    }
    if let Ok(l) = v.extract::<Vec<Ref>>() {
        return Ok(InputRef::List(l));
    }
    Err(PyTypeError::new_err(format!(
        "op '{op}', input {i}: expected a symbolic tensor of this graph or a list of them"
    )))
}

/// Parses a `GraphDef` given as binary bytes or as text.
fn parse_graph_def(data: &[u8]) -> OfResult<GraphDef> {
    match proto::from_binary::<GraphDef>(data) {
        Ok(def) => Ok(def),
        Err(binary_err) => match std::str::from_utf8(data) {
            Ok(text) => proto::from_text::<GraphDef>(text).map_err(|text_err| {
                Status::invalid_argument(format!(
                    "not a GraphDef: as binary: {}; as text: {}",
                    binary_err.message(),
                    text_err.message()
                ))
            }),
            Err(_) => Err(binary_err),
        },
    }
}

#[pymethods]
impl PyGraph {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> PyGraph {
        PyGraph {
            graph: Arc::new(Graph::new()),
            session: None,
            suffixes: std::collections::HashMap::new(),
        }
    }

    /// `_add_op(op, inputs, attrs, name, control)`: adds a node; `inputs`
    /// holds one `(node, index)` pair, or a list of pairs, per input
    /// argument; `attrs` as for `_C.execute`. Returns `(index, name,
    /// outputs, groups)`: `outputs` as [`Self::_outputs`], `groups` one
    /// `(start, end, is_list)` per output argument.
    #[allow(clippy::type_complexity)]
    fn _add_op<'py>(
        &mut self,
        py: Python<'py>,
        op: &str,
        inputs: Bound<'py, PyList>,
        attrs: Bound<'py, PyDict>,
        name: &str,
        control: Vec<usize>,
    ) -> PyResult<(usize, String, Bound<'py, PyList>, Vec<(usize, usize, bool)>)> {
        errors::guard(py, "Graph.add_op", || {
            let reg = errors::check(py, Registry::global().lookup(op), None)?;
            let def = &reg.op_def;
            let map = attr_map(def, &attrs)?;
            let mut refs = Vec::with_capacity(inputs.len());
            for (i, v) in inputs.iter().enumerate() {
                refs.push(input_ref(op, i, &v)?);
            }
            let index = errors::check(py, self.add_node(op, name, refs, map, &control), Some(op))?;
            let node = &self.graph.nodes()[index];
            let ranges =
                errors::check(py, arg_ranges(def, &def.output_arg, &node.attrs), Some(op))?;
            let groups = ranges
                .into_iter()
                .zip(&def.output_arg)
                .map(|(r, a)| {
                    let list = !a.number_attr.is_empty() || !a.type_list_attr.is_empty();
                    (r.start, r.end, list)
                })
                .collect();
            Ok((
                index,
                node.name.clone(),
                self.outputs_of(py, index)?,
                groups,
            ))
        })
    }

    /// `_add_const(tensor, name)`: adds a `Const` node; `(index, name)`.
    fn _add_const(
        &mut self,
        py: Python<'_>,
        t: PyRef<'_, PyTensor>,
        name: &str,
    ) -> PyResult<(usize, String)> {
        errors::guard(py, "Graph.constant", || {
            let index = errors::check(py, self.add_const(&t.t, name), Some("Const"))?;
            Ok((index, self.graph.nodes()[index].name.clone()))
        })
    }

    /// The number of nodes.
    fn _num_nodes(&self) -> usize {
        self.graph.len()
    }

    /// `(name, op, inputs, control_inputs, device)` of node `index`:
    /// inputs as `(node, index)` pairs, control inputs as node indices.
    #[allow(clippy::type_complexity)]
    fn _node(
        &self,
        py: Python<'_>,
        index: usize,
    ) -> PyResult<(String, String, Vec<Ref>, Vec<usize>, String)> {
        let n = errors::check(
            py,
            self.node_id(index).and_then(|id| self.graph.node(id)),
            None,
        )?;
        Ok((
            n.name.clone(),
            n.op.clone(),
            n.inputs.iter().map(|o| (o.node.index(), o.index)).collect(),
            n.control_inputs.iter().map(|c| c.index()).collect(),
            n.device.clone(),
        ))
    }

    /// The outputs of node `index`: `(dtype number, shape)` each, the shape
    /// a list with None for unknown dims, or None for an unknown rank.
    fn _outputs<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyList>> {
        self.outputs_of(py, index)
    }

    /// The attrs of node `index`, as a dict of Python values.
    fn _attrs<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyDict>> {
        let n = errors::check(
            py,
            self.node_id(index).and_then(|id| self.graph.node(id)),
            None,
        )?;
        let d = PyDict::new(py);
        for (k, v) in n.attrs.iter() {
            d.set_item(k, attr_to_py(py, v)?)?;
        }
        Ok(d)
    }

    /// The index of the node named `name`, or None.
    fn _find(&self, name: &str) -> Option<usize> {
        self.graph.find(name).map(NodeId::index)
    }

    /// `_run(fetches, feeds, targets)`: runs what `fetches` (`(node,
    /// index)` pairs) and `targets` (node indices) need, with `feeds`
    /// (`((node, index), Tensor)` pairs); the fetched Tensors. Runs without
    /// the GIL; Ctrl-C cancels it (KeyboardInterrupt).
    fn _run<'py>(
        slf: &Bound<'py, Self>,
        fetches: Vec<Ref>,
        feeds: Vec<(Ref, PyRef<'py, PyTensor>)>,
        targets: Vec<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        errors::guard(py, "Graph.run", || {
            // The graph is borrowed only to resolve the arguments and get
            // the session: runs from several threads at once, and nodes
            // added meanwhile, do not conflict with this run.
            let (session, feed, fetch, target) = {
                let mut this = slf.try_borrow_mut()?;
                let fetch: Vec<Output> = fetches
                    .iter()
                    .map(|&r| this.output(r))
                    .collect::<OfResult<_>>()
                    .map_err(|e| errors::to_py(py, &e.prepend("fetch: "), None))?;
                let mut feed = Vec::with_capacity(feeds.len());
                for (r, t) in &feeds {
                    let o =
                        errors::check(py, this.output(*r).map_err(|e| e.prepend("feed: ")), None)?;
                    feed.push((o, t.t.clone()));
                }
                let target: Vec<NodeId> = targets
                    .iter()
                    .map(|&i| this.node_id(i))
                    .collect::<OfResult<_>>()
                    .map_err(|e| errors::to_py(py, &e.prepend("target: "), None))?;
                let session = errors::check(py, this.session(), None)?;
                (session, feed, fetch, target)
            };
            let outs = run_interruptible(py, &session, feed, &fetch, &target)?;
            let out = PyList::empty(py);
            for t in outs {
                out.append(PyTensor::new(t))?;
            }
            Ok(out)
        })
    }

    /// The graph as a binary `GraphDef`.
    fn _graph_def_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        errors::guard(py, "Graph.as_graph_def", || {
            Ok(PyBytes::new(
                py,
                &proto::to_binary(&self.graph.to_graph_def()),
            ))
        })
    }

    /// `_import(data, prefix, input_map)`: adds the nodes of a `GraphDef`
    /// (binary bytes or text), named `prefix/...`, all or nothing.
    /// `input_map` pairs an output name of the GraphDef (`"x:0"`, `"x"`)
    /// with a `(node, index)` of this graph to use instead. Returns the
    /// index of the first node added and how many were added.
    fn _import(
        &mut self,
        py: Python<'_>,
        data: &[u8],
        prefix: &str,
        input_map: Vec<(String, Ref)>,
    ) -> PyResult<(usize, usize)> {
        errors::guard(py, "import_graph_def", || {
            let mut def = errors::check(py, parse_graph_def(data), None)?;
            let mut g = (*self.graph).clone();
            let first = g.len();
            // Each mapped output becomes an Identity of the replacement,
            // named where the import looks for an input the GraphDef does
            // not define (`prefix` + name).
            let mut rename = std::collections::HashMap::new();
            for (k, (name, r)) in input_map.iter().enumerate() {
                let (node, index) =
                    errors::check(py, opforge::graph::parse_output_name(name), None)?;
                if !def.node.iter().any(|n| n.name == node) {
                    return Err(PyValueError::new_err(format!(
                        "Attempted to map inputs that were not found in graph_def: [{name}]"
                    )));
                }
                let id = g.node_id(r.0).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "input_map['{name}'] is not a tensor of this graph"
                    ))
                })?;
                let local = format!("{node}__input_map_{index}_{k}");
                let spec = NodeSpec::new("Identity", &format!("{prefix}{local}"))
                    .input(Output::new(id, r.1));
                errors::check(py, g.add(spec), None)?;
                rename.insert((node.to_string(), index), local);
            }
            if !rename.is_empty() {
                for n in &mut def.node {
                    for input in &mut n.input {
                        if input.starts_with('^') {
                            continue;
                        }
                        if let Ok((node, index)) = opforge::graph::parse_output_name(input) {
                            if let Some(local) = rename.get(&(node.to_string(), index)) {
                                *input = local.clone();
                            }
                        }
                    }
                }
            }
            errors::check(py, g.import(&def, prefix), None)?;
            let added = g.len() - first;
            self.session = None;
            self.graph = Arc::new(g);
            Ok((first, added))
        })
    }
}

/// `_C.graph_def_to_text(data)`: a `GraphDef` (binary or text) as text.
#[pyfunction]
pub fn graph_def_to_text(py: Python<'_>, data: &[u8]) -> PyResult<String> {
    errors::guard(py, "GraphDef", || {
        let def = errors::check(py, parse_graph_def(data), None)?;
        Ok(proto::to_text(&def))
    })
}

/// `_C.graph_def_to_bytes(data)`: a `GraphDef` (binary or text) as binary.
#[pyfunction]
pub fn graph_def_to_bytes<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    errors::guard(py, "GraphDef", || {
        let def = errors::check(py, parse_graph_def(data), None)?;
        Ok(PyBytes::new(py, &proto::to_binary(&def)))
    })
}

/// `_C.graph_def_nodes(data)`: `(name, op, inputs, device)` of each node of
/// a `GraphDef` (binary or text), for `GraphDef.node`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn graph_def_nodes(
    py: Python<'_>,
    data: &[u8],
) -> PyResult<Vec<(String, String, Vec<String>, String)>> {
    errors::guard(py, "GraphDef", || {
        let def = errors::check(py, parse_graph_def(data), None)?;
        Ok(def
            .node
            .into_iter()
            .map(|n| (n.name, n.op, n.input, n.device))
            .collect())
    })
}
