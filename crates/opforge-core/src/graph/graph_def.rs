//! `GraphDef` import and export, including graphs written by TensorFlow
//! (`name:1` inputs, `^ctrl` control inputs, `device` strings, `versions`).

use super::{parse_output_name, Graph, NodeId, Output};
use crate::attrs::AttrMap;
use crate::proto::{GraphDef, NodeDef};
use crate::registry::Registry;
use crate::{Result, Status};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

impl Graph {
    /// The graph as a `GraphDef`: every node with all its attrs, inputs as
    /// `name` / `name:1`, then control inputs as `^name`.
    pub fn to_graph_def(&self) -> GraphDef {
        let node = self
            .nodes
            .iter()
            .map(|n| {
                let mut input: Vec<String> = n
                    .inputs
                    .iter()
                    .map(|o| {
                        let src = &self.nodes[o.node.index()].name;
                        if o.index == 0 {
                            src.clone()
                        } else {
                            format!("{src}:{}", o.index)
                        }
                    })
                    .collect();
                input.extend(
                    n.control_inputs
                        .iter()
                        .map(|&c| format!("^{}", self.nodes[c.index()].name)),
                );
                NodeDef {
                    name: n.name.clone(),
                    op: n.op.clone(),
                    input,
                    device: n.device.clone(),
                    attr: n
                        .attrs
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    ..Default::default()
                }
            })
            .collect();
        GraphDef {
            node,
            versions: Some(self.versions.clone()),
            library: self.library.clone(),
            ..Default::default()
        }
    }

    /// A graph from a `GraphDef` (see [`Graph::import`]).
    ///
    /// ```
    /// use opforge_core::graph::Graph;
    /// use opforge_core::proto::{self, GraphDef};
    /// # use opforge_core::{register_op, OpDefBuilder};
    /// # register_op!(OpDefBuilder::new("DocSrc").attr("dtype: type = DT_FLOAT").output("y: dtype"));
    /// # register_op!(OpDefBuilder::new("DocSink").attr("T: type").input("x: T").output("y: T"));
    /// let def: GraphDef = proto::from_text(r#"
    ///     node { name: "b" op: "DocSink" input: "a" input: "^a" attr { key: "T" value { type: DT_FLOAT } } }
    ///     node { name: "a" op: "DocSrc" device: "/device:CPU:0" }
    ///     versions { producer: 1994 }
    /// "#).unwrap();
    /// let g = Graph::from_graph_def(&def).unwrap();
    /// assert_eq!(g.len(), 2);
    /// // The omitted attr got its default:
    /// assert!(g.node(g.find("a").unwrap()).unwrap().attrs.contains_key("dtype"));
    /// ```
    pub fn from_graph_def(def: &GraphDef) -> Result<Graph> {
        Graph::from_graph_def_in(def, Registry::global().clone())
    }

    /// A graph from a `GraphDef`, resolving its ops in `registry`.
    pub fn from_graph_def_in(def: &GraphDef, registry: Arc<Registry>) -> Result<Graph> {
        let mut g = Graph::with_registry(registry);
        g.import(def, "")?;
        if let Some(v) = &def.versions {
            g.versions = v.clone();
        }
        g.library = def.library.clone();
        Ok(g)
    }

    /// Adds the nodes of `def` (names prefixed with `prefix`), in dependency
    /// order whatever their order in the file. Attrs missing from a node get
    /// the current OpDef's defaults (so old graphs keep loading after an op
    /// gains an attr with a default); an unknown op is `NotFound`.
    pub fn import(&mut self, def: &GraphDef, prefix: &str) -> Result<()> {
        let mut nodes: Vec<&NodeDef> = def.node.iter().collect();
        self.import_nodes(&mut nodes, prefix)
    }

    /// A graph from a binary `GraphDef`: [`LeanGraphDef::decode`] then
    /// [`Graph::from_lean_graph_def`]. The graph is the one
    /// [`Graph::from_graph_def`] makes of the same bytes, with the errors of
    /// [`proto::from_binary`](crate::proto::from_binary) and of the import,
    /// in a fraction of the memory.
    ///
    /// ```
    /// use opforge_core::graph::Graph;
    /// use opforge_core::proto::{self, GraphDef};
    /// # use opforge_core::{register_op, OpDefBuilder};
    /// # register_op!(OpDefBuilder::new("DocSrc2").attr("dtype: type = DT_FLOAT").output("y: dtype"));
    /// let def: GraphDef = proto::from_text(r#"node { name: "a" op: "DocSrc2" }"#).unwrap();
    /// let g = Graph::from_graph_def_bytes(&proto::to_binary(&def)).unwrap();
    /// assert!(g.node(g.find("a").unwrap()).unwrap().attrs.contains_key("dtype"));
    /// ```
    pub fn from_graph_def_bytes(bytes: &[u8]) -> Result<Graph> {
        Graph::from_lean_graph_def(LeanGraphDef::decode(bytes)?)
    }

    /// A graph from a [`LeanGraphDef`], resolving its ops in the global
    /// registry: the graph [`Graph::from_graph_def`] makes of the same
    /// `GraphDef`, each node's attrs moved into the graph (and the rest of
    /// the node freed) as the node is added.
    pub fn from_lean_graph_def(def: LeanGraphDef) -> Result<Graph> {
        Graph::from_lean_graph_def_in(def, Registry::global().clone())
    }

    /// [`Graph::from_lean_graph_def`], resolving ops in `registry`.
    pub fn from_lean_graph_def_in(def: LeanGraphDef, registry: Arc<Registry>) -> Result<Graph> {
        let lean::GraphDef {
            mut node,
            rest: lean::GraphDefRest {
                versions, library, ..
            },
        } = def.0;
        let mut g = Graph::with_registry(registry);
        g.import_nodes(&mut node, "")?;
        drop(node);
        if let Some(v) = versions {
            g.versions = v;
        }
        g.library = library;
        Ok(g)
    }

    /// The import of [`Graph::import`], over borrowed `NodeDef`s or nodes
    /// decoded for the import (taken as they are added).
    fn import_nodes<N: ImportNode>(&mut self, nodes: &mut [N], prefix: &str) -> Result<()> {
        let count = nodes.len();
        if u32::try_from(count).is_err() {
            return Err(Status::invalid_argument(format!(
                "GraphDef has {count} nodes: at most {} are supported",
                u32::MAX
            )));
        }
        self.nodes.reserve_exact(count);
        self.by_name.reserve(count);
        // Dependencies of each node on other nodes of `nodes`, as one array
        // (`dep_start[i]..dep_start[i + 1]` of `dep`).
        let mut dep: Vec<u32> = Vec::with_capacity(count);
        let mut dep_start: Vec<u32> = Vec::with_capacity(count + 1);
        {
            let mut index: HashMap<&str, u32> = HashMap::with_capacity(count);
            for (i, n) in nodes.iter().enumerate() {
                if index.insert(n.name(), i as u32).is_some() {
                    return Err(Status::invalid_argument(format!(
                        "GraphDef has two nodes named '{}'",
                        n.name()
                    )));
                }
            }
            for n in nodes.iter() {
                dep_start.push(edge_count(dep.len())?);
                for input in n.inputs() {
                    let src = input.strip_prefix('^').unwrap_or(input);
                    let (name, _) = parse_output_name(src)
                        .map_err(|e| e.prepend(format!("Node '{}': ", n.name())))?;
                    match index.get(name) {
                        Some(&j) => dep.push(j),
                        None if self.find(&format!("{prefix}{name}")).is_some() => {}
                        None => {
                            return Err(Status::invalid_argument(format!(
                                "Node '{}': input '{input}' is not a node of the graph",
                                n.name()
                            )))
                        }
                    }
                }
            }
            dep_start.push(edge_count(dep.len())?);
        }
        // Kahn's algorithm, keeping file order among ready nodes.
        let mut pending: Vec<u32> = dep_start.windows(2).map(|w| w[1] - w[0]).collect();
        // Users of each node, the same way (`user_start[j]..user_start[j + 1]`).
        let mut user_start: Vec<u32> = vec![0; count + 1];
        for &j in &dep {
            user_start[j as usize + 1] += 1;
        }
        for j in 0..count {
            user_start[j + 1] += user_start[j];
        }
        let mut user: Vec<u32> = vec![0; dep.len()];
        let mut fill: Vec<u32> = user_start[..count].to_vec();
        for i in 0..count {
            for &j in &dep[dep_start[i] as usize..dep_start[i + 1] as usize] {
                user[fill[j as usize] as usize] = i as u32;
                fill[j as usize] += 1;
            }
        }
        drop((dep, dep_start, fill));
        let mut ready: BinaryHeap<Reverse<u32>> = (0..count as u32)
            .filter(|&i| pending[i as usize] == 0)
            .map(Reverse)
            .collect();
        let mut added = 0;
        while let Some(Reverse(i)) = ready.pop() {
            let i = i as usize;
            self.import_node(&mut nodes[i], prefix)?;
            added += 1;
            for &u in &user[user_start[i] as usize..user_start[i + 1] as usize] {
                pending[u as usize] -= 1;
                if pending[u as usize] == 0 {
                    ready.push(Reverse(u));
                }
            }
        }
        if added != count {
            let stuck: Vec<&str> = (0..count)
                .filter(|&i| pending[i] > 0)
                .map(|i| nodes[i].name())
                .take(5)
                .collect();
            return Err(Status::unimplemented(format!(
                "GraphDef has a cycle (through {}): control-flow loops are not supported",
                stuck.join(", ")
            )));
        }
        Ok(())
    }

    fn import_node<N: ImportNode>(&mut self, n: &mut N, prefix: &str) -> Result<NodeId> {
        let data_inputs = n.inputs().iter().filter(|i| !i.starts_with('^')).count();
        let mut inputs = Vec::with_capacity(data_inputs);
        let mut control = Vec::new();
        for input in n.inputs() {
            if let Some(c) = input.strip_prefix('^') {
                control.push(
                    self.find(&format!("{prefix}{c}"))
                        .ok_or_else(|| Status::internal("control input not added"))?,
                );
            } else {
                if !control.is_empty() {
                    return Err(Status::invalid_argument(format!(
                        "Node '{}': data input '{input}' after a control input",
                        n.name()
                    )));
                }
                let (name, index) = parse_output_name(input)?;
                let id = self
                    .find(&format!("{prefix}{name}"))
                    .ok_or_else(|| Status::internal("input not added"))?;
                inputs.push(Output { node: id, index });
            }
        }
        let attrs = n.take_attrs();
        let id = self.add_complete(
            &format!("{prefix}{}", n.name()),
            n.op(),
            n.device(),
            attrs,
            inputs,
            control,
        )?;
        n.release();
        Ok(id)
    }
}

/// A binary `GraphDef` decoded for [`Graph::from_lean_graph_def`] only: the
/// same bytes as [`proto::from_binary::<GraphDef>`](crate::proto::from_binary)
/// accepts, with the same checks, but each node's `attr` map kept as the
/// list of entries it is on the wire rather than a `BTreeMap` (whose one
/// leaf is some 800 bytes, per node), and the rarely set nested messages
/// boxed: a large graph takes a fraction of the memory before its import.
pub struct LeanGraphDef(lean::GraphDef);

impl LeanGraphDef {
    /// Decodes a binary `GraphDef` (`DataLoss` on bad bytes, as
    /// [`proto::from_binary`](crate::proto::from_binary)).
    pub fn decode(bytes: &[u8]) -> Result<LeanGraphDef> {
        lean::GraphDef::decode(bytes)
            .map(LeanGraphDef)
            .map_err(|e| {
                Status::data_loss(format!(
                    "cannot parse binary {}: {e}",
                    <GraphDef as prost::Name>::full_name()
                ))
            })
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.0.node.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.0.node.is_empty()
    }
}

/// A number of dependency edges as a `u32` (`InvalidArgument` past it).
fn edge_count(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Status::invalid_argument(format!(
            "GraphDef has more than {} inputs in all: too many to import",
            u32::MAX
        ))
    })
}

/// What the import reads of a node: a borrowed `NodeDef` (its attrs
/// cloned), or a [`lean::NodeDef`] (its attrs taken, and its other fields
/// freed once the node is in the graph).
trait ImportNode {
    fn name(&self) -> &str;
    fn op(&self) -> &str;
    fn device(&self) -> &str;
    fn inputs(&self) -> &[String];
    /// The node's attrs (only called once per node).
    fn take_attrs(&mut self) -> AttrMap;
    /// The node is in the graph: what it still holds may be freed.
    fn release(&mut self) {}
}

impl ImportNode for &NodeDef {
    fn name(&self) -> &str {
        &self.name
    }
    fn op(&self) -> &str {
        &self.op
    }
    fn device(&self) -> &str {
        &self.device
    }
    fn inputs(&self) -> &[String] {
        &self.input
    }
    fn take_attrs(&mut self) -> AttrMap {
        self.attr
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl ImportNode for lean::NodeDef {
    fn name(&self) -> &str {
        &self.name
    }
    fn op(&self) -> &str {
        &self.op
    }
    fn device(&self) -> &str {
        &self.device
    }
    fn inputs(&self) -> &[String] {
        &self.input
    }
    fn take_attrs(&mut self) -> AttrMap {
        // A map field keeps the last value of a repeated key, as
        // `AttrMap::insert` does.
        std::mem::take(&mut self.attr)
            .into_iter()
            .map(|e| (e.key, e.value.unwrap_or_default()))
            .collect()
    }
    fn release(&mut self) {
        // The name stays: a cycle error names the nodes not added.
        self.op = String::new();
        self.device = String::new();
        self.input = Vec::new();
        self.experimental_debug_info = None;
        self.experimental_type = None;
    }
}

/// `GraphDef` and `NodeDef` as the import reads them: the same fields and
/// field numbers as the generated types (so the same bytes decode, with the
/// same checks), but a node's `attr` map is decoded as the repeated entry
/// messages a map field is on the wire, into a vector rather than a
/// `BTreeMap` (whose one leaf is some 800 bytes per node), and the rarely
/// set nested messages are boxed.
mod lean {
    use crate::proto::{
        node_def, AttrValue, FullTypeDef, FunctionDefLibrary, GraphDebugInfo, VersionDef,
    };
    use prost::bytes::Buf;
    use prost::encoding::{decode_key, message, skip_field, DecodeContext};
    use prost::{DecodeError, Message};

    /// The `GraphDef`: its nodes, decoded one at a time (each node's lists
    /// without the spare room a decoder's pushes leave, the list of nodes
    /// sized by a first pass over the bytes), and its other fields.
    #[derive(Default)]
    pub struct GraphDef {
        pub node: Vec<NodeDef>,
        pub rest: GraphDefRest,
    }

    impl GraphDef {
        pub fn decode(bytes: &[u8]) -> Result<GraphDef, DecodeError> {
            let mut def = GraphDef {
                node: Vec::with_capacity(count_nodes(bytes)),
                rest: GraphDefRest::default(),
            };
            let mut buf = bytes;
            let ctx = DecodeContext::default();
            while buf.has_remaining() {
                let (tag, wire_type) = decode_key(&mut buf)?;
                if tag == 1 {
                    let mut n = NodeDef::default();
                    message::merge(wire_type, &mut n, &mut buf, ctx.clone()).map_err(|mut e| {
                        e.push("GraphDef", "node");
                        e
                    })?;
                    n.input.shrink_to_fit();
                    n.attr.shrink_to_fit();
                    def.node.push(n);
                } else {
                    def.rest
                        .merge_field(tag, wire_type, &mut buf, ctx.clone())?;
                }
            }
            Ok(def)
        }
    }

    /// The number of `node` fields of an encoded `GraphDef` (0 when the
    /// bytes are malformed: the decode then reports it).
    fn count_nodes(bytes: &[u8]) -> usize {
        let mut buf = bytes;
        let mut count = 0;
        while buf.has_remaining() {
            let Ok((tag, wire_type)) = decode_key(&mut buf) else {
                return 0;
            };
            if tag == 1 {
                count += 1;
            }
            if skip_field(wire_type, tag, &mut buf, DecodeContext::default()).is_err() {
                return 0;
            }
        }
        count
    }

    /// The fields of a `GraphDef` other than its nodes.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GraphDefRest {
        #[prost(message, optional, tag = "4")]
        pub versions: Option<VersionDef>,
        #[prost(int32, tag = "3")]
        pub version: i32,
        #[prost(message, optional, tag = "2")]
        pub library: Option<FunctionDefLibrary>,
        #[prost(message, optional, boxed, tag = "5")]
        pub debug_info: Option<Box<GraphDebugInfo>>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeDef {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub op: String,
        #[prost(string, repeated, tag = "3")]
        pub input: Vec<String>,
        #[prost(string, tag = "4")]
        pub device: String,
        #[prost(message, repeated, tag = "5")]
        pub attr: Vec<AttrEntry>,
        #[prost(message, optional, boxed, tag = "6")]
        pub experimental_debug_info: Option<Box<node_def::ExperimentalDebugInfo>>,
        #[prost(message, optional, boxed, tag = "7")]
        pub experimental_type: Option<Box<FullTypeDef>>,
    }

    /// One entry of the `attr` map (`map<string, AttrValue>` is
    /// `repeated AttrEntry` on the wire).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AttrEntry {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AttrValue>,
    }
}
