//! `GraphDef` import and export, including graphs written by TensorFlow
//! (`name:1` inputs, `^ctrl` control inputs, `device` strings, `versions`).

use super::{parse_output_name, Graph, NodeId, Output};
use crate::proto::{GraphDef, NodeDef};
use crate::registry::Registry;
use crate::{Result, Status};
use std::collections::HashMap;
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
        self.nodes.reserve_exact(def.node.len());
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(def.node.len());
        for (i, n) in def.node.iter().enumerate() {
            if index.insert(n.name.as_str(), i).is_some() {
                return Err(Status::invalid_argument(format!(
                    "GraphDef has two nodes named '{}'",
                    n.name
                )));
            }
        }
        // Dependencies of each NodeDef on other NodeDefs of `def`.
        let mut deps: Vec<Vec<usize>> = Vec::with_capacity(def.node.len());
        for n in &def.node {
            let mut d = Vec::new();
            for input in &n.input {
                let src = input.strip_prefix('^').unwrap_or(input);
                let (name, _) = parse_output_name(src)
                    .map_err(|e| e.prepend(format!("Node '{}': ", n.name)))?;
                match index.get(name) {
                    Some(&j) => d.push(j),
                    None if self.find(&format!("{prefix}{name}")).is_some() => {}
                    None => {
                        return Err(Status::invalid_argument(format!(
                            "Node '{}': input '{input}' is not a node of the graph",
                            n.name
                        )))
                    }
                }
            }
            deps.push(d);
        }
        // Kahn's algorithm, keeping file order among ready nodes.
        let mut pending: Vec<usize> = deps.iter().map(Vec::len).collect();
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); def.node.len()];
        for (i, d) in deps.iter().enumerate() {
            for &j in d {
                users[j].push(i);
            }
        }
        let mut ready: std::collections::BTreeSet<usize> =
            (0..def.node.len()).filter(|&i| pending[i] == 0).collect();
        let mut added = 0;
        while let Some(i) = ready.pop_first() {
            self.import_node(&def.node[i], prefix)?;
            added += 1;
            for &u in &users[i] {
                pending[u] -= 1;
                if pending[u] == 0 {
                    ready.insert(u);
                }
            }
        }
        if added != def.node.len() {
            let stuck: Vec<&str> = (0..def.node.len())
                .filter(|&i| pending[i] > 0)
                .map(|i| def.node[i].name.as_str())
                .take(5)
                .collect();
            return Err(Status::unimplemented(format!(
                "GraphDef has a cycle (through {}): control-flow loops are not supported",
                stuck.join(", ")
            )));
        }
        Ok(())
    }

    fn import_node(&mut self, n: &NodeDef, prefix: &str) -> Result<NodeId> {
        let mut inputs = Vec::new();
        let mut control = Vec::new();
        for input in &n.input {
            if let Some(c) = input.strip_prefix('^') {
                control.push(
                    self.find(&format!("{prefix}{c}"))
                        .ok_or_else(|| Status::internal("control input not added"))?,
                );
            } else {
                if !control.is_empty() {
                    return Err(Status::invalid_argument(format!(
                        "Node '{}': data input '{input}' after a control input",
                        n.name
                    )));
                }
                let (name, index) = parse_output_name(input)?;
                let id = self
                    .find(&format!("{prefix}{name}"))
                    .ok_or_else(|| Status::internal("input not added"))?;
                inputs.push(Output { node: id, index });
            }
        }
        let attrs = n.attr.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        self.add_complete(
            &format!("{prefix}{}", n.name),
            &n.op,
            &n.device,
            attrs,
            inputs,
            control,
        )
    }
}
