//! Graphs: nodes (ops applied to other nodes' outputs), built through a
//! TensorFlow-`Scope`-like API or imported from a `GraphDef`. Attrs are
//! inferred and validated as in eager mode, and each node's shape function
//! runs when it is added, so a shape error names the node at construction.

mod graph_def;
pub mod rewrite;
mod session;
#[cfg(test)]
mod tests;

pub use graph_def::LeanGraphDef;
pub use rewrite::{GraphRewrite, Replacement, RewriteContext, RewriteFunction};
pub use session::{Session, SessionOptions};

use crate::attrs::{
    add_defaults, arg_ranges, in_out_types, resolve_call, validate_attrs, ArgTypes, AttrMap,
    IntoAttrValue,
};
use crate::proto::attr_value::Value;
use crate::registry::{OpRegistrationData, Registry};
use crate::shape_inference::{InferenceContext, ShapeFn};
use crate::{DataType, Result, Status, Tensor};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A node of a graph: the graph's id and the node's index in it. Handles
/// of another graph are rejected (`InvalidArgument`), never read as some
/// other node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    graph: u32,
    index: u32,
}

impl NodeId {
    /// The node's index in its graph (its position in [`Graph::nodes`]).
    #[inline]
    pub fn index(self) -> usize {
        self.index as usize
    }
}

/// Gives each graph a distinct id.
static NEXT_GRAPH_ID: AtomicU32 = AtomicU32::new(1);

/// One output of a node: `node:index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Output {
    /// The producing node.
    pub node: NodeId,
    /// Which of its flat outputs.
    pub index: usize,
}

impl Output {
    /// Output `index` of `node`.
    pub fn new(node: NodeId, index: usize) -> Output {
        Output { node, index }
    }
}

impl From<NodeId> for Output {
    fn from(node: NodeId) -> Output {
        Output { node, index: 0 }
    }
}

/// One input argument of a node: one output, or a list of outputs.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A single tensor.
    One(Output),
    /// A list (for `N * T` and `list(type)` arguments).
    List(Vec<Output>),
}

/// A node of a graph.
#[derive(Clone)]
pub struct Node {
    /// The unique name.
    pub name: String,
    /// The op.
    pub op: String,
    /// The requested device ("" = any).
    pub device: String,
    /// Every attr (given, inferred and defaulted).
    pub attrs: AttrMap,
    /// Flat data inputs.
    pub inputs: Vec<Output>,
    /// Nodes that must run before this one.
    pub control_inputs: Vec<NodeId>,
    /// Flat input dtypes.
    pub input_types: Vec<DataType>,
    /// Flat output dtypes.
    pub output_types: Vec<DataType>,
    /// Inferred output shapes (`None` = unknown rank, `-1` = unknown dim).
    pub output_shapes: Vec<Option<Vec<i64>>>,
    /// The op's registration.
    pub registration: Arc<OpRegistrationData>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Node({} = {}{})",
            self.name,
            self.op,
            crate::attrs::summarize_attrs(&self.attrs)
        )
    }
}

/// A node to add: op, name, inputs, attrs, control inputs, device.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    /// The op.
    pub op: String,
    /// The name (made unique by [`Graph::add`] only through [`Scope`]).
    pub name: String,
    /// One entry per input argument of the op.
    pub inputs: Vec<Input>,
    /// Attrs given (the rest are inferred or defaulted).
    pub attrs: AttrMap,
    /// Control inputs.
    pub control_inputs: Vec<NodeId>,
    /// The requested device.
    pub device: String,
}

impl NodeSpec {
    /// A node of `op` named `name`.
    pub fn new(op: &str, name: &str) -> NodeSpec {
        NodeSpec {
            op: op.to_string(),
            name: name.to_string(),
            inputs: Vec::new(),
            attrs: AttrMap::new(),
            control_inputs: Vec::new(),
            device: String::new(),
        }
    }

    /// Adds a single-tensor input argument.
    pub fn input(mut self, o: impl Into<Output>) -> Self {
        self.inputs.push(Input::One(o.into()));
        self
    }

    /// Adds a list input argument.
    pub fn input_list(mut self, l: Vec<Output>) -> Self {
        self.inputs.push(Input::List(l));
        self
    }

    /// Sets an attr.
    pub fn attr(mut self, name: &str, v: impl IntoAttrValue) -> Self {
        self.attrs.insert(name.to_string(), v.into_attr_value());
        self
    }

    /// Adds a control input.
    pub fn control_input(mut self, n: NodeId) -> Self {
        self.control_inputs.push(n);
        self
    }

    /// Sets the device.
    pub fn device(mut self, d: &str) -> Self {
        self.device = d.to_string();
        self
    }
}

/// A graph of nodes in the order they were added (a topological order).
pub struct Graph {
    id: u32,
    nodes: Vec<Node>,
    by_name: NameIndex,
    /// The attrs of the last node added of each op (shared).
    last_attrs: HashMap<String, AttrMap>,
    registry: Arc<Registry>,
    /// The GraphDef versions (producer = the opforge graph version).
    pub versions: crate::proto::VersionDef,
    /// Functions carried with the graph (kept through import and export).
    pub library: Option<crate::proto::FunctionDefLibrary>,
}

/// The nodes by name, without a copy of the names: a map from the hash of
/// a name to the index of the node, checked against the node's name, and
/// a map by name for the (rare) names whose hash another name had first.
/// A later node of a name takes the name over, as in a `HashMap`.
#[derive(Clone, Default)]
struct NameIndex {
    hasher: std::collections::hash_map::RandomState,
    first: HashMap<u64, u32, std::hash::BuildHasherDefault<HashIsKey>>,
    more: HashMap<String, u32>,
}

impl NameIndex {
    fn hash(&self, name: &str) -> u64 {
        std::hash::BuildHasher::hash_one(&self.hasher, name)
    }

    /// The index of the node named `name`.
    fn get(&self, nodes: &[Node], name: &str) -> Option<u32> {
        match self.first.get(&self.hash(name)) {
            Some(&i) if nodes[i as usize].name == name => Some(i),
            Some(_) => self.more.get(name).copied(),
            None => None,
        }
    }

    /// Indexes `nodes[index]` by its name.
    fn insert(&mut self, nodes: &[Node], index: u32) {
        let name = &nodes[index as usize].name;
        let h = self.hash(name);
        match self.first.get_mut(&h) {
            Some(i) if nodes[*i as usize].name == *name => *i = index,
            Some(_) => {
                self.more.insert(name.clone(), index);
            }
            None => {
                self.first.insert(h, index);
            }
        }
    }

    fn reserve(&mut self, additional: usize) {
        self.first.reserve(additional);
    }
}

/// A hasher for keys that are already hashes.
#[derive(Default)]
struct HashIsKey(u64);

impl std::hash::Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The GraphDef producer version opforge writes (TensorFlow 2.x's range).
pub const GRAPH_DEF_VERSION: i32 = 1994;

/// A copy of the graph under a new graph id: the same nodes at the same
/// indices, so a caller that keeps building a graph while sessions run
/// snapshots of it can address the copy's nodes by index
/// ([`Graph::node_id`]). Node ids of the original belong to the original
/// only (the copy rejects them, as it rejects any other graph's).
impl Clone for Graph {
    fn clone(&self) -> Graph {
        let id = NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed);
        let mut nodes = self.nodes.clone();
        // The nodes' references to each other name the copy.
        for n in &mut nodes {
            for i in &mut n.inputs {
                i.node.graph = id;
            }
            for c in &mut n.control_inputs {
                c.graph = id;
            }
        }
        Graph {
            id,
            nodes,
            by_name: self.by_name.clone(),
            last_attrs: self.last_attrs.clone(),
            registry: self.registry.clone(),
            versions: self.versions.clone(),
            library: self.library.clone(),
        }
    }
}

impl Default for Graph {
    fn default() -> Self {
        Graph::new()
    }
}

impl Graph {
    /// An empty graph using the global registry.
    pub fn new() -> Graph {
        Graph::with_registry(Registry::global().clone())
    }

    /// An empty graph resolving ops and shape functions in `registry`.
    pub fn with_registry(registry: Arc<Registry>) -> Graph {
        Graph {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            nodes: Vec::new(),
            by_name: NameIndex::default(),
            last_attrs: HashMap::new(),
            registry,
            versions: crate::proto::VersionDef {
                producer: GRAPH_DEF_VERSION,
                min_consumer: 0,
                bad_consumers: Vec::new(),
            },
            library: None,
        }
    }

    /// The registry the graph resolves ops in.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The registry the graph resolves ops in, shared.
    pub fn registry_arc(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Every node, in insertion (topological) order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The ids of every node, in insertion (topological) order.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes.len()).map(|i| self.id_at(i))
    }

    /// The id of the node at `index` of [`nodes`](Self::nodes), if the
    /// graph has that many nodes.
    pub fn node_id(&self, index: usize) -> Option<NodeId> {
        (index < self.nodes.len()).then(|| self.id_at(index))
    }

    /// The id of the node at `index` (the caller checked the index).
    fn id_at(&self, index: usize) -> NodeId {
        NodeId {
            graph: self.id,
            index: index as u32,
        }
    }

    /// The index of node `id`, or `InvalidArgument` for a node of another
    /// graph or past this graph's end.
    pub fn check_node(&self, id: NodeId) -> Result<usize> {
        if id.graph != self.id {
            return Err(Status::invalid_argument(format!(
                "node handle {id:?} belongs to another graph: use node ids only with the graph that made them"
            )));
        }
        if id.index() >= self.nodes.len() {
            return Err(Status::invalid_argument(format!(
                "node handle {id:?} is not a node of this graph (it has {} nodes)",
                self.nodes.len()
            )));
        }
        Ok(id.index())
    }

    /// A node (`InvalidArgument` for a handle of another graph).
    pub fn node(&self, id: NodeId) -> Result<&Node> {
        Ok(&self.nodes[self.check_node(id)?])
    }

    /// The node at `index` of [`nodes`](Self::nodes) (for ids a check accepted).
    #[inline]
    pub(crate) fn at(&self, index: usize) -> &Node {
        &self.nodes[index]
    }

    /// `FailedPrecondition` if a node's op was unloaded from the registry
    /// after the node was added: naming the node, the op and who had
    /// registered it.
    pub fn check_live(&self) -> Result<()> {
        match self.nodes.iter().find(|n| !n.registration.is_live()) {
            None => Ok(()),
            Some(n) => Err(unloaded_op(&n.name, &n.op, &n.registration)),
        }
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node named `name`.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.by_name
            .get(&self.nodes, name)
            .map(|index| self.id_at(index as usize))
    }

    /// The output named `name:index` (or `name` for index 0).
    pub fn output(&self, name: &str) -> Result<Output> {
        let (node, index) = parse_output_name(name)?;
        let id = self
            .find(node)
            .ok_or_else(|| Status::not_found(format!("No node named '{node}' in the graph")))?;
        let n = self.nodes[id.index()].output_types.len();
        if index >= n {
            return Err(Status::out_of_range(format!(
                "Node '{node}' ({}) has {n} outputs; there is no output {index}",
                self.nodes[id.index()].op
            )));
        }
        Ok(Output { node: id, index })
    }

    /// `name:index` of an output (`InvalidArgument` for a handle of another graph).
    pub fn output_name(&self, o: Output) -> Result<String> {
        self.check_output(o)?;
        Ok(self.name_of(o))
    }

    /// `name:index` of an output a check accepted.
    pub(crate) fn name_of(&self, o: Output) -> String {
        format!("{}:{}", self.nodes[o.node.index()].name, o.index)
    }

    /// The dtype of an output (`InvalidArgument` for a handle of another graph).
    pub fn output_type(&self, o: Output) -> Result<DataType> {
        self.check_output(o)?;
        Ok(self.type_of(o))
    }

    /// The dtype of an output a check accepted.
    #[inline]
    pub(crate) fn type_of(&self, o: Output) -> DataType {
        self.nodes[o.node.index()].output_types[o.index]
    }

    /// The inferred shape of an output (`None` = unknown rank;
    /// `InvalidArgument` for a handle of another graph).
    pub fn output_shape(&self, o: Output) -> Result<Option<&[i64]>> {
        self.check_output(o)?;
        Ok(self.nodes[o.node.index()].output_shapes[o.index].as_deref())
    }

    /// A name based on `base` that no node has yet (`base`, `base_1`, ...).
    pub fn unique_name(&self, base: &str) -> String {
        if self.find(base).is_none() {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|n| self.find(n).is_none())
            .unwrap_or_default()
    }

    /// Adds a node: infers and validates its attrs from its inputs' dtypes,
    /// runs its shape function on its inputs' shapes (with `Const` inputs'
    /// values), and returns its id. Errors name the node.
    pub fn add(&mut self, spec: NodeSpec) -> Result<NodeId> {
        let name = spec.name.clone();
        self.add_inner(spec)
            .map_err(|e| e.prepend(format!("Node '{name}': ")))
    }

    fn add_inner(&mut self, spec: NodeSpec) -> Result<NodeId> {
        if spec.name.is_empty() || !valid_node_name(&spec.name) {
            return Err(Status::invalid_argument(format!(
                "'{}' is not a valid node name: use letters, digits and . _ - / (not starting with _ or /)",
                spec.name
            )));
        }
        if self.find(&spec.name).is_some() {
            return Err(Status::already_exists(format!(
                "A node named '{}' is already in the graph",
                spec.name
            )));
        }
        let node = self.make_node(spec)?;
        Ok(self.push_node(node))
    }

    /// Appends `node` (its name not yet in the graph); its id.
    fn push_node(&mut self, node: Node) -> NodeId {
        let index = self.nodes.len();
        let id = self.id_at(index);
        self.nodes.push(node);
        self.by_name.insert(&self.nodes, index as u32);
        id
    }

    /// The node `spec` describes, on this graph's nodes: attrs resolved and
    /// validated, types and shapes inferred (not yet in the graph).
    fn make_node(&mut self, spec: NodeSpec) -> Result<Node> {
        for &c in &spec.control_inputs {
            self.check_node(c)
                .map_err(|e| e.prepend("control input: "))?;
        }
        let reg = self.registry.lookup(&spec.op)?;
        let mut arg_types = Vec::with_capacity(spec.inputs.len());
        let mut flat = Vec::new();
        for input in &spec.inputs {
            match input {
                Input::One(o) => {
                    arg_types.push(ArgTypes::Single(self.output_type(*o)?));
                    flat.push(*o);
                }
                Input::List(l) => {
                    arg_types.push(ArgTypes::List(
                        l.iter()
                            .map(|&o| self.output_type(o))
                            .collect::<Result<_>>()?,
                    ));
                    flat.extend_from_slice(l);
                }
            }
        }
        let call = resolve_call(&reg.op_def, &arg_types, &spec.attrs)?;
        self.new_node(
            spec.name,
            spec.op,
            spec.device,
            call.attrs,
            flat,
            spec.control_inputs,
            call.input_types,
            call.output_types,
            reg,
        )
    }

    /// A node of these parts (checked by the caller), its attrs shared
    /// and its output shapes inferred.
    #[allow(clippy::too_many_arguments)]
    fn new_node(
        &mut self,
        name: String,
        op: String,
        device: String,
        mut attrs: AttrMap,
        inputs: Vec<Output>,
        control_inputs: Vec<NodeId>,
        input_types: Vec<DataType>,
        output_types: Vec<DataType>,
        reg: Arc<OpRegistrationData>,
    ) -> Result<Node> {
        // Shared with the kernel a session builds for the node, and with
        // the previous node of the same op when it has the same attrs (as
        // most nodes of a large graph have).
        match self.last_attrs.get(&op) {
            Some(last) if *last == attrs => attrs = last.clone(),
            _ => {
                attrs.share();
                self.last_attrs.insert(op.clone(), attrs.clone());
            }
        }
        let mut node = Node {
            name,
            op,
            device,
            attrs,
            inputs,
            control_inputs,
            input_types,
            output_types,
            output_shapes: Vec::new(),
            registration: reg,
        };
        node.output_shapes = self.infer_shapes(&node)?;
        Ok(node)
    }

    /// Replaces node `id` by the node `spec` describes, which keeps its
    /// name and output types and reads only nodes before it (so every
    /// consumer, feed, fetch and handle of the node still means it): for
    /// graph rewrites ([`rewrite`]).
    pub(crate) fn replace_node(&mut self, id: NodeId, spec: NodeSpec) -> Result<()> {
        let index = self.check_node(id)?;
        let old = &self.nodes[index];
        let earlier = |n: NodeId| n.index() < index;
        if spec.name != old.name
            || !spec.control_inputs.iter().all(|&c| earlier(c))
            || !spec.inputs.iter().all(|i| match i {
                Input::One(o) => earlier(o.node),
                Input::List(l) => l.iter().all(|o| earlier(o.node)),
            })
        {
            return Err(Status::internal(format!(
                "a rewrite of node '{}' must keep its name and read only earlier nodes",
                old.name
            )));
        }
        let node = self.make_node(spec)?;
        if node.output_types != self.nodes[index].output_types {
            return Err(Status::internal(format!(
                "a rewrite of node '{}' must keep its output types",
                node.name
            )));
        }
        self.nodes[index] = node;
        Ok(())
    }

    /// A copy with the same id: the handles of this graph address the
    /// copy's nodes (for a rewritten copy that stands for this graph).
    pub(crate) fn clone_as_same(&self) -> Graph {
        Graph {
            id: self.id,
            nodes: self.nodes.clone(),
            by_name: self.by_name.clone(),
            last_attrs: self.last_attrs.clone(),
            registry: self.registry.clone(),
            versions: self.versions.clone(),
            library: self.library.clone(),
        }
    }

    /// The value of an output when it is known at graph-construction time
    /// (a `Const` node's value).
    pub fn constant_value(&self, o: Output) -> Option<Tensor> {
        self.check_output(o).ok()?;
        let n = &self.nodes[o.node.index()];
        if n.op != "Const" || o.index != 0 {
            return None;
        }
        match n.attrs.get("value").and_then(|v| v.value.as_ref()) {
            Some(Value::Tensor(t)) => Tensor::from_proto(t).ok(),
            _ => None,
        }
    }

    /// Runs a node's shape function on its inputs' inferred shapes.
    fn infer_shapes(&self, node: &Node) -> Result<Vec<Option<Vec<i64>>>> {
        let n_out = node.output_types.len();
        let Some(shape_fn) = self.registry.attr::<ShapeFn>(&node.op) else {
            return Ok(vec![None; n_out]);
        };
        let in_shapes: Vec<Option<Vec<i64>>> = node
            .inputs
            .iter()
            .map(|&o| self.nodes[o.node.index()].output_shapes[o.index].clone())
            .collect();
        let mut ctx = InferenceContext::new(
            &node.registration.op_def,
            &node.name,
            &node.attrs,
            &in_shapes,
            n_out,
        );
        for (i, &o) in node.inputs.iter().enumerate() {
            if let Some(t) = self.constant_value(o) {
                ctx.set_input_tensor(i, t);
            } else if self.nodes[o.node.index()].op == "Shape" {
                // The value of Shape(x) is x's shape, as far as it is known.
                let src = self.nodes[o.node.index()].inputs[0];
                let known = self.nodes[src.node.index()].output_shapes[src.index].clone();
                if let Some(dims) = known {
                    let s = ctx.make_partial_shape(Some(&dims));
                    ctx.set_input_tensor_as_shape(i, s);
                }
            }
        }
        let input_names: Vec<String> = node.inputs.iter().map(|&o| self.name_of(o)).collect();
        let result = shape_fn(&mut ctx);
        ctx.check_accesses()
            .and(result)
            .map_err(|e| ctx.annotate_error(e, &input_names))?;
        Ok((0..n_out)
            .map(|i| ctx.output(i).and_then(|s| ctx.shape_values(s)))
            .collect())
    }

    /// `InvalidArgument` unless `o` is an output of a node of this graph.
    pub fn check_output(&self, o: Output) -> Result<()> {
        let n = &self.nodes[self.check_node(o.node)?];
        if o.index >= n.output_types.len() {
            return Err(Status::invalid_argument(format!(
                "node '{}' has {} outputs; there is no output {}",
                n.name,
                n.output_types.len(),
                o.index
            )));
        }
        Ok(())
    }

    /// Adds a node whose attrs are complete (from a `NodeDef`): fills the
    /// op's defaults, validates, and checks the inputs' dtypes.
    pub(crate) fn add_complete(
        &mut self,
        name: &str,
        op: &str,
        device: &str,
        mut attrs: AttrMap,
        inputs: Vec<Output>,
        control: Vec<NodeId>,
    ) -> Result<NodeId> {
        let reg = self.registry.lookup(op).map_err(|e| {
            e.append(" (the graph uses an op this binary does not have: load the op library that defines it before importing)")
        })?;
        add_defaults(&reg.op_def, &mut attrs);
        validate_attrs(&reg.op_def, &attrs)?;
        let (input_types, output_types) = in_out_types(&reg.op_def, &attrs)?;
        if input_types.len() != inputs.len() {
            return Err(Status::invalid_argument(format!(
                "Node '{name}' ({op}) expects {} inputs, but has {}",
                input_types.len(),
                inputs.len()
            )));
        }
        for (i, (&o, &want)) in inputs.iter().zip(&input_types).enumerate() {
            let got = self.output_type(o)?;
            if got.base() != want.base() {
                return Err(Status::invalid_argument(format!(
                    "Input {i} of node {name} was passed {got} from {} incompatible with expected {want}.",
                    self.name_of(o)
                )));
            }
        }
        let _ = arg_ranges(&reg.op_def, &reg.op_def.input_arg, &attrs)?;
        self.new_node(
            name.to_string(),
            op.to_string(),
            device.to_string(),
            attrs,
            inputs,
            control,
            input_types,
            output_types,
            reg,
        )
        .map(|node| self.push_node(node))
        .map_err(|e| e.prepend(format!("Node '{name}': ")))
    }
}

/// The error for a node whose op was unloaded after the node was made.
pub(crate) fn unloaded_op(node: &str, op: &str, registration: &OpRegistrationData) -> Status {
    Status::failed_precondition(format!(
        "Node '{node}' uses op '{op}', which was unloaded from the registry (it was registered by {}) \
         after the node was created; load the library again and rebuild the graph or session",
        registration.state().describe_origins()
    ))
}

/// Splits `name:index` (a bare name is index 0).
pub fn parse_output_name(s: &str) -> Result<(&str, usize)> {
    match s.rsplit_once(':') {
        Some((n, i)) if !n.is_empty() => {
            let index = i.parse().map_err(|_| {
                Status::invalid_argument(format!("'{s}' is not a valid output name (node:index)"))
            })?;
            Ok((n, index))
        }
        Some(_) => Err(Status::invalid_argument(format!(
            "'{s}' is not a valid output name (node:index)"
        ))),
        None => Ok((s, 0)),
    }
}

fn valid_node_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/>".contains(c))
}

/// Builds nodes with unique, scoped names (`layer1/MatMul`, `layer1/MatMul_1`),
/// shared control dependencies and a device, like TensorFlow's `Scope`.
///
/// ```
/// use opforge_core::graph::{Graph, Scope};
/// # use opforge_core::{register_op, OpDefBuilder, Tensor};
/// # register_op!(OpDefBuilder::new("DocConst").attr("value: tensor").attr("dtype: type").output("output: dtype"));
/// let mut g = Graph::new();
/// let mut root = Scope::new(&mut g);
/// let mut layer = root.sub("layer1");
/// let t = Tensor::scalar(1.0f32);
/// let a = layer.op("DocConst").attr("value", &t).attr("dtype", t.dtype()).build().unwrap();
/// let b = layer.op("DocConst").attr("value", &t).attr("dtype", t.dtype()).build().unwrap();
/// assert_eq!(g.node(a).unwrap().name, "layer1/DocConst");
/// assert_eq!(g.node(b).unwrap().name, "layer1/DocConst_1");
/// ```
pub struct Scope<'g> {
    graph: &'g mut Graph,
    prefix: String,
    control: Vec<NodeId>,
    device: String,
}

impl<'g> Scope<'g> {
    /// The root scope of a graph.
    pub fn new(graph: &'g mut Graph) -> Scope<'g> {
        Scope {
            graph,
            prefix: String::new(),
            control: Vec::new(),
            device: String::new(),
        }
    }

    /// A child scope: names get `name/` in front.
    pub fn sub(&mut self, name: &str) -> Scope<'_> {
        Scope {
            prefix: format!("{}{name}/", self.prefix),
            control: self.control.clone(),
            device: self.device.clone(),
            graph: self.graph,
        }
    }

    /// A child scope whose nodes run after `deps`.
    pub fn with_control_dependencies(&mut self, deps: &[NodeId]) -> Scope<'_> {
        let mut control = self.control.clone();
        control.extend_from_slice(deps);
        Scope {
            prefix: self.prefix.clone(),
            control,
            device: self.device.clone(),
            graph: self.graph,
        }
    }

    /// A child scope whose nodes request `device`.
    pub fn with_device(&mut self, device: &str) -> Scope<'_> {
        Scope {
            prefix: self.prefix.clone(),
            control: self.control.clone(),
            device: device.to_string(),
            graph: self.graph,
        }
    }

    /// The graph.
    pub fn graph(&mut self) -> &mut Graph {
        self.graph
    }

    /// A unique name in this scope based on `base`.
    pub fn unique_name(&self, base: &str) -> String {
        self.graph.unique_name(&format!("{}{base}", self.prefix))
    }

    /// Starts a node of `op` (named after the op unless `.name()` is given).
    pub fn op(&mut self, op: &str) -> ScopedOp<'_, 'g> {
        ScopedOp {
            spec: NodeSpec::new(op, ""),
            scope: self,
        }
    }
}

/// A node being built in a [`Scope`].
pub struct ScopedOp<'s, 'g> {
    scope: &'s mut Scope<'g>,
    spec: NodeSpec,
}

impl ScopedOp<'_, '_> {
    /// Names the node (made unique within the scope).
    pub fn name(mut self, name: &str) -> Self {
        self.spec.name = name.to_string();
        self
    }
    /// Adds a single-tensor input argument.
    pub fn input(mut self, o: impl Into<Output>) -> Self {
        self.spec = self.spec.input(o);
        self
    }
    /// Adds a list input argument.
    pub fn input_list(mut self, l: Vec<Output>) -> Self {
        self.spec = self.spec.input_list(l);
        self
    }
    /// Sets an attr.
    pub fn attr(mut self, name: &str, v: impl IntoAttrValue) -> Self {
        self.spec = self.spec.attr(name, v);
        self
    }
    /// Adds a control input.
    pub fn control_input(mut self, n: NodeId) -> Self {
        self.spec = self.spec.control_input(n);
        self
    }
    /// Adds the node.
    pub fn build(mut self) -> Result<NodeId> {
        let base = if self.spec.name.is_empty() {
            self.spec.op.clone()
        } else {
            self.spec.name.clone()
        };
        self.spec.name = self.scope.unique_name(&base);
        self.spec
            .control_inputs
            .extend_from_slice(&self.scope.control);
        if self.spec.device.is_empty() {
            self.spec.device = self.scope.device.clone();
        }
        self.scope.graph.add(self.spec)
    }
}
